package transform

import (
	"slices"
	"sort"
)

// DroppedFields names what of the old key the new key cannot give back, in
// old-key order: fields it uses nowhere, or only through a salt or a time
// bucket (a hash or the hour, not the value); parts of the old key read
// without a field (named by their component, e.g. "source_layout.row[0]
// (salt)"); and $qualifier when the old qualifier is not parsed and the new
// qualifier neither copies nor holds it. Old cells that differ only there
// become the same new cell, and the later write hides the earlier one.
func (p *Program) DroppedFields() []string {
	return slices.Clone(p.inv.lost)
}

// MergedFamilies names the new families that more than one old family is
// mapped into: cells of those old families with the same key collide.
func (p *Program) MergedFamilies() []string {
	n := map[string]int{}
	for _, f := range p.families {
		n[string(f[1])]++
	}
	var out []string
	for f, k := range n {
		if k > 1 {
			out = append(out, f)
		}
	}
	sort.Strings(out)
	return out
}

// MayCollide reports whether two different old cells can map to the same
// new cell (row, family, qualifier, timestamp): a field of the old key is
// dropped, or two old families become one. When it is false the mapping is
// one to one by construction and a run need not look for collisions.
func (p *Program) MayCollide() bool {
	return len(p.DroppedFields()) > 0 || len(p.MergedFamilies()) > 0
}
