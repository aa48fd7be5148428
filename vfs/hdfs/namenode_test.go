package hdfs

import (
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// remoteErr is a Java exception as the HDFS client reports it.
type remoteErr struct{ class string }

func (e remoteErr) Error() string     { return e.class + ": remote" }
func (e remoteErr) Method() string    { return "getFileInfo" }
func (e remoteErr) Desc() string      { return "" }
func (e remoteErr) Exception() string { return e.class }
func (e remoteErr) Message() string   { return e.class + ": remote" }

func TestNameNodeDown(t *testing.T) {
	for _, c := range []struct {
		name      string
		err       error
		transport bool
		want      bool
	}{
		{"refused dial", &os.PathError{Op: "stat", Path: "/x", Err: errors.New("no available namenodes: dial tcp 127.0.0.1:1: connect: connection refused")}, false, true},
		{"safe mode", &os.PathError{Op: "create", Path: "/x", Err: remoteErr{excSafeMode}}, false, true},
		{"retriable", remoteErr{excRetriable}, false, true},
		{"standby", remoteErr{excStandby}, false, true},
		{"other remote exception", remoteErr{"java.io.IOException"}, true, false},
		{"not found", &os.PathError{Op: "stat", Path: "/x", Err: os.ErrNotExist}, true, false},
		{"exists", &os.PathError{Op: "create", Path: "/x", Err: os.ErrExist}, true, false},
		{"connection broke, NameNode call", &os.PathError{Op: "stat", Path: "/x", Err: io.EOF}, true, true},
		{"connection broke, read path", io.EOF, false, false},
		{"reset, NameNode call", fmt.Errorf("rename: %w", syscall.ECONNRESET), true, true},
		{"token refused", fmt.Errorf("no available namenodes: hadooprpc: NameNode 127.0.0.1:1 refused the login: InvalidToken"), true, false},
		{"gave up already", fmt.Errorf("%w: no available namenodes", ErrNameNodeUnavailable), true, false},
		{"permission", iofs.ErrPermission, true, false},
	} {
		if got := nameNodeDown(c.err, c.transport); got != c.want {
			t.Errorf("%s: nameNodeDown(%v, %v) = %v, want %v", c.name, c.err, c.transport, got, c.want)
		}
	}
}

// TestNameNodeGoneGivesUp: a NameNode that accepted the client, then went
// away for good, is waited for up to NameNodeWait; then the operation
// fails with ErrNameNodeUnavailable, naming the file system, the
// operation and how long it waited.
func TestNameNodeGoneGivesUp(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		// Take the client's connection and handshake, then drop it and
		// stop listening: every later dial is refused.
		c, err := ln.Accept()
		ln.Close()
		if err == nil {
			io.CopyN(io.Discard, c, 7)
			c.Close()
		}
	}()
	h, err := DialWith(ln.Addr().String(), Options{NameNodeWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	begin := time.Now()
	_, err = h.Stat("/some/file")
	took := time.Since(begin)
	if !errors.Is(err, ErrNameNodeUnavailable) {
		t.Fatalf("Stat with the NameNode gone: %v, want ErrNameNodeUnavailable", err)
	}
	if took < time.Second || took > 10*time.Second {
		t.Errorf("gave up after %v, NameNodeWait is 1s", took)
	}
	for _, want := range []string{"hdfs://" + ln.Addr().String(), "stat /some/file", "no answer for"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if n := h.Stats().NameNodeRetries; n == 0 {
		t.Error("no wait was counted")
	}
}
