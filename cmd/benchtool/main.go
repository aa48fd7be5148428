// Command benchtool is the Go half of `make bench`: it runs one measured
// operation of rekey's own code and prints one JSON line in the same shape
// as the Java oracle's bench subcommands, so scripts/bench.sh can print the
// two side by side as ratios.
//
//	benchtool read-hfile PATH                      every cell of one local HFile
//	benchtool write-hfile PATH N [ENCODING [CODEC]] N cells into a local HFile with hfile.Writer
//	benchtool read-storefiles [--passes=N] DIR     every cell of every HFile under a local root dir's
//	                                               data/ and archive/, one file after the other, with the
//	                                               bare HFile iterator (no merge, no read semantics)
//	benchtool read-snapshot [--readahead=off] [--chunk=BYTES] [--passes=N] [--cpuprofile=FILE] [--trace=FILE] ROOT NAME [WORKERS]
//	                                               every cell of a snapshot, all versions, split per region
//	benchtool merge-cost [--passes=N] ROOT NAME     N rounds of read-storefiles then read-snapshot (1 worker) of
//	                                               a local snapshot in one process: the median ratio of the two
//	benchtool worker-scaling [--passes=N] ROOT NAME N rounds of read-snapshot with 1 worker then with 2 in one
//	                                               process: the median ratio of the two
//	benchtool put ZKQUORUM TABLE N BATCH           N small puts through hbase.Writer
//	benchtool scan ZKQUORUM TABLE                  every cell of a live table through hbase.Scanner
//	benchtool bookkeeping [--sizes=N,...] [--phases=P,...] [--rounds=N] JOB DIR
//	                                               a run's own records at N regions (default 1000,5000,20000):
//	                                               plan, run, stop-at-half, resume, choose (verify's entity
//	                                               choice), each timed in a process of its own, the median of
//	                                               N rounds (default 3; see bookkeeping.go for the snapshot it
//	                                               builds under DIR)
//
// Each read runs one untimed warm-up pass first, as the Java side does, so
// both measure steady-state reading rather than start-up. The snapshot
// reads take --passes timed passes after it (default 1) and report the
// median one, as the oracle's bench-read-snapshot does with the same count.
package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/pprof"
	"runtime/trace"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/hfile"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/vfs"

	// Every storage backend: a bench job may name any root or staging URL.
	_ "github.com/rekeyhq/rekey/vfs/all"
)

