package verify_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/job"
	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/verify"
)

// TestStagingRunReadsOnlyRecordedFiles: a crash while the merge writes an
// HFile, or while the load re-splits one, leaves a whole HFile no record
// names; the load deletes it rather than load it. Verifying the staging
// folder (verify --staging, OpenStagingRun) must not read it either: here
// a copy of a staged file under another name stands for it, and the new
// side still holds the run's 31413 cells, not those plus the copy's. A
// recorded file that is missing fails the open, naming it.
func TestStagingRunReadsOnlyRecordedFiles(t *testing.T) {
	j, staged := stageRun(t, demoLayout, func(p *transform.Program) transform.Mapper { return p.New() })
	staged.Close()
	root := filepath.Join(j.Sink.Staging, "hfiles")
	var files []string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if len(files) == 0 {
		t.Fatal("the run staged no HFiles")
	}
	b, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(filepath.Dir(files[0]), strings.Repeat("e", 32))
	if err := os.WriteFile(stray, b, 0o644); err != nil {
		t.Fatal(err)
	}
	count := func(r *verify.StagingReader) int {
		n := 0
		if err := r.Read(context.Background(), transform.KeyRange{}, func(*cell.Cell) error { n++; return nil }); err != nil {
			t.Fatal(err)
		}
		return n
	}
	all, err := verify.OpenStaging(root)
	if err != nil {
		t.Fatal(err)
	}
	withStray := count(all)
	all.Close()
	if withStray <= 31413 {
		t.Fatalf("the folder read whole holds %d cells; the stray copy should add to the run's 31413", withStray)
	}
	run, err := verify.OpenStagingRun(j.Sink.Staging)
	if err != nil {
		t.Fatal(err)
	}
	if n := count(run); n != 31413 {
		t.Errorf("the run's staged files hold %d cells, want 31413 (the stray file read: %v)", n, n == withStray)
	}
	run.Close()

	if err := os.Remove(files[0]); err != nil {
		t.Fatal(err)
	}
	_, err = verify.OpenStagingRun(j.Sink.Staging)
	if err == nil || !strings.Contains(err.Error(), filepath.Base(files[0])) {
		t.Errorf("open with the recorded %s removed: %v, want an error naming it", files[0], err)
	}
}

// TestStagingOfCatchupRefused: a staging folder whose identity record
// says a catch-up staged it (since, as rekey run JOB --since A through
// staged HFiles writes it; TestCatchupThroughHFiles in pipeline refuses
// a real one) holds only the difference between two snapshots: verify
// --staging on it is refused, naming the snapshot and what to verify
// instead, before the snapshot is read; the same folder without the
// field opens.
func TestStagingOfCatchupRefused(t *testing.T) {
	j, staged := stageRun(t, demoLayout, func(p *transform.Program) transform.Mapper { return p.New() })
	staged.Close()
	id := filepath.Join(j.Sink.Staging, job.StagedIdentityFile)
	b, err := os.ReadFile(id)
	if err != nil {
		t.Fatal(err)
	}
	var rec job.StagedIdentity
	if err := json.Unmarshal(b, &rec); err != nil || rec.Since != "" {
		t.Fatalf("a whole run's identity record: %v, since %q", err, rec.Since)
	}
	sr, err := verify.OpenStagingRun(j.Sink.Staging)
	if err != nil {
		t.Fatalf("a whole run's folder: %v", err)
	}
	sr.Close()
	rec.Since = "events_20261206"
	if b, err = json.Marshal(rec); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(id, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := verify.OpenStagingRun(j.Sink.Staging); !errors.Is(err, verify.ErrCatchupStaging) || !strings.Contains(err.Error(), "events_20261206") {
		t.Errorf("OpenStagingRun of a catch-up's folder: %v; want ErrCatchupStaging naming the snapshot", err)
	}
	j.Source.Name = "no_such_snapshot" // refused before the snapshot is opened
	if _, err := verify.Prepare(context.Background(), j, verify.Options{Staging: j.Sink.Staging}); !errors.Is(err, verify.ErrCatchupStaging) || !strings.Contains(err.Error(), "verify the target table") {
		t.Errorf("verify --staging of a catch-up's folder: %v; want ErrCatchupStaging saying what to verify instead", err)
	}
}
