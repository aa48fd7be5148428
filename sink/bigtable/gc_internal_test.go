package bigtable

import (
	"strings"
	"testing"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/rekeyhq/rekey/sink"
)

// TestDrops: which GC rules would remove cells a run writes. A
// max-versions rule drops when it keeps fewer versions than the run
// writes, a max-age rule when it is shorter than the written cells' TTL
// (any age when the source has none); a union drops what any of its
// rules drops, an intersection what all of them drop.
func TestDrops(t *testing.T) {
	day := 24 * time.Hour
	for _, tc := range []struct {
		name  string
		p     bigtable.GCPolicy
		w     keep
		drops bool
	}{
		{"no rule", bigtable.NoGcPolicy(), keep{versions: 3}, false},
		{"as many versions", bigtable.MaxVersionsPolicy(3), keep{versions: 3}, false},
		{"fewer versions", bigtable.MaxVersionsPolicy(1), keep{versions: 3}, true},
		{"max age, source without TTL", bigtable.MaxAgePolicy(30 * day), keep{versions: 1}, true},
		{"max age as long as the TTL", bigtable.MaxAgePolicy(7 * day), keep{versions: 1, ttl: 7 * day}, false},
		{"max age shorter than the TTL", bigtable.MaxAgePolicy(day), keep{versions: 1, ttl: 7 * day}, true},
		{"union, one rule drops", bigtable.UnionPolicy(bigtable.MaxVersionsPolicy(5), bigtable.MaxAgePolicy(day)), keep{versions: 3}, true},
		{"union, none drops", bigtable.UnionPolicy(bigtable.MaxVersionsPolicy(5), bigtable.MaxAgePolicy(7*day)), keep{versions: 3, ttl: 7 * day}, false},
		{"intersection, one keeps", bigtable.IntersectionPolicy(bigtable.MaxVersionsPolicy(5), bigtable.MaxAgePolicy(day)), keep{versions: 3}, false},
		{"intersection, both drop", bigtable.IntersectionPolicy(bigtable.MaxVersionsPolicy(1), bigtable.MaxAgePolicy(day)), keep{versions: 3}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			why := drops(tc.p, tc.w)
			if (why != "") != tc.drops {
				t.Errorf("drops(%s, %+v) = %q, want dropping %v", tc.p, tc.w, why, tc.drops)
			}
		})
	}
}

// TestFamiliesMerged: source families written into one target family
// make it keep what either keeps (the most versions, no max age when
// either has no TTL); the created rule is what HBase kept (VERSIONS, TTL
// attributes), the check is against what the scan reads.
func TestFamiliesMerged(t *testing.T) {
	fs := families([]sink.Family{
		{Target: "d", Source: "a", MaxVersions: 2, TTL: time.Hour, Attributes: map[string]string{"VERSIONS": "5", "TTL": "3600 SECONDS (1 HOUR)"}},
		{Target: "d", Source: "b", MaxVersions: 3, TTL: 2 * time.Hour, Attributes: map[string]string{"VERSIONS": "3", "TTL": "7200"}},
		{Target: "e", Source: "c", MaxVersions: 1, Attributes: map[string]string{"TTL": "FOREVER"}},
	})
	if len(fs) != 2 || fs[0].name != "d" || fs[1].name != "e" {
		t.Fatalf("families: %+v", fs)
	}
	if got := fs[0].writes; got != (keep{versions: 3, ttl: 2 * time.Hour}) {
		t.Errorf("d writes %+v", got)
	}
	if got := fs[0].kept; got != (keep{versions: 5, ttl: 2 * time.Hour}) {
		t.Errorf("d keeps %+v", got)
	}
	if got := policy(fs[0].kept).String(); got != "(versions() > 5 || age() > 2h)" {
		t.Errorf("d's rule %s", got)
	}
	if got := policy(fs[1].kept).String(); got != "versions() > 1" {
		t.Errorf("e's rule %s", got)
	}
}

// TestUnmapped names settings that do not map, and not defaults.
func TestUnmapped(t *testing.T) {
	got := strings.Join(unmapped(sink.Family{MinVersions: 1, KeepDeletedCells: true,
		Attributes: map[string]string{"COMPRESSION": "SNAPPY", "DATA_BLOCK_ENCODING": "FAST_DIFF", "BLOOMFILTER": "ROW", "IN_MEMORY": "false"}}), "; ")
	for _, w := range []string{"COMPRESSION SNAPPY", "DATA_BLOCK_ENCODING FAST_DIFF", "BLOOMFILTER ROW", "MIN_VERSIONS 1", "KEEP_DELETED_CELLS"} {
		if !strings.Contains(got, w) {
			t.Errorf("unmapped: %q lacks %q", got, w)
		}
	}
	if strings.Contains(got, "IN_MEMORY") {
		t.Errorf("unmapped names a default: %q", got)
	}
}
