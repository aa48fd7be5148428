package pipeline_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink/hfiles"
	"github.com/rekeyhq/rekey/sink/puts"
	"github.com/rekeyhq/rekey/snapshot"
)

// preset is one configs/ job with a source made for it and its rule
// written out here, independently of package transform: expected target
// cells come from the oracle's dump of the source through this rule.
type preset struct {
	config    string
	families  []string // source families
	split     []string // source split keys
	newSplits []string // target split keys (hex)
	gen       func(r *rand.Rand) []cell.Cell
	rule      func(c cell.Cell) cell.Cell
}

const tsBase = 1767225600000 // 2026-01-01T00:00:00Z

func be64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }

var presets = map[string]preset{
	// row = sensor, qualifier = 8-byte time -> row = sensor 0x00 hour (ISO),
	// qualifier = 4-byte millis into the hour.
	"wide_to_bucketed": {
		config: "wide_to_bucketed.yaml", families: []string{"r"}, split: []string{"s010", "s020"},
		newSplits: []string{hexOf("s005"), hexOf("s015\x002026-01-01T05"), hexOf("s025")},
		gen: func(r *rand.Rand) []cell.Cell {
			var out []cell.Cell
			for s := 1; s <= 30; s++ {
				n := 40 + r.Intn(40)
				if s == 1 || s == 17 {
					n = 3000 // heavy entities
				}
				for i := 0; i < n; i++ {
					ts := tsBase + r.Int63n(3*24*3600*1000)
					c := cell.Cell{Row: []byte(fmt.Sprintf("s%03d", s)), Family: []byte("r"), Qualifier: be64(uint64(ts)), Timestamp: ts, Type: cell.Put, Value: randValue(r)}
					out = append(out, c)
					if i%9 == 0 { // a second, newer version
						c2 := c
						c2.Timestamp++
						c2.Value = randValue(r)
						out = append(out, c2)
					}
				}
			}
			return out
		},
		rule: func(c cell.Cell) cell.Cell {
			ts := int64(binary.BigEndian.Uint64(c.Qualifier))
			hour := ts - ts%3600000
			c.Row = append(append(slices.Clone(c.Row), 0), time.UnixMilli(hour).UTC().Format("2006-01-02T15")...)
			c.Qualifier = binary.BigEndian.AppendUint32(nil, uint32(ts-hour))
			return c
		},
	},
	// row = customer|order digits -> row = customer 0x00 day(8-byte millis
	// of the cell time), qualifier = 8-byte order, old qualifier; o -> d.
	"tall_to_wide": {
		config: "tall_to_wide.yaml", families: []string{"o"}, split: []string{"c0010", "c0020"},
		newSplits: []string{hexOf("c0010"), hexOf("c0020")},
		gen: func(r *rand.Rand) []cell.Cell {
			var out []cell.Cell
			for cu := 1; cu <= 30; cu++ {
				n := 5 + r.Intn(30)
				if cu == 3 {
					n = 1500
				}
				for o := 0; o < n; o++ {
					row := []byte(fmt.Sprintf("c%04d|%d", cu, r.Intn(1_000_000)))
					ts := tsBase + r.Int63n(10*24*3600*1000)
					for _, q := range []string{"status", "total"} {
						out = append(out, cell.Cell{Row: row, Family: []byte("o"), Qualifier: []byte(q), Timestamp: ts, Type: cell.Put, Value: randValue(r)})
					}
				}
			}
			return out
		},
		rule: func(c cell.Cell) cell.Cell {
			cust, order, _ := strings.Cut(string(c.Row), "|")
			n, _ := strconv.ParseUint(order, 10, 64)
			day := c.Timestamp - c.Timestamp%86400000
			c.Row = append(append([]byte(cust), 0), be64(uint64(day))...)
			c.Qualifier = append(be64(n), c.Qualifier...)
			c.Family = []byte("d")
			return c
		},
	},
	// row = device|reversed ts -> row = FNV-1a(device) % 16 (one byte), old row.
	"salt": {
		config: "salt.yaml", families: []string{"t"}, split: []string{"d05", "d10"},
		newSplits: []string{"04", "08", "0c"},
		gen: func(r *rand.Rand) []cell.Cell {
			var out []cell.Cell
			for d := 0; d < 15; d++ {
				n := 20 + r.Intn(50)
				if d == 7 {
					n = 2000
				}
				for i := 0; i < n; i++ {
					ts := tsBase + r.Int63n(24*3600*1000)
					row := append([]byte(fmt.Sprintf("d%02d|", d)), be64(uint64(math.MaxInt64-ts))...)
					out = append(out, cell.Cell{Row: row, Family: []byte("t"), Qualifier: []byte("v"), Timestamp: ts, Type: cell.Put, Value: randValue(r)})
				}
			}
			return out
		},
		rule: func(c cell.Cell) cell.Cell {
			dev, _, _ := strings.Cut(string(c.Row), "|")
			h := fnv.New32a()
			h.Write([]byte(dev))
			c.Row = append([]byte{byte(h.Sum32() % 16)}, c.Row...)
			return c
		},
	},
	// row = 13-digit ts # user digits -> row = 8-byte user, "E", reversed
	// ts; cf -> a.
	"rekey": {
		config: "rekey.yaml", families: []string{"cf"}, split: []string{"1767300000000", "1767400000000"},
		newSplits: []string{hex8(100), hex8(10000)},
		gen: func(r *rand.Rand) []cell.Cell {
			var out []cell.Cell
			for i := 0; i < 3000; i++ {
				user := r.Intn(50000)
				if i%4 == 0 {
					user = 4242 // a heavy user
				}
				ts := tsBase + r.Int63n(300_000_000)
				row := []byte(fmt.Sprintf("%013d#%d", ts, user))
				out = append(out, cell.Cell{Row: row, Family: []byte("cf"), Qualifier: []byte("a"), Timestamp: ts, Type: cell.Put, Value: randValue(r)})
			}
			return out
		},
		rule: func(c cell.Cell) cell.Cell {
			ts, user, _ := strings.Cut(string(c.Row), "#")
			t, _ := strconv.ParseInt(ts, 10, 64)
			u, _ := strconv.ParseUint(user, 10, 64)
			c.Row = append(append(be64(u), 'E'), be64(uint64(math.MaxInt64-t))...)
			c.Family = []byte("a")
			return c
		},
	},
}

