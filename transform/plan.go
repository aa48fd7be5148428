package transform

import (
	"bytes"
	"fmt"
	"hash/maphash"
	"sort"
	"strings"

	"github.com/rekeyhq/rekey/cell"
)

// HBase limits the plan checks against, at their defaults.
const (
	// DefaultMaxRowSize is hbase.table.max.rowsize: a Get or a Scan without
	// batching fails on a row larger than this.
	DefaultMaxRowSize = 1 << 30
	// DefaultMaxCellSize is hbase.client.keyvalue.maxsize (and, since HBase
	// 2.x, hbase.server.keyvalue.maxsize): a cell larger than this is refused.
	DefaultMaxCellSize = 10 << 20
)

// PlanOptions tune a Planner; zero values take the defaults.
type PlanOptions struct {
	MaxRowSize  int64 // default DefaultMaxRowSize
	MaxCellSize int64 // default DefaultMaxCellSize
	Examples    int   // old/new key pairs to keep, default 8
	Top         int   // heaviest entities to report, default 10
	Regions     int   // regions to suggest split keys for, default 4
	// MaxTracked bounds the rows, entities and keys the planner remembers
	// (default 4,000,000 each), so planning a whole large snapshot cannot
	// exhaust memory; beyond it the figures cover what was tracked.
	MaxTracked int
}

// Planner gathers what a sample of old cells says about a job: entities,
// new row sizes, collisions and bad keys. It does no I/O; the caller feeds it
// cells (rekey plan reads them from the snapshot).
type Planner struct {
	p    *Program
	r    *Rekey
	back *Rekey // reads new keys back, to check they round-trip
	opts PlanOptions

	cells, rejected int64
	rejects         []string
	entities        map[string]*EntityStat
	rows            map[string]*rowStat
	newKeys         map[uint64]uint64 // new cell key hash -> old cell key hash, to find collisions
	seed            maphash.Seed
	key             []byte
	truncated       bool
	collisions      []string
	examples        []Example
	lastExampleRow  []byte
	exampleEntity   []byte
	perEntity       int
	unreadable      []string
	backEnt         []byte
	maxCell         int64
	maxCellKey      string
	negatives       map[int]bool // number fields seen negative
	// lead is the field of the new row's first varying component when it
	// is a number not known to be a time; leadTimes counts sampled values
	// that look like epoch seconds or millis.
	lead, leadTimes int64
	// qualTime is a number field of the new qualifier, and qualTimes counts
	// sampled values that look like timestamps: a row keyed by entity with
	// one column per timestamp grows without end.
	qualTime, qualTimes int64
	oldRows             map[string]*rowStat
	ent                 []byte
}

type rowStat struct {
	cells, bytes int64
}

// EntityStat counts the sampled cells of one entity.
type EntityStat struct {
	Entity string `json:"entity"`
	Cells  int64  `json:"cells"`
	Bytes  int64  `json:"bytes"`
}

// Example shows one old key beside its new key.
type Example struct {
	Old    string `json:"old"`
	New    string `json:"new"`
	Fields string `json:"fields"`
}

// RowSize is the size of one new row.
type RowSize struct {
	Row   string `json:"row"`
	Cells int64  `json:"cells"`
	Bytes int64  `json:"bytes"`
}

