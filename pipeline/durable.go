package pipeline

import (
	"errors"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/internal/krb"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/state"
	"github.com/rekeyhq/rekey/vfs"
)

// The run's durable state (its checkpoint, the leases on it and on the
// sink's state, the job record) is kept by package state, which says how
// each is written, read and fenced; the run says what is recorded when.
// The names a caller of pipeline matches or reads are state's, named
// here too.

// Checkpoint is the state of a run as its checkpoint holds it
// (state.Checkpoint).
type Checkpoint = state.Checkpoint

// ErrCheckpointDamaged is matched by the error of a run whose checkpoint
// is not what rekey writes (state.ErrCheckpointDamaged).
var ErrCheckpointDamaged = state.ErrCheckpointDamaged

// DefaultLeaseTTL is how long a remote lease lasts unless renewed, when
// Options.LeaseTTL is zero (state.DefaultLeaseTTL).
const DefaultLeaseTTL = state.DefaultLeaseTTL

// ErrLeased is matched by the error (a *LeasedError) of a run refused
// because another run holds its state (state.ErrLeased).
var ErrLeased = state.ErrLeased

// ErrLeaseLost is matched by the error of a run that lost its remote
// lease while it ran (state.ErrLeaseLost).
var ErrLeaseLost = state.ErrLeaseLost

// Owner names the run that holds a lease (state.Owner).
type Owner = state.Owner

// LeasedError is the refusal of a run whose state another run holds
// (state.LeasedError).
type LeasedError = state.LeasedError

// takeLeases leases the run's state before anything reads or writes it:
// the checkpoint, and the state the sink writes (sink.Kind.State: the
// hfiles sink's staging folder) when the run builds the sink itself (a
// given sink owns its own output). The leases are released when the run
// is closed.
func (r *Run) takeLeases() error {
	r.leases = state.NewLeases(leaseOptions(r.o.LeaseTTL, r.o.ForceTakeover, r.logf, r.o.Kerberos))
	r.closers = append(r.closers, r.leases.Release)
	todo := []sink.Lease{{What: "checkpoint", Where: r.o.Checkpoint, File: checkpointLeasePath(r.o.Checkpoint)}}
	if kind, err := r.sinkKind(); err == nil && r.o.Sink == nil && kind.State != nil {
		more, err := kind.State(r.sinkEnv())
		if err != nil {
			return err
		}
		todo = append(todo, more...)
	}
	for _, s := range todo {
		err := r.leases.Take(s.File, s.What+" "+s.Where)
		var le *LeasedError
		if errors.As(err, &le) && s.Hint != "" {
			le.Hint = s.Hint
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// leaseOptions are the lease options of a run or task given its
// options' lease fields: a zero ttl is DefaultLeaseTTL.
func leaseOptions(ttl time.Duration, force bool, logf func(string, ...any), id *krb.Identity) state.LeaseOptions {
	if ttl <= 0 {
		ttl = DefaultLeaseTTL
	}
	return state.LeaseOptions{TTL: ttl, Force: force, Logf: logf, Open: vfs.Options{Kerberos: id}}
}

// checkpointLeasePath is the lease file of a checkpoint: beside it, named
// after it, so each shard's and each redo's checkpoint has its own.
func checkpointLeasePath(checkpoint string) string {
	return strings.TrimSuffix(checkpoint, ".json") + ".lease"
}
