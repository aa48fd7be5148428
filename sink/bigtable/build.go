package bigtable

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"sync/atomic"

	"cloud.google.com/go/bigtable"
	"google.golang.org/api/option"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/sink"
)

// The bigtable sink is built from the job's target.bigtable section by
// the run that writes through it (sink.type bigtable).
func init() {
	sink.Register(job.SinkBigtable, sink.Kind{Build: build, Deletes: true, PlanFamilies: planFamilies, PlanWarnings: planWarnings})
}

// A catch-up (sink.Env.Since) writes through this sink as a whole run
// does, and its removed cells, version delete markers of exactly one
// cell each (type cell.Delete), go through the delete pass that
// target.bigtable.deletes: apply turns on for a raw run: each becomes a
// DeleteFromColumn of the cell's mapped row and column over
// [T*1000, (T+1)*1000) µs (mapMarker), applied by Finish once every put
// of the catch-up is acknowledged. A catch-up needs no deletes: apply:
// removals are what it is asked to carry (a target still holding removed
// cells is not at B), and each maps exactly, which is what that option
// makes a user accept for a raw run's markers, whose meaning may not.
//
// Ordering. MutateRows applies a request's entries in any order, and a
// Bigtable delete masks nothing written after it, so no removal is sent
// beside a put: all of them follow all the catch-up's puts. Each removal
// deletes one mapped cell (row, column, timestamp), and so does nothing
// to a put of another cell, whenever applied. A removal and an addition
// meet at one mapped cell only when two source cells map to it (a
// collision; a value replaced at the same key comes as a put alone).
// The exact result then keeps the added cell, which B's whole run would
// write there; this pass, coming last, deletes it. That mirrors the
// puts and hfiles sinks, where HBase's version delete masks every put at
// its timestamp in whichever order they arrive, so that one catch-up
// leaves the same target through every sink; and collisions are inexact
// in a catch-up anyway (a removed cell's delete also takes an unchanged
// cell mapped onto it, which the catch-up never reads): docs/catchup.md,
// Collisions, says to verify such a job after each catch-up.

