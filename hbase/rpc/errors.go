package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Retry says what a client should do after an error.
type Retry int

// Retry classes, from most to least hopeful.
const (
	// RetryNow: try again at once, same server (RetryImmediatelyException,
	// MultiActionResultTooLarge).
	RetryNow Retry = iota
	// Backoff: the server is right but busy or starting; wait, then retry
	// the same server.
	Backoff
	// Relocate: the region is not (or no longer) where the client thinks;
	// drop the cached location, look it up again, then retry.
	Relocate
	// RestartScanner: the server forgot or rejected the scanner; open a new
	// one from the last row returned.
	RestartScanner
	// GiveUp: retrying cannot help (bad request, missing table, or the
	// server said do_not_retry).
	GiveUp
)

// String names the class.
func (r Retry) String() string {
	switch r {
	case RetryNow:
		return "retry-now"
	case Backoff:
		return "backoff"
	case Relocate:
		return "relocate"
	case RestartScanner:
		return "restart-scanner"
	case GiveUp:
		return "give-up"
	}
	return fmt.Sprintf("Retry(%d)", int(r))
}

// Java exception classes a client treats specially. Subclasses of
// DoNotRetryIOException not listed here are recognized by do_not_retry.
const (
	ExcNotServingRegion     = "org.apache.hadoop.hbase.NotServingRegionException"
	ExcRegionMoved          = "org.apache.hadoop.hbase.exceptions.RegionMovedException"
	ExcRegionOpening        = "org.apache.hadoop.hbase.exceptions.RegionOpeningException"
	ExcRegionTooBusy        = "org.apache.hadoop.hbase.RegionTooBusyException"
	ExcRetryImmediately     = "org.apache.hadoop.hbase.RetryImmediatelyException"
	ExcServerNotRunningYet  = "org.apache.hadoop.hbase.ipc.ServerNotRunningYetException"
	ExcCallQueueTooBig      = "org.apache.hadoop.hbase.CallQueueTooBigException"
	ExcCallDropped          = "org.apache.hadoop.hbase.CallDroppedException"
	ExcRpcThrottling        = "org.apache.hadoop.hbase.quotas.RpcThrottlingException"
	ExcMultiTooLarge        = "org.apache.hadoop.hbase.MultiActionResultTooLarge"
	ExcPleaseHold           = "org.apache.hadoop.hbase.PleaseHoldException"
	ExcServerStopped        = "org.apache.hadoop.hbase.regionserver.RegionServerStoppedException"
	ExcServerAborted        = "org.apache.hadoop.hbase.regionserver.RegionServerAbortedException"
	ExcWrongRegion          = "org.apache.hadoop.hbase.regionserver.WrongRegionException"
	ExcRegionOffline        = "org.apache.hadoop.hbase.client.RegionOfflineException"
	ExcUnknownScanner       = "org.apache.hadoop.hbase.UnknownScannerException"
	ExcLease                = "org.apache.hadoop.hbase.regionserver.LeaseException"
	ExcOutOfOrderScanner    = "org.apache.hadoop.hbase.exceptions.OutOfOrderScannerNextException"
	ExcScannerReset         = "org.apache.hadoop.hbase.exceptions.ScannerResetException"
	ExcDoNotRetry           = "org.apache.hadoop.hbase.DoNotRetryIOException"
	ExcTableNotFound        = "org.apache.hadoop.hbase.TableNotFoundException"
	ExcTableExists          = "org.apache.hadoop.hbase.TableExistsException"
	ExcTableNotEnabled      = "org.apache.hadoop.hbase.TableNotEnabledException"
	ExcTableNotDisabled     = "org.apache.hadoop.hbase.TableNotDisabledException"
	ExcNoSuchColumnFamily   = "org.apache.hadoop.hbase.regionserver.NoSuchColumnFamilyException"
	ExcSnapshotCreation     = "org.apache.hadoop.hbase.snapshot.SnapshotCreationException"
	ExcSnapshotDoesNotExist = "org.apache.hadoop.hbase.snapshot.SnapshotDoesNotExistException"
	ExcCallTimeout          = "org.apache.hadoop.hbase.ipc.CallTimeoutException"
	ExcServerTooBusy        = "org.apache.hadoop.hbase.ipc.ServerTooBusyException"
)

