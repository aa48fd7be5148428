package verify

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/rekeyhq/rekey/transform"
)

var update = flag.Bool("update", false, "rewrite the golden report files in testdata/")

// reportFixture is a report with a match, a mismatch of each kind and a
// dual-written entity, built from fixed results.
func reportFixture() *Report {
	rng := func(s, e string) Range { return rangeOf(kr(s, e)) }
	res := []Result{
		{Entity: "user=u00001", Key: "7530303030310001", ChosenBy: []string{ByHeaviestCells, BySample},
			Old:   Side{Range: rng("u00001", "u00001\x00"), Rows: 1, Cells: 500, Bytes: 24000, Digest: "aa"},
			New:   Side{Range: rng("u00001", "u00002"), Rows: 3, Cells: 500, Bytes: 24000, Digest: "aa"},
			Match: true, Reads: 1},
		{Entity: "user=u00002", Key: "7530303030320001", ChosenBy: []string{ByName},
			Old:        Side{Range: rng("u00002", "u00002\x00"), Rows: 1, Cells: 40, Bytes: 1900, Digest: "bb"},
			New:        Side{Range: rng("u00002", "u00003"), Rows: 2, Cells: 38, Bytes: 1810, Digest: "cc"},
			Mismatches: map[Class]int64{MissingInNew: 2, ValueDiffers: 1, MappedWrong: 1},
			First: []Difference{
				{Class: MissingInNew, Old: "753030303032\te\t01\t5\tPut\t76\n"},
				{Class: ValueDiffers, Old: "753030303032\te\t02\t5\tPut\t76\n", New: "753030303032\te\t02\t5\tPut\t77\n"},
				{Class: MappedWrong, Old: "753030303032\te\t03\t5\tPut\t78\n", New: "753030303032\te\t04\t5\tPut\t78\n",
					MapsTo: "753030303032\te\t04\t5\tPut\t78\n", Reason: "its key does not lead back to the old cell whose content it holds"},
			}, Reads: 4},
		{Entity: "user=u00003", Key: "7530303030330001", ChosenBy: []string{BySample},
			Old:   Side{Range: rng("u00003", "u00003\x00"), Rows: 1, Cells: 10, Bytes: 480, Digest: "dd"},
			New:   Side{Range: rng("u00003", "u00004"), Rows: 1, Cells: 10, Bytes: 480, Digest: "dd"},
			Newer: 3, Match: true, Reads: 1},
	}
	for i := range res {
		res[i].Method = Inverse
	}
	r := NewReport(res)
	r.Job, r.Old, r.New, r.Entity = "jobs/demo.yaml", "snapshot demo_events", "table events_by_day", []string{"user"}
	r.MethodWhy = "the new key keeps every old field"
	r.Started = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	r.Seconds = 1.25
	r.Summary.OldBytesRead, r.Summary.NewBytesRead, r.Summary.OldBytesAll = 65536, 26190, 1<<20
	return r
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./verify -run TestReportGolden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (rerun with -update if intended):\n%s", name, got)
	}
}

