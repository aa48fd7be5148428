package hfiles

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"regexp"
	"sort"
)

// Region is one target region of the region map the cells are
// partitioned by.
type Region struct {
	// Dir names the region's folder under STAGING/hfiles: the encoded
	// region name for a live table, "rNNNNN" for an offline region map.
	Dir string `json:"dir"`
	// Start and End bound the region's rows, [Start, End); an empty End is
	// the end of the table.
	Start []byte `json:"start"`
	End   []byte `json:"end"`
}

// Contains reports whether row lies in [Start, End).
func (r *Region) Contains(row []byte) bool {
	return bytes.Compare(row, r.Start) >= 0 && (len(r.End) == 0 || bytes.Compare(row, r.End) < 0)
}

// RegionMap is the target table and its regions as they were when
// staging began: where each cell's row is looked up for the region, so
// the partition, it is staged to. It is saved in the staging folder as
// plan.json: every run of a staging folder partitions by the same map,
// even if the table splits meanwhile (the load re-splits files for
// regions that changed).
type RegionMap struct {
	Table   string   `json:"table"`
	Regions []Region `json:"regions"`
}

// RegionMapFromSplitKeys builds an offline region map: n split keys make
// n+1 regions. The keys are sorted and must be distinct and non-empty.
func RegionMapFromSplitKeys(table string, keys [][]byte) (*RegionMap, error) {
	ks := make([][]byte, len(keys))
	copy(ks, keys)
	sort.Slice(ks, func(i, j int) bool { return bytes.Compare(ks[i], ks[j]) < 0 })
	p := &RegionMap{Table: table}
	var start []byte
	for i, k := range ks {
		if len(k) == 0 {
			return nil, fmt.Errorf("hfiles: plan for %s: split key %d is empty", table, i)
		}
		if i > 0 && bytes.Equal(k, ks[i-1]) {
			return nil, fmt.Errorf("hfiles: plan for %s: split key %q given twice", table, k)
		}
		p.Regions = append(p.Regions, Region{Start: start, End: bytes.Clone(k)})
		start = bytes.Clone(k)
	}
	p.Regions = append(p.Regions, Region{Start: start})
	for i := range p.Regions {
		p.Regions[i].Dir = fmt.Sprintf("r%05d", i)
	}
	return p, nil
}

// RegionMapFromTable reads the live table's regions from hbase:meta.
func RegionMapFromTable(ctx context.Context, c Cluster, table string) (*RegionMap, error) {
	rs, err := c.Regions(ctx, table)
	if err != nil {
		return nil, fmt.Errorf("hfiles: regions of %s: %w", table, err)
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("hfiles: table %s has no regions in hbase:meta", table)
	}
	p := &RegionMap{Table: table}
	for i, r := range rs {
		p.Regions = append(p.Regions, Region{Dir: regionDir(r.Name, i), Start: bytes.Clone(r.StartKey), End: bytes.Clone(r.EndKey)})
	}
	return p, p.check()
}

// encodedName matches the ".<32 hex>." suffix of a new-format region name.
var encodedName = regexp.MustCompile(`\.([0-9a-f]{32})\.$`)

// regionDir is the encoded name of a region (what HBase names its folder),
// or a positional name for an old-format region name without one.
func regionDir(name []byte, i int) string {
	if m := encodedName.FindSubmatch(name); m != nil {
		return string(m[1])
	}
	return fmt.Sprintf("r%05d", i)
}

// check verifies the regions tile the key space: the first starts at "",
// each starts where the previous ended, the last ends at "".
func (p *RegionMap) check() error {
	if len(p.Regions) == 0 {
		return fmt.Errorf("hfiles: plan for %s has no regions", p.Table)
	}
	if len(p.Regions[0].Start) != 0 {
		return fmt.Errorf("hfiles: plan for %s: first region starts at %q, not at the beginning of the table", p.Table, p.Regions[0].Start)
	}
	for i := 1; i < len(p.Regions); i++ {
		if !bytes.Equal(p.Regions[i].Start, p.Regions[i-1].End) {
			return fmt.Errorf("hfiles: plan for %s: region %d starts at %q but region %d ends at %q (a hole or overlap; is a split under way?)",
				p.Table, i, p.Regions[i].Start, i-1, p.Regions[i-1].End)
		}
	}
	if last := p.Regions[len(p.Regions)-1]; len(last.End) != 0 {
		return fmt.Errorf("hfiles: plan for %s: last region ends at %q, not at the end of the table", p.Table, last.End)
	}
	return nil
}

// locate returns the index of the region holding row.
func (p *RegionMap) locate(row []byte) int {
	// The first region whose End is past row; regions tile the key space.
	return sort.Search(len(p.Regions)-1, func(i int) bool {
		return bytes.Compare(row, p.Regions[i].End) < 0
	})
}

// String describes a region for messages.
func (r *Region) String() string {
	return fmt.Sprintf("%s [%s, %s)", r.Dir, hexOrDash(r.Start), hexOrDash(r.End))
}

func hexOrDash(b []byte) string {
	if len(b) == 0 {
		return "-"
	}
	return hex.EncodeToString(b)
}
