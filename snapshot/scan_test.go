package snapshot

import (
	"math"
	"testing"
)

func TestReadsFile(t *testing.T) {
	const now = 1_000_000
	ttl := &familyRules{tr: newTimeRange(0, 0), oldestUnexpired: now - 1000}
	window := &familyRules{tr: newTimeRange(500, 600), oldestUnexpired: math.MinInt64}
	kept := &familyRules{tr: newTimeRange(0, 0), minVersions: 1, oldestUnexpired: now - 1000}
	span := func(lo, hi int64) fileMeta { return fileMeta{HasTimeRange: true, TimeRangeMin: lo, TimeRangeMax: hi} }
	for _, tc := range []struct {
		name string
		r    *familyRules
		m    fileMeta
		want bool
	}{
		{"a file without a time range is read", ttl, fileMeta{}, true},
		{"a file with unexpired cells is read", ttl, span(0, now), true},
		{"a wholly expired file is skipped", ttl, span(0, now-1001), false},
		{"the newest cell exactly at the cutoff keeps the file", ttl, span(0, now-1000), true},
		{"MIN_VERSIONS keeps expired files", kept, span(0, now-1001), true},
		{"a file before the time range is skipped", window, span(100, 499), false},
		{"a file reaching into the range is read", window, span(100, 500), true},
		{"a file from the range's end on is skipped", window, span(600, 700), false},
		{"a file that claims all time is read", window, span(0, math.MaxInt64), true},
	} {
		if got := tc.r.readsFile(tc.m); got != tc.want {
			t.Errorf("%s: readsFile = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestSortStoreFiles(t *testing.T) {
	file := func(name string, seq, size int64, bulkTS int64) storeFileInfo {
		m := fileMeta{}
		if bulkTS != 0 {
			m.HasBulkLoadTS, m.BulkLoadTS = true, bulkTS
		}
		return storeFileInfo{f: &resolvedFile{sortName: name, size: size}, seqID: seq, meta: m}
	}
	// Each file sorts before the next, by the rule its name gives.
	want := []storeFileInfo{
		file("lowest sequence id", 1, 10, 0),
		file("larger file first", 2, 20, 0),
		file("smaller file", 2, 10, 5),
		file("no bulk load time sorts last", 2, 10, 0),
		file("path name a", 3, 10, 0),
		file("path name b", 3, 10, 0),
	}
	got := []storeFileInfo{want[5], want[3], want[0], want[4], want[2], want[1]}
	sortStoreFiles(got)
	for i := range want {
		if got[i].f.sortName != want[i].f.sortName {
			t.Errorf("position %d: %q, want %q", i, got[i].f.sortName, want[i].f.sortName)
		}
	}
}
