package pipeline_test

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/snapshot"
	"github.com/rekeyhq/rekey/vfs"
	"github.com/rekeyhq/rekey/vfs/hdfs"
)

// upload copies the local folder src to dst on the HDFS fs, file by file.
func upload(t *testing.T, fs *hdfs.FS, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		to := path.Join(dst, filepath.ToSlash(rel))
		if d.IsDir() {
			return fs.MkdirAll(to)
		}
		in, err := os.Open(p)
		if err != nil {
			return err
		}
		defer in.Close()
		w, err := fs.Create(to)
		if err != nil {
			return err
		}
		if _, err := io.Copy(w, in); err != nil {
			w.Close()
			return err
		}
		return w.Close()
	})
	if err != nil {
		t.Fatalf("upload %s to %s%s: %v", src, fs, dst, err)
	}
}

// TestNameNodeRestartsMidRun: the NameNode of the HDFS holding the source
// snapshot (and, for the staged run, the checkpoint and the staging
// folder) stops mid-run and restarts on its port some seconds later
// (testenv's dfs3, apart from the HBase cluster's own HDFS, so nobody
// else's files go away). Snapshot reads, checkpoint writes, a staged run's
// spill, merge and the bulk load from it wait for the NameNode and go on;
// both runs finish with every cell, and the targets equal the rule applied
// to the oracle's dump.
func TestNameNodeRestartsMidRun(t *testing.T) {
	st := testenv.Require(t)
	t.Parallel()
	src := uniq(t, "nn_src")
	snap := src + "_snap"
	testenv.DropAfter(t, src, snap)
	p := presets["wide_to_bucketed"]
	// Ten source regions, so the run opens store files (a NameNode call
	// each) all along, not only at its start.
	var keys []string
	for s := 3; s <= 19; s += 2 {
		keys = append(keys, fmt.Sprintf("s%03d", s))
	}
	source := testenv.SeedCells(t, st, testenv.SourceTable{Table: src, Snapshot: snap, Families: p.families, SplitKeys: keys, Versions: 1}, bigWide(20, 600))
	want := expect(p, source)

	nn := control(t, st, "dfs3-start")
	t.Cleanup(func() { control(t, st, "dfs3-shutdown") })
	local := filepath.Join(t.TempDir(), "export")
	testenv.Oracle(t, "export-snapshot", snap, local)
	fs, err := hdfs.Dial(nn)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	upload(t, fs, local, "/nnr/root")

	// One test at a time restarts dfs3's NameNode: the runs go one after
	// the other.
	for _, kind := range []job.SinkKind{job.SinkPuts, job.SinkHFiles} {
		t.Run(string(kind), func(t *testing.T) {
			dst := uniq(t, "nn_"+string(kind))
			testenv.DropAfter(t, dst, "")
			// The run reads the snapshot through an HDFS client of the
			// test's, so the test can see it waited for the NameNode, and
			// keeps one store file open between scans, so each split
			// opens its files (a NameNode call) while the run goes on.
			reads, err := hdfs.Dial(nn)
			if err != nil {
				t.Fatal(err)
			}
			defer reads.Close()
			j := loadJob(t, p, st, snap, dst)
			j.Source.Root = "/nnr/root"
			j.Target.Create.SplitKeys = splitKeys(t, p.newSplits)
			o := pipeline.Options{Workers: 2, Limits: pipeline.Limits{CellsPerSec: 1500},
				Open: snapshot.OpenOptions{FS: reads, MaxOpenFiles: 1}}
			if kind == job.SinkHFiles {
				// Here the checkpoint is on dfs3 too: each split's end
				// writes it, and waits for the NameNode as the snapshot
				// reads of the next split would.
				j.Run.Checkpoint = "hdfs://" + nn + "/nnr/" + dst + "/checkpoint.json"
				j.Sink.Kind = job.SinkHFiles
				j.Sink.Staging = "hdfs://" + nn + "/nnr/" + dst + "/staging"
				o.Memory = 4 << 20
			}
			run := startRun(j, o)
			run.writing(t, time.Second)
			// Paused while the NameNode stops (a loaded machine can take
			// longer over it than the run takes), so that the run is still
			// going when it is down.
			run.ctl.Pause()
			t.Log(control(t, st, "dfs3-stop-namenode"))
			stopped := time.Now()
			run.ctl.Resume()

			time.Sleep(3 * time.Second)
			t.Log(control(t, st, "dfs3-start-namenode"))
			t.Logf("NameNode back %v after it stopped", time.Since(stopped).Round(time.Millisecond))
			res := <-run.done
			if !res.at.After(stopped) {
				t.Fatal("the run ended before the NameNode stopped: nothing was tested")
			}
			finished(t, "run across a NameNode restart", res, len(want))
			hs := reads.Stats()
			t.Logf("snapshot reads: %d waits for the NameNode, %d reads retried", hs.NameNodeRetries, hs.Retries)
			if kind == job.SinkPuts && hs.NameNodeRetries == 0 {
				t.Error("the snapshot reads never waited for the NameNode: the restart missed them")
			}
			if kind == job.SinkHFiles {
				if stats, ok := res.sum.Staged(); !ok || stats.RegionsLoaded == 0 {
					t.Fatalf("no region bulk loaded: %+v", stats)
				}
			}
			sameCells(t, "target after a NameNode restart", dumpTable(t, dst, true), want)
		})
	}

	// A file whose bytes are written and flushed is closed while the
	// NameNode is away: Close finishes the block on the DataNodes, then
	// its NameNode calls meet a broken connection (a bare EOF or a reset)
	// and refused dials; it waits for the NameNode and completes the file
	// with every byte.
	t.Run("close", func(t *testing.T) {
		w, err := fs.Create("/nnr/close-across-restart")
		if err != nil {
			t.Fatal(err)
		}
		body := make([]byte, 3<<20)
		for i := range body {
			body[i] = byte(i*7 + i>>11)
		}
		if _, err := w.Write(body); err != nil {
			t.Fatal(err)
		}
		if err := w.Sync(); err != nil {
			t.Fatal(err)
		}
		t.Log(control(t, st, "dfs3-stop-namenode"))
		closed := make(chan error, 1)
		go func() { closed <- w.Close() }()
		time.Sleep(3 * time.Second)
		t.Log(control(t, st, "dfs3-start-namenode"))
		if err := <-closed; err != nil {
			t.Fatalf("Close across a NameNode restart: %v", err)
		}
		t.Logf("%d waits for the NameNode in all", fs.Stats().NameNodeRetries)
		got, err := vfs.ReadFile(fs, "/nnr/close-across-restart")
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(body) {
			t.Fatalf("file closed across the restart has %d bytes, want the %d written", len(got), len(body))
		}
	})
}
