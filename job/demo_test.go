package job

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/snapshot"
)

// TestDemoSnapshot runs the configs whose old layout fits the bundled
// snapshot (written by a real HBase: row = user, qualifier = 8-byte millis)
// over every cell of it: every cell maps, its new key reads back to the same
// entity and the same event time, and no two cells share a new key.
func TestDemoSnapshot(t *testing.T) {
	demo, err := Load("../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(demo.Source.Root, ".hbase-snapshot", demo.Source.Name)); err != nil {
		t.Fatalf("demo snapshot missing: %v", err)
	}
	for _, name := range []string{"demo.yaml", "wide_to_bucketed.yaml"} {
		t.Run(name, func(t *testing.T) {
			j, err := Load(filepath.Join("../configs", name))
			if err != nil {
				t.Fatal(err)
			}
			mapSnapshot(t, j, demo.Source.Root, demo.Source.Name)
		})
	}
}

func mapSnapshot(t *testing.T, j *Job, root, name string) {
	ctx := context.Background()
	snap, err := snapshot.Open(ctx, root, name, snapshot.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer snap.Close()
	splits, err := snap.Splits(snapshot.SplitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r, back := j.Program.New(), j.Program.New()
	seen := map[string]bool{}
	var oldEnt, newEnt []byte
	cells := 0
	for _, sp := range splits {
		sc, err := snap.NewScanner(ctx, sp, snapshot.ScanOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for sc.Next() {
			src := sc.Cell()
			cells++
			out, err := r.Apply(src)
			if err != nil {
				t.Fatalf("%s: %v", src.String(), err)
			}
			if len(out.Qualifier) != 4 {
				t.Fatalf("new qualifier %q is not a 4-byte offset", out.Qualifier)
			}
			key := string(cell.AppendKey(nil, &out))
			if seen[key] {
				t.Fatalf("two cells map to %s", out.String())
			}
			seen[key] = true
			if oldEnt, err = r.SourceEntity(oldEnt[:0], src); err != nil {
				t.Fatal(err)
			}
			if newEnt, err = back.TargetEntity(newEnt[:0], &out); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(oldEnt, newEnt) {
				t.Fatalf("%s: entity %x from the old key, %x from the new", src.String(), oldEnt, newEnt)
			}
			oldTS, _, _ := r.Field("ts")
			newTS, _, _ := back.Field("ts")
			if oldTS.N != newTS.N {
				t.Fatalf("%s: event time %d reads back as %d", src.String(), int64(oldTS.N), int64(newTS.N))
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
		sc.Close()
	}
	if cells < 1000 {
		t.Fatalf("only %d cells in the demo snapshot", cells)
	}
}
