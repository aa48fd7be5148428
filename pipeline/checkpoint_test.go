package pipeline_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/crc32"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
)

// The checkpoint tests cut the demo snapshot into small splits, so a run
// has many to record.
const (
	testSplitBytes  = 8 << 10
	testSplits      = 25 // the demo snapshot's splits at testSplitBytes (cut inside rows too)
	testRowSplits   = 19 // the same cut at rows only, as builds before in-row cuts did
	stoppedAfter    = 5  // splits done before the interrupted run stops
	journalMagicLen = len("rekey checkpoint journal\n")
	// demoCells is the demo snapshot's cell count in HBase's own dump of
	// it (testdata/snapshots/demo_events.cells, one line a cell).
	demoCells = 31413
)

// stopAfter is a dry run that cancels the run once k splits committed.
type stopAfter struct {
	sink.DryRun
	n      atomic.Int32
	k      int32
	cancel func()
	// each, when set, runs after every commit (before any cancel).
	each func()
}

func (s *stopAfter) Begin(ctx context.Context, i sink.SplitInfo) (sink.SplitSink, error) {
	in, err := s.DryRun.Begin(ctx, i)
	return &stopSplit{in, s}, err
}

type stopSplit struct {
	sink.SplitSink
	s *stopAfter
}

func (x *stopSplit) Commit(ctx context.Context) (sink.Ack, error) {
	a, err := x.SplitSink.Commit(ctx)
	if x.s.each != nil {
		x.s.each()
	}
	if x.s.n.Add(1) == x.s.k && x.s.cancel != nil {
		x.s.cancel()
	}
	return a, err
}

// checkpointJob is the demo job with its checkpoint in a fresh folder.
func checkpointJob(t *testing.T) *job.Job {
	t.Helper()
	j := demoJob(t)
	j.BadKeys.File = ""
	return j
}

// interrupted runs j with one worker until stoppedAfter splits are done.
func interrupted(t *testing.T, j *job.Job) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &stopAfter{k: stoppedAfter, cancel: cancel}
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Sink: s, Workers: 1, SplitBytes: testSplitBytes})
	if !errors.Is(err, pipeline.ErrInterrupted) || sum.Done != stoppedAfter || sum.Splits != testSplits {
		t.Fatalf("interrupted run: %v, %d of %d splits done; want ErrInterrupted, %d of %d", err, sum.Done, sum.Splits, stoppedAfter, testSplits)
	}
}

// resume prepares a resumed run of j.
func resume(j *job.Job) (*pipeline.Run, error) {
	return pipeline.Prepare(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, Workers: 1, SplitBytes: testSplitBytes, Resume: true})
}

// journalOf returns the path of the one journal beside j's checkpoint.
func journalOf(t *testing.T, j *job.Job) string {
	t.Helper()
	m, err := filepath.Glob(j.Run.Checkpoint + ".journal-*")
	if err != nil || len(m) != 1 {
		t.Fatalf("journals beside the checkpoint: %v %v, want one", m, err)
	}
	return m[0]
}

// frames splits a journal into its records, by the layout package
// pipeline documents: a magic line, then per record a 4-byte length, the
// payload's CRC32C, the CRC32C of those 8 bytes, and the payload. It
// returns each record's offset.
func frames(t *testing.T, b []byte) []int {
	t.Helper()
	var offs []int
	for off := journalMagicLen; off < len(b); {
		offs = append(offs, off)
		off += 12 + int(binary.BigEndian.Uint32(b[off:]))
	}
	return offs
}

// reframe builds a record with valid checksums around payload.
func reframe(payload string) []byte {
	tab := crc32.MakeTable(crc32.Castagnoli)
	b := make([]byte, 12+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)))
	binary.BigEndian.PutUint32(b[4:], crc32.Checksum([]byte(payload), tab))
	binary.BigEndian.PutUint32(b[8:], crc32.Checksum(b[:8], tab))
	copy(b[12:], payload)
	return b
}