// build checks the job against what Bigtable can hold, readies the table
// (created or checked before any write) and returns the sink.
func build(ctx context.Context, e sink.Env) (sink.Sink, error) {
	j := e.Job
	if err := j.CheckSinkTarget(); err != nil {
		return nil, fmt.Errorf("%w: %w", sink.ErrTarget, err)
	}
	bt := j.Target.Bigtable
	if err := checkDeletes(e); err != nil {
		return nil, err
	}
	if n := j.Sink.BatchCells; n > MaxMutations {
		return nil, fmt.Errorf("%w: sink.batch_cells %d: a MutateRows request holds at most %d mutations", sink.ErrTarget, n, MaxMutations)
	}
	conn, err := Dial(ctx, bt)
	if err != nil {
		return nil, err
	}
	created, err := Ready(ctx, conn.Admin, Target{
		Table: j.Target.Table, Families: e.Families,
		Create: j.Target.Create.Enabled, SplitKeys: j.Target.Create.SplitKeys,
		PlanSplitKeys: e.PlanSplitKeys, Warn: e.Warn, Since: e.Since,
	})
	if err != nil {
		conn.Close()
		return nil, err
	}
	if created && e.Logf != nil {
		e.Logf("created bigtable table %s in %s/%s", j.Target.Table, bt.Project, bt.Instance)
	}
	s := New(conn.Data.Open(j.Target.Table), j.Target.Table, conn.Calls(), Options{
		BatchMutations: j.Sink.BatchCells, BatchBytes: j.Sink.BatchBytes,
		EntryBytes: min(e.Budget.SinkPerWorker()/2, 64<<20),
		Timeout:    j.Target.Timeout, Workers: e.Workers,
		AtomicRows: bt.AtomicRows, AllowLargeRows: bt.AllowLargeRows, FailOnTags: bt.FailOnTags,
		Warn: e.Warn,
	})
	if bt.ApplyDeletes || e.Since != "" {
		ids := make([]string, len(e.Splits))
		for i, si := range e.Splits {
			ids[i] = si.ID
		}
		if err := s.ApplyDeletes(DeletesDir(e.Checkpoint), ids); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return &owned{Sink: s, conn: conn}, nil
}

// checkDeletes holds raw mode and target.bigtable.deletes to each other
// and to what the delete pass needs: every put of the job before it, in
// one process, and its markers spilled on a local disk beside the
// checkpoint. A catch-up always takes the pass (its removals), so it
// needs the same.
func checkDeletes(e sink.Env) error {
	j := e.Job
	raw, apply := j.Source.Scan.Raw, j.Target.Bigtable.ApplyDeletes
	switch {
	case e.Since != "" && !job.IsLocalPath(e.Checkpoint):
		// Refused rather than run without its removals: the target
		// would keep cells B no longer shows, and the record say B.
		return fmt.Errorf("%w: --since into Bigtable spills the removed cells' deletes beside the checkpoint, to apply after every put, and the checkpoint must be a local path for that (it is %s): give --checkpoint a local file", sink.ErrTarget, e.Checkpoint)
	case raw && !apply:
		return fmt.Errorf("%w: --raw (source.scan.raw): %s", sink.ErrTarget, job.RawRefused)
	case !apply:
		return nil
	case !raw:
		return fmt.Errorf("%w: target.bigtable.deletes: apply needs a raw read (--raw or source.scan.raw): without it the read applies the snapshot's deletes to its cells and no marker reaches the table, so cells the target already holds would not be deleted", sink.ErrTarget)
	case e.Count > 1:
		return fmt.Errorf("%w: target.bigtable.deletes: apply with --shard: the delete markers must be applied after every put of the job, and a shard cannot know when the others' are in; run the job in one process", sink.ErrTarget)
	case !job.IsLocalPath(e.Checkpoint):
		return fmt.Errorf("%w: target.bigtable.deletes: apply spills the delete markers beside the checkpoint, which must be a local path (it is %s)", sink.ErrTarget, e.Checkpoint)
	}
	return nil
}

// owned is a Sink that closes the connection it was built with.
type owned struct {
	*Sink
	conn *Conn
}

// Close implements sink.Sink.
func (o *owned) Close() error { return o.conn.Close() }

// Conn is a data and an admin client of one Bigtable instance.
type Conn struct {
	Data  *bigtable.Client
	Admin *bigtable.AdminClient
	// calls counts the MutateRows calls made through Data.
	calls atomic.Uint64
	grpc  *grpc.ClientConn // the emulator's connection, when we dialed it
}

// Calls counts the MutateRows calls made through Data, each retry
// its own call: what New takes to count the client's retries.
func (c *Conn) Calls() *atomic.Uint64 { return &c.calls }

// Close closes both clients.
func (c *Conn) Close() error {
	err := c.Data.Close()
	if aerr := c.Admin.Close(); err == nil {
		err = aerr
	}
	if c.grpc != nil {
		c.grpc.Close()
	}
	return err
}

// scheme strips a URL scheme from BIGTABLE_EMULATOR_HOST, as Google's
// clients do.
var scheme = regexp.MustCompile(`^[a-z][a-z0-9+.-]*://`)

// Dial opens the data and admin clients of the instance bt names, with
// bt's app profile and credentials. With BIGTABLE_EMULATOR_HOST set,
// both go to that emulator without credentials, as every Google client
// does; the data client's connection is dialed here then, so that its
// MutateRows calls are counted (Retries) as they are on a real instance.
func Dial(ctx context.Context, bt *job.Bigtable) (*Conn, error) {
	c := &Conn{}
	count := func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		if strings.HasSuffix(method, "/MutateRows") {
			c.calls.Add(1)
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
	var opts []option.ClientOption
	if bt.CredentialsFile != "" {
		opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, bt.CredentialsFile))
	}
	dataOpts := opts
	if host := os.Getenv("BIGTABLE_EMULATOR_HOST"); host != "" {
		conn, err := grpc.NewClient("passthrough:///"+scheme.ReplaceAllString(host, ""),
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithChainStreamInterceptor(count),
			grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(1<<28), grpc.MaxCallRecvMsgSize(1<<28)))
		if err != nil {
			return nil, fmt.Errorf("bigtable emulator %s: %w", host, err)
		}
		c.grpc = conn
		dataOpts = []option.ClientOption{option.WithGRPCConn(conn)}
	} else {
		dataOpts = append(dataOpts, option.WithGRPCDialOption(grpc.WithChainStreamInterceptor(count)))
	}
	var err error
	// The client's own metrics go to Cloud Monitoring, which needs a
	// permission a job's account may well not have; the run reports its
	// own counts.
	c.Data, err = bigtable.NewClientWithConfig(ctx, bt.Project, bt.Instance,
		bigtable.ClientConfig{AppProfile: bt.AppProfile, MetricsProvider: bigtable.NoopMetricsProvider{}}, dataOpts...)
	if err != nil {
		if c.grpc != nil {
			c.grpc.Close()
		}
		return nil, fmt.Errorf("bigtable %s/%s: %w", bt.Project, bt.Instance, err)
	}
	c.Admin, err = bigtable.NewAdminClient(ctx, bt.Project, bt.Instance, opts...)
	if err != nil {
		c.Data.Close()
		if c.grpc != nil {
			c.grpc.Close()
		}
		return nil, fmt.Errorf("bigtable admin %s/%s: %w", bt.Project, bt.Instance, err)
	}
	return c, nil
}