func hexOf(s string) string { return fmt.Sprintf("%x", s) }
func hex8(v uint64) string  { return fmt.Sprintf("%x", be64(v)) }

func randValue(r *rand.Rand) []byte {
	v := make([]byte, r.Intn(24))
	r.Read(v)
	return v
}

func seedSource(t *testing.T, st *testenv.State, table, snap string, p preset, cells []cell.Cell, versions int) []cell.Cell {
	t.Helper()
	return testenv.SeedCells(t, st, testenv.SourceTable{Table: table, Snapshot: snap, Families: p.families, SplitKeys: p.split, Versions: versions}, cells)
}

// expect maps source cells through the preset's rule, in HBase's order.
func expect(p preset, src []cell.Cell) []cell.Cell {
	out := make([]cell.Cell, 0, len(src))
	for _, c := range src {
		out = append(out, p.rule(c))
	}
	slices.SortFunc(out, func(a, b cell.Cell) int { return cell.Compare(&a, &b) })
	return out
}

// loadJob reads the preset's job file and points it at the test cluster.
func loadJob(t *testing.T, p preset, st *testenv.State, snap, target string) *job.Job {
	t.Helper()
	j, err := job.Load(filepath.Join("..", "configs", p.config))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j.Source.Root, j.Source.Name = st.RootDir, snap
	j.Target.Table, j.Target.ZKQuorum, j.Target.ZNodeParent = target, st.ZKQuorum, st.ZNodeParent
	j.Target.Create.Enabled = true
	j.Run.Checkpoint = filepath.Join(dir, "checkpoint.json")
	if j.BadKeys.File != "" {
		j.BadKeys.File = filepath.Join(dir, "rejects.tsv")
	}
	return j
}