// Warning is one thing the plan advises against.
type Warning struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// PlanReport is what a Planner found.
type PlanReport struct {
	SampledCells int64 `json:"sampled_cells"`
	// Truncated says the planner hit PlanOptions.MaxTracked: row, entity
	// and collision figures cover only what it could remember.
	Truncated bool `json:"truncated,omitempty"`
	// Complete says the sample was the whole snapshot, so the figures are
	// exact rather than lower bounds.
	Complete         bool         `json:"complete"`
	Rejected         int64        `json:"rejected"`
	RejectExamples   []string     `json:"reject_examples,omitempty"`
	Collisions       []string     `json:"collisions,omitempty"`
	Unreadable       []string     `json:"unreadable,omitempty"`
	Entities         int          `json:"entities"`
	HeaviestEntities []EntityStat `json:"heaviest_entities"`
	OldRows          int          `json:"old_rows"`
	WorstOldRow      RowSize      `json:"worst_old_row"`
	NewRows          int          `json:"new_rows"`
	WorstRow         RowSize      `json:"worst_row"`
	MaxCellBytes     int64        `json:"max_cell_bytes"`
	MaxCell          string       `json:"max_cell,omitempty"`
	Warnings         []Warning    `json:"warnings"`
	// SplitKeys are suggested split points for the new table, printable
	// (Bytes.toStringBinary form) and hex.
	SplitKeys    []string  `json:"split_keys"`
	SplitKeysHex []string  `json:"split_keys_hex"`
	Examples     []Example `json:"examples"`

	// sizes are the sample's new rows and their sizes, for RowsPast: a
	// target may bound rows below hbase.table.max.rowsize (Bigtable).
	sizes []rowSize
}

// rowSize is one new row of the sample, its key as it is.
type rowSize struct {
	row string
	rowStat
}

// RowsPast lists the new rows of the sample holding more than bytes or
// more than cells (math.MaxInt64 leaves a bound unchecked), largest by
// bytes first, then by cells, then by key; each with its key printable.
// Every such row is listed, so a caller that shows a few can count the
// rest.
func (r *PlanReport) RowsPast(bytes, cells int64) []RowSize {
	var past []rowSize
	for _, s := range r.sizes {
		if s.bytes > bytes || s.cells > cells {
			past = append(past, s)
		}
	}
	sort.Slice(past, func(i, j int) bool {
		a, b := past[i], past[j]
		if a.bytes != b.bytes {
			return a.bytes > b.bytes
		}
		if a.cells != b.cells {
			return a.cells > b.cells
		}
		return a.row < b.row
	})
	out := make([]RowSize, len(past))
	for i, s := range past {
		out[i] = RowSize{Row: printable([]byte(s.row)), Cells: s.cells, Bytes: s.bytes}
	}
	return out
}

// NewPlanner returns a Planner for p.
func (p *Program) NewPlanner(opts PlanOptions) *Planner {
	if opts.MaxRowSize <= 0 {
		opts.MaxRowSize = DefaultMaxRowSize
	}
	if opts.MaxCellSize <= 0 {
		opts.MaxCellSize = DefaultMaxCellSize
	}
	if opts.Examples <= 0 {
		opts.Examples = 8
	}
	if opts.Top <= 0 {
		opts.Top = 10
	}
	if opts.Regions <= 1 {
		opts.Regions = 4
	}
	if opts.MaxTracked <= 0 {
		opts.MaxTracked = 4_000_000
	}
	pl := &Planner{
		p: p, r: p.New(), back: p.New(), opts: opts,
		entities: map[string]*EntityStat{}, rows: map[string]*rowStat{},
		newKeys: map[uint64]uint64{}, seed: maphash.MakeSeed(), negatives: map[int]bool{}, lead: -1,
		qualTime: -1, oldRows: map[string]*rowStat{},
	}
	if q := p.targetQual(); q != nil {
		for i := range q.comps {
			c := &q.comps[i]
			if c.field >= 0 && p.fields[c.field].kind == KindNumber && c.typ != Salt {
				pl.qualTime = int64(c.field)
				break
			}
		}
	}
	for i := range p.dstRow.comps {
		c := &p.dstRow.comps[i]
		if c.typ == Literal {
			continue
		}
		if c.field >= 0 && p.fields[c.field].kind == KindNumber && !p.fields[c.field].time && c.typ != Salt {
			pl.lead = int64(c.field)
		}
		break
	}
	return pl
}

// Epoch bounds (2000-01-01 to 2100-01-01) for telling a number that is
// really a timestamp.
const (
	epochSecLo, epochSecHi = 946_684_800, 4_102_444_800
	epochMsLo, epochMsHi   = epochSecLo * 1000, epochSecHi * 1000
)

