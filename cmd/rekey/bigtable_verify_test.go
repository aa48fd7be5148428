package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"cloud.google.com/go/bigtable"
	"cloud.google.com/go/bigtable/bttest"
)

// TestVerifyBigtableAtTheCLI is issue 52's verify against a Bigtable
// target as a user runs it: `rekey run` of the demo job (the bundled
// snapshot, no cluster) into Google's emulator on loopback through
// BIGTABLE_EMULATOR_HOST; then one cell of u00007 is deleted and one
// value of u00042 changed with Google's client. `rekey verify --all
// --json` exits 1 naming exactly those two entities, missing_in_new and
// value_differs, and gives each a redo range that covers the entity's
// old row (the demo's old key is the user id whole) and no other user's;
// `rekey run --only` that report writes them again, and verify exits 0.
func TestVerifyBigtableAtTheCLI(t *testing.T) {
	srv, err := bttest.NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Setenv("BIGTABLE_EMULATOR_HOST", srv.Addr)
	jobFile := bigtableDemoJob(t, "bigtable: {project: p, instance: i}", "bigtable: {project: p, instance: i}\n  create: true")

	code, out, errOut := runRekey(t, "run", jobFile, "--progress", "none", "--json")
	if code != exitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	var sum struct {
		Written int64 `json:"cells_written"`
	}
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Written != 31413 {
		// 31413: the oracle's dump, testdata/snapshots/demo_events.cells.
		t.Fatalf("run wrote %d cells (%v), want 31413\n%s", sum.Written, err, out)
	}

	ctx := context.Background()
	c, err := bigtable.NewClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	tbl := c.Open("events_by_day")
	// The first cell of each victim's first new row (the new key starts
	// with the six bytes of the user id).
	first := func(user string) (row, fam, col string, ts bigtable.Timestamp) {
		t.Helper()
		err := tbl.ReadRows(ctx, bigtable.PrefixRange(user), func(r bigtable.Row) bool {
			for f, items := range r {
				it := items[0]
				row, fam, col, ts = it.Row, f, strings.TrimPrefix(it.Column, f+":"), it.Timestamp
				return false
			}
			return true
		}, bigtable.LimitRows(1))
		if err != nil || row == "" {
			t.Fatalf("no row of %s in the emulator (%v)", user, err)
		}
		return row, fam, col, ts
	}
	row, fam, col, ts := first("u00007")
	del := bigtable.NewMutation()
	del.DeleteTimestampRange(fam, col, ts, ts+1000)
	if err := tbl.Apply(ctx, row, del); err != nil {
		t.Fatal(err)
	}
	row, fam, col, ts = first("u00042")
	set := bigtable.NewMutation()
	set.Set(fam, col, ts, []byte("damaged"))
	if err := tbl.Apply(ctx, row, set); err != nil {
		t.Fatal(err)
	}

	report := filepath.Join(t.TempDir(), "report.json")
	code, out, errOut = runRekey(t, "verify", jobFile, "--all", "--json", "--out", report, "--retries", "0")
	if code != exitProblems {
		t.Fatalf("verify of the damaged table: exit %d, want 1\n%s%s", code, out, errOut)
	}
	var rep struct {
		Entities []struct {
			Entity     string           `json:"entity"`
			Match      bool             `json:"match"`
			Mismatches map[string]int64 `json:"mismatches"`
		} `json:"entities"`
		Redo []struct {
			Entity string `json:"entity"`
			Old    struct {
				Start string `json:"start_hex"`
				Stop  string `json:"stop_hex"`
			} `json:"old_range"`
		} `json:"redo"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("verify --json: %v\n%s", err, out)
	}
	classes := map[string]string{}
	for _, e := range rep.Entities {
		if e.Match {
			continue
		}
		var cs []string
		for c := range e.Mismatches {
			cs = append(cs, c)
		}
		sort.Strings(cs)
		classes[e.Entity] += strings.Join(cs, ",")
	}
	want := map[string]string{"user=u00007": "missing_in_new", "user=u00042": "value_differs"}
	if len(classes) != len(want) || classes["user=u00007"] != want["user=u00007"] || classes["user=u00042"] != want["user=u00042"] {
		t.Errorf("mismatched entities and classes %v, want %v\n%s", classes, want, out)
	}
	if len(rep.Redo) != 2 {
		t.Fatalf("%d redo ranges, want the two entities'\n%s", len(rep.Redo), out)
	}
	for _, r := range rep.Redo {
		user := strings.TrimPrefix(r.Entity, "user=")
		// The range holds the user's old row and neither neighbour's.
		for _, k := range []struct {
			row string
			in  bool
		}{{user, true}, {user[:5] + string(user[5]-1), false}, {user[:5] + string(user[5]+1), false}} {
			h := hexOf(k.row)
			if in := r.Old.Start <= h && (r.Old.Stop == "" || h < r.Old.Stop); in != k.in {
				t.Errorf("redo of %s: old range [%s, %s) holds %q: %v, want %v", r.Entity, r.Old.Start, r.Old.Stop, k.row, in, k.in)
			}
		}
	}

	code, out, errOut = runRekey(t, "run", jobFile, "--only", report, "--progress", "none", "--json")
	if code != exitOK {
		t.Fatalf("run --only the report: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = runRekey(t, "verify", jobFile, "--all", "--retries", "0")
	if code != exitOK {
		t.Errorf("verify after the redo: exit %d, want 0\n%s%s", code, out, errOut)
	}
}

// hexOf is the report's hex form of a key (lower case, two digits a
// byte), so that hex strings order as the keys do.
func hexOf(s string) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		b = append(b, digits[s[i]>>4], digits[s[i]&15])
	}
	return string(b)
}
