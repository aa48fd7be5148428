package main

// benchtool bookkeeping: what a run spends on its own records as the
// number of splits grows, with next to no cells to read.
//
// There is no cluster here to take a snapshot of 20,000 regions, so the
// snapshot is built: a manifest Go writes, of N regions that tile the row
// space of the job's snapshot (an HBase-written one: the demo job's), each
// listing as HFileLinks the HBase-written store files of the source
// regions it overlaps. A scan is bounded by its region, so every source
// cell is read by exactly one region (the run checks the total), and with
// N above the source's rows most regions hold one row or none: the phases
// measure the cost per split, not reading.

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/snapshot/manifest"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/verify"
	"github.com/rekeyhq/rekey/vfs"
)

// bookkeepingPhases are measured in this order, each in a process of its
// own (so each has its own peak RSS): the plan's sample, a whole dry run,
// a dry run stopped once half the splits are done, its resume, and
// verify's choice of entities from the sketch the whole run left.
var bookkeepingPhases = []string{"plan", "run", "stop-at-half", "resume", "choose"}

// phaseResult is one phase at one size, as a child process prints it.
type phaseResult struct {
	Phase   string  `json:"phase"`
	Regions int     `json:"regions"`
	Seconds float64 `json:"seconds"`
	// Splits is the splits the phase finished; Cells the cells it read
	// (the plan: sampled); Entities the entities verify chose.
	Splits   int   `json:"splits,omitempty"`
	Cells    int64 `json:"cells,omitempty"`
	Entities int   `json:"entities,omitempty"`
	// WrittenMB is what the process handed to write(2) (/proc/self/io
	// wchar): the checkpoint and the sketch beside it, for a dry run.
	WrittenMB float64 `json:"written_mb"`
	// Filled in by the parent: the phase's seconds per 1,000 regions, its
	// process's peak RSS, the size of the checkpoint's files after it, and
	// the rounds it ran (the figures are its median round's, the peak RSS
	// the largest).
	MsPer1000       float64 `json:"ms_per_1000_regions"`
	PeakRSSMB       float64 `json:"peak_rss_mb"`
	CheckpointBytes int64   `json:"checkpoint_bytes,omitempty"`
	Rounds          int     `json:"rounds,omitempty"`
}

// bookkeepingResult is the line bench.sh keeps: the fields every row has
// (cells per second here counts regions through the whole run phase at
// the largest size), then every phase at every size.
type bookkeepingResult struct {
	Op          string          `json:"op"`
	Cells       int64           `json:"cells"`
	Seconds     float64         `json:"seconds"`
	CellsPerSec float64         `json:"cells_per_sec"`
	Source      string          `json:"source"`
	Phases      []phaseResult   `json:"phases"`
	Notes       string          `json:"notes"`
	Sizes       []int           `json:"sizes"`
	Flat        map[string]bool `json:"flat"`
}

// bookkeeping builds the snapshots under dir and runs the phases (in the
// order given; resume and choose read what the phases before them left)
// at every size, each in a child process, rounds times: each phase's
// figure is its median round by time (the machine is shared), with the
// largest peak RSS of its rounds.
func bookkeeping(jobPath, dir string, sizes []int, phases []string, rounds int) error {
	j, err := job.Load(jobPath)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	_, _, want, err := sourceRegions(j)
	if err != nil {
		return err
	}
	out := bookkeepingResult{Op: "bookkeeping", Sizes: sizes, Source: j.Source.Root + " " + j.Source.Name,
		Notes: "snapshot manifests written by benchtool, of N regions tiling the job snapshot's rows and linking its HBase-written store files; dry-run sink; ms per 1000 regions = phase seconds * 1000 / N, median of the rounds; peak RSS of the phase's own process, largest of the rounds"}
	for _, n := range sizes {
		root := filepath.Join(dir, fmt.Sprintf("n%d", n))
		name := fmt.Sprintf("bk%d", n)
		if err := buildTiledSnapshot(j, root, name, n); err != nil {
			return fmt.Errorf("%d regions: %w", n, err)
		}
		byPhase := map[string][]phaseResult{}
		for round := 1; round <= rounds; round++ {
			for _, ph := range phases {
				r, err := runPhase(self, jobPath, root, name, ph, n)
				if err != nil {
					return fmt.Errorf("%d regions, %s: %w", n, ph, err)
				}
				if err := checkPhase(r, n, want); err != nil {
					return err
				}
				r.CheckpointBytes = checkpointBytes(filepath.Join(root, "state", "checkpoint.json"))
				byPhase[ph] = append(byPhase[ph], r)
				fmt.Fprintf(os.Stderr, "bookkeeping: round %d %6d regions %-13s %8.3f s %8.1f ms/1000 regions %7.1f MB RSS %9.1f MB written\n", round, n, ph, r.Seconds, r.MsPer1000, r.PeakRSSMB, r.WrittenMB)
			}
		}
		for _, ph := range phases {
			out.Phases = append(out.Phases, medianRound(byPhase[ph]))
		}
	}
	out.Flat = flatness(out.Phases, sizes)
	last := sizes[len(sizes)-1]
	for _, r := range out.Phases {
		if r.Phase == "run" && r.Regions == last {
			out.Cells, out.Seconds = int64(last), r.Seconds
			out.CellsPerSec = float64(last) / r.Seconds
		}
	}
	return json.NewEncoder(os.Stdout).Encode(out)
}