func looksLikeTime(v Value) bool {
	n, ok := v.Int()
	return ok && (n >= epochSecLo && n < epochSecHi || n >= epochMsLo && n < epochMsHi)
}

// Add maps one sampled old cell and records what it becomes.
func (pl *Planner) Add(src *cell.Cell) {
	pl.cells++
	out, err := pl.r.Apply(src)
	if err != nil {
		pl.rejected++
		if len(pl.rejects) < 5 {
			pl.rejects = append(pl.rejects, err.Error())
		}
		return
	}
	for i, v := range pl.r.rec.vals {
		if v.Set && v.Signed && int64(v.N) < 0 && pl.p.fields[i].kind == KindNumber {
			pl.negatives[i] = true
		}
	}
	if pl.lead >= 0 && looksLikeTime(pl.r.rec.vals[pl.lead]) {
		pl.leadTimes++
	}
	if pl.qualTime >= 0 && looksLikeTime(pl.r.rec.vals[pl.qualTime]) {
		pl.qualTimes++
	}
	ors := pl.stat(pl.oldRows, src.Row)
	ors.cells++
	ors.bytes += cell.Size(src)
	size := cell.Size(&out)
	if size > pl.maxCell {
		pl.maxCell, pl.maxCellKey = size, keyString(&out)
	}
	rs := pl.stat(pl.rows, out.Row)
	rs.cells++
	rs.bytes += size

	// Keys are remembered by 64-bit hashes: a false collision needs two
	// equal hashes among millions of keys, which is far less likely than a
	// disk error.
	pl.key = cell.AppendKey(pl.key[:0], &out)
	newKey := maphash.Bytes(pl.seed, pl.key)
	pl.key = cell.AppendKey(pl.key[:0], src)
	oldKey := maphash.Bytes(pl.seed, pl.key)
	if prev, ok := pl.newKeys[newKey]; ok && prev != oldKey {
		if len(pl.collisions) < 5 {
			pl.collisions = append(pl.collisions, fmt.Sprintf("%s and another old cell both become %s", keyString(src), keyString(&out)))
		}
	} else if len(pl.newKeys) < pl.opts.MaxTracked {
		pl.newKeys[newKey] = oldKey
	} else {
		pl.truncated = true
	}

	// The entity of the old cell, from the fields Apply just parsed.
	pl.ent = pl.r.appendEntity(pl.ent[:0])
	es := pl.entities[string(pl.ent)]
	if es == nil {
		if len(pl.entities) < pl.opts.MaxTracked {
			es = &EntityStat{Entity: pl.p.FormatEntity(pl.ent)}
			pl.entities[string(pl.ent)] = es
		} else {
			pl.truncated = true
			es = &EntityStat{}
		}
	}
	es.Cells++
	es.Bytes += cell.Size(src)

	// The new key must read back to the same entity, or verification could
	// not find the cell in the new table.
	var err2 error
	pl.backEnt, err2 = pl.back.TargetEntity(pl.backEnt[:0], &out)
	switch {
	case err2 != nil:
		if len(pl.unreadable) < 5 {
			pl.unreadable = append(pl.unreadable, err2.Error())
		}
		return
	case !bytes.Equal(pl.backEnt, pl.ent):
		if len(pl.unreadable) < 5 {
			pl.unreadable = append(pl.unreadable, fmt.Sprintf("%s reads back as %s, not %s", keyString(&out), pl.p.FormatEntity(pl.backEnt), es.Entity))
		}
		return
	}
	// Show a few new rows per entity (a bucketed entity gets several), for
	// several entities.
	if len(pl.examples) < pl.opts.Examples && !bytes.Equal(out.Row, pl.lastExampleRow) {
		if !bytes.Equal(pl.ent, pl.exampleEntity) {
			pl.exampleEntity = append(pl.exampleEntity[:0], pl.ent...)
			pl.perEntity = 0
		}
		if pl.perEntity < 2 {
			pl.perEntity++
			pl.lastExampleRow = append(pl.lastExampleRow[:0], out.Row...)
			pl.examples = append(pl.examples, Example{
				Old:    keyString(src),
				New:    keyString(&out),
				Fields: string(pl.back.AppendFields(nil)),
			})
		}
	}
}

