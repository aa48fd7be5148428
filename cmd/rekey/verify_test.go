package main

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// identityJob writes a job that maps the demo snapshot onto itself (with
// the given families: mapping), so the snapshot is its own new side.
func identityJob(t *testing.T, root, families string) string {
	t.Helper()
	dir := t.TempDir()
	src := `source: {root: ` + filepath.Join(root, "testdata", "snapshots", "demo_events") + `, name: demo_events}
target: {table: events_copy}
source_layout:
  row: [{field: user, type: string}]
  qualifier: [{field: ts, type: int, width: 8}]
target_layout:
  row: [{field: user, type: string}]
  qualifier: [{field: ts, type: int, width: 8}]
entity: [user]
` + families
	p := filepath.Join(dir, "copy.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// oracleCounts reads HBase's dump of the demo snapshot: cells per user.
func oracleCounts(t *testing.T, root string) map[string]int64 {
	t.Helper()
	dump, err := os.ReadFile(filepath.Join(root, "testdata", "snapshots", "demo_events.cells"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(strings.TrimSpace(string(dump)), "\n") {
		row, _, _ := strings.Cut(line, "\t")
		b, err := hex.DecodeString(row)
		if err != nil {
			t.Fatal(err)
		}
		out[string(b)]++
	}
	return out
}

type verifyReport struct {
	Method    string
	MethodWhy string `json:"method_reason"`
	Summary   struct {
		Entities      int   `json:"entities"`
		Mismatched    int   `json:"mismatched"`
		CellsCompared int64 `json:"cells_compared"`
		OldBytesRead  int64 `json:"old_bytes_read"`
		OldBytesAll   int64 `json:"old_bytes_total"`
	}
	Entities []struct {
		Entity   string
		ChosenBy []string `json:"chosen_by"`
		Old, New struct {
			Rows   int64
			Cells  int64
			Digest string
		}
		Match      bool
		Method     string
		Mismatches map[string]int64
		First      []struct {
			Class, Old, New string
			MapsTo          string `json:"maps_to"`
			Reason          string
		} `json:"first_differences"`
	}
	Redo []struct{ Entity, Key string }
}

func decodeReport(t *testing.T, out string) verifyReport {
	t.Helper()
	var r verifyReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report JSON: %v\n%.2000s", err, out)
	}
	return r
}

// TestVerifyAllMatchesItself: the demo snapshot against itself, every
// entity: all match, and the cells compared are the oracle's.
func TestVerifyAllMatchesItself(t *testing.T) {
	root := demoSnapshot(t)
	want := oracleCounts(t, root)
	job := identityJob(t, root, "")
	snaps := filepath.Join(root, "testdata", "snapshots", "demo_events")
	code, out, errOut := runRekey(t, "verify", job, "--all", "--snapshot", "demo_events", "--snapshot-root", snaps, "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s\n%.3000s", code, errOut, out)
	}
	r := decodeReport(t, out)
	var total int64
	for _, n := range want {
		total += n
	}
	if r.Summary.Entities != len(want) || r.Summary.Mismatched != 0 || r.Summary.CellsCompared != 2*total {
		t.Fatalf("summary %+v; oracle: %d users, %d cells", r.Summary, len(want), total)
	}
	for _, e := range r.Entities {
		if n := want[strings.TrimPrefix(e.Entity, "user=")]; e.Old.Cells != n || e.New.Cells != n || !e.Match {
			t.Errorf("%s: old %d new %d match %v, oracle %d", e.Entity, e.Old.Cells, e.New.Cells, e.Match, n)
		}
	}
}

// TestVerifyMismatchReportAndOnly: a job that renames the family does not
// match its own snapshot; every differing cell is classified, the report's
// redo list drives --only, and the HTML page parses and fetches nothing.
func TestVerifyMismatchReportAndOnly(t *testing.T) {
	root := demoSnapshot(t)
	want := oracleCounts(t, root)
	job := identityJob(t, root, "families: {e: x}\n")
	snaps := filepath.Join(root, "testdata", "snapshots", "demo_events")
	dir := t.TempDir()
	page, rep := filepath.Join(dir, "report.html"), filepath.Join(dir, "report.json")
	code, out, errOut := runRekey(t, "verify", job, "--find-worst", "--heaviest", "3", "--sample", "5", "--seed", "9",
		"--snapshot", "demo_events", "--snapshot-root", snaps, "--html", page, "--out", rep)
	if code != exitProblems {
		t.Fatalf("exit %d, want %d: %s\n%s", code, exitProblems, errOut, out)
	}
	if !strings.Contains(out, "MISMATCH") || !strings.Contains(out, "entities checked") {
		t.Errorf("text report:\n%s", out)
	}
	b, err := os.ReadFile(rep)
	if err != nil {
		t.Fatal(err)
	}
	r := decodeReport(t, string(b))
	// The heaviest user by the oracle's count is checked first.
	var top string
	for u, n := range want {
		if n > want[top] || n == want[top] && u < top {
			top = u
		}
	}
	if r.Entities[0].Entity != "user="+top {
		t.Errorf("worst entity %s, want user=%s (%d cells)", r.Entities[0].Entity, top, want[top])
	}
	if r.Summary.Entities < 5 || r.Summary.Entities > 11 || r.Summary.Mismatched != r.Summary.Entities || len(r.Redo) != r.Summary.Entities {
		t.Errorf("summary %+v, %d to redo", r.Summary, len(r.Redo))
	}
	// The identity job keeps every field, so the inverse compares: each
	// new cell reads back to its old cell, but sits in family e, which the
	// job renames to x: all of them are mapped wrong, none missing.
	if r.Method != "inverse" || r.MethodWhy != "the new key keeps every old field" {
		t.Errorf("method %q (%s), want inverse because the new key keeps every old field", r.Method, r.MethodWhy)
	}
	for _, e := range r.Entities {
		n := want[strings.TrimPrefix(e.Entity, "user=")]
		if len(e.Mismatches) != 1 || e.Mismatches["mapped_wrong"] != n {
			t.Errorf("%s: %v, want %d mapped_wrong", e.Entity, e.Mismatches, n)
		}
	}
	if !strings.Contains(out, "method: inverse (the new key keeps every old field)") {
		t.Errorf("text report does not say the method:\n%.500s", out)
	}
	// The forward comparison sees each cell missing and one extra.
	code, out, errOut = runRekey(t, "verify", job, "--only", rep, "--method", "forward", "--snapshot", "demo_events", "--snapshot-root", snaps, "--json")
	if code != exitProblems {
		t.Fatalf("--method forward: exit %d: %s", code, errOut)
	}
	for _, e := range decodeReport(t, out).Entities {
		n := want[strings.TrimPrefix(e.Entity, "user=")]
		if e.Method != "forward" || e.Mismatches["missing_in_new"] != n || e.Mismatches["extra_in_new"] != n {
			t.Errorf("forward %s: %s %v, want %d missing and %d extra", e.Entity, e.Method, e.Mismatches, n, n)
		}
	}

	// --only re-checks exactly the entities to redo.
	code, out, errOut = runRekey(t, "verify", job, "--only", rep, "--snapshot", "demo_events", "--snapshot-root", snaps, "--json")
	if code != exitProblems {
		t.Fatalf("--only: exit %d: %s", code, errOut)
	}
	again := decodeReport(t, out)
	if again.Summary.Entities != r.Summary.Entities {
		t.Errorf("--only checked %d entities, the report had %d to redo", again.Summary.Entities, r.Summary.Entities)
	}
	for _, e := range again.Entities {
		if len(e.ChosenBy) != 1 || e.ChosenBy[0] != "only" {
			t.Errorf("%s chosen by %v", e.Entity, e.ChosenBy)
		}
	}

	checkHTML(t, page, r.Summary.Entities)
	// The page people send around: the verdict with the exit status, what
	// was checked and why, and on a failure the commands that redo and
	// re-check.
	b, err = os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`id="verdict"`, "FAIL (exit 1)", "entities checked: ", "rekey run " + job + " --only " + rep, "rekey verify " + job + " --only " + rep, "cells</text>"} {
		if !bytes.Contains(b, []byte(want)) {
			t.Errorf("the HTML page lacks %q", want)
		}
	}
	checkRendered(t, page)
}

// checkRendered opens the page in headless Chromium, when one is installed
// (Debian: apt-get install chromium), and checks the chart is drawn: the
// screenshot holds the old bars' blue and the mismatched new bars' red.
// REKEY_REQUIRE_BROWSER=1 makes a missing browser a failure.
func checkRendered(t *testing.T, page string) {
	t.Helper()
	var bin string
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		if os.Getenv("REKEY_REQUIRE_BROWSER") == "1" {
			t.Fatal("no headless browser (chromium) to render the report")
		}
		t.Log("no chromium: the report was parsed as HTML but not rendered")
		return
	}
	shot := filepath.Join(t.TempDir(), "report.png")
	// No network: every host resolves to nothing, so a page that fetched
	// anything would render without it.
	cmd := exec.Command(bin, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
		"--host-resolver-rules=MAP * ~NOTFOUND", "--window-size=1000,900", "--screenshot="+shot, "file://"+page)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	f, err := os.Open(shot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	near := func(c color.Color, r0, g0, b0 int) bool {
		r, g, b, _ := c.RGBA()
		d := func(x uint32, y int) int { return int(x>>8) - y }
		return abs(d(r, r0)) < 24 && abs(d(g, g0)) < 24 && abs(d(b, b0)) < 24
	}
	var blue, red int
	bounds := img.Bounds()
	for y := bounds.Min.Y; y < bounds.Max.Y; y++ {
		for x := bounds.Min.X; x < bounds.Max.X; x++ {
			c := img.At(x, y)
			if near(c, 0x5b, 0x8d, 0xef) {
				blue++
			}
			if near(c, 0xb0, 0x00, 0x20) {
				red++
			}
		}
	}
	t.Logf("rendered: %d blue, %d red pixels", blue, red)
	if blue < 1000 || red < 1000 {
		t.Errorf("rendered report: %d blue (old bar) and %d red (mismatch) pixels, want the chart drawn", blue, red)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// checkHTML parses the page as a browser would and checks it is whole and
// self-contained: a chart with two bars per entity, a table row per
// entity, mismatches marked, and no URL to fetch.
func checkHTML(t *testing.T, path string, entities int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("HTML does not parse: %v", err)
	}
	var rects, rows, marks int
	var fetches []string
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			switch n.Data {
			case "rect":
				rects++
			case "tr":
				rows++
			case "script", "link", "img", "iframe":
				fetches = append(fetches, n.Data)
			}
			for _, a := range n.Attr {
				if (a.Key == "src" || a.Key == "href") && a.Val != "" {
					fetches = append(fetches, a.Key+"="+a.Val)
				}
				if a.Key == "class" && a.Val == "bad" {
					marks++
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
	if rects != 2*entities || rows != entities+1 || marks != entities {
		t.Errorf("HTML: %d bars, %d table rows, %d marked; want %d, %d, %d", rects, rows, marks, 2*entities, entities+1, entities)
	}
	if len(fetches) > 0 {
		t.Errorf("HTML fetches %v", fetches)
	}
	if !bytes.HasPrefix(b, []byte("<!DOCTYPE html>")) || !bytes.Contains(b, []byte("</html>")) {
		t.Error("HTML page not whole")
	}
}

func TestVerifyUsageErrors(t *testing.T) {
	root := demoSnapshot(t)
	job := identityJob(t, root, "")
	for name, args := range map[string][]string{
		"no sketch":      {"verify", job, "--snapshot", "demo_events", "--snapshot-root", filepath.Join(root, "testdata", "snapshots", "demo_events")},
		"bad entity":     {"verify", job, "--entity", "usr=u1"},
		"bad ttl":        {"verify", job, "--entity", "user=u1", "--target-ttl", "d"},
		"missing report": {"verify", job, "--only", filepath.Join(t.TempDir(), "none.json")},
		"no cluster":     {"verify", job, "--entity", "user=u00001", "--zk", ""},
		"no such method": {"verify", job, "--entity", "user=u00001", "--method", "sideways"},
	} {
		t.Setenv("REKEY_ZK", "")
		t.Setenv("HBASE_CONF_DIR", "")
		if code, _, errOut := runRekey(t, args...); code != exitUsage {
			t.Errorf("%s: exit %d, want %d (%s)", name, code, exitUsage, errOut)
		}
	}
}

// TestVerifyMethodNeedsAnInverse: a job whose new key drops a field has no
// inverse: verify compares forward and says why, and asking for the
// inverse (flag or job file) is a usage error naming the field.
func TestVerifyMethodNeedsAnInverse(t *testing.T) {
	root := demoSnapshot(t)
	snaps := filepath.Join(root, "testdata", "snapshots", "demo_events")
	dir := t.TempDir()
	write := func(name, extra string) string {
		p := filepath.Join(dir, name)
		src := `source: {root: ` + snaps + `, name: demo_events}
target: {table: events_latest}
source_layout:
  row: [{field: user, type: string}]
  qualifier: [{field: ts, type: int, width: 8}]
target_layout:
  row: [{field: user, type: string}]
  qualifier: [{type: literal, bytes: "latest"}]
entity: [user]
` + extra
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	job := write("latest.yaml", "")
	args := []string{"verify", job, "--entity", "user=u00001", "--snapshot", "demo_events", "--snapshot-root", snaps}
	code, out, errOut := runRekey(t, append(args, "--json")...)
	if code != exitProblems {
		t.Fatalf("default method: exit %d: %s", code, errOut)
	}
	if r := decodeReport(t, out); r.Method != "forward" || r.MethodWhy != "the new key drops field ts" {
		t.Errorf("method %q (%s), want forward because the new key drops field ts", r.Method, r.MethodWhy)
	}
	for _, m := range []string{"inverse", "both"} {
		code, _, errOut = runRekey(t, append(args, "--method", m)...)
		if code != exitUsage || !strings.Contains(errOut, "drops field ts") {
			t.Errorf("--method %s: exit %d, want %d naming the dropped field: %s", m, code, exitUsage, errOut)
		}
	}
	code, _, errOut = runRekey(t, "verify", write("asks.yaml", "verify: {method: inverse}\n"), "--entity", "user=u00001", "--snapshot", "demo_events", "--snapshot-root", snaps)
	if code != exitUsage || !strings.Contains(errOut, "drops field ts") {
		t.Errorf("verify.method inverse in the job: exit %d: %s", code, errOut)
	}
}

// TestVerifyStaging: the demo snapshot's own HFiles, laid out as a staging
// folder (hfiles/REGION/FAMILY/FILE), are the new side of the identity job:
// every entity matches.
func TestVerifyStaging(t *testing.T) {
	root := demoSnapshot(t)
	want := oracleCounts(t, root)
	job := identityJob(t, root, "")
	stage := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "testdata", "snapshots", "demo_events", "data", "default", "events"), filepath.Join(stage, "hfiles")); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runRekey(t, "verify", job, "--all", "--staging", stage, "--json")
	if code != exitOK {
		t.Fatalf("exit %d: %s\n%.2000s", code, errOut, out)
	}
	if r := decodeReport(t, out); r.Summary.Entities != len(want) || r.Summary.Mismatched != 0 {
		t.Fatalf("summary %+v, oracle has %d users", r.Summary, len(want))
	}
	if code, _, _ := runRekey(t, "verify", job, "--all", "--staging", t.TempDir()); code != exitUsage {
		t.Errorf("empty staging folder: exit %d, want %d", code, exitUsage)
	}
}

// TestVerifyUsesTheRunsSketch: `rekey run` leaves its entity sketch in the
// job's state folder, and `rekey verify` with no entity flags checks the
// heaviest and the sample from it; after a sharded run it merges every
// shard's sketch, and chooses the same heaviest entities.
func TestVerifyUsesTheRunsSketch(t *testing.T) {
	root := demoSnapshot(t)
	snaps := filepath.Join(root, "testdata", "snapshots", "demo_events")
	verifyJSON := func(job string, extra ...string) verifyReport {
		t.Helper()
		args := append([]string{"verify", job, "--snapshot", "demo_events", "--snapshot-root", snaps, "--json"}, extra...)
		code, out, errOut := runRekey(t, args...)
		if code != exitOK {
			t.Fatalf("verify: exit %d: %s\n%.2000s", code, errOut, out)
		}
		return decodeReport(t, out)
	}
	heaviest := func(r verifyReport) []string {
		var out []string
		for _, e := range r.Entities {
			for _, c := range e.ChosenBy {
				if c == "heaviest-cells" {
					out = append(out, e.Entity)
				}
			}
		}
		return out
	}

	whole := identityJob(t, root, "")
	if code, out, errOut := runRekey(t, "verify", whole, "--snapshot", "demo_events", "--snapshot-root", snaps); code != exitUsage || !strings.Contains(errOut, "run the job first") {
		t.Fatalf("before any run: exit %d: %s %s", code, errOut, out)
	}
	if code, _, errOut := runRekey(t, "run", whole, "--sink", "dry-run", "--progress", "none"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, errOut)
	}
	r := verifyJSON(whole, "--heaviest", "5", "--sample", "20")
	if r.Summary.Entities < 20 || r.Summary.Entities > 30 || len(heaviest(r)) != 5 {
		t.Errorf("from the run's sketch: %d entities, heaviest %v", r.Summary.Entities, heaviest(r))
	}

	sharded := identityJob(t, root, "")
	for _, sh := range []string{"0/2", "1/2"} {
		if code, _, errOut := runRekey(t, "run", sharded, "--sink", "dry-run", "--shard", sh, "--progress", "none"); code != 0 {
			t.Fatalf("run shard %s: exit %d: %s", sh, code, errOut)
		}
	}
	rs := verifyJSON(sharded, "--heaviest", "5", "--sample", "20")
	a, b := heaviest(r), heaviest(rs)
	sort.Strings(a)
	sort.Strings(b)
	if strings.Join(a, ",") != strings.Join(b, ",") {
		t.Errorf("heaviest from the shards' merged sketches %v, from one run's %v", b, a)
	}
}

// TestVerifySourceSnapshot: --source-snapshot replaces the job's
// source.name, as rekey run's does (a nightly catch-up verifies that
// night's snapshot with one job file): a job naming a snapshot that does
// not exist verifies against the one the flag names, and a flag naming
// one that does not exist is refused (exit 2) naming it.
func TestVerifySourceSnapshot(t *testing.T) {
	root := demoSnapshot(t)
	job := identityJob(t, root, "")
	b, err := os.ReadFile(job)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(job, bytes.Replace(b, []byte("name: demo_events"), []byte("name: yesterday"), 1), 0o644); err != nil {
		t.Fatal(err)
	}
	snaps := filepath.Join(root, "testdata", "snapshots", "demo_events")
	if code, _, errOut := runRekey(t, "verify", job, "--all", "--snapshot", "demo_events", "--snapshot-root", snaps); code != exitUsage || !strings.Contains(errOut, "yesterday") {
		t.Fatalf("the job's own missing snapshot: exit %d, want %d naming it (%s)", code, exitUsage, errOut)
	}
	code, out, errOut := runRekey(t, "verify", job, "--source-snapshot", "demo_events", "--all", "--snapshot", "demo_events", "--snapshot-root", snaps, "--json")
	if code != exitOK {
		t.Fatalf("--source-snapshot demo_events: exit %d: %s\n%.2000s", code, errOut, out)
	}
	if r := decodeReport(t, out); r.Summary.Entities == 0 || r.Summary.Mismatched != 0 {
		t.Fatalf("--source-snapshot demo_events: %+v", r.Summary)
	}
	if code, _, errOut := runRekey(t, "verify", job, "--source-snapshot", "nope", "--all", "--snapshot", "demo_events", "--snapshot-root", snaps); code != exitUsage || !strings.Contains(errOut, "nope") {
		t.Fatalf("--source-snapshot nope: exit %d, want %d naming it (%s)", code, exitUsage, errOut)
	}
}