// medianRound is the round of median time, with the largest peak RSS.
func medianRound(rs []phaseResult) phaseResult {
	sort.Slice(rs, func(a, b int) bool { return rs[a].Seconds < rs[b].Seconds })
	m := rs[len(rs)/2]
	for _, r := range rs {
		m.PeakRSSMB = max(m.PeakRSSMB, r.PeakRSSMB)
	}
	m.Rounds = len(rs)
	return m
}

// checkPhase holds a phase to what it must have done: the run and the
// resumed run cover every source cell once.
func checkPhase(r phaseResult, n int, want int64) error {
	switch r.Phase {
	case "run", "resume":
		if r.Cells != want {
			return fmt.Errorf("%d regions, %s: the run's splits hold %d cells, the source %d: the regions do not tile it", n, r.Phase, r.Cells, want)
		}
	case "plan":
		// A share of PlanSample per split: at most every cell.
		if r.Cells <= 0 || r.Cells > want {
			return fmt.Errorf("%d regions, plan: sampled %d cells of %d", n, r.Cells, want)
		}
	}
	return nil
}

// flatness says, per phase, whether the time per 1,000 regions at the
// largest size is within twice the one at the smallest.
func flatness(rs []phaseResult, sizes []int) map[string]bool {
	per := map[string]map[int]float64{}
	for _, r := range rs {
		if per[r.Phase] == nil {
			per[r.Phase] = map[int]float64{}
		}
		per[r.Phase][r.Regions] = r.MsPer1000
	}
	flat := map[string]bool{}
	for ph, m := range per {
		lo, hi := m[sizes[0]], m[sizes[len(sizes)-1]]
		flat[ph] = hi <= 2*lo+1
	}
	return flat
}

func checkpointBytes(p string) int64 {
	var n int64
	m, _ := filepath.Glob(p + "*")
	for _, f := range m {
		if fi, err := os.Stat(f); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// runPhase runs one phase in a child process and adds its peak RSS.
func runPhase(self, jobPath, root, name, phase string, n int) (phaseResult, error) {
	var r phaseResult
	cmd := exec.Command(self, "bookkeeping-phase", phase, jobPath, root, name, strconv.Itoa(n))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return r, fmt.Errorf("%v: %s", err, strings.TrimSpace(stderr.String()))
	}
	if err := json.Unmarshal(stdout.Bytes(), &r); err != nil {
		return r, fmt.Errorf("child output %q: %w", stdout.String(), err)
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.PeakRSSMB = float64(ru.Maxrss) / 1024 // kilobytes on Linux
	}
	r.MsPer1000 = r.Seconds * 1000 / float64(n) * 1000
	return r, nil
}

// bookkeepingPhase is the child: one phase, timed, printed as JSON.
func bookkeepingPhase(phase, jobPath, root, name string, n int) error {
	j, err := job.Load(jobPath)
	if err != nil {
		return err
	}
	state := filepath.Join(root, "state")
	j.Source.Root, j.Source.Name = root, name
	j.Run.Checkpoint = filepath.Join(state, "checkpoint.json")
	j.BadKeys.File = ""
	j.Sink.Kind = job.SinkDryRun
	w0 := wchar()
	start := time.Now()
	r := phaseResult{Phase: phase, Regions: n}
	switch phase {
	case "plan":
		r.Cells, err = planSample(j)
	case "run":
		var sum *pipeline.Summary
		sum, err = pipeline.Execute(context.Background(), j, pipeline.Options{Fresh: true})
		if sum != nil {
			r.Splits, r.Cells = sum.Done-sum.Skipped, sum.Read
		}
	case "stop-at-half":
		r.Splits, err = stopAtHalf(j, n)
	case "resume":
		var sum *pipeline.Summary
		sum, err = pipeline.Execute(context.Background(), j, pipeline.Options{Resume: true})
		if sum != nil {
			r.Splits, r.Cells = sum.Done-sum.Skipped, sum.Read
			if sum.Skipped == 0 {
				err = errors.Join(err, errors.New("the resume skipped no split"))
			}
		}
	case "choose":
		r.Entities, err = chooseEntities(state)
	default:
		return fmt.Errorf("unknown phase %q", phase)
	}
	if err != nil {
		return err
	}
	r.Seconds = time.Since(start).Seconds()
	r.WrittenMB = float64(wchar()-w0) / 1e6
	return json.NewEncoder(os.Stdout).Encode(r)
}

// planSample is rekey plan's work: the snapshot opened and sampled into
// the planner; it returns the cells sampled.
func planSample(j *job.Job) (int64, error) {
	ctx := context.Background()
	snap, err := snapshot.Open(ctx, j.Source.Root, j.Source.Name, snapshot.OpenOptions{})
	if err != nil {
		return 0, err
	}
	defer snap.Close()
	pl := j.Program.NewPlanner(transform.PlanOptions{Regions: len(snap.Regions())})
	if _, err := pipeline.Sample(ctx, snap, pipeline.ScanOptions(j, snap.Info()), pl, pipeline.PlanSample); err != nil {
		return 0, err
	}
	rep := pl.Report(false)
	return rep.SampledCells, nil
}

// stopAtHalf runs the job afresh and cancels it once half its splits are
// done, as a kill would stop it (the journal is synced per split, so what
// a kill leaves is what the cancel leaves, less the splits in flight).
func stopAtHalf(j *job.Job, n int) (int, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := &halfway{k: int64(n / 2), cancel: cancel}
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Sink: s, Fresh: true})
	if !errors.Is(err, pipeline.ErrInterrupted) {
		return 0, fmt.Errorf("the run stopped at half: %v, want an interruption", err)
	}
	return sum.Done, nil
}