func splitKeys(t *testing.T, hexes []string) [][]byte {
	var out [][]byte
	for _, h := range hexes {
		var b []byte
		if _, err := fmt.Sscanf(h, "%x", &b); err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// runPuts prepares the target and runs the job through the puts sink
// (batches of 500, 2 workers).
func runPuts(t *testing.T, ctx context.Context, j *job.Job, newSplits []string, cfg pipeline.Options) (*pipeline.Summary, error) {
	t.Helper()
	if cfg.Workers == 0 {
		cfg.Workers = 2
	}
	return runPutsWith(t, ctx, j, newSplits, cfg, puts.Options{BatchCells: 500, Workers: 2})
}

func dumpTable(t *testing.T, table string, raw bool) []cell.Cell {
	return testenv.DumpTable(t, table, raw)
}

func sameCells(t *testing.T, what string, got, want []cell.Cell) {
	t.Helper()
	testenv.SameCells(t, what, got, want)
}

func uniq(t *testing.T, prefix string) string {
	return fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano()%1_000_000_000)
}

func dropTable(t *testing.T, table string) {
	testenv.Drop(nil, []string{table})
}

func TestPresetsThroughPuts(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	for name, p := range presets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src := uniq(t, "run_src_"+name)
			snap := src + "_snap"
			dst := uniq(t, "run_dst_"+name)
			defer dropTable(t, src)
			defer dropTable(t, dst)
			defer testenv.Drop([]string{snap}, nil)
			cells := p.gen(rand.New(rand.NewSource(7)))
			source := seedSource(t, st, src, snap, p, cells, 3)
			want := expect(p, source)
			j := loadJob(t, p, st, snap, dst)
			sum, err := runPuts(t, ctx, j, p.newSplits, pipeline.Options{})
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			if !sum.Finished || sum.Read != int64(len(source)) || sum.Written != int64(len(want)) || sum.Problems() {
				t.Errorf("summary: finished %v, read %d (snapshot has %d), written %d (want %d), rejected %d, collided %d, failed %d",
					sum.Finished, sum.Read, len(source), sum.Written, len(want), sum.Rejected, sum.Collided, sum.Failed)
			}
			sameCells(t, "target", dumpTable(t, dst, false), want)
			verifiesBothWays(t, j)
			// The sketch beside the checkpoint names the heaviest entity.
			f, err := os.Open(filepath.Join(filepath.Dir(j.Run.Checkpoint), "entities.json"))
			if err != nil {
				t.Fatalf("entity sketch: %v", err)
			}
			f.Close()
		})
	}
}

func loadJobFile(p string) (*job.Job, error) { return job.Load(p) }

