package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
	"github.com/rekeyhq/rekey/hfile"
)

// TestRunHFilesOffline runs the demo job with the hfiles sink and no
// cluster: every mapped cell lands, once and in HBase's order, in staged
// HFiles, and the summary says how to load them.
func TestRunHFilesOffline(t *testing.T) {
	job := demoJob(t)
	out := filepath.Join(filepath.Dir(job), "out")
	f, err := os.OpenFile(job, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("sink:\n  type: hfiles\n  offline: true\n  staging: " + out + "\n")
	f.Close()
	code, stdout, errOut := runRekey(t, "run", job, "--progress", "none")
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, errOut)
	}
	if !strings.Contains(errOut, "BulkLoadHFilesTool") {
		t.Errorf("no load command printed:\n%s", errOut)
	}
	var n int
	var files []string
	filepath.WalkDir(filepath.Join(out, "hfiles"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, p)
		}
		return err
	})
	if len(files) == 0 {
		t.Fatal("no HFiles staged")
	}
	for _, p := range files {
		rd, err := hfile.OpenFile(p)
		if err != nil {
			t.Fatal(err)
		}
		it := rd.NewIterator()
		var prev cell.Cell
		for ok, first := it.First(), true; ok; ok, first = it.Next(), false {
			c := it.Cell()
			if !first && cell.Compare(&prev, c) >= 0 {
				t.Fatalf("%s: %s not after %s", p, c, &prev)
			}
			prev = c.Clone()
			n++
		}
		if err := it.Err(); err != nil {
			t.Fatal(err)
		}
		rd.Close()
	}
	// testdata/snapshots/demo_events.cells, the oracle's dump of the
	// snapshot, has 31413 cells; the demo layout keeps every one.
	if n != 31413 {
		t.Errorf("%d cells in the staged HFiles, want 31413", n)
	}
}
