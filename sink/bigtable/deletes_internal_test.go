package bigtable

import (
	"math"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/cell"
)

// TestMapMarker: each HBase marker type becomes the Bigtable range that
// holds exactly the cells it masks, at ms×1000 (a version delete its one
// millisecond, a column or family delete everything up to and including
// its millisecond, a family marker on every column); a marker past
// Bigtable's largest timestamp, where cells of different HBase
// timestamps share one Bigtable timestamp, is refused unless it covers
// them all (LATEST_TIMESTAMP), and so is a negative one.
func TestMapMarker(t *testing.T) {
	const ts = 1767225600123
	last := overflowMillis - 1
	for _, tc := range []struct {
		name       string
		typ        cell.Type
		ms         int64
		start, end int64
		wide       bool
		refused    string
	}{
		{"version", cell.Delete, ts, ts * 1000, (ts + 1) * 1000, false, ""},
		{"column", cell.DeleteColumn, ts, 0, (ts + 1) * 1000, false, ""},
		{"family", cell.DeleteFamily, ts, 0, (ts + 1) * 1000, true, ""},
		{"family version", cell.DeleteFamilyVersion, ts, ts * 1000, (ts + 1) * 1000, true, ""},
		{"column at the epoch", cell.DeleteColumn, 0, 0, 1000, false, ""},
		{"column at the last millisecond below the largest", cell.DeleteColumn, last, 0, int64(MaxTimestamp), false, ""},
		{"version at the last millisecond below the largest", cell.Delete, last, last * 1000, int64(MaxTimestamp), false, ""},
		{"column at LATEST_TIMESTAMP: everything", cell.DeleteColumn, math.MaxInt64, 0, 0, false, ""},
		{"family at LATEST_TIMESTAMP: everything", cell.DeleteFamily, math.MaxInt64, 0, 0, true, ""},
		{"column past the largest", cell.DeleteColumn, overflowMillis, 0, 0, false, "some above it and some not"},
		{"family past the largest", cell.DeleteFamily, overflowMillis + 5, 0, 0, false, "past Bigtable's largest"},
		{"version past the largest", cell.Delete, overflowMillis, 0, 0, false, "cannot be told apart"},
		{"family version at LATEST_TIMESTAMP", cell.DeleteFamilyVersion, math.MaxInt64, 0, 0, false, "cannot be told apart"},
		{"negative", cell.DeleteColumn, -5, 0, 0, false, "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := cell.Cell{Row: []byte("r"), Family: []byte("f"), Qualifier: []byte("q"), Timestamp: tc.ms, Type: tc.typ}
			if tc.typ == cell.DeleteFamily || tc.typ == cell.DeleteFamilyVersion {
				c.Qualifier = nil
			}
			d, why := mapMarker(&c)
			if tc.refused != "" {
				if !strings.Contains(why, tc.refused) {
					t.Errorf("refusal %q, want it to say %q", why, tc.refused)
				}
				return
			}
			if why != "" || d.Start != tc.start || d.End != tc.end || d.Wide != tc.wide || string(d.Row) != "r" || d.Family != "f" || (!tc.wide && string(d.Qualifier) != "q") {
				t.Errorf("got %+v (%q), want [%d, %d) wide %v", d, why, tc.start, tc.end, tc.wide)
			}
		})
	}
}
