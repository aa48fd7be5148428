package testenv

import (
	"bytes"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// TestDumpTagsColumn: a six-column line (every dump written before the
// tags column) still parses, with no tags; a seven-column line carries
// the tags, an empty seventh column none; AppendDumpTags writes what
// ParseDumpLine reads, and without tags its first six columns are
// cell.AppendDump's line.
func TestDumpTagsColumn(t *testing.T) {
	old := "7231\tf\t71\t1000\tPut\t76"
	c, err := ParseDumpLine(old)
	if err != nil || c.Tags != nil || string(c.Row) != "r1" || string(c.Value) != "v" {
		t.Fatalf("six columns: %+v, %v", c, err)
	}
	if got := string(AppendDumpTags(nil, &c)); got != old+"\t\n" {
		t.Errorf("no tags: %q, want an empty seventh column", got)
	}
	tagged := "7231\tf\t71\t1000\tPut\t76\t000308000a"
	c, err = ParseDumpLine(tagged)
	if err != nil || !bytes.Equal(c.Tags, []byte{0, 3, 8, 0, 10}) {
		t.Fatalf("seven columns: %+v, %v", c, err)
	}
	if got := string(AppendDumpTags(nil, &c)); got != tagged+"\n" {
		t.Errorf("round trip: %q, want %q", got, tagged+"\n")
	}
	if got := string(cell.AppendDump(nil, &c)); got != old+"\n" {
		t.Errorf("AppendDump of a tagged cell: %q, want the six columns %q", got, old)
	}
	c, err = ParseDumpLine(old + "\t")
	if err != nil || c.Tags != nil {
		t.Errorf("empty tags column: %+v, %v; want no tags", c, err)
	}
	for _, bad := range []string{"7231\tf\t71\t1000\tPut", old + "\t00\textra", old + "\tzz"} {
		if _, err := ParseDumpLine(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}
