package transform

import "sort"

// DroppedFields names the fields the old key holds that the new key uses
// nowhere (directly, or through a time bucket or offset): old cells that
// differ only in them become the same new cell, and the later write hides
// the earlier one.
func (p *Program) DroppedFields() []string {
	used := map[int]bool{}
	for _, l := range []*Layout{p.dstRow, p.dstQual} {
		if l == nil {
			continue
		}
		for i := range l.comps {
			c := &l.comps[i]
			if c.field >= 0 {
				used[c.field] = true
			}
			for _, f := range c.of {
				used[f] = true
			}
		}
	}
	if used[idxRow] || used[idxQualifier] {
		// The whole old row or qualifier is carried over: nothing is lost.
		return nil
	}
	var out []string
	seen := map[int]bool{}
	for _, l := range []*Layout{p.srcRow, p.srcQual} {
		if l == nil || l == p.srcQual && p.dstQual == nil {
			continue
		}
		for i := range l.comps {
			c := &l.comps[i]
			f := c.field
			if c.typ == Offset {
				f = c.of[0]
			}
			if f >= 0 && c.typ != Salt && c.typ != TimeBucket && !used[f] && !seen[f] {
				seen[f] = true
				out = append(out, p.fields[f].name)
			}
		}
	}
	return out
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
