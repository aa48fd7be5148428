package pipeline_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/transform"
)

// refusing is a sink that counts what it is given and refuses, for its
// key, every new cell whose row starts with prefix, as the bigtable sink
// refuses a row key over 4 KiB: what the run does with such a refusal
// is the same for any sink that makes one.
type refusing struct{ prefix []byte }

func (s refusing) Name() string { return "refusing" }
func (s refusing) Begin(context.Context, sink.SplitInfo) (sink.SplitSink, error) {
	return &refusingSplit{prefix: s.prefix}, nil
}
func (refusing) Finish(context.Context, sink.Reporter) error { return nil }
func (refusing) Close() error                                { return nil }

type refusingSplit struct {
	prefix []byte
	n      int64
}

func (s *refusingSplit) Write(_ context.Context, c *cell.Cell) error {
	if bytes.HasPrefix(c.Row, s.prefix) {
		return &sink.BadKeyError{Why: "refused for the test"}
	}
	s.n++
	return nil
}
func (s *refusingSplit) Commit(context.Context) (sink.Ack, error) { return sink.Ack{Cells: s.n}, nil }
func (s *refusingSplit) Abort()                                   {}

// TestSinkRefusalsRejected: new cells a sink refuses for their key are
// rejected by the job's bad_keys, each counted and in the reject file,
// whether the transform maps cell by cell or holds whole rows back and
// emits them later (a row-level transform, whose cells reach the sink
// while another old cell is read, or at the end of the split); with
// bad_keys: fail the run stops at the first.
func TestSinkRefusalsRejected(t *testing.T) {
	ctx := context.Background()
	// The oracle's dump of the bundled snapshot: user u00001's cells
	// become new rows starting with u00001 (the demo keeps the user).
	dump, err := os.ReadFile("../testdata/snapshots/demo_events.cells")
	if err != nil {
		t.Fatal(err)
	}
	source, err := testenv.ParseDump(dump)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		prefix   string
		rowLevel bool
	}{
		{"u00001", false},
		{"u00001", true},
		// Every row: the last row of each split reaches the sink only
		// when the transform is flushed.
		{"u", true},
	} {
		refused := 0
		for _, c := range source {
			if strings.HasPrefix(string(c.Row), tc.prefix) {
				refused++
			}
		}
		if refused == 0 {
			t.Fatalf("no cell of %s in the demo snapshot", tc.prefix)
		}
		rowLevel := tc.rowLevel
		j := demoJob(t)
		o := pipeline.Options{Sink: refusing{prefix: []byte(tc.prefix)}, Workers: 2}
		if rowLevel {
			prog := j.Program
			o.NewMapper = func() transform.Mapper {
				m := prog.New()
				return &transform.RowBuffer{MaxBytes: 64 << 20, Fn: func(row []cell.Cell, emit func(cell.Cell)) error {
					for _, c := range row {
						if err := m.Map(c, emit); err != nil {
							return err
						}
					}
					return nil
				}}
			}
		}
		sum, err := pipeline.Execute(ctx, j, o)
		if err != nil {
			t.Fatalf("row level %v: %v", rowLevel, err)
		}
		if sum.Rejected != int64(refused) || sum.Written != int64(len(source)-refused) || sum.Done != sum.Splits {
			t.Errorf("%s, row level %v: rejected %d (want %d), written %d (want %d), %d/%d splits done", tc.prefix, rowLevel, sum.Rejected, refused, sum.Written, len(source)-refused, sum.Done, sum.Splits)
		}
		rej, err := os.ReadFile(j.BadKeys.File)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(rej), "refused for the test"); n != refused {
			t.Errorf("%s, row level %v: %d refused cells in the reject file, want %d", tc.prefix, rowLevel, n, refused)
		}
	}
	j := demoJob(t)
	j.BadKeys = job.BadKeys{Action: job.Fail}
	if _, err := pipeline.Execute(ctx, j, pipeline.Options{Sink: refusing{prefix: []byte("u00001")}, Workers: 2}); !errors.Is(err, pipeline.ErrBadKeyFatal) {
		t.Errorf("bad_keys: fail: %v", err)
	}
}