// stat returns the counters of one row, or a throwaway one once the
// planner tracks MaxTracked rows (memory stays bounded; the report says the
// figures are partial).
func (pl *Planner) stat(m map[string]*rowStat, row []byte) *rowStat {
	if s := m[string(row)]; s != nil {
		return s
	}
	if len(m) >= pl.opts.MaxTracked {
		pl.truncated = true
		return &rowStat{}
	}
	s := &rowStat{}
	m[string(row)] = s
	return s
}

func keyString(c *cell.Cell) string {
	var b []byte
	b = AppendPrintable(b, c.Row)
	b = append(b, '/')
	b = AppendPrintable(b, c.Family)
	b = append(b, ':')
	b = AppendPrintable(b, c.Qualifier)
	return string(b)
}

// Report summarises the sample. complete says the caller fed every cell of
// the snapshot.
func (pl *Planner) Report(complete bool) *PlanReport {
	rep := &PlanReport{
		SampledCells: pl.cells, Complete: complete, Rejected: pl.rejected, Truncated: pl.truncated,
		RejectExamples: pl.rejects, Collisions: pl.collisions, Unreadable: pl.unreadable,
		Entities: len(pl.entities), NewRows: len(pl.rows),
		MaxCellBytes: pl.maxCell, MaxCell: pl.maxCellKey, Examples: pl.examples,
		Warnings: []Warning{},
	}
	for _, e := range pl.entities {
		rep.HeaviestEntities = append(rep.HeaviestEntities, *e)
	}
	sort.Slice(rep.HeaviestEntities, func(i, j int) bool {
		a, b := rep.HeaviestEntities[i], rep.HeaviestEntities[j]
		return a.Cells > b.Cells || a.Cells == b.Cells && a.Entity < b.Entity
	})
	if len(rep.HeaviestEntities) > pl.opts.Top {
		rep.HeaviestEntities = rep.HeaviestEntities[:pl.opts.Top]
	}
	rows := make([]string, 0, len(pl.rows))
	rep.sizes = make([]rowSize, 0, len(pl.rows))
	for row, rs := range pl.rows {
		rows = append(rows, row)
		rep.sizes = append(rep.sizes, rowSize{row, *rs})
		if rs.bytes > rep.WorstRow.Bytes || rs.bytes == rep.WorstRow.Bytes && rs.cells > rep.WorstRow.Cells {
			rep.WorstRow = RowSize{Row: printable([]byte(row)), Cells: rs.cells, Bytes: rs.bytes}
		}
	}
	sort.Strings(rows)
	rep.OldRows = len(pl.oldRows)
	for row, rs := range pl.oldRows {
		if rs.bytes > rep.WorstOldRow.Bytes || rs.bytes == rep.WorstOldRow.Bytes && rs.cells > rep.WorstOldRow.Cells {
			rep.WorstOldRow = RowSize{Row: printable([]byte(row)), Cells: rs.cells, Bytes: rs.bytes}
		}
	}
	rep.Warnings = pl.p.layoutWarnings(pl.negatives)
	warn := func(code, format string, args ...any) {
		rep.Warnings = append(rep.Warnings, Warning{Code: code, Message: fmt.Sprintf(format, args...)})
	}
	if ok := pl.cells - pl.rejected; pl.lead >= 0 && ok > 0 && pl.leadTimes*10 >= ok*9 {
		warn("hotspot", "the new row starts with %s, and %d of %d sampled values look like epoch seconds or millis: if it follows the clock, live writes all go to the newest region; put an entity or a salt first", pl.p.fields[pl.lead].name, pl.leadTimes, ok)
	}
	if pl.truncated {
		warn("partial", "the planner stopped remembering new rows, entities and keys at %d of each; sizes, counts and collision checks cover only those (sample fewer cells)", pl.opts.MaxTracked)
	}
	bound := "in the sample"
	if !complete {
		bound = "in the sample (a lower bound: the sample is not the whole snapshot)"
	}
	if rep.WorstRow.Bytes > pl.opts.MaxRowSize {
		warn("row-too-large", "new row %s holds %d bytes %s, above hbase.table.max.rowsize (%d): Gets and unbatched Scans of it will fail", rep.WorstRow.Row, rep.WorstRow.Bytes, bound, pl.opts.MaxRowSize)
	}
	if pl.maxCell > pl.opts.MaxCellSize {
		warn("cell-too-large", "cell %s is %d bytes, above hbase.client.keyvalue.maxsize (%d; hbase.server.keyvalue.maxsize has the same default): the client and the region server refuse to write it", pl.maxCellKey, pl.maxCell, pl.opts.MaxCellSize)
	}
	if pl.rejected > 0 {
		warn("bad-keys", "%d of %d sampled cells do not fit the layouts (first: %s)", pl.rejected, pl.cells, pl.rejects[0])
	}
	if ok := pl.cells - pl.rejected; pl.qualTime >= 0 && ok > 0 && pl.qualTimes*10 >= ok*9 && !pl.p.hasTimeBucket() && !hasCode(rep.Warnings, "unbounded-row") {
		warn("unbounded-row", "the new qualifier holds %s, and %d of %d sampled values look like timestamps, but the new row has no time bucket: one row per entity grows with time without end (largest in the sample: %s, %d cells); add a time_bucket component to the new row", pl.p.fields[pl.qualTime].name, pl.qualTimes, ok, rep.WorstRow.Row, rep.WorstRow.Cells)
	}
	if len(pl.unreadable) > 0 {
		warn("unreadable", "new keys do not read back to their entity, so verification cannot find them: %s", pl.unreadable[0])
	}
	if len(pl.collisions) > 0 {
		warn("collision", "different old cells map to the same new cell, so one overwrites the other: %s", pl.collisions[0])
	}
	rep.SplitKeys, rep.SplitKeysHex = pl.p.splitKeys(rows, pl.opts.Regions)
	return rep
}

