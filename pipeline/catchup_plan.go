package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/snapshot/diff"
	"github.com/rekeyhq/rekey/vfs"
)

// CatchupPlan is what a catch-up from one snapshot to the job's would read,
// from the two manifests and their store files' file info and block
// indexes alone (rekey plan --since): no cell is read.
type CatchupPlan struct {
	// Since is snapshot A, Snapshot the job's (B).
	Since    string `json:"since"`
	Snapshot string `json:"snapshot"`
	// Refused is why `rekey run --since` would refuse to start now (the
	// reached record does not put the target at A); empty when it would
	// start. The estimate below is made either way, A read as of its
	// creation time when no record gives its TTL time.
	Refused string `json:"refused,omitempty"`
	// TTLTimeA and TTLTimeB are the times TTLs are measured at on each
	// side.
	TTLTimeA time.Time `json:"since_ttl_time"`
	TTLTimeB time.Time `json:"ttl_time"`
	// FilesRead and BytesRead are the store file entries (of both
	// snapshots) the catch-up reads, and their bytes; FilesSkipped and
	// BytesSkipped the rest.
	FilesRead    int   `json:"store_files_read"`
	BytesRead    int64 `json:"bytes_read"`
	FilesSkipped int   `json:"store_files_skipped"`
	BytesSkipped int64 `json:"bytes_skipped"`
	// Ranges is the number of row ranges that can differ.
	Ranges int `json:"row_ranges"`
	// FullBytes is what a whole run of B reads, for comparison.
	FullBytes int64 `json:"full_run_bytes"`
}

// PlanCatchup estimates the catch-up of j from snapshot o.Since (a name,
// or "last") to the job's snapshot, as `rekey run --since` would run it
// with the same options (o.Checkpoint for where the reached record is,
// o.AssumeAt, o.SetTimestamp): which store files it reads and skips. It
// writes nothing. A catch-up the run refuses for its options (raw reads,
// set_timestamp, A the job's own snapshot) is an error; one refused only
// because the record does not put the target at A is estimated, with
// the reason in Refused.
func PlanCatchup(ctx context.Context, j *job.Job, o Options) (*CatchupPlan, error) {
	if o.Since == "" {
		return nil, fmt.Errorf("%w: no snapshot to catch up from", ErrInvalid)
	}
	r := &Run{j: j, prepared: time.Now(), logf: func(string, ...any) {}}
	defer r.close()
	o.Kerberos = Identity(j, o.Kerberos)
	r.reachedBase = reachedBase(j, o.Checkpoint)
	if err := r.resolveSinceLast(&o); err != nil {
		return nil, err
	}
	r.o = o
	if j.Source.Scan.Raw {
		return nil, fmt.Errorf("%w: --since: a raw copy cannot be caught up (a delete marker that vanished cannot be undone by a write)", ErrInvalid)
	}
	if o.SetTimestamp != 0 || j.Run.SetTimestamp != 0 {
		return nil, fmt.Errorf("%w: --since cannot catch up a job that sets every cell's timestamp (set_timestamp)", ErrInvalid)
	}
	if o.Since == j.Source.Name {
		return nil, fmt.Errorf("%w: --since %s names the job's own snapshot", ErrInvalid, o.Since)
	}
	oo := snapshot.OpenOptions{Location: vfs.Options{Kerberos: o.Kerberos}}
	b, err := snapshot.Open(ctx, j.Source.Root, j.Source.Name, oo)
	if err != nil {
		return nil, fmt.Errorf("source snapshot: %w", err)
	}
	defer b.Close()
	a, err := snapshot.Open(ctx, j.Source.Root, o.Since, oo)
	if err != nil {
		return nil, fmt.Errorf("--since snapshot: %w", err)
	}
	defer a.Close()
	if err := forward(a, b); err != nil {
		return nil, err
	}
	r.scan = scanOptions(j, b.Info().CreationTime)
	nowB := r.scan.Now
	if nowB.IsZero() {
		nowB = r.prepared
	}
	p := &CatchupPlan{Since: o.Since, Snapshot: j.Source.Name, TTLTimeB: nowB, FullBytes: b.Bytes()}
	nowA, err := r.checkAt(a)
	switch {
	case errors.Is(err, ErrNotAt):
		p.Refused = err.Error()
		nowA = a.Info().CreationTime
	case err != nil:
		return nil, err
	}
	p.TTLTimeA = nowA
	plan, err := diff.NewPlan(ctx, a, b, diff.Options{Scan: r.scan, NowA: nowA, NowB: nowB})
	if err != nil {
		return nil, fmt.Errorf("catch-up from %s to %s: %w", o.Since, j.Source.Name, err)
	}
	st := plan.Stats()
	p.FilesRead, p.BytesRead, p.FilesSkipped, p.BytesSkipped = st.FilesRead, st.BytesRead, st.FilesSkipped, st.BytesSkipped
	p.Ranges = len(plan.Ranges())
	return p, nil
}