// result is one measurement, field for field the oracle's JSON line.
type result struct {
	Op    string `json:"op"`
	Cells int64  `json:"cells"`
	// Bytes is the cells' KeyValue size (cell.Size), the unit of rekey's
	// own counts. The oracle's line counts key and value lengths only, 8
	// bytes a cell less (more with tags); scripts/bench.sh compares cells/s,
	// never bytes.
	Bytes       int64   `json:"bytes"`
	Seconds     float64 `json:"seconds"`
	CellsPerSec float64 `json:"cells_per_sec"`
	MBPerSec    float64 `json:"mb_per_sec"`
	Workers     int     `json:"workers,omitempty"`
	// CPUSeconds is the process's user+system CPU time over the measured
	// pass (read-snapshot), to tell waiting from working.
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// merge-cost only: the bare store file passes' rate, and the median of
	// each round's bare time over its snapshot time.
	BareCellsPerSec float64 `json:"bare_cells_per_sec,omitempty"`
	BareOverMerged  float64 `json:"bare_over_merged,omitempty"`
	// worker-scaling only: the median one-worker pass's rate, time and CPU
	// time (over HDFS one worker's read-ahead runs beside it, so its CPU
	// can exceed its time), and the median of each round's one-worker
	// time over its two-worker time.
	OneWorkerCellsPerSec float64 `json:"one_worker_cells_per_sec,omitempty"`
	OneWorkerSeconds     float64 `json:"one_worker_seconds,omitempty"`
	OneWorkerCPUSeconds  float64 `json:"one_worker_cpu_seconds,omitempty"`
	TwoOverOne           float64 `json:"two_over_one,omitempty"`
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "benchtool:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: benchtool read-hfile PATH | read-snapshot ROOT NAME [WORKERS] | put ZKQUORUM TABLE N BATCH")
	}
	switch args[0] {
	case "read-hfile":
		if len(args) != 2 {
			return fmt.Errorf("usage: benchtool read-hfile PATH")
		}
		return warmThenEmit(func() (result, error) { return readHFile(args[1]) })
	case "write-hfile":
		if len(args) < 3 || len(args) > 5 {
			return fmt.Errorf("usage: benchtool write-hfile PATH N [ENCODING [CODEC]]")
		}
		n, err := strconv.ParseInt(args[2], 10, 64)
		if err != nil || n < 1 {
			return fmt.Errorf("N must be a positive integer, got %q", args[2])
		}
		enc, codec := "NONE", "NONE"
		if len(args) > 3 {
			enc = args[3]
		}
		if len(args) > 4 {
			codec = args[4]
		}
		r, err := writeHFile(args[1], n, enc, codec)
		if err != nil {
			return err
		}
		return emit(r)
	case "read-storefiles":
		passes, err := passesFlag(&args)
		if err != nil {
			return err
		}
		if len(args) != 2 {
			return fmt.Errorf("usage: benchtool read-storefiles [--passes=N] DIR")
		}
		return warmThenMedian(passes, func() (result, error) { return readStoreFiles(args[1]) })
	case "read-snapshot":
		var ra vfs.ReadAheadOptions
		profile, tracePath, passes := "", "", 1
		for len(args) > 1 && strings.HasPrefix(args[1], "--") {
			k, v, _ := strings.Cut(args[1], "=")
			switch k {
			case "--readahead":
				ra.Off = v == "off"
			case "--chunk":
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return fmt.Errorf("--chunk wants a byte count, got %q", v)
				}
				ra.Chunk = n
			case "--cpuprofile":
				profile = v
			case "--trace":
				tracePath = v
			case "--passes":
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return fmt.Errorf("--passes wants a positive count, got %q", v)
				}
				passes = n
			default:
				return fmt.Errorf("unknown option %s", args[1])
			}
			args = append(args[:1], args[2:]...)
		}
		if len(args) < 3 || len(args) > 4 {
			return fmt.Errorf("usage: benchtool read-snapshot [--readahead=off] [--chunk=BYTES] [--passes=N] [--cpuprofile=FILE] [--trace=FILE] ROOT NAME [WORKERS]")
		}
		workers := 1
		if len(args) == 4 {
			n, err := strconv.Atoi(args[3])
			if err != nil || n < 1 {
				return fmt.Errorf("WORKERS must be a positive integer, got %q", args[3])
			}
			workers = n
		}
		return warmThenMedian(passes, func() (result, error) { return readSnapshot(args[1], args[2], workers, ra, profile, tracePath) })
	case "merge-cost", "worker-scaling":
		// Two kinds of pass alternating in one process (see alternate).
		passes, err := passesFlag(&args)
		if err != nil {
			return err
		}
		if len(args) != 3 {
			return fmt.Errorf("usage: benchtool %s [--passes=N] ROOT NAME", args[0])
		}
		measure := mergeCost
		if args[0] == "worker-scaling" {
			measure = workerScaling
		}
		r, err := measure(args[1], args[2], passes)
		if err != nil {
			return err
		}
		return emit(r)
	case "put":
		if len(args) != 5 {
			return fmt.Errorf("usage: benchtool put ZKQUORUM TABLE N BATCH")
		}
		n, err1 := strconv.ParseInt(args[3], 10, 64)
		batch, err2 := strconv.Atoi(args[4])
		if err1 != nil || err2 != nil || n < 1 || batch < 1 {
			return fmt.Errorf("N and BATCH must be positive integers")
		}
		r, err := put(args[1], args[2], n, batch)
		if err != nil {
			return err
		}
		return emit(r)
	case "bookkeeping":
		sizes, phases, rounds := []int{1000, 5000, 20000}, bookkeepingPhases, 3
		for len(args) > 1 && strings.HasPrefix(args[1], "--") {
			k, v, _ := strings.Cut(args[1], "=")
			switch k {
			case "--sizes":
				sizes = nil
				for _, f := range strings.Split(v, ",") {
					n, err := strconv.Atoi(f)
					if err != nil || n < 2 {
						return fmt.Errorf("--sizes wants region counts of 2 or more, got %q", f)
					}
					sizes = append(sizes, n)
				}
			case "--phases":
				phases = strings.Split(v, ",")
			case "--rounds":
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return fmt.Errorf("--rounds wants a positive count, got %q", v)
				}
				rounds = n
			default:
				return fmt.Errorf("unknown option %s", args[1])
			}
			args = append(args[:1:1], args[2:]...)
		}
		if len(args) != 3 {
			return fmt.Errorf("usage: benchtool bookkeeping [--sizes=N,...] [--phases=P,...] [--rounds=N] JOB DIR")
		}
		return bookkeeping(args[1], args[2], sizes, phases, rounds)
	case "bookkeeping-phase":
		if len(args) != 6 {
			return fmt.Errorf("usage: benchtool bookkeeping-phase PHASE JOB ROOT NAME REGIONS")
		}
		n, err := strconv.Atoi(args[5])
		if err != nil {
			return err
		}
		return bookkeepingPhase(args[1], args[2], args[3], args[4], n)
	case "scan":
		if len(args) != 3 {
			return fmt.Errorf("usage: benchtool scan ZKQUORUM TABLE")
		}
		return warmThenEmit(func() (result, error) { return scan(args[1], args[2]) })
	}
	return fmt.Errorf("unknown operation %q", args[0])
}