// splitKeys suggests where to pre-split the new table: at every salt bucket
// when the new row starts with a salt, else at quantiles of the sampled new
// rows.
func (p *Program) splitKeys(rows []string, regions int) (printed, hexed []string) {
	var keys [][]byte
	if c := p.dstRow.comps[0]; c.typ == Salt {
		for b := uint32(1); b < c.buckets; b++ {
			keys = append(keys, appendUint(nil, uint64(b), c.width))
		}
	} else if len(rows) > 1 {
		n := min(regions, len(rows))
		for i := 1; i < n; i++ {
			k := []byte(rows[i*len(rows)/n])
			if len(keys) == 0 || !bytes.Equal(keys[len(keys)-1], k) {
				keys = append(keys, k)
			}
		}
	}
	for _, k := range keys {
		printed = append(printed, printable(k))
		hexed = append(hexed, fmt.Sprintf("%x", k))
	}
	return printed, hexed
}

// layoutWarnings are the warnings the layouts alone justify. negatives names
// number fields seen negative in the sample.
func (p *Program) layoutWarnings(negatives map[int]bool) []Warning {
	var ws []Warning
	warn := func(code, format string, args ...any) {
		ws = append(ws, Warning{Code: code, Message: fmt.Sprintf(format, args...)})
	}
	name := func(c *component) string {
		if c.field >= 0 {
			return p.fields[c.field].name
		}
		if len(c.of) > 0 {
			return p.fields[c.of[0]].name
		}
		return c.typ.String()
	}

	// Row key limit: fixed parts that take much of HBase's limit leave
	// little room for the variable-length ones; a longer new row is then
	// rejected (or fails the job) under bad_keys. (A layout whose fixed
	// parts alone pass the limit does not compile.)
	if p.dstRow.fixedLen < 0 && p.dstRow.minLen > MaxRowKeyLength/2 {
		warn("row-key-limit", "the new row's fixed-width components take %d bytes, leaving %d for its variable-length ones before HBase's %d-byte row key limit; longer new rows are rejected under bad_keys", p.dstRow.minLen, MaxRowKeyLength-p.dstRow.minLen, MaxRowKeyLength)
	}

	// Hotspot: the first component that varies decides which region a
	// write goes to; if it follows the clock, every write goes to the last
	// (or first) region.
	for i := range p.dstRow.comps {
		c := &p.dstRow.comps[i]
		if c.typ == Literal {
			continue
		}
		timeLike := c.typ == TimeBucket || c.typ == ReversedTS || c.field >= 0 && p.fields[c.field].time
		if timeLike {
			dir := "the newest region"
			if c.typ == ReversedTS {
				dir = "the first region"
			}
			warn("hotspot", "the new row starts with %s (%s), which follows the clock: a backfill spreads, but live writes all go to %s; put an entity or a salt first", name(c), c.typ, dir)
		}
		break
	}

	// Unbounded rows: a new row that gathers cells from many old rows with
	// nothing (a time bucket) to cap it grows without end.
	hasBucket := false
	inRow := map[int]bool{}
	for i := range p.dstRow.comps {
		c := &p.dstRow.comps[i]
		if c.typ == TimeBucket {
			hasBucket = true
		}
		if c.field >= 0 {
			inRow[c.field] = true
		}
	}
	var gathered []string
	for i := range p.srcRow.comps {
		c := &p.srcRow.comps[i]
		if c.field >= 0 && c.typ != Salt && !inRow[c.field] && !inRow[idxRow] {
			gathered = append(gathered, p.fields[c.field].name)
		}
	}
	if !hasBucket && len(gathered) > 0 {
		warn("unbounded-row", "the new row drops %s from the old row key, so one new row gathers all old rows that differ only there and has no time bucket to bound it; add a time_bucket component to the new row", strings.Join(gathered, ", "))
	}
	for _, name := range p.DroppedFields() {
		warn("dropped-field", "field %s of the old key is not in the new key: old cells that differ only in it will overwrite each other", name)
	}

	// Encodings whose byte order is not the value order.
	for _, l := range []*Layout{p.dstRow, p.dstQual} {
		if l == nil {
			continue
		}
		where := "row"
		if l == p.dstQual {
			where = "qualifier"
		}
		for i := range l.comps {
			c := &l.comps[i]
			last := i == len(l.comps)-1
			switch {
			case c.typ == Int:
				seen := ""
				if negatives[c.field] {
					seen = " (the sample has negative values)"
				}
				warn("signed-int", "new %s component %s is a two's-complement int: negative values sort after positive ones%s; use sortable_int", where, name(c), seen)
			case c.typ == Decimal && c.width == 0:
				warn("decimal-text", "new %s component %s is decimal text without a width: \"10\" sorts before \"9\"; give a width (zero-padded) or use uint", where, name(c))
			case c.typ == String && !c.hasSep && last && where == "row" && i > 0:
				warn("no-separator", "new row ends with %s, a string with no separator: a prefix scan for one value also returns longer values that start with it (\"u1\" finds \"u12\")", name(c))
			case c.typ == String && !c.hasSep && last && where == "row" && len(p.dstRow.comps) == 1 && p.dstQual != nil:
				// A lone string row is exact; nothing to say.
			case c.typ == String && c.hasSep && c.sep != 0x00:
				warn("separator-order", "new %s component %s ends with separator %q, which is not 0x00: a value that is a prefix of another can sort after it (\"a\" after \"a!\")", where, name(c), c.sep)
			}
		}
	}
	return ws
}

func hasCode(ws []Warning, code string) bool {
	for _, w := range ws {
		if w.Code == code {
			return true
		}
	}
	return false
}

func (p *Program) hasTimeBucket() bool {
	for i := range p.dstRow.comps {
		if p.dstRow.comps[i].typ == TimeBucket {
			return true
		}
	}
	return false
}
