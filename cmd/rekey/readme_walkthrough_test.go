package main

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/internal/testenv"
)

// walkthroughCommands are the rekey commands of the README's "A
// walkthrough on a real cluster", in order, as a reader copies them: the
// inline code spans that start with "rekey ", whitespace folded (a span
// may break across lines).
func walkthroughCommands(t *testing.T) [][]string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	start := strings.Index(s, "## A walkthrough on a real cluster")
	if start < 0 {
		t.Fatal(`README.md has no "## A walkthrough on a real cluster" section`)
	}
	s = s[start+3:]
	if end := strings.Index(s, "\n## "); end >= 0 {
		s = s[:end]
	}
	var out [][]string
	for _, m := range regexp.MustCompile("`(rekey [^`]+)`").FindAllStringSubmatch(s, -1) {
		out = append(out, strings.Fields(m[1]))
	}
	return out
}

// TestReadmeWalkthrough follows the README's walkthrough on the mini
// cluster as a newcomer would: the demo's cells in a live table,
// snapshotted by HBase; the README's job file pointed at that snapshot;
// the cluster named by $REKEY_ZK; then every rekey command the walkthrough
// shows, as written (job.yaml is the job, DIR the staging folder the run
// names), each of which must exit 0. The loaded table must hold the
// demo's rule applied to the oracle's dump of the snapshot, written out
// here: row = the 6-byte user, then the day's start (8-byte big-endian
// millis); qualifier = the 4-byte millis into the day; family, timestamp
// and value kept.
func TestReadmeWalkthrough(t *testing.T) {
	st := testenv.Require(t)
	cmds := walkthroughCommands(t)
	var verbs []string
	for _, c := range cmds {
		verbs = append(verbs, c[1])
	}
	if got := strings.Join(verbs, " "); got != "plan run verify load verify" {
		t.Fatalf("the walkthrough's commands are %q; this test follows plan run verify load verify: update one or the other", got)
	}

	stamp := time.Now().UnixNano()
	src, snap, dst := fmt.Sprintf("walk_src_%d", stamp), fmt.Sprintf("walk_src_%d_snap", stamp), fmt.Sprintf("walk_dst_%d", stamp)
	testenv.DropAfter(t, src, snap)
	testenv.DropAfter(t, dst, "")
	demo, err := os.ReadFile("../../testdata/snapshots/demo_events.cells")
	if err != nil {
		t.Fatal(err)
	}
	cells, err := testenv.ParseDump(demo)
	if err != nil {
		t.Fatal(err)
	}
	source := testenv.SeedCells(t, st, testenv.SourceTable{Table: src, Snapshot: snap, Families: []string{"e"}, SplitKeys: []string{"u00100", "u00200"}}, cells)

	dir := t.TempDir()
	t.Setenv("REKEY_ZK", st.ZKQuorum)
	demoJob, err := os.ReadFile("../../configs/demo.yaml")
	if err != nil {
		t.Fatal(err)
	}
	y := strings.Replace(string(demoJob), "root: ../testdata/snapshots/demo_events", "root: "+st.RootDir, 1)
	y = strings.Replace(y, "name: demo_events", "name: "+snap, 1)
	y = strings.Replace(y, "table: events_by_day", "table: "+dst, 1)
	y = strings.Replace(y, "file: ../bin/demo-rejects.tsv", "file: rejects.tsv", 1)
	jobPath, report := filepath.Join(dir, "job.yaml"), filepath.Join(dir, "report.html")
	if err := os.WriteFile(jobPath, []byte(y), 0o644); err != nil {
		t.Fatal(err)
	}
	// The reader's files, in the reader's folder.
	files := map[string]string{"job.yaml": jobPath, "DIR": filepath.Join(dir, "job.rekey", "staging"), "report.html": report}
	for _, c := range cmds {
		args := make([]string, 0, len(c)-1)
		for _, a := range c[1:] {
			if f, ok := files[a]; ok {
				a = f
			}
			args = append(args, a)
		}
		code, out, errOut := runRekey(t, args...)
		if code != exitOK {
			t.Fatalf("%s: exit %d\n%s\n%.3000s", strings.Join(c, " "), code, errOut, out)
		}
		t.Logf("%s: exit 0", strings.Join(c, " "))
	}
	if fi, err := os.Stat(report); err != nil || fi.Size() == 0 {
		t.Errorf("the walkthrough's verify wrote no report.html: %v", err)
	}

	want := make([]cell.Cell, 0, len(source))
	for _, c := range source {
		if len(c.Row) != 6 || len(c.Qualifier) != 8 {
			t.Fatalf("the demo's cell %q/%x does not fit the demo job's old layout", c.Row, c.Qualifier)
		}
		ts := int64(binary.BigEndian.Uint64(c.Qualifier))
		const day = 24 * 60 * 60 * 1000
		row := binary.BigEndian.AppendUint64(append([]byte{}, c.Row...), uint64(ts-ts%day))
		q := binary.BigEndian.AppendUint32(nil, uint32(ts%day))
		w := c
		w.Row, w.Qualifier = row, q
		want = append(want, w)
	}
	testenv.SameCells(t, "the loaded table", testenv.DumpTable(t, dst, false), want)
}