var retryByClass = map[string]Retry{
	ExcNotServingRegion:     Relocate,
	ExcRegionMoved:          Relocate,
	ExcServerStopped:        Relocate,
	ExcServerAborted:        Relocate,
	ExcWrongRegion:          Relocate,
	ExcRegionOffline:        Relocate,
	ExcRegionOpening:        Backoff,
	ExcRegionTooBusy:        Backoff,
	ExcServerNotRunningYet:  Backoff,
	ExcCallQueueTooBig:      Backoff,
	ExcCallDropped:          Backoff,
	ExcRpcThrottling:        Backoff,
	ExcPleaseHold:           Backoff,
	ExcCallTimeout:          Backoff,
	ExcServerTooBusy:        Backoff,
	ExcRetryImmediately:     RetryNow,
	ExcMultiTooLarge:        RetryNow,
	ExcUnknownScanner:       RestartScanner,
	ExcLease:                RestartScanner,
	ExcOutOfOrderScanner:    RestartScanner,
	ExcScannerReset:         RestartScanner,
	ExcDoNotRetry:           GiveUp,
	ExcTableNotFound:        GiveUp,
	ExcTableExists:          GiveUp,
	ExcTableNotEnabled:      GiveUp,
	ExcTableNotDisabled:     GiveUp,
	ExcNoSuchColumnFamily:   GiveUp,
	ExcSnapshotCreation:     GiveUp,
	ExcSnapshotDoesNotExist: GiveUp,
}

// Classify returns the retry class of a Java exception class name. An
// unknown class is retried with back-off unless the server said
// do_not_retry, as HBase's own client does with plain IOExceptions.
func Classify(class string, doNotRetry bool) Retry {
	r, ok := retryByClass[class]
	switch {
	case ok && r != GiveUp && !(doNotRetry && r == Backoff):
		// Some retriable classes (scanner ones) extend DoNotRetryIOException
		// and arrive with do_not_retry set; the class decides for them.
		return r
	case ok, doNotRetry:
		return GiveUp
	}
	return Backoff
}

// RemoteError is an exception thrown by an HBase server, either for a whole
// call (the ResponseHeader's ExceptionResponse) or for one action of a Multi
// call.
type RemoteError struct {
	// Class is the Java exception class name.
	Class string
	// Message is the server's text: the first line of the stack trace, or
	// the stringified exception for Multi actions.
	Message string
	// StackTrace is the full text the server sent, when it sent one.
	StackTrace string
	// Host and Port, when set, name the server the region moved to.
	Host string
	Port int
	// DoNotRetry is the server's do_not_retry flag.
	DoNotRetry bool
	// Server is the address of the server that answered.
	Server string
}

// Error implements error.
func (e *RemoteError) Error() string {
	short := e.Class
	if i := strings.LastIndexByte(short, '.'); i >= 0 {
		short = short[i+1:]
	}
	msg := e.Message
	if p := e.Class + ": "; strings.HasPrefix(msg, p) {
		msg = msg[len(p):]
	}
	if msg == "" {
		return fmt.Sprintf("hbase: %s from %s", short, e.Server)
	}
	return fmt.Sprintf("hbase: %s from %s: %s", short, e.Server, msg)
}

// Retry returns the error's retry class.
func (e *RemoteError) Retry() Retry { return Classify(e.Class, e.DoNotRetry) }

// Is makes errors.Is(err, ErrX) work for the sentinel classes below.
func (e *RemoteError) Is(target error) bool {
	if s, ok := target.(classSentinel); ok {
		return e.Class == string(s)
	}
	return false
}

// classSentinel lets callers test a RemoteError's class with errors.Is.
type classSentinel string

func (s classSentinel) Error() string { return "hbase: " + string(s) }

// Sentinels for errors.Is tests on RemoteError classes.
var (
	ErrTableNotFound      error = classSentinel(ExcTableNotFound)
	ErrTableExists        error = classSentinel(ExcTableExists)
	ErrTableNotEnabled    error = classSentinel(ExcTableNotEnabled)
	ErrTableNotDisabled   error = classSentinel(ExcTableNotDisabled)
	ErrNoSuchColumnFamily error = classSentinel(ExcNoSuchColumnFamily)
	ErrNotServingRegion   error = classSentinel(ExcNotServingRegion)
	ErrRegionTooBusy      error = classSentinel(ExcRegionTooBusy)
)

// ErrConnBroken is wrapped by the error of every call that was in flight, or
// was started, on a connection that failed. The call may or may not have
// reached the server.
var ErrConnBroken = errors.New("hbase/rpc: connection broken")

// RetryOf returns the retry class of any error a call can return: errors
// with a Retry method (RemoteError and the client's own) by that method, a
// call timeout as Backoff, broken connections and failed dials as Relocate
// (the server may be gone), anything else (malformed frames, cancellation)
// as GiveUp.
func RetryOf(err error) Retry {
	var rc interface{ Retry() Retry }
	switch {
	case err == nil:
		return RetryNow
	case errors.As(err, &rc):
		return rc.Retry()
	case errors.Is(err, context.DeadlineExceeded):
		// One call timed out; the operation's own deadline is checked by
		// the caller.
		return Backoff
	case errors.Is(err, ErrCorrupt):
		return GiveUp
	case errors.Is(err, ErrConnBroken), errors.Is(err, ErrDial):
		return Relocate
	}
	return GiveUp
}

// ErrDial is wrapped by errors from connecting to a server.
var ErrDial = errors.New("hbase/rpc: cannot connect")

// firstLine returns s up to its first newline: Java stack traces start with
// "class: message".
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimRight(s[:i], "\r")
	}
	return s
}
