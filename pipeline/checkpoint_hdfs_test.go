package pipeline_test

import (
	"bytes"
	"encoding/json"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/entity"
	"github.com/rekeyhq/rekey/internal/testenv"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/vfs"
)

// TestCheckpointOnHDFSKillNineThenResume: with the checkpoint on HDFS, a
// dry run of the demo job killed -9 at random points (mid-append, maybe,
// leaving the journal open under the dead process's lease) resumes each
// time and ends with every split done once: its summary reads every cell
// of the snapshot, and the sketch beside the checkpoint counts each of
// them once, none lost with a killed run's journal and none twice.
func TestCheckpointOnHDFSKillNineThenResume(t *testing.T) {
	st := testenv.Require(t)
	bin := rekeyBinary(t)
	dir := t.TempDir()
	b, err := os.ReadFile("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	root, err := filepath.Abs("../testdata/snapshots/demo_events")
	if err != nil {
		t.Fatal(err)
	}
	job := strings.Replace(strings.Replace(string(b), "../testdata/snapshots/demo_events", root, 1), "../bin/demo-rejects.tsv", filepath.Join(dir, "rejects.tsv"), 1)
	jobPath := filepath.Join(dir, "demo.yaml")
	if err := os.WriteFile(jobPath, []byte(job), 0o644); err != nil {
		t.Fatal(err)
	}
	state := "hdfs://" + st.NameNode + "/tmp/" + uniq(t, "ckpt")
	// Each run follows a kill -9 of the last, whose HDFS lease would hold
	// the state for a minute more: --force-takeover says its owner is dead.
	args := []string{"run", jobPath, "--sink", "dry-run", "--checkpoint", state + "/checkpoint.json", "--resume", "--force-takeover",
		"--workers", "1", "--split-bytes", "8KiB", "--progress", "none", "--max-cells-per-sec", "6000"}
	r := rand.New(rand.NewSource(time.Now().UnixNano()))
	for k := 0; k < 4; k++ {
		cmd := exec.Command(bin, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		d := time.Duration(700+r.Intn(1500)) * time.Millisecond
		time.Sleep(d)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		t.Logf("kill -9 after %v: exit %d; %s", d, exitCode(err), strings.TrimSpace(stderr.String()))
	}
	final := exec.Command(bin, append(args[:len(args)-2], "--json")...)
	var stderr bytes.Buffer
	final.Stderr = &stderr
	out, err := final.Output()
	if err != nil {
		t.Fatalf("final resume: exit %d\n%s", exitCode(err), stderr.String())
	}
	t.Logf("final resume: %s", strings.TrimSpace(stderr.String()))
	var sum pipeline.Summary
	if err := json.Unmarshal(out, &sum); err != nil {
		t.Fatal(err)
	}
	if !sum.Finished || sum.Done != sum.Splits || sum.Read != demoCells {
		t.Fatalf("final summary: finished %v, %d of %d splits, %d cells read; want every split and %d cells", sum.Finished, sum.Done, sum.Splits, sum.Read, demoCells)
	}
	t.Logf("%d of %d splits done by the killed runs", sum.Skipped, sum.Splits)
	loc, err := vfs.Open(state + "/" + entity.SketchFile)
	if err != nil {
		t.Fatal(err)
	}
	defer loc.Close()
	sb, err := vfs.ReadFile(loc.FS, loc.Path)
	if err != nil {
		t.Fatal(err)
	}
	sk, err := entity.ReadSketch(bytes.NewReader(sb))
	if err != nil {
		t.Fatal(err)
	}
	if _, cells, _ := sk.Totals(); cells != demoCells {
		t.Errorf("the sketch on HDFS counts %d cells, want %d: splits lost or counted twice across the kills", cells, demoCells)
	}
}