// halfway is a dry run that cancels its run after k commits.
type halfway struct {
	sink.DryRun
	k      int64
	done   atomic.Int64
	cancel func()
}

func (h *halfway) Begin(ctx context.Context, i sink.SplitInfo) (sink.SplitSink, error) {
	in, err := h.DryRun.Begin(ctx, i)
	return &halfwaySplit{in, h}, err
}

type halfwaySplit struct {
	sink.SplitSink
	h *halfway
}

func (s *halfwaySplit) Commit(ctx context.Context) (sink.Ack, error) {
	a, err := s.SplitSink.Commit(ctx)
	if s.h.done.Add(1) == s.h.k {
		s.h.cancel()
	}
	return a, err
}

// chooseEntities is verify's choice of entities from the run's sketch.
func chooseEntities(state string) (int, error) {
	sks, _, err := verify.LoadStateSketch(state)
	if err != nil {
		return 0, err
	}
	var c verify.Choice
	c.AddSketches(sks, job.DefaultHeavyHitters, job.DefaultSampleEntities)
	return c.Len(), nil
}

// wchar is the bytes this process has handed to write(2) so far.
func wchar() int64 {
	b, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "wchar: "); ok {
			n, _ := strconv.ParseInt(v, 10, 64)
			return n
		}
	}
	return 0
}

// buildTiledSnapshot writes root/.hbase-snapshot/name, a snapshot of n
// regions over the job snapshot's store files (root/data links to its
// data/), unless it is there already.
func buildTiledSnapshot(j *job.Job, root, name string, n int) error {
	dir := filepath.Join(root, ".hbase-snapshot", name)
	if _, err := os.Stat(filepath.Join(dir, "data.manifest")); err == nil {
		return nil
	}
	src, err := vfs.Open(j.Source.Root)
	if err != nil {
		return err
	}
	defer src.Close()
	if _, ok := src.FS.(vfs.Local); !ok {
		return fmt.Errorf("the job's snapshot root %s is not local", j.Source.Root)
	}
	srcDir := filepath.Join(filepath.FromSlash(src.Path), ".hbase-snapshot", j.Source.Name)
	info, err := readSnapshotInfo(srcDir)
	if err != nil {
		return err
	}
	m, err := readDataManifest(srcDir)
	if err != nil {
		return err
	}
	srcRegions, rows, _, err := sourceRegions(j)
	if err != nil {
		return err
	}
	keys, err := tileKeys(rows, n)
	if err != nil {
		return err
	}
	rms, err := tiledRegions(m.TableSchema.TableName, srcRegions, keys)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.Symlink(filepath.Join(filepath.FromSlash(src.Path), "data"), filepath.Join(root, "data")); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	info.Name = proto.String(name)
	ib, err := proto.Marshal(info)
	if err != nil {
		return err
	}
	mb, err := proto.Marshal(&manifest.SnapshotDataManifest{TableSchema: m.TableSchema, RegionManifests: rms})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, ".snapshotinfo"), ib, 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "data.manifest"), mb, 0o644)
}