func readFile(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCheckpointDamageRefused: a checkpoint whose base or journal is
// damaged is refused with ErrCheckpointDamaged and a message that names
// the way out (--fresh), never read as fewer splits done; --fresh then
// starts over.
func TestCheckpointDamageRefused(t *testing.T) {
	cases := []struct {
		name   string
		damage func(t *testing.T, base, journal string)
		want   string // in the message
	}{
		{"journal: a record's payload checksum in the middle", func(t *testing.T, _, jp string) {
			b := readFile(t, jp)
			offs := frames(t, b)
			b[offs[2]+12+5] ^= 0x20 // the second split record, records follow
			writeFile(t, jp, b)
		}, "not a torn write"},
		{"journal: a record's length in the middle", func(t *testing.T, _, jp string) {
			b := readFile(t, jp)
			offs := frames(t, b)
			b[offs[2]+1] ^= 0x10 // 1 MiB longer: past the end of the file
			writeFile(t, jp, b)
		}, "record header's checksum"},
		{"journal: an unknown record type", func(t *testing.T, _, jp string) {
			b := readFile(t, jp)
			offs := frames(t, b)
			out := append(append([]byte{}, b[:offs[3]]...), reframe(`{"type":"merge"}`)...)
			writeFile(t, jp, append(out, b[offs[3]:]...))
		}, `type "merge"`},
		{"journal: an unknown field in a record", func(t *testing.T, _, jp string) {
			b := readFile(t, jp)
			writeFile(t, jp, append(b, reframe(`{"type":"split","split":{"id":"x"},"extra":1}`)...))
		}, "extra"},
		{"journal: the header of another generation", func(t *testing.T, _, jp string) {
			b := readFile(t, jp)
			offs := frames(t, b)
			var h map[string]any
			if err := json.Unmarshal(b[offs[0]+12:offs[1]], &h); err != nil {
				t.Fatal(err)
			}
			h["generation"] = h["generation"].(float64) + 1
			nh, _ := json.Marshal(h)
			out := append(append([]byte{}, b[:offs[0]]...), reframe(string(nh))...)
			writeFile(t, jp, append(out, b[offs[1]:]...))
		}, "is not of this base"},
		{"journal: not a journal", func(t *testing.T, _, jp string) {
			b := readFile(t, jp)
			b[0] = 'R'
			writeFile(t, jp, b)
		}, "does not start as a rekey journal"},
		{"journal: missing", func(t *testing.T, _, jp string) {
			if err := os.Remove(jp); err != nil {
				t.Fatal(err)
			}
		}, "which is missing"},
		{"base: truncated", func(t *testing.T, bp, _ string) {
			b := readFile(t, bp)
			writeFile(t, bp, b[:len(b)/2])
		}, "truncated"},
		{"base: a format version this rekey does not read", func(t *testing.T, bp, _ string) {
			b := readFile(t, bp)
			writeFile(t, bp, bytes.Replace(b, []byte(`{"version":2,`), []byte(`{"version":3,`), 1))
		}, "format version 3"},
		{"base: its state changed under its checksum", func(t *testing.T, bp, _ string) {
			b := readFile(t, bp)
			writeFile(t, bp, bytes.Replace(b, []byte(`"sink_finished":false`), []byte(`"sink_finished":true`), 1))
		}, "CRC32C"},
		{"base: missing, its journal there", func(t *testing.T, bp, _ string) {
			if err := os.Remove(bp); err != nil {
				t.Fatal(err)
			}
		}, "the base", // and the journal named
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := checkpointJob(t)
			interrupted(t, j)
			jp := journalOf(t, j)
			tc.damage(t, j.Run.Checkpoint, jp)
			r, err := resume(j)
			if err == nil {
				p := r.Outline()
				r.Close()
				t.Fatalf("resume over a damaged checkpoint: no error; %d of %d splits to do", p.Todo, p.Splits)
			}
			if !errors.Is(err, pipeline.ErrCheckpointDamaged) {
				t.Fatalf("resume: %v, want ErrCheckpointDamaged", err)
			}
			for _, w := range []string{tc.want, "--fresh", j.Run.Checkpoint} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
			// Without --resume it is refused the same way, not as "exists".
			if _, err := pipeline.Prepare(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, SplitBytes: testSplitBytes}); !errors.Is(err, pipeline.ErrCheckpointDamaged) {
				t.Errorf("a run without --resume: %v, want ErrCheckpointDamaged", err)
			}
			sum, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, SplitBytes: testSplitBytes, Fresh: true})
			if err != nil || sum.Skipped != 0 || sum.Done != testSplits {
				t.Fatalf("--fresh over the damaged checkpoint: %v (skipped %d, done %d); want every split done afresh", err, sum.Skipped, sum.Done)
			}
			if m, _ := filepath.Glob(j.Run.Checkpoint + ".journal-*"); len(m) != 1 {
				t.Errorf("journals after --fresh: %v, want one", m)
			}
		})
	}
}