func TestReportGolden(t *testing.T) {
	r := reportFixture()
	var text, js bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	golden(t, "report.txt", text.Bytes())
	golden(t, "report.json", js.Bytes())

	// The JSON reads back, redo list and all.
	back, err := ReadReport(bytes.NewReader(js.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Redo) != 1 || back.Redo[0].Entity != "user=u00002" || back.Redo[0].Old.StartHex != "753030303032" {
		t.Errorf("redo read back as %+v", back.Redo)
	}
	if _, err := ReadReport(strings.NewReader(`{"format":"other","version":1}`)); err == nil {
		t.Error("a file of another format was read as a report")
	}
}

// Worst first: mismatches, then the largest difference, then the heaviest.
func TestReportOrder(t *testing.T) {
	r := reportFixture()
	var got []string
	for _, e := range r.Entities {
		got = append(got, e.Entity)
	}
	if strings.Join(got, " ") != "user=u00002 user=u00001 user=u00003" {
		t.Errorf("order %v", got)
	}
	if r.Summary.Mismatched != 1 || r.Summary.Newer != 3 || r.Summary.CellsCompared != 1098 || r.OK() {
		t.Errorf("summary %+v", r.Summary)
	}
}

// Entity names are people's data: the HTML page escapes them.
func TestReportHTMLEscapes(t *testing.T) {
	r := reportFixture()
	r.Entities[0].Entity = `user=<script>alert(1)</script>`
	var b bytes.Buffer
	if err := r.WriteHTML(&b); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(&b)
	if err != nil {
		t.Fatal(err)
	}
	var scripts int
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && n.Data == "script" {
			scripts++
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if scripts != 0 {
		t.Errorf("an entity name became %d script elements", scripts)
	}
}

func kr(s, e string) transform.KeyRange { return transform.KeyRange{Start: []byte(s), Stop: []byte(e)} }

func TestRedoRanges(t *testing.T) {
	r := &Report{Redo: []Redo{
		{Entity: "c", Old: rangeOf(kr("c", "d"))},
		{Entity: "a", Old: rangeOf(kr("a", "b"))},
		{Entity: "b", Old: rangeOf(kr("b", "b\x00"))}, // touches a's: merged
		{Entity: "x", Old: rangeOf(kr("x", ""))},      // to the end
		{Entity: "y", Old: rangeOf(kr("y", "z"))},     // inside x's
	}}
	got, err := r.RedoRanges()
	if err != nil {
		t.Fatal(err)
	}
	var s []string
	for _, k := range got {
		s = append(s, k.String())
	}
	if want := `[a, b\x00) [c, d) [x, (end))`; strings.Join(s, " ") != want {
		t.Errorf("ranges %s, want %s", strings.Join(s, " "), want)
	}
	r.Redo = append(r.Redo, Redo{Entity: "user=7", FilterByEntity: true})
	if _, err := r.RedoRanges(); !errors.Is(err, ErrNeedsEntityFilter) {
		t.Errorf("filter_by_entity entry: %v", err)
	}
}

// With method both, every entity has an inverse and a forward result: it
// is counted once, redone once, and an entity the two disagree on is
// named as the transform's failure.
func TestReportBothMethods(t *testing.T) {
	side := func(cells int64, digest string) Side {
		return Side{Rows: 1, Cells: cells, Bytes: 10 * cells, Digest: digest}
	}
	res := []Result{
		{Entity: "user=a", Key: "61", Method: Inverse, Old: side(5, "x"), New: side(5, "x"), Match: true},
		{Entity: "user=b", Key: "62", Method: Inverse, Old: side(5, "y"), New: side(5, "z"), Mismatches: map[Class]int64{MappedWrong: 2}},
		{Entity: "user=a", Key: "61", Method: Forward, Old: side(5, "x"), New: side(5, "x"), Match: true},
		{Entity: "user=b", Key: "62", Method: Forward, Old: side(5, "w"), New: side(5, "w"), Match: true},
	}
	r := NewReport(res)
	if r.Method != Both || r.Summary.Entities != 2 || r.Summary.Mismatched != 1 || len(r.Redo) != 1 || r.Redo[0].Entity != "user=b" {
		t.Fatalf("method %s, summary %+v, redo %+v", r.Method, r.Summary, r.Redo)
	}
	if strings.Join(r.Summary.Disagree, ",") != "user=b" {
		t.Errorf("disagree %v, want user=b", r.Summary.Disagree)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"method: both", "  method  ", "user=b (inverse): mapped_wrong=2", "inverse and forward disagree on 1 entities (user=b): the transform maps them wrong"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
	var page bytes.Buffer
	if err := r.WriteHTML(&page); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(page.String(), "<th>method</th>") || !strings.Contains(page.String(), "user=b (inverse)") || !strings.Contains(page.String(), "disagree") {
		t.Errorf("HTML report lacks the method column or the disagreement:\n%s", page.String())
	}
}
