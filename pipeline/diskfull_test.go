package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/human"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/sink/hfiles"
)

// incompressible makes sensors x per wide_to_bucketed cells with random
// 100-byte values, so runs and HFiles take about as much room as the cells.
func incompressible(sensors, per int) []cell.Cell {
	r := rand.New(rand.NewSource(17))
	var out []cell.Cell
	for s := 1; s <= sensors; s++ {
		for i := 0; i < per; i++ {
			ts := tsBase + r.Int63n(3*24*3600*1000)
			v := make([]byte, 100)
			r.Read(v)
			out = append(out, cell.Cell{Row: []byte(fmt.Sprintf("s%03d", s)), Family: []byte("r"), Qualifier: be64(uint64(ts)), Timestamp: ts, Type: cell.Put, Value: v})
		}
	}
	return out
}

// TestStagingFileSystemFills: the staging folder is a 256 KiB tmpfs and the
// job's runs and HFiles need several times that. The run stops with an
// error that matches hfiles.ErrStagingFull and names the folder, its free
// space and what it needs; the target holds nothing (no partial load).
// Once the tmpfs is grown, --resume finishes, and the target equals the
// rule applied to the oracle's dump, each cell once.
func TestStagingFileSystemFills(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	ctx := context.Background()
	disk := testenv.SmallDisk(t, "256k")
	src, dst := uniq(t, "full_src"), uniq(t, "full_dst")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	p := presets["wide_to_bucketed"]
	source := seedSource(t, st, src, snap, p, incompressible(40, 200), 1)
	want := expect(p, source)
	j := loadJob(t, p, st, snap, dst)
	j.Target.Create.SplitKeys = splitKeys(t, p.newSplits)
	j.Sink.Kind = job.SinkHFiles
	j.Sink.Staging = disk
	o := pipeline.Options{Workers: 2, Memory: 4 << 20}

	_, err := pipeline.Execute(ctx, j, o)
	var fe *hfiles.FullError
	if !errors.Is(err, hfiles.ErrStagingFull) || !errors.As(err, &fe) {
		t.Fatalf("run into a full staging folder: %v; want a hfiles.FullError", err)
	}
	t.Logf("first run: %v", err)
	for _, want := range []string{disk, "free", "needs about", "--resume"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not say %q", want)
		}
	}
	if got := dumpTable(t, dst, true); len(got) != 0 {
		t.Fatalf("the target holds %d cells after the failed run: a partial load", len(got))
	}

	testenv.GrowDisk(t, disk, "64m")
	o.Resume = true
	sum, err := pipeline.Execute(ctx, j, o)
	if err != nil {
		t.Fatalf("resume once there is room: %v", err)
	}
	stats, _ := sum.Staged()
	if !sum.Finished || stats.RegionsLoaded == 0 {
		t.Fatalf("resume: finished %v, regions loaded %d", sum.Finished, stats.RegionsLoaded)
	}
	// The estimate against what the job's staging really took at its
	// peak: every run plus every HFile (runs are removed after the merge).
	peak := stats.RunBytes + stats.HFileBytes
	t.Logf("estimated need %s (%s); measured runs %s + HFiles %s = %s", human.Bytes(fe.Need), fe.Basis, human.Bytes(stats.RunBytes), human.Bytes(stats.HFileBytes), human.Bytes(peak))
	if fe.Need < peak/2 || fe.Need > 3*peak {
		t.Errorf("the error estimated %d bytes needed; the job took %d at its peak", fe.Need, peak)
	}
	sameCells(t, "target after the resume", dumpTable(t, dst, true), want)
}