// TestCheckpointTornLastRecord: a last journal record cut short or left
// as zeros (a crash while it was appended) is left out: the run resumes
// and redoes that split only.
func TestCheckpointTornLastRecord(t *testing.T) {
	cases := []struct {
		name string
		tear func(b []byte, last int) []byte
	}{
		{"cut in its payload", func(b []byte, last int) []byte { return b[:last+12+(len(b)-last-12)/2] }},
		{"cut in its header", func(b []byte, last int) []byte { return b[:last+5] }},
		{"its payload zeros", func(b []byte, last int) []byte {
			for i := last + 12; i < len(b); i++ {
				b[i] = 0
			}
			return b
		}},
		{"all of it zeros", func(b []byte, last int) []byte {
			for i := last; i < len(b); i++ {
				b[i] = 0
			}
			return b
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := checkpointJob(t)
			interrupted(t, j)
			jp := journalOf(t, j)
			b := readFile(t, jp)
			offs := frames(t, b)
			// The interrupted run may have recorded the split in flight when
			// it stopped, not done; drop such records so the last is a done
			// split's.
			for !bytes.Contains(b[offs[len(offs)-1]:], []byte(`"done":true`)) {
				b = b[:offs[len(offs)-1]]
				offs = offs[:len(offs)-1]
			}
			writeFile(t, jp, tc.tear(b, offs[len(offs)-1]))
			r, err := resume(j)
			if err != nil {
				t.Fatalf("resume after a torn last record: %v", err)
			}
			if p := r.Outline(); p.Todo != testSplits-(stoppedAfter-1) {
				t.Errorf("after a torn last record: %d splits to do, want %d (the torn one redone)", p.Todo, testSplits-(stoppedAfter-1))
			}
			if err := r.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			sum, err := r.Wait()
			if err != nil || !sum.Finished || sum.Skipped != stoppedAfter-1 {
				t.Fatalf("resumed run: %v, finished %v, skipped %d; want finished, %d skipped", err, sum.Finished, sum.Skipped, stoppedAfter-1)
			}
		})
	}
}

