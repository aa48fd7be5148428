package verify_test

import (
	"context"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/transform"
	"github.com/rekeyhq/rekey/verify"
)

// When every entity differs, classification holds at most MaxDiffCells old
// cells at once: entities are classified in batches, and one larger than
// the bound is reported unclassified. The bundled demo snapshot is both
// sides; the job renames the family, so every cell is missing and extra.
func TestClassifyInBoundedBatches(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join("..", "testdata", "snapshots", "demo_events")
	dump, err := os.ReadFile(filepath.Join("..", "testdata", "snapshots", "demo_events.cells"))
	if err != nil {
		t.Fatal(err)
	}
	perUser := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(dump)), "\n") {
		row, _, _ := strings.Cut(line, "\t")
		b, _ := hex.DecodeString(row)
		perUser[string(b)]++
	}
	p, err := transform.Compile(transform.Spec{
		Source:   transform.LayoutSpec{Row: []transform.ComponentSpec{{Type: "string", Field: "user"}}},
		Target:   transform.LayoutSpec{Row: []transform.ComponentSpec{{Type: "string", Field: "user"}}},
		Entity:   []string{"user"},
		Families: map[string]string{"e": "x"},
	})
	if err != nil {
		t.Fatal(err)
	}
	old, err := verify.OpenSnapshot(ctx, root, "demo_events", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	nw, err := verify.OpenSnapshot(ctx, root, "demo_events", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer nw.Close()
	var ch verify.Choice
	for u := range perUser {
		k, err := p.ParseEntity("user=" + u)
		if err != nil {
			t.Fatal(err)
		}
		ch.Add(k, verify.ByAll)
	}
	// The inverse reads each new cell back to its old cell, in the family
	// that old family e is renamed away from: the cell is there under a
	// wrong key, mapped_wrong and paired with it. The forward comparison
	// sees a missing and an extra cell instead.
	for _, m := range []verify.Method{verify.Inverse, verify.Forward} {
		res, err := verify.Compare(ctx, verify.Config{Program: p, Old: old, New: nw, MaxDiffCells: 3000, Method: m}, ch.Targets())
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			n := perUser[strings.TrimPrefix(r.Entity, "user=")]
			if r.Match || r.Method != m {
				t.Errorf("%s %s: match %v", m, r.Entity, r.Match)
				continue
			}
			if n > 3000 {
				if len(r.Mismatches) != 1 || r.Mismatches[verify.Unclassified] == 0 {
					t.Errorf("%s %s (%d cells, over the bound): %v, want unclassified", m, r.Entity, n, r.Mismatches)
				}
				continue
			}
			want := map[verify.Class]int64{verify.MissingInNew: n, verify.ExtraInNew: n}
			if m == verify.Inverse {
				want = map[verify.Class]int64{verify.MappedWrong: n}
			}
			if fmt.Sprint(r.Mismatches) != fmt.Sprint(want) {
				t.Errorf("%s %s: %v, want %v", m, r.Entity, r.Mismatches, want)
			}
		}
	}
}

// Count (--find-worst, --all) counts every entity of the bundled snapshot
// as HBase's dump does, its four regions read in parallel and merged.
func TestCountMatchesOracle(t *testing.T) {
	ctx := context.Background()
	root := filepath.Join("..", "testdata", "snapshots", "demo_events")
	dump, err := os.ReadFile(filepath.Join("..", "testdata", "snapshots", "demo_events.cells"))
	if err != nil {
		t.Fatal(err)
	}
	perUser := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(dump)), "\n") {
		row, _, _ := strings.Cut(line, "\t")
		b, _ := hex.DecodeString(row)
		perUser[string(b)]++
	}
	p, err := transform.Compile(transform.Spec{
		Source: transform.LayoutSpec{Row: []transform.ComponentSpec{{Type: "string", Field: "user"}}},
		Target: transform.LayoutSpec{Row: []transform.ComponentSpec{{Type: "string", Field: "user"}}},
		Entity: []string{"user"},
	})
	if err != nil {
		t.Fatal(err)
	}
	old, err := verify.OpenSnapshot(ctx, root, "demo_events", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	cs, err := verify.Count(ctx, old, p, verify.CountOptions{K: 10, N: 20, Seed: 5, Workers: 3})
	if err != nil {
		t.Fatal(err)
	}
	if cs.Exact.Len() != len(perUser) || cs.Rejected != 0 {
		t.Fatalf("%d entities, %d rejected; oracle: %d users", cs.Exact.Len(), cs.Rejected, len(perUser))
	}
	for u, n := range perUser {
		k, _ := p.ParseEntity("user=" + u)
		if got, _ := cs.Exact.Get(k); got.Cells != n {
			t.Errorf("user=%s: %d cells, oracle %d", u, got.Cells, n)
		}
	}
	if len(cs.Sketch.Sample()) != 20 {
		t.Errorf("sample of %d, want 20", len(cs.Sketch.Sample()))
	}
	// The merged sketch ranks the heaviest as the exact counts do, each
	// count an upper bound within its error (merging regions adds what an
	// entity may have had where a full summary no longer held it).
	exact := cs.Exact.Heaviest(0, 10)
	for i, c := range cs.Sketch.Heaviest(0) {
		if string(c.Key) != string(exact[i].Key) || c.Cells < exact[i].Cells || c.Cells-c.Error > exact[i].Cells {
			t.Errorf("sketch #%d: %x %d (error %d), exact %x %d", i, c.Key, c.Cells, c.Error, exact[i].Key, exact[i].Cells)
		}
	}
}