// warmThenEmit runs a read once untimed, as the oracle does, so the timed
// second run measures reading with warm caches rather than start-up.
// passesFlag takes a leading --passes=N off args (default 1).
func passesFlag(args *[]string) (int, error) {
	a := *args
	if len(a) > 1 && strings.HasPrefix(a[1], "--passes=") {
		n, err := strconv.Atoi(strings.TrimPrefix(a[1], "--passes="))
		if err != nil || n < 1 {
			return 0, fmt.Errorf("--passes wants a positive count, got %q", a[1])
		}
		*args = append(a[:1:1], a[2:]...)
		return n, nil
	}
	return 1, nil
}

// warmThenMedian runs measure once untimed, then passes times, and emits
// the pass of median time: a read of the bench snapshot takes a tenth of
// a second, where one slow pass (the machine's other work) moves a single
// figure by a third. The oracle's bench-read-snapshot takes the same
// count of passes and reports its median the same way.
func warmThenMedian(passes int, measure func() (result, error)) error {
	if _, err := measure(); err != nil {
		return err
	}
	var rs []result
	for range passes {
		r, err := measure()
		if err != nil {
			return err
		}
		rs = append(rs, r)
	}
	return emit(medianPass(rs))
}

// medianPass is the pass of median time among rs (which it sorts).
func medianPass(rs []result) result {
	sort.Slice(rs, func(i, j int) bool { return rs[i].Seconds < rs[j].Seconds })
	return rs[len(rs)/2]
}

func warmThenEmit(measure func() (result, error)) error {
	if _, err := measure(); err != nil {
		return err
	}
	r, err := measure()
	if err != nil {
		return err
	}
	return emit(r)
}

