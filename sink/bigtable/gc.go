package bigtable

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"

	"cloud.google.com/go/bigtable"

	"github.com/rekeyhq/rekey/sink"
)

// keep is what a target family must keep of the cells a run writes into
// it: every version up to versions, of any age up to ttl (0: any age).
type keep struct {
	versions int
	ttl      time.Duration
}

// family is one target family with the source families written into it.
type family struct {
	name    string
	sources []sink.Family
	// writes is what the run writes into it (the scan's versions, the
	// sources' TTLs); kept is what HBase keeps (VERSIONS, TTL), the GC
	// rule a created table gets.
	writes, kept keep
}

// families groups the run's source families by target family, sorted by
// name.
func families(fs []sink.Family) []*family {
	by := map[string]*family{}
	var out []*family
	for _, f := range fs {
		tf := by[f.Target]
		if tf == nil {
			tf = &family{name: f.Target}
			by[f.Target] = tf
			out = append(out, tf)
		}
		tf.sources = append(tf.sources, f)
		kv := f.MaxVersions
		if v, err := strconv.Atoi(f.Attributes["VERSIONS"]); err == nil && v > 0 {
			kv = v
		}
		kt := f.TTL
		if s, ok := f.Attributes["TTL"]; ok {
			kt = parseTTL(s, kt)
		}
		tf.writes = union(tf.writes, keep{versions: f.MaxVersions, ttl: f.TTL}, len(tf.sources) == 1)
		tf.kept = union(tf.kept, keep{versions: kv, ttl: kt}, len(tf.sources) == 1)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].name < out[b].name })
	return out
}

// union is what keeps both a and b: the most versions, the longest age
// (none when either has none).
func union(a, b keep, first bool) keep {
	if first {
		return b
	}
	out := keep{versions: max(a.versions, b.versions), ttl: max(a.ttl, b.ttl)}
	if a.ttl == 0 || b.ttl == 0 {
		out.ttl = 0
	}
	return out
}

// parseTTL reads a TTL attribute as HBase writes it ("86400", "FOREVER",
// "86400 SECONDS (1 DAY)"); def when it cannot.
func parseTTL(s string, def time.Duration) time.Duration {
	f := strings.Fields(s)
	if len(f) == 0 {
		return def
	}
	if strings.EqualFold(f[0], "FOREVER") {
		return 0
	}
	n, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil || n <= 0 {
		return def
	}
	if n >= math.MaxInt32 {
		return 0 // HBase's FOREVER is Integer.MAX_VALUE seconds
	}
	return time.Duration(n) * time.Second
}

// policy is the GC rule a created family gets for what HBase kept: a
// cell goes when it is past the versions kept or older than the TTL,
// either one, as in HBase: the union of a max-versions and a max-age
// rule.
func policy(k keep) bigtable.GCPolicy {
	v := bigtable.MaxVersionsPolicy(min(max(k.versions, 1), math.MaxInt32))
	if k.ttl == 0 {
		return v
	}
	return bigtable.UnionPolicy(v, bigtable.MaxAgePolicy(k.ttl))
}

// drops says why GC rule p would remove cells a run writes under w, or
// "" when it keeps them all. A max-versions rule drops when it keeps
// fewer versions than are written; a max-age rule when it is shorter
// than the written cells' TTL (or they have none). A union drops what
// any of its rules drops; an intersection only what all of them drop.
func drops(p bigtable.GCPolicy, w keep) string {
	switch p := p.(type) {
	case nil:
		return ""
	case bigtable.MaxVersionsGCPolicy:
		if int(p) < w.versions {
			return fmt.Sprintf("it keeps %d versions of a column, and the job writes up to %d", int(p), w.versions)
		}
	case bigtable.MaxAgeGCPolicy:
		switch {
		case w.ttl == 0:
			return fmt.Sprintf("it removes cells older than %v, and the job writes cells of any age (the source family has no TTL)", time.Duration(p))
		case time.Duration(p) < w.ttl:
			return fmt.Sprintf("it removes cells older than %v, and the job writes cells up to %v old (the source family's TTL)", time.Duration(p), w.ttl)
		}
	case bigtable.UnionGCPolicy:
		for _, c := range p.Children {
			if why := drops(c, w); why != "" {
				return why
			}
		}
	case bigtable.IntersectionGCPolicy:
		var whys []string
		for _, c := range p.Children {
			why := drops(c, w)
			if why == "" {
				return ""
			}
			whys = append(whys, why)
		}
		return strings.Join(whys, ", and ")
	}
	return ""
}

// unmapped names what of a source family's settings Bigtable has no
// place for, each with its value, leaving out values that change
// nothing (the defaults).
func unmapped(f sink.Family) []string {
	var out []string
	for _, a := range []struct{ key, none string }{
		{"COMPRESSION", "NONE"}, {"DATA_BLOCK_ENCODING", "NONE"}, {"BLOOMFILTER", "NONE"},
		{"IN_MEMORY", "false"}, {"BLOCKSIZE", ""}, {"BLOCKCACHE", ""}, {"MOB_THRESHOLD", ""}, {"IS_MOB", "false"},
	} {
		if v, ok := f.Attributes[a.key]; ok && v != "" && !strings.EqualFold(v, a.none) {
			out = append(out, a.key+" "+v)
		}
	}
	if f.MinVersions > 0 {
		out = append(out, fmt.Sprintf("MIN_VERSIONS %d (expired cells are removed down to none)", f.MinVersions))
	}
	if f.KeepDeletedCells {
		out = append(out, "KEEP_DELETED_CELLS (Bigtable keeps no deleted cells)")
	}
	return out
}
