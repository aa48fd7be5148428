package pipeline_test

import (
	"context"
	"errors"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/internal/s3test"
	"github.com/rekeyhq/rekey/pipeline"
	"github.com/rekeyhq/rekey/vfs"
)

// objects lists every object under prefix with its bytes.
func objects(t *testing.T, fsys vfs.FS, prefix string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, p := range s3test.Files(t, fsys, prefix) {
		b, err := vfs.ReadFile(fsys, p)
		if err != nil {
			t.Fatal(err)
		}
		out[p] = string(b)
	}
	return out
}

// TestForcedTakeoverStopsTheLiveRunOnObjectStores: a run staging into an
// object store (versitygw's S3, fake-gcs-server's GCS, Azurite when
// installed) whose staging lease another run takes with --force-takeover
// writes nothing more to the staging folder: its next record is refused
// by the fence (its renewal is still a third of a lifetime away) and it
// ends with ErrLeaseLost, while the new owner holds the folder.
func TestForcedTakeoverStopsTheLiveRunOnObjectStores(t *testing.T) {
	for _, s := range stagingStores {
		t.Run(s.name, func(t *testing.T) {
			fsys, root, env := s.open(t)
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				t.Setenv(k, v) // the run's vfs reads the store's settings there
			}
			prefix := s3test.Prefix(t, fsys, "lease-run")
			dir := t.TempDir()
			st := state{Checkpoint: filepath.Join(dir, "first.json"), Staging: root + prefix, Rejects: filepath.Join(dir, "rejects.tsv"), TTL: 30 * time.Second}
			j, o := demoRun(t, st)
			o.Limits.CellsPerSec = 4000 // the demo's cells take 8 s
			r1, err := pipeline.Prepare(context.Background(), j, o)
			if err != nil {
				t.Fatal(err)
			}
			if err := r1.Start(context.Background()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(time.Second)
			st2 := st
			st2.Checkpoint = filepath.Join(dir, "second.json")
			j2, o2 := demoRun(t, st2)
			o2.ForceTakeover, o2.Fresh = true, false
			r2, err := pipeline.Prepare(context.Background(), j2, o2)
			if err != nil {
				t.Fatalf("forced takeover: %v", err)
			}
			defer r2.Close()
			before := objects(t, fsys, prefix)
			took := time.Now()
			sum, err := r1.Wait()
			if !errors.Is(err, pipeline.ErrLeaseLost) {
				t.Fatalf("the run whose lease was taken: %v", err)
			}
			if d := time.Since(took); d > 8*time.Second || sum.Finished {
				t.Errorf("it stopped %v after the takeover (finished %v); its renewal is 10 s away, the fence is at its next record", d, sum.Finished)
			}
			after := objects(t, fsys, prefix)
			var changed []string
			for p, b := range after {
				if before[p] != b {
					changed = append(changed, p)
				}
			}
			sort.Strings(changed)
			if len(changed) > 0 {
				t.Errorf("the run wrote after it lost its lease: %v", changed)
			}
		})
	}
}
