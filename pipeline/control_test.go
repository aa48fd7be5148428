package pipeline_test

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/pipeline"
)

func demoJob(t *testing.T) *job.Job {
	t.Helper()
	j, err := job.Load("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	j.Run.Checkpoint = filepath.Join(dir, "checkpoint.json")
	j.BadKeys.File = filepath.Join(dir, "rejects.tsv")
	return j
}

// TestControlPausesResumesAndChangesLimits drives a dry run of the bundled
// snapshot through the loopback control endpoint.
func TestControlPausesResumesAndChangesLimits(t *testing.T) {
	ctl := pipeline.NewControl(pipeline.Limits{CellsPerSec: 4000})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := ctl.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + addr
	done := make(chan *pipeline.Summary, 1)
	go func() {
		sum, err := pipeline.Execute(ctx, demoJob(t), pipeline.Options{Sink: pipeline.DryRun{}, Control: ctl, Workers: 2})
		if err != nil {
			t.Error(err)
		}
		done <- sum
	}()
	status := func() pipeline.Status {
		resp, err := http.Get(base + "/status")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var s pipeline.Status
		json.NewDecoder(resp.Body).Decode(&s)
		return s
	}
	post := func(path string) {
		resp, err := http.Post(base+path, "text/plain", nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("POST %s: %s", path, resp.Status)
		}
	}
	time.Sleep(time.Second)
	post("/pause")
	time.Sleep(300 * time.Millisecond)
	a := status()
	time.Sleep(time.Second)
	b := status()
	if !b.Paused || b.Written != a.Written {
		t.Errorf("paused: written went %d -> %d, paused %v", a.Written, b.Written, b.Paused)
	}
	if a.Written == 0 || a.Written > 31413/2 {
		t.Errorf("a second at 4000 cells/s wrote %d cells", a.Written)
	}
	post("/resume")
	post("/limits?cells_per_sec=0")
	select {
	case sum := <-done:
		if sum == nil || sum.Written != 31413 || !sum.Finished {
			t.Errorf("summary after resume: %+v", sum)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run did not finish after resume and lifting the cap")
	}
	resp, err := http.Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sb strings.Builder
	buf := make([]byte, 1<<16)
	n, _ := resp.Body.Read(buf)
	sb.Write(buf[:n])
	if !strings.Contains(sb.String(), "rekey_cells_written_total") {
		t.Errorf("metrics lack rekey_cells_written_total:\n%s", sb.String())
	}
}

// TestInterruptKeepsFinishedSplits: a cancelled run reports ErrInterrupted
// and a resume finishes with exactly the snapshot's cells.
func TestInterruptKeepsFinishedSplits(t *testing.T) {
	j := demoJob(t)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(1500 * time.Millisecond); cancel() }()
	sum, err := pipeline.Execute(ctx, j, pipeline.Options{Sink: pipeline.DryRun{}, Workers: 1, Limits: pipeline.Limits{CellsPerSec: 10000}})
	if err != pipeline.ErrInterrupted || !sum.Interrupted {
		t.Fatalf("interrupted run: %v, %+v", err, sum)
	}
	if sum.Done == sum.Splits {
		t.Fatalf("every split finished before the interrupt; the test needs a slower run")
	}
	sum2, err := pipeline.Execute(context.Background(), j, pipeline.Options{Sink: pipeline.DryRun{}, Workers: 2, Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	if sum2.Read != 31413 || sum2.Skipped != sum.Done || !sum2.Finished {
		t.Errorf("resume: read %d (want 31413 over both runs), skipped %d (want %d), finished %v", sum2.Read, sum2.Skipped, sum.Done, sum2.Finished)
	}
}
