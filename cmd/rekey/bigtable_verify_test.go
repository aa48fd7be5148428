package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"cloud.google.com/go/bigtable"
	btapb "cloud.google.com/go/bigtable/admin/apiv2/adminpb"
	"cloud.google.com/go/bigtable/bttest"
	"google.golang.org/grpc"
)

// TestVerifyBigtableAtTheCLI is issue 52's verify against a Bigtable
// target as a user runs it: `rekey run` of the demo job (the bundled
// snapshot, no cluster) into Google's emulator on loopback through
// BIGTABLE_EMULATOR_HOST; then one cell of u00007 is deleted and one
// value of u00042 changed with Google's client. `rekey verify --all
// --method both --json` exits 1 naming exactly those two entities,
// missing_in_new and value_differs by both methods, and gives each a redo range that covers the entity's
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
	code, out, errOut = runRekey(t, "verify", jobFile, "--all", "--method", "both", "--json", "--out", report, "--retries", "0")
	if code != exitProblems {
		t.Fatalf("verify of the damaged table: exit %d, want 1\n%s%s", code, out, errOut)
	}
	var rep struct {
		Entities []struct {
			Entity     string           `json:"entity"`
			Method     string           `json:"method"`
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
		classes[e.Entity+" "+e.Method] += strings.Join(cs, ",")
	}
	want := map[string]string{
		"user=u00007 inverse": "missing_in_new", "user=u00007 forward": "missing_in_new",
		"user=u00042 inverse": "value_differs", "user=u00042 forward": "value_differs",
	}
	if fmt.Sprint(classes) != fmt.Sprint(want) {
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

// TestBigtableCreateSplits: `rekey run` of the demo job creates its
// Bigtable table with exactly the job's split_keys, and with
// target.create.regions: 4 with three split keys, in increasing order,
// that each of the four ranges they make holds some of the rows written
// (a split key outside the data would leave a range empty). The
// emulator keeps no splits, so they are read from the CreateTable
// request on its way in.
func TestBigtableCreateSplits(t *testing.T) {
	var mu sync.Mutex
	var creates []*btapb.CreateTableRequest
	srv, err := bttest.NewServer("127.0.0.1:0", grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		if r, ok := req.(*btapb.CreateTableRequest); ok {
			mu.Lock()
			creates = append(creates, r)
			mu.Unlock()
		}
		return h(ctx, req)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	t.Setenv("BIGTABLE_EMULATOR_HOST", srv.Addr)
	ctx := context.Background()
	c, err := bigtable.NewClient(ctx, "p", "i")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for _, tc := range []struct {
		table, create string
		want          []string // nil: three keys that cut the rows in four
	}{
		{"given", `{split_keys: ["u00010", "0x7530303032ff", "u00031"]}`, []string{"u00010", "u0002\xff", "u00031"}},
		{"regions", "{regions: 4}", nil},
	} {
		creates = nil
		jobFile := bigtableDemoJob(t, "  table: events_by_day", "  table: "+tc.table+"\n  create: "+tc.create)
		if code, out, errOut := runRekey(t, "run", jobFile, "--progress", "none"); code != exitOK {
			t.Fatalf("%s: run: exit %d\n%s%s", tc.table, code, out, errOut)
		}
		if len(creates) != 1 {
			t.Fatalf("%s: %d CreateTable requests", tc.table, len(creates))
		}
		var got []string
		for _, s := range creates[0].InitialSplits {
			got = append(got, string(s.Key))
		}
		if tc.want != nil {
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("%s: created with splits %q, want %q", tc.table, got, tc.want)
			}
			continue
		}
		if len(got) != 3 || !sort.StringsAreSorted(got) || got[0] == got[1] || got[1] == got[2] {
			t.Fatalf("%s: created with splits %q, want 3 increasing keys", tc.table, got)
		}
		in := make([]int, 4)
		err := c.Open(tc.table).ReadRows(ctx, bigtable.InfiniteRange(""), func(r bigtable.Row) bool {
			in[sort.SearchStrings(got, r.Key()+"\x00")]++ // the range whose start is at or below the key
			return true
		}, bigtable.RowFilter(bigtable.StripValueFilter()))
		if err != nil {
			t.Fatal(err)
		}
		for i, n := range in {
			if n == 0 {
				t.Errorf("%s: splits %q leave range %d without rows (rows per range %v)", tc.table, got, i, in)
			}
		}
	}
}