func readSnapshotInfo(dir string) (*manifest.SnapshotDescription, error) {
	b, err := os.ReadFile(filepath.Join(dir, ".snapshotinfo"))
	if err != nil {
		return nil, err
	}
	return manifest.DecodeSnapshotInfo(b)
}

func readDataManifest(dir string) (*manifest.SnapshotDataManifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "data.manifest"))
	if err != nil {
		return nil, fmt.Errorf("%w (the bookkeeping bench needs a consolidated v2 manifest)", err)
	}
	return manifest.DecodeDataManifest(b)
}

// sourceRegions opens the job's snapshot and returns its regions, its
// distinct row keys in order, and its cell count, read as the run reads.
func sourceRegions(j *job.Job) (regions []snapshot.Region, rows [][]byte, cells int64, err error) {
	ctx := context.Background()
	snap, err := snapshot.Open(ctx, j.Source.Root, j.Source.Name, snapshot.OpenOptions{})
	if err != nil {
		return nil, nil, 0, err
	}
	defer snap.Close()
	splits, err := snap.Splits(snapshot.SplitOptions{})
	if err != nil {
		return nil, nil, 0, err
	}
	for _, sp := range splits {
		err := snap.ReadSplit(ctx, sp, pipeline.ScanOptions(j, snap.Info()), func(c *cell.Cell) error {
			cells++
			if len(rows) == 0 || !bytes.Equal(rows[len(rows)-1], c.Row) {
				rows = append(rows, append([]byte(nil), c.Row...))
			}
			return nil
		})
		if err != nil {
			return nil, nil, 0, err
		}
	}
	return snap.Regions(), rows, cells, nil
}

// tileKeys returns n-1 increasing split keys spread over rows: key i is
// the row at i/n of the way through, then 0x00 and i, so keys between two
// rows sort between them and every row falls in exactly one region.
func tileKeys(rows [][]byte, n int) ([][]byte, error) {
	if len(rows) == 0 || n < 1 {
		return nil, errors.New("no rows to tile")
	}
	keys := make([][]byte, 0, n-1)
	for i := 1; i < n; i++ {
		r := rows[i*len(rows)/n]
		k := append(append(append([]byte(nil), r...), 0), binary.BigEndian.AppendUint32(nil, uint32(i))...)
		if len(keys) > 0 && bytes.Compare(keys[len(keys)-1], k) >= 0 {
			return nil, fmt.Errorf("split keys %x and %x out of order", keys[len(keys)-1], k)
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// tiledRegions builds one region manifest per range between keys, listing
// as HFileLinks the store files of the source regions it overlaps.
func tiledRegions(tn *manifest.TableName, srcs []snapshot.Region, keys [][]byte) ([]*manifest.SnapshotRegionManifest, error) {
	bounds := append(append([][]byte{nil}, keys...), nil)
	var out []*manifest.SnapshotRegionManifest
	for i := 0; i+1 < len(bounds); i++ {
		start, end := bounds[i], bounds[i+1]
		rm := &manifest.SnapshotRegionManifest{Version: proto.Int32(2), RegionInfo: &manifest.RegionInfo{
			RegionId: proto.Uint64(1767225600000 + uint64(i)), TableName: tn, StartKey: start, EndKey: end,
			Offline: proto.Bool(false), Split: proto.Bool(false), ReplicaId: proto.Int32(0),
		}}
		fams := map[string]*manifest.SnapshotRegionManifest_FamilyFiles{}
		for _, s := range srcs {
			// [start, end) and [s.StartKey, s.EndKey) overlap (empty end: no end).
			if (len(s.EndKey) > 0 && bytes.Compare(start, s.EndKey) >= 0) || (len(end) > 0 && bytes.Compare(s.StartKey, end) >= 0) {
				continue
			}
			for _, ff := range s.Families {
				f := fams[string(ff.Family)]
				if f == nil {
					f = &manifest.SnapshotRegionManifest_FamilyFiles{FamilyName: ff.Family}
					fams[string(ff.Family)] = f
					rm.FamilyFiles = append(rm.FamilyFiles, f)
				}
				for _, sf := range ff.Files {
					if sf.Reference != nil || strings.Contains(sf.Name, "=") || sf.Size <= 0 {
						return nil, fmt.Errorf("source store file %s is a reference, a link or of unrecorded size; the bench tiles plain store files only", sf.Name)
					}
					link := fmt.Sprintf("%s=%s-%s", tn.Qualifier, s.EncodedName, sf.Name)
					if ns := string(tn.Namespace); ns != "" && ns != "default" {
						link = ns + "=" + link
					}
					f.StoreFiles = append(f.StoreFiles, &manifest.SnapshotRegionManifest_StoreFile{Name: proto.String(link), FileSize: proto.Uint64(uint64(sf.Size))})
				}
			}
		}
		out = append(out, rm)
	}
	return out, nil
}
