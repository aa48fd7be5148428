package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hbase"
)

// TestVerifyAllFindsRowsOnlyTheTargetHas: `rekey verify --all` lists its
// entities from the old snapshot, so it must read the rest of the target
// too. The demo job is run into a live table; then HBase is given, through
// its own client, one row of a user the snapshot never had (u0004x, whose
// new range lies between two users' ranges) and two rows whose keys the
// new layout cannot read at all (one before every user's range, one after).
// Through the live table and through --snapshot auto, the check reports the
// user as an entity of its own (extra_in_new, a redo entry marked new_only)
// and the two rows outside every entity (unreadable_in_new), and exits 1;
// the clean target before them verifies clean, and a sampled check (which
// reads only its entities' ranges) does not see them.
func TestVerifyAllFindsRowsOnlyTheTargetHas(t *testing.T) {
	st, c, table := scratchTable(t, "verify_newonly_")
	ctx := context.Background()
	job := demoJob(t)
	if code, out, errOut := runRekey(t, "run", job, "--zk", st.ZKQuorum, "--table", table, "--create", "--progress", "none"); code != 0 {
		t.Fatalf("run: exit %d: %s\n%s", code, errOut, out)
	}
	type report struct {
		NewSide string `json:"new_side"`
		Summary struct {
			Entities, Mismatched int
			Mismatches           map[string]int64
		}
		Entities []struct {
			Entity     string
			ChosenBy   []string `json:"chosen_by"`
			Match      bool
			Mismatches map[string]int64
			Old, New   struct{ Cells int64 }
		}
		Redo []struct {
			Entity  string
			NewOnly bool `json:"new_only"`
		}
		Outside *struct {
			Cells      int64
			Mismatches map[string]int64
			Examples   []struct{ Class, New string }
		}
	}
	check := func(want int, args ...string) report {
		t.Helper()
		code, out, errOut := runRekey(t, append([]string{"verify", job, "--zk", st.ZKQuorum, "--table", table, "--retries", "0", "--json"}, args...)...)
		if code != want {
			t.Fatalf("verify %v: exit %d, want %d: %s\n%.3000s", args, code, want, errOut, out)
		}
		var r report
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("report: %v\n%.2000s", err, out)
		}
		return r
	}
	clean := check(exitOK, "--all")
	if clean.Outside != nil || clean.Summary.Mismatched != 0 {
		t.Fatalf("clean target: summary %+v, outside %+v", clean.Summary, clean.Outside)
	}
	for _, e := range clean.Entities {
		if e.Entity == "user=u0004x" {
			t.Fatal("the snapshot has user u0004x: the test's extra user must be one it lacks")
		}
	}

	// A cell of the target as the run wrote it gives the family and a
	// timestamp older than the snapshot (newer ones are dual writes).
	sc := c.Scan(ctx, []byte(table), &hbase.Scan{Limit: 1})
	if !sc.Next() {
		t.Fatalf("empty target: %v", sc.Err())
	}
	model := sc.Cell().Clone()
	sc.Close()
	const day = int64(24 * time.Hour / time.Millisecond)
	start := model.Timestamp - model.Timestamp%day
	extra := cell.Cell{Row: binary.BigEndian.AppendUint64([]byte("u0004x"), uint64(start)), Family: model.Family,
		Qualifier: binary.BigEndian.AppendUint32(nil, uint32(model.Timestamp-start)), Timestamp: model.Timestamp, Type: cell.Put, Value: []byte("extra")}
	for _, cl := range []cell.Cell{
		extra,
		{Row: []byte("a-bad"), Family: model.Family, Qualifier: []byte("q"), Timestamp: model.Timestamp, Type: cell.Put, Value: []byte("not the layout")},
		{Row: []byte("zz"), Family: model.Family, Qualifier: []byte("q"), Timestamp: model.Timestamp, Type: cell.Put, Value: []byte("not the layout")},
	} {
		if err := c.Put(ctx, []byte(table), cl.Row, []cell.Cell{cl}); err != nil {
			t.Fatal(err)
		}
	}

	reportFile := filepath.Join(t.TempDir(), "report.json")
	for _, side := range []struct {
		name string
		args []string
	}{
		{"table", []string{"--all", "--out", reportFile}},
		{"snapshot", []string{"--all", "--snapshot", "auto", "--snapshot-root", st.RootDir}},
	} {
		r := check(exitProblems, side.args...)
		if r.NewSide != side.name {
			t.Errorf("%s: new side %q", side.name, r.NewSide)
		}
		if r.Summary.Entities != clean.Summary.Entities+1 || r.Summary.Mismatched != 1 ||
			r.Summary.Mismatches["extra_in_new"] != 1 || r.Summary.Mismatches["unreadable_in_new"] != 2 {
			t.Errorf("%s: summary %+v, want %d entities, 1 mismatched: extra_in_new=1, unreadable_in_new=2", side.name, r.Summary, clean.Summary.Entities+1)
		}
		e := r.Entities[0] // the mismatch, first
		if e.Entity != "user=u0004x" || e.Match || strings.Join(e.ChosenBy, ",") != "new-only" || e.Old.Cells != 0 || e.New.Cells != 1 || e.Mismatches["extra_in_new"] != 1 {
			t.Errorf("%s: first entity %+v, want user=u0004x chosen new-only, 0 old cells and 1 new, extra_in_new=1", side.name, e)
		}
		if len(r.Redo) != 1 || r.Redo[0].Entity != "user=u0004x" || !r.Redo[0].NewOnly {
			t.Errorf("%s: redo %+v, want user=u0004x new_only", side.name, r.Redo)
		}
		o := r.Outside
		if o == nil || o.Cells != 2 || o.Mismatches["unreadable_in_new"] != 2 || len(o.Examples) != 2 ||
			!strings.HasPrefix(o.Examples[0].New, "612d626164\t") || !strings.HasPrefix(o.Examples[1].New, "7a7a\t") {
			t.Errorf("%s: outside %+v, want the rows a-bad and zz, unreadable_in_new", side.name, o)
		}
	}

	// The text report says what to do with each.
	code, out, errOut := runRekey(t, "verify", job, "--zk", st.ZKQuorum, "--table", table, "--retries", "0", "--all")
	for _, want := range []string{"user=u0004x: extra_in_new=1", "only in the new side", "outside every entity: 2 new cells belong to no entity (unreadable_in_new=2)", "delete them from the target"} {
		if code != exitProblems || !strings.Contains(out, want) {
			t.Errorf("text report: exit %d, no %q: %s\n%.3000s", code, want, errOut, out)
		}
	}

	// A sampled check reads its entities' ranges only: it cannot see them.
	if r := check(exitOK, "--find-worst", "--heaviest", "5", "--sample", "20"); r.Outside != nil {
		t.Errorf("sampled check: outside %+v", r.Outside)
	}
	// Nothing to write again for an entity only the target has.
	code, out, errOut = runRekey(t, "run", job, "--zk", st.ZKQuorum, "--table", table, "--only", reportFile, "--progress", "none")
	if code != exitUsage || !strings.Contains(errOut, "only on the new side") {
		t.Errorf("run --only a report of a new-only entity: exit %d: %s\n%s", code, errOut, out)
	}
}