// targetClient connects to j's cluster and prepares j's target table
// (pre-split at newSplits, hex); the client closes when the test ends.
func targetClient(t *testing.T, ctx context.Context, j *job.Job, newSplits []string) *hbase.Client {
	t.Helper()
	client, err := hbase.NewClient(hbase.Config{ZKQuorum: j.Target.ZKQuorum, ZNodeParent: j.Target.ZNodeParent})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	snap, err := snapshot.Open(ctx, j.Source.Root, j.Source.Name, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = pipeline.PrepareTarget(ctx, client, j, snap, splitKeys(t, newSplits))
	snap.Close()
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// runPutsWith is runPuts with the puts sink's options given.
func runPutsWith(t *testing.T, ctx context.Context, j *job.Job, newSplits []string, cfg pipeline.Options, po puts.Options) (*pipeline.Summary, error) {
	t.Helper()
	client := targetClient(t, ctx, j, newSplits)
	cfg.Sink = puts.New(client, j.Target.Table, po)
	return pipeline.Execute(ctx, j, cfg)
}

// TestTimeRangeAndRawDeletes: a run limited to [from, to) copies exactly
// the cells in that range; a raw run carries delete markers, which then
// mask the same cells in the target as in the source.
func TestTimeRangeAndRawDeletes(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	p := presets["wide_to_bucketed"]
	src := uniq(t, "tr_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	cells := p.gen(rand.New(rand.NewSource(3)))
	// Delete markers: a version delete and a column delete on a few cells.
	for i := 0; i < len(cells); i += 97 {
		c := cells[i]
		typ := cell.Delete
		if i%2 == 1 {
			typ = cell.DeleteColumn
		}
		cells = append(cells, cell.Cell{Row: c.Row, Family: c.Family, Qualifier: c.Qualifier, Timestamp: c.Timestamp, Type: typ})
	}
	source := seedSource(t, st, src, snap, p, cells, 3)

	t.Run("time range", func(t *testing.T) {
		dst := uniq(t, "tr_dst")
		testenv.DropAfter(t, dst, "")
		from, to := int64(tsBase+24*3600*1000), int64(tsBase+48*3600*1000)
		var in []cell.Cell
		for _, c := range source {
			if c.Timestamp >= from && c.Timestamp < to {
				in = append(in, c)
			}
		}
		j := loadJob(t, p, st, snap, dst)
		j.Source.Scan.From, j.Source.Scan.To = from, to
		sum, err := runPuts(t, ctx, j, p.newSplits, pipeline.Options{})
		if err != nil || !sum.Finished {
			t.Fatalf("run: %v %+v", err, sum)
		}
		sameCells(t, "target of [from, to)", dumpTable(t, dst, false), expect(p, in))
	})
	t.Run("raw", func(t *testing.T) {
		dst := uniq(t, "raw_dst")
		testenv.DropAfter(t, dst, "")
		raw, err := testenv.ParseDump(testenv.Oracle(t, "dump-snapshot", st.RootDir, snap, "--raw"))
		if err != nil {
			t.Fatal(err)
		}
		markers := 0
		for _, c := range raw {
			if c.Type != cell.Put {
				markers++
			}
		}
		if markers == 0 {
			t.Fatal("the raw source holds no delete markers")
		}
		j := loadJob(t, p, st, snap, dst)
		j.Source.Scan.Raw = true
		sum, err := runPuts(t, ctx, j, p.newSplits, pipeline.Options{})
		if err != nil || !sum.Finished || sum.Read != int64(len(raw)) {
			t.Fatalf("raw run: %v, read %d of %d raw cells", err, sum.Read, len(raw))
		}
		// The target, read normally, equals the source read normally:
		// the markers mask the same cells.
		sameCells(t, "raw-copied target, read normally", dumpTable(t, dst, false), expect(p, source))
		// And the markers themselves arrived.
		sameCells(t, "raw-copied target, read raw", dumpTable(t, dst, true), expect(p, raw))
	})
}

// TestTargetWithoutTheFamiliesIsRefused: an existing target lacking a
// mapped family is refused before anything is written.
func TestTargetWithoutTheFamiliesIsRefused(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	p := presets["tall_to_wide"] // writes family d
	src, dst := uniq(t, "fam_src"), uniq(t, "fam_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	seedSource(t, st, src, snap, p, p.gen(rand.New(rand.NewSource(1)))[:10], 1)
	client, err := hbase.NewClient(hbase.Config{ZKQuorum: st.ZKQuorum})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if err := client.CreateTable(ctx, hbase.TableSpec{Name: dst, Families: []hbase.Family{{Name: "o"}}}); err != nil {
		t.Fatal(err)
	}
	j := loadJob(t, p, st, snap, dst)
	s, err := snapshot.Open(ctx, j.Source.Root, j.Source.Name, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = pipeline.PrepareTarget(ctx, client, j, s, nil)
	if !errors.Is(err, pipeline.ErrTargetFamilies) || !strings.Contains(err.Error(), "no d") {
		t.Fatalf("target without family d: %v", err)
	}
	if n := len(dumpTable(t, dst, true)); n != 0 {
		t.Errorf("%d cells written into the refused target", n)
	}
}

// TestPresetsThroughHFiles: each preset through the staged-HFiles sink and
// a bulk load; the target equals the rule applied to the source, as with
// puts.
func TestPresetsThroughHFiles(t *testing.T) {
	st := testenv.Require(t)
	for name, p := range presets {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			src, dst := uniq(t, "hf_src_"+name), uniq(t, "hf_dst_"+name)
			snap := src + "_snap"
			testenv.DropAfter(t, src, snap)
			testenv.DropAfter(t, dst, "")
			source := seedSource(t, st, src, snap, p, p.gen(rand.New(rand.NewSource(5))), 3)
			want := expect(p, source)
			j := loadJob(t, p, st, snap, dst)
			sum, err := runHFiles(t, ctx, st, j, p.newSplits)
			if err != nil {
				t.Fatalf("run: %v", err)
			}
			stats, _ := sum.SinkStats.(hfiles.Stats)
			if !sum.Finished || sum.Written != int64(len(want)) || stats.Cells != int64(len(want)) || stats.RegionsLoaded == 0 {
				t.Errorf("finished %v, written %d, staged %d, want %d; regions loaded %d", sum.Finished, sum.Written, stats.Cells, len(want), stats.RegionsLoaded)
			}
			sameCells(t, "bulk-loaded target", dumpTable(t, dst, false), want)
		})
	}
}