func emit(r result) error {
	if r.Seconds > 0 {
		r.CellsPerSec = float64(r.Cells) / r.Seconds
		r.MBPerSec = float64(r.Bytes) / r.Seconds / 1e6
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// count adds one cell to r, as a cell.ForEach callback.
func (r *result) count(c *cell.Cell) error {
	r.Cells++
	r.Bytes += cell.Size(c)
	return nil
}

func readHFile(path string) (result, error) {
	start := time.Now()
	r, err := hfile.OpenFile(path)
	if err != nil {
		return result{}, err
	}
	defer r.Close()
	res := result{Op: "read-hfile"}
	if err := cell.ForEach(r.NewIterator(), res.count); err != nil {
		return result{}, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// readStoreFiles reads every HFile under dir's data/ and archive/ with the
// bare iterator: the ceiling for a snapshot read of the same files, which
// adds the merge and HBase's read semantics.
func readStoreFiles(dir string) (result, error) {
	var paths []string
	for _, sub := range []string{"data", "archive"} {
		err := filepath.WalkDir(filepath.Join(dir, sub), func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil
				}
				return err
			}
			// Store files are <region>/<family>/<hex name>; skip region
			// metadata (.regioninfo, recovered.edits, .tmp).
			if d.Type().IsRegular() && !strings.HasPrefix(d.Name(), ".") && !strings.Contains(p, "recovered.edits") {
				paths = append(paths, p)
			}
			return nil
		})
		if err != nil {
			return result{}, err
		}
	}
	if len(paths) == 0 {
		return result{}, fmt.Errorf("no store files under %s/data or %s/archive", dir, dir)
	}
	res := result{Op: "read-storefiles"}
	start := time.Now()
	for _, p := range paths {
		r, err := hfile.OpenFile(p)
		if err != nil {
			return result{}, err
		}
		err = cell.ForEach(r.NewIterator(), res.count)
		r.Close()
		if err != nil {
			return result{}, err
		}
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

func readSnapshot(root, name string, workers int, ra vfs.ReadAheadOptions, profile, tracePath string) (result, error) {
	ctx := context.Background()
	if tracePath != "" {
		// Like the profile, the measured pass's trace is the one kept.
		f, err := os.Create(tracePath)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		if err := trace.Start(f); err != nil {
			return result{}, err
		}
		defer trace.Stop()
	}
	if profile != "" {
		// The profile covers the measured pass only: warmThenEmit runs this
		// twice and the second file write wins.
		f, err := os.Create(profile)
		if err != nil {
			return result{}, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return result{}, err
		}
		defer pprof.StopCPUProfile()
	}
	start, cpu0 := time.Now(), cpuTime()
	s, err := snapshot.Open(ctx, root, name, snapshot.OpenOptions{ReadAhead: ra})
	if err != nil {
		return result{}, err
	}
	defer s.Close()
	splits, err := s.Splits(snapshot.SplitOptions{})
	if err != nil {
		return result{}, err
	}
	var cells, bytes atomic.Int64
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	// All versions, as the oracle's bench scan reads them.
	opts := snapshot.ScanOptions{MaxVersions: 1 << 30}
	for i, sp := range splits {
		g.Go(func() error {
			var part result
			err := s.ReadSplit(gctx, sp, opts, part.count)
			cells.Add(part.Cells)
			bytes.Add(part.Bytes)
			return err
		})
		// As rekey run does: the next split's files open while this one
		// is read.
		if i+1 < len(splits) {
			s.Prepare(splits[i+1], opts)
		}
	}
	if err := g.Wait(); err != nil {
		return result{}, err
	}
	return result{Op: "read-snapshot", Cells: cells.Load(), Bytes: bytes.Load(), Seconds: time.Since(start).Seconds(), Workers: workers, CPUSeconds: (cpuTime() - cpu0).Seconds()}, nil
}

// mergeCost measures what the scanner adds to decoding: rounds of one
// bare pass over the snapshot's store files (readStoreFiles) followed at
// once by one snapshot pass, one worker, after one untimed pass of each.
// Taken in separate processes the two rates drift apart with the
// machine's speed (on a shared VM by a tenth from one second to the
// next); side by side in one process each round's ratio sees the same
// machine. It reports the median snapshot pass, the median bare pass's
// rate and the median of the rounds' ratios.
func mergeCost(root, name string, rounds int) (result, error) {
	bare := func() (result, error) { return readStoreFiles(root) }
	merged := func() (result, error) { return readSnapshot(root, name, 1, vfs.ReadAheadOptions{}, "", "") }
	// Every version of every cell, no deletes: both passes must count the
	// same cells, or the ratio compares different work.
	bs, ms, ratio, err := alternate(rounds, bare, merged, "the store files hold %d cells but the snapshot read returned %d: a ratio would compare different work (deletes or expired cells in the snapshot?)")
	if err != nil {
		return result{}, err
	}
	m := medianPass(ms)
	m.Op = "merge-cost"
	m.BareCellsPerSec = rate(medianPass(bs))
	m.BareOverMerged = ratio
	return m, nil
}

// workerScaling measures what a second worker adds: rounds of one
// snapshot pass with one worker followed at once by one with two, after
// one untimed pass of each, in one process (so both see the same machine
// and the same cores: the process is not pinned, and one worker's
// read-ahead, where the files stream, runs beside it on the other core).
// It reports the median two-worker pass, the median one-worker pass's
// rate and the median of the rounds' time ratios (one worker's over two's).
func workerScaling(root, name string, rounds int) (result, error) {
	one := func() (result, error) { return readSnapshot(root, name, 1, vfs.ReadAheadOptions{}, "", "") }
	two := func() (result, error) { return readSnapshot(root, name, 2, vfs.ReadAheadOptions{}, "", "") }
	ones, twos, ratio, err := alternate(rounds, one, two, "one worker read %d cells but two read %d")
	if err != nil {
		return result{}, err
	}
	t := medianPass(twos)
	t.Op = "worker-scaling"
	o := medianPass(ones)
	t.OneWorkerCellsPerSec, t.OneWorkerSeconds, t.OneWorkerCPUSeconds = rate(o), o.Seconds, o.CPUSeconds
	t.TwoOverOne = ratio
	return t, nil
}

// alternate runs a and b once each untimed, then rounds of a followed at
// once by b, and returns their passes and the median of the rounds'
// ratios of a's time over b's. Both must count the same cells in every
// round (mismatch is a format with the two counts).
func alternate(rounds int, a, b func() (result, error), mismatch string) (as, bs []result, ratio float64, err error) {
	for _, f := range []func() (result, error){a, b} {
		if _, err := f(); err != nil {
			return nil, nil, 0, err
		}
	}
	var ratios []float64
	for range rounds {
		ra, err := a()
		if err != nil {
			return nil, nil, 0, err
		}
		rb, err := b()
		if err != nil {
			return nil, nil, 0, err
		}
		if ra.Cells != rb.Cells {
			return nil, nil, 0, fmt.Errorf(mismatch, ra.Cells, rb.Cells)
		}
		as, bs = append(as, ra), append(bs, rb)
		ratios = append(ratios, ra.Seconds/rb.Seconds)
	}
	sort.Float64s(ratios)
	return as, bs, ratios[len(ratios)/2], nil
}

// rate is r's cells per second.
func rate(r result) float64 { return float64(r.Cells) / r.Seconds }

// put writes the same rows as the oracle's bench-put (a hashed first byte,
// then the big-endian row number; family f, qualifier q, 32 zero bytes) so
// both sides load the same regions equally.
func put(zk, table string, n int64, batch int) (result, error) {
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: zk})
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	// The same table shape as the oracle's: four regions cut at 0x40,
	// 0x80 and 0xc0, default family settings.
	exists, err := c.TableExists(ctx, table)
	if err != nil {
		return result{}, err
	}
	if !exists {
		spec := hbase.TableSpec{Name: table, Families: []hbase.Family{{Name: "f"}}, SplitKeys: [][]byte{{0x40}, {0x80}, {0xc0}}}
		if err := c.CreateTable(ctx, spec); err != nil {
			return result{}, err
		}
	}
	w := c.NewWriter([]byte(table), hbase.WriterConfig{MaxCellsPerCall: batch})
	value := make([]byte, 32)
	res := result{Op: "put"}
	start := time.Now()
	const tsBase = 1767225600000 // 2026-01-01, the oracle's Seed.TS_BASE
	for i := int64(0); i < n; i++ {
		row := make([]byte, 9)
		row[0] = byte(uint64(i) * 0x9E3779B97F4A7C15 >> 56)
		binary.BigEndian.PutUint64(row[1:], uint64(i))
		cl := cell.Cell{Row: row, Family: []byte("f"), Qualifier: []byte("q"), Timestamp: tsBase, Type: cell.Put, Value: value}
		if err := w.Write(ctx, cl); err != nil {
			return result{}, err
		}
		res.Cells++
		res.Bytes += cell.Size(&cl)
	}
	if err := w.Close(ctx); err != nil {
		return result{}, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// scan reads a whole live table as the oracle's bench-scan does: 1000 rows
// per RPC, no block caching.
func scan(zk, table string) (result, error) {
	ctx := context.Background()
	c, err := hbase.NewClient(hbase.Config{ZKQuorum: zk})
	if err != nil {
		return result{}, err
	}
	defer c.Close()
	res := result{Op: "scan"}
	start := time.Now()
	if err := cell.ForEach(c.Scan(ctx, []byte(table), &hbase.Scan{Caching: 1000}), res.count); err != nil {
		return result{}, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// javaRandom is java.util.Random (a 48-bit LCG), so the written values
// are byte for byte those of the oracle's bench-write-hfile.
type javaRandom struct{ seed int64 }

func newJavaRandom(seed int64) *javaRandom {
	return &javaRandom{seed: (seed ^ 0x5DEECE66D) & (1<<48 - 1)}
}

func (r *javaRandom) nextInt() int32 {
	r.seed = (r.seed*0x5DEECE66D + 0xB) & (1<<48 - 1)
	return int32(r.seed >> 16)
}

func (r *javaRandom) nextBytes(b []byte) {
	for i := 0; i < len(b); {
		v := r.nextInt()
		for n := min(len(b)-i, 4); n > 0; n-- {
			b[i] = byte(v)
			v >>= 8
			i++
		}
	}
}

// writeHFile writes the cells the oracle's bench-write-hfile writes (rows
// of five columns, increasing timestamps, 32-byte values half random, half
// repeated) with the same file settings (64 KiB blocks, tags, no memstore
// timestamps, no bloom), timing file creation to close as the Java side
// does.
func writeHFile(path string, n int64, encName, codecName string) (result, error) {
	var enc hfile.Encoding
	var codec hfile.Codec
	found := false
	for _, e := range []hfile.Encoding{hfile.EncodingNone, hfile.EncodingPrefix, hfile.EncodingDiff, hfile.EncodingFastDiff, hfile.EncodingRowIndexV1} {
		if e.String() == encName {
			enc, found = e, true
		}
	}
	if !found {
		return result{}, fmt.Errorf("unknown encoding %q", encName)
	}
	found = false
	for _, c := range []hfile.Codec{hfile.CodecNone, hfile.CodecGZ, hfile.CodecSnappy, hfile.CodecLZ4, hfile.CodecZstd} {
		if c.String() == codecName {
			codec, found = c, true
		}
	}
	if !found {
		return result{}, fmt.Errorf("unknown codec %q", codecName)
	}
	start := time.Now()
	f, err := os.Create(path)
	if err != nil {
		return result{}, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w, err := hfile.NewWriter(bw, hfile.WriterOptions{Name: path, BlockSize: 64 << 10, Encoding: enc, Codec: codec, Tags: true})
	if err != nil {
		return result{}, err
	}
	const tsBase = 1767225600000 // the oracle's Seed.TS_BASE
	rnd := newJavaRandom(42)
	res := result{Op: "write-hfile"}
	var row, q []byte
	value := make([]byte, 32)
	for i := int64(0); i < n; i++ {
		row = append(row[:0], "row"...)
		row = appendPadded(row, i/5, 10)
		q = strconv.AppendInt(append(q[:0], "col"...), i%5, 10)
		rnd.nextBytes(value)
		for j := 16; j < 32; j++ {
			value[j] = 'x'
		}
		c := cell.Cell{Row: row, Family: []byte("f"), Qualifier: q, Timestamp: tsBase + i, Type: cell.Put, Value: value}
		if err := w.Append(&c); err != nil {
			return result{}, err
		}
		res.Cells++
		res.Bytes += cell.Size(&c)
	}
	if err := w.Close(); err != nil {
		return result{}, err
	}
	if err := bw.Flush(); err != nil {
		return result{}, err
	}
	if err := f.Close(); err != nil {
		return result{}, err
	}
	res.Seconds = time.Since(start).Seconds()
	return res, nil
}

// appendPadded appends v in decimal, zero-padded to width digits.
func appendPadded(b []byte, v int64, width int) []byte {
	var d [20]byte
	s := strconv.AppendInt(d[:0], v, 10)
	for k := len(s); k < width; k++ {
		b = append(b, '0')
	}
	return append(b, s...)
}