// sketchOf reads the entity sketch a run left beside its checkpoint.
func sketchOf(t *testing.T, j *job.Job) *entity.Sketch {
	t.Helper()
	f, err := os.Open(filepath.Join(filepath.Dir(j.Run.Checkpoint), entity.SketchFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := entity.ReadSketch(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sameSketch compares what verify reads of two sketches: totals,
// heaviest by both measures and the sample.
func sameSketch(t *testing.T, what string, got, want *entity.Sketch) {
	t.Helper()
	ga, gc, gb := got.Totals()
	wa, wc, wb := want.Totals()
	if ga != wa || gc != wc || gb != wb {
		t.Errorf("%s: totals %d adds, %d cells, %d bytes; want %d, %d, %d", what, ga, gc, gb, wa, wc, wb)
	}
	list := func(s *entity.Sketch) string {
		b, _ := json.Marshal([][]entity.Count{s.Heaviest(entity.ByCells), s.Heaviest(entity.ByBytes), s.Sample()})
		return string(b)
	}
	if g, w := list(got), list(want); g != w {
		t.Errorf("%s: heaviest or sample differ:\n got %.300s\nwant %.300s", what, g, w)
	}
}

// sameCounts compares the counts of two sketches cut differently: total
// cells and bytes, heaviest by both measures, and the sample's entities.
func sameCounts(t *testing.T, what string, got, want *entity.Sketch) {
	t.Helper()
	_, gc, gb := got.Totals()
	_, wc, wb := want.Totals()
	if gc != wc || gb != wb {
		t.Errorf("%s: totals %d cells, %d bytes; want %d, %d", what, gc, gb, wc, wb)
	}
	list := func(s *entity.Sketch) string {
		sample := s.Sample()
		sort.Slice(sample, func(i, j int) bool { return bytes.Compare(sample[i].Key, sample[j].Key) < 0 })
		b, _ := json.Marshal([][]entity.Count{s.Heaviest(entity.ByCells), s.Heaviest(entity.ByBytes), sample})
		return string(b)
	}
	if g, w := list(got), list(want); g != w {
		t.Errorf("%s: heaviest or sample differ:\n got %.300s\nwant %.300s", what, g, w)
	}
}

// TestCheckpointResumeKeepsSketch: the sketch a resumed run leaves equals
// the one an uninterrupted run leaves, so the split records carry every
// done split's entities and none is lost with the base written rarely.
func TestCheckpointResumeKeepsSketch(t *testing.T) {
	whole := checkpointJob(t)
	sum, err := pipeline.Execute(context.Background(), whole, pipeline.Options{Sink: sink.DryRun{}, Workers: 1, SplitBytes: testSplitBytes})
	if err != nil || !sum.Finished {
		t.Fatalf("uninterrupted run: %v", err)
	}
	j := checkpointJob(t)
	interrupted(t, j)
	r, err := resume(j)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sum, err := r.Wait(); err != nil || sum.Skipped != stoppedAfter {
		t.Fatalf("resumed run: %v (skipped %d, want %d)", err, sum.Skipped, stoppedAfter)
	}
	sameSketch(t, "resumed run's sketch against the uninterrupted run's", sketchOf(t, j), sketchOf(t, whole))
}

// TestCheckpointNotRewrittenPerSplit: while a run goes on, a finished split
// adds one record to the journal and leaves the base as it is, so the
// cost per split does not grow with the splits before it.
func TestCheckpointNotRewrittenPerSplit(t *testing.T) {
	j := checkpointJob(t)
	var base os.FileInfo
	var sizes []int64
	var sinkErr error
	s := &stopAfter{}
	s.each = func() {
		fi, err := os.Stat(j.Run.Checkpoint)
		if err != nil {
			sinkErr = err
			return
		}
		if base == nil {
			base = fi
		} else if !os.SameFile(base, fi) || fi.Size() != base.Size() {
			sinkErr = errors.New("the base was rewritten while splits finished")
		}
		m, _ := filepath.Glob(j.Run.Checkpoint + ".journal-*")
		if len(m) == 1 {
			if fi, err := os.Stat(m[0]); err == nil {
				sizes = append(sizes, fi.Size())
			}
		}
	}
	sum, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: s, Workers: 1, SplitBytes: testSplitBytes})
	if err != nil || !sum.Finished {
		t.Fatalf("run: %v", err)
	}
	if sinkErr != nil {
		t.Fatal(sinkErr)
	}
	// Commit n sees the journal with n-1 records: it grows by one record
	// per split, never shrinks.
	if len(sizes) != testSplits {
		t.Fatalf("journal sizes seen at %d commits, want %d", len(sizes), testSplits)
	}
	for i := 1; i < len(sizes); i++ {
		if sizes[i] <= sizes[i-1] {
			t.Errorf("journal at commit %d: %d bytes, at the one before %d", i+1, sizes[i], sizes[i-1])
		}
	}
}

// TestCheckpointVersion1Loads: a checkpoint earlier rekeys wrote (one file
// rewritten after every split, format version 1) resumes: its done splits
// are skipped, its sketch kept, and the run goes on in the new format.
// testdata/checkpoint-v1.json was written by rekey at commit eb3ece1: the
// demo job through a dry run, split at 8 KiB, one worker, stopped after 5
// splits (the sixth in flight, not done).
func TestCheckpointVersion1Loads(t *testing.T) {
	j := checkpointJob(t)
	writeFile(t, j.Run.Checkpoint, readFile(t, "testdata/checkpoint-v1.json"))
	r, err := resume(j)
	if err != nil {
		t.Fatalf("resume from a version 1 checkpoint: %v", err)
	}
	// The checkpoint was written with row cuts: the resume keeps them.
	if p := r.Outline(); p.Todo != testRowSplits-5 {
		t.Errorf("from the version 1 checkpoint: %d splits to do, want %d", p.Todo, testRowSplits-5)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sum, err := r.Wait()
	if err != nil || !sum.Finished || sum.Skipped != 5 {
		t.Fatalf("resumed run: %v (finished %v, skipped %d, want 5)", err, sum.Finished, sum.Skipped)
	}
	whole := checkpointJob(t)
	if _, err := pipeline.Execute(context.Background(), whole, pipeline.Options{Sink: sink.DryRun{}, Workers: 1, SplitBytes: testSplitBytes}); err != nil {
		t.Fatal(err)
	}
	// The uninterrupted run cuts inside rows, the resumed one at rows (its
	// checkpoint's), so they add some entities' cells in other runs of
	// calls: the counts must agree, not the number of Add calls or the
	// order the sample was merged in.
	sameCounts(t, "sketch resumed from version 1 against an uninterrupted run's", sketchOf(t, j), sketchOf(t, whole))
	if b := readFile(t, j.Run.Checkpoint); !bytes.HasPrefix(b, []byte(`{"version":2,`)) {
		t.Errorf("after the resume the base starts %.40q, want version 2", b)
	}
}

// TestCompactionMidRun: with compactions due after every record, a run
// rewrites its base as it goes, and a resume from a run stopped between
// them skips every split done and keeps every entity.
func TestCompactionMidRun(t *testing.T) {
	defer pipeline.SetCompactMinBytes(1)()
	j := checkpointJob(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var r *pipeline.Run
	var gens []int64
	s := &stopAfter{k: 12, cancel: cancel}
	s.each = func() { gens = append(gens, pipeline.JournalGeneration(r)) }
	r, err := pipeline.Prepare(ctx, j, pipeline.Options{Sink: s, Workers: 1, SplitBytes: testSplitBytes})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := r.Wait(); !errors.Is(err, pipeline.ErrInterrupted) {
		t.Fatalf("run: %v", err)
	}
	// Commit n sees the generation before split n's record.
	if gens[len(gens)-1] < 4 {
		t.Errorf("journal generations seen at the commits: %v; want a compaction every few splits", gens)
	}
	r2, err := resume(j)
	if err != nil {
		t.Fatal(err)
	}
	if p := r2.Outline(); p.Todo != testSplits-12 {
		t.Errorf("after 12 splits and compactions: %d of %d to do", p.Todo, p.Splits)
	}
	if err := r2.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	if sum, err := r2.Wait(); err != nil || !sum.Finished {
		t.Fatalf("resumed run: %v", err)
	}
	// Every cell of the demo snapshot is in the sketch once.
	if _, cells, _ := sketchOf(t, j).Totals(); cells != demoCells {
		t.Errorf("the resumed run's sketch counts %d cells, want %d", cells, demoCells)
	}
}

// TestResumeKeepsTheSketchSizes: a resume asked for other sketch sizes
// goes on with the checkpoint's (sketches of other sizes do not merge; the
// run once panicked in Merge), and its sketch misses no entity.
func TestResumeKeepsTheSketchSizes(t *testing.T) {
	j := checkpointJob(t)
	interrupted(t, j)
	sum, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: sink.DryRun{}, Workers: 1, SplitBytes: testSplitBytes, Resume: true, HeavyHitters: 7, SampleEntities: 9})
	if err != nil || !sum.Finished {
		t.Fatalf("resume with other sketch sizes: %v", err)
	}
	sk := sketchOf(t, j)
	if sk.K() != job.DefaultHeavyHitters || sk.N() != job.DefaultSampleEntities {
		t.Errorf("sketch sizes after the resume: k=%d n=%d, want the checkpoint's %d and %d", sk.K(), sk.N(), job.DefaultHeavyHitters, job.DefaultSampleEntities)
	}
	if _, cells, _ := sk.Totals(); cells != demoCells {
		t.Errorf("the sketch counts %d cells, want %d", cells, demoCells)
	}
}
