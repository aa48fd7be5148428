package hbase

import (
	"errors"

	"github.com/rekeyhq/rekey/hbase/rpc"
)

// Errors a caller tests with errors.Is, whichever layer produced them (a
// server's exception, or the client's own check). They are the same values
// as hbase/rpc's, so callers need not import the wire package.
var (
	// ErrTableNotFound: the table does not exist.
	ErrTableNotFound = rpc.ErrTableNotFound
	// ErrTableExists: a table of that name exists already.
	ErrTableExists = rpc.ErrTableExists
	// ErrTableNotEnabled: the table is disabled.
	ErrTableNotEnabled = rpc.ErrTableNotEnabled
	// ErrTableNotDisabled: the operation needs a disabled table.
	ErrTableNotDisabled = rpc.ErrTableNotDisabled
	// ErrNoSuchColumnFamily: a mutation names a family the table lacks.
	ErrNoSuchColumnFamily = rpc.ErrNoSuchColumnFamily
	// ErrNotServingRegion: the region is not (or no longer) on that server.
	ErrNotServingRegion = rpc.ErrNotServingRegion
	// ErrRegionTooBusy: the server pushed back; the client backs off.
	ErrRegionTooBusy = rpc.ErrRegionTooBusy
	// ErrConnBroken: a connection failed with calls in flight.
	ErrConnBroken = rpc.ErrConnBroken
)

// ErrZooKeeperUnreachable is matched by the error of an operation that
// ran out of time while ZooKeeper was out of reach (or its session being
// replaced): a cause outside the job that a later attempt may not meet.
var ErrZooKeeperUnreachable = errors.New("hbase: ZooKeeper is out of reach")
