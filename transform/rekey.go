package transform

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/cell"
)

// Rekey maps cells through a Program. It owns reusable buffers, so it is not
// safe for concurrent use: make one per worker with Program.New. The cells it
// emits point into those buffers and into the source cell; they are valid
// until the next call.
type Rekey struct {
	p    *Program
	rec  record
	row  []byte
	qual []byte
	// dirty says a parse of a new key set fields that a parse of an old key
	// does not (see prepare); only then must they be cleared.
	dirty bool
	// u is Unmap's state, made on its first call.
	u *unmapState

	// oldRow is a copy of the last old row parsed whole, and the record's
	// values read from it point into oldRow and the first oldRowArena bytes
	// of the arena. The next cell of the same row (most cells of a wide
	// row) keeps them instead of parsing the row again, and keeps the first
	// rowKeep bytes of the new row (Program.dstRowKeep's components; -1:
	// not built for oldRow). oldRowOK is false until a parse succeeds, and
	// a parse of a new key (dirty) voids it.
	oldRow      []byte
	oldRowOK    bool
	oldRowArena int
	rowKeep     int
}

// New returns a Rekey for one worker.
func (p *Program) New() *Rekey {
	return &Rekey{p: p, rec: record{vals: make([]Value, len(p.fields)+p.inv.slots)}}
}

// Program returns the program r runs.
func (r *Rekey) Program() *Program { return r.p }

// Map implements Mapper: it maps src to its one new cell and emits it, or
// returns an error wrapping ErrBadKey and emits nothing.
func (r *Rekey) Map(src cell.Cell, emit func(cell.Cell)) error {
	// src is our own copy: re-key it in place rather than copy it again.
	if err := r.apply(&src); err != nil {
		return err
	}
	emit(src)
	return nil
}

// MapInPlace implements InPlaceMapper: Map without the copy and the emit.
func (r *Rekey) MapInPlace(c *cell.Cell) error { return r.apply(c) }

// Apply returns the new cell for src (valid until the next call).
func (r *Rekey) Apply(src *cell.Cell) (cell.Cell, error) {
	out := *src
	if err := r.apply(&out); err != nil {
		return cell.Cell{}, err
	}
	return out, nil
}

// apply replaces the key of c with its new key. On error c is unchanged,
// so messages name the old cell.
func (r *Rekey) apply(c *cell.Cell) error {
	p := r.p
	sameRow := p.reuseRow && r.oldRowOK && !r.dirty && bytes.Equal(c.Row, r.oldRow)
	if err := r.parseSource(c, sameRow); err != nil {
		return err
	}
	var err error
	switch {
	case sameRow && r.rowKeep >= 0:
		r.row, err = p.dstRow.buildComps(r.row[:r.rowKeep], &r.rec, p.dstRowKeep, len(p.dstRow.comps))
	case p.reuseRow:
		r.row, err = r.buildRow()
	default:
		r.row, err = p.dstRow.build(r.row[:0], &r.rec)
	}
	if err != nil {
		return fmt.Errorf("new row for %s: %w", cellName(c), err)
	}
	if len(r.row) > MaxRowKeyLength {
		return fmt.Errorf("%w: new row for %s is %d bytes, above HBase's row key limit of %d", ErrBadKey, cellName(c), len(r.row), MaxRowKeyLength)
	}
	if c.Type == cell.DeleteFamily || c.Type == cell.DeleteFamilyVersion {
		// A family delete covers a whole old row; it can be carried only
		// when one old row becomes one new row with its columns unchanged.
		if p.dstQual != nil || !p.rowToRow {
			return fmt.Errorf("%w: %s: a family delete marker cannot be re-keyed: the new layout splits or merges old rows", ErrBadKey, cellName(c))
		}
	}
	if p.dstQual != nil {
		if r.qual, err = p.dstQual.build(r.qual[:0], &r.rec); err != nil {
			return fmt.Errorf("new qualifier for %s: %w", cellName(c), err)
		}
		c.Qualifier = r.qual
	}
	c.Row = r.row
	for i := range p.families {
		if f := &p.families[i]; cell.SameName(f[0], c.Family) {
			c.Family = f[1]
			break
		}
	}
	return nil
}

func cellName(c *cell.Cell) string {
	return fmt.Sprintf("cell %s/%s:%s", printable(c.Row), printable(c.Family), printable(c.Qualifier))
}

// parseSource fills the record from an old cell. sameRow says the cell's
// row is the last one parsed, whose values the record kept (reuseRow).
func (r *Rekey) parseSource(src *cell.Cell, sameRow bool) error {
	p := r.p
	r.prepare(src, false)
	if sameRow {
		// The row's unescaped strings sit at the arena's start: the
		// qualifier's go after them. prepare sized the arena for the
		// whole key, so this never moves it.
		r.rec.arena = r.rec.arena[:r.oldRowArena]
	} else {
		row := src.Row
		if p.reuseRow {
			// Parse a copy, so the values stay valid for the row's next
			// cells whatever becomes of src's buffer.
			r.oldRow = append(r.oldRow[:0], row...)
			r.oldRowOK, r.rowKeep, row = false, -1, r.oldRow
		}
		if err := p.srcRow.parse(row, &r.rec); err != nil {
			return fmt.Errorf("old row of %s: %w", cellName(src), err)
		}
		r.oldRowOK, r.oldRowArena = p.reuseRow, len(r.rec.arena)
	}
	if p.srcQual != nil {
		if src.Type == cell.DeleteFamily || src.Type == cell.DeleteFamilyVersion {
			return fmt.Errorf("%w: %s: a family delete marker has no qualifier to parse", ErrBadKey, cellName(src))
		}
		if err := p.srcQual.parse(src.Qualifier, &r.rec); err != nil {
			return fmt.Errorf("old qualifier of %s: %w", cellName(src), err)
		}
	}
	if !p.srcSalted {
		return nil
	}
	if err := r.checkSalts(p.srcRow, p.srcQual); err != nil {
		return fmt.Errorf("old key of %s: %w", cellName(src), err)
	}
	return nil
}

// buildRow builds the new row of a cell whose old row was just parsed,
// noting where the part made from the old row alone ends (rowKeep).
func (r *Rekey) buildRow() ([]byte, error) {
	l, keep := r.p.dstRow, r.p.dstRowKeep
	dst, err := l.buildComps(r.row[:0], &r.rec, 0, keep)
	if err != nil {
		return dst, err
	}
	r.rowKeep = len(dst)
	return l.buildComps(dst, &r.rec, keep, len(l.comps))
}

// parseTarget fills the record from a new cell.
func (r *Rekey) parseTarget(c *cell.Cell) error {
	p := r.p
	r.prepare(c, true)
	if err := p.dstRow.parse(c.Row, &r.rec); err != nil {
		return fmt.Errorf("new row of %s: %w", cellName(c), err)
	}
	if q := p.targetQual(); q != nil {
		if err := q.parse(c.Qualifier, &r.rec); err != nil {
			return fmt.Errorf("new qualifier of %s: %w", cellName(c), err)
		}
	}
	if err := r.checkSalts(p.dstRow, p.dstQual); err != nil {
		return fmt.Errorf("new key of %s: %w", cellName(c), err)
	}
	return nil
}

func (r *Rekey) prepare(c *cell.Cell, full bool) {
	switch {
	case full:
		r.rec.reset()
		r.dirty = true
	case r.dirty:
		// A successful parse of the old key sets every field it defines;
		// only the fields it does not define must not keep a value from an
		// earlier cell, and only a parse of a new key sets those.
		for _, f := range r.p.notSource {
			r.rec.vals[f] = Value{}
		}
		r.dirty = false
		fallthrough
	default:
		r.rec.arena = r.rec.arena[:0]
	}
	// Unescaped strings are never longer than the key they came from, so
	// with this capacity the arena never moves while a key is parsed.
	if n := len(c.Row) + len(c.Qualifier); cap(r.rec.arena) < n {
		r.rec.arena = make([]byte, 0, 2*n)
	}
	v, used := r.rec.vals, &r.p.builtins
	if full || used[idxRow] {
		v[idxRow] = Value{Bytes: c.Row, Set: true}
	}
	if full || used[idxFamily] {
		v[idxFamily] = Value{Bytes: c.Family, Set: true}
	}
	if full || used[idxQualifier] {
		v[idxQualifier] = Value{Bytes: c.Qualifier, Set: true}
	}
	if full || used[idxTS] {
		v[idxTS] = Value{N: uint64(c.Timestamp), Signed: true, Set: true}
	}
}

// checkSalts recomputes every salt whose fields were all read, so a key with
// a wrong salt (written by another hash) is caught instead of misfiled.
func (r *Rekey) checkSalts(ls ...*Layout) error {
	for _, l := range ls {
		if l == nil {
			continue
		}
		for i := range l.comps {
			c := &l.comps[i]
			if c.typ != Salt || len(c.of) == 0 || c.field < 0 {
				continue
			}
			all := true
			for _, f := range c.of {
				all = all && r.rec.vals[f].Set
			}
			if !all {
				continue
			}
			if want := uint64(c.saltHash(&r.rec) % c.buckets); want != r.rec.vals[c.field].N {
				return fmt.Errorf("%w: %s is %d, but the salted fields hash to %d", ErrBadKey, c.label, r.rec.vals[c.field].N, want)
			}
		}
	}
	return nil
}

// SourceEntity appends the entity key of an old cell to dst. Entity keys are
// canonical (the same entity read from the old and the new table gives the
// same bytes) and sort like their fields.
func (r *Rekey) SourceEntity(dst []byte, c *cell.Cell) ([]byte, error) {
	// The cells of a row come together: its values, parsed once, serve
	// them all (as in apply), and only the qualifier is read again.
	sameRow := r.p.reuseRow && r.oldRowOK && !r.dirty && bytes.Equal(c.Row, r.oldRow)
	if err := r.parseSource(c, sameRow); err != nil {
		return dst, err
	}
	return r.appendEntity(dst), nil
}

// TargetEntity appends the entity key of a new cell to dst.
func (r *Rekey) TargetEntity(dst []byte, c *cell.Cell) ([]byte, error) {
	if err := r.parseTarget(c); err != nil {
		return dst, err
	}
	return r.appendEntity(dst), nil
}

// LastEntity appends the entity key of the cell this Rekey last mapped
// (through Map or Apply, or back through Unmap) without parsing its key
// again: the runner counts entities as it maps. After a failed mapping it
// is undefined; after Unmap fails with ErrMappedWrong and returns an old
// cell, it is that cell's.
func (r *Rekey) LastEntity(dst []byte) []byte { return r.appendEntity(dst) }

// EntityOfOldRow implements RowEntityMapper (Program.EntityOfOldRow).
func (r *Rekey) EntityOfOldRow() bool { return r.p.entityOfRow }

// appendEntity encodes the entity fields: numbers as 8 bytes with the sign
// bit flipped when the field is signed in the old key (whichever side's
// component read this value: an int and a uint holding 7 hold the same
// bits); bytes with 0x00 written 0x00,0xFF and ended by 0x00,0x01
// (order-preserving and unambiguous).
func (r *Rekey) appendEntity(dst []byte) []byte {
	for i, f := range r.p.entity {
		v := &r.rec.vals[f]
		if r.p.fields[f].kind == KindNumber {
			u := v.N
			if r.p.entitySigned[i] {
				u ^= 1 << 63
			}
			dst = binary.BigEndian.AppendUint64(dst, u)
			continue
		}
		b := v.Bytes
		for {
			i := indexByte(b, 0)
			if i < 0 {
				break
			}
			dst = append(dst, b[:i]...)
			dst = append(dst, 0x00, 0xFF)
			b = b[i+1:]
		}
		dst = append(dst, b...)
		dst = append(dst, 0x00, 0x01)
	}
	return dst
}

// FormatEntity renders an entity key made by SourceEntity or TargetEntity as
// name=value pairs, for reports.
func (p *Program) FormatEntity(key []byte) string {
	var b strings.Builder
	for i, f := range p.entity {
		if i > 0 {
			b.WriteByte(',')
		}
		fi := p.fields[f]
		b.WriteString(fi.name)
		b.WriteByte('=')
		if fi.kind == KindNumber {
			if len(key) < 8 {
				b.WriteString("?")
				return b.String()
			}
			u := binary.BigEndian.Uint64(key)
			key = key[8:]
			// Entity numbers carry no sign flag; a flipped sign bit below
			// 2^63 means a negative signed value or a large unsigned one,
			// and the field table knows which component made it.
			if p.fieldSigned(f) {
				b.WriteString(strconv.FormatInt(int64(u^1<<63), 10))
			} else {
				b.WriteString(strconv.FormatUint(u, 10))
			}
			continue
		}
		var val []byte
		for len(key) > 0 {
			if key[0] != 0x00 {
				val = append(val, key[0])
				key = key[1:]
				continue
			}
			if len(key) > 1 && key[1] == 0xFF {
				val = append(val, 0)
				key = key[2:]
				continue
			}
			key = key[min(2, len(key)):]
			break
		}
		b.WriteString(printable(val))
	}
	return b.String()
}

// fieldSigned tells whether a number field holds signed values, judged by
// the old-key component that reads it.
func (p *Program) fieldSigned(f int) bool {
	if f == idxTS {
		return true
	}
	for _, l := range []*Layout{p.srcRow, p.srcQual} {
		if l == nil {
			continue
		}
		for i := range l.comps {
			c := &l.comps[i]
			if c.field == f {
				return c.typ == Int || c.typ == SortableInt || c.typ == ReversedTS || c.typ == TimeBucket
			}
			if c.typ == Offset && len(c.of) == 1 && c.of[0] == f {
				return true
			}
		}
	}
	return false
}

// Entity returns the names of the entity fields.
func (p *Program) Entity() []string {
	out := make([]string, len(p.entity))
	for i, f := range p.entity {
		out[i] = p.fields[f].name
	}
	return out
}

// AppendFields appends the fields of the last cell r parsed (by Apply,
// SourceEntity or TargetEntity) as "name=value" pairs; timestamps are shown
// as UTC dates. For reports and debugging; it allocates.
func (r *Rekey) AppendFields(dst []byte) []byte {
	first := true
	for i := numBuiltins; i < len(r.p.fields); i++ {
		v := r.rec.vals[i]
		if !v.Set {
			continue
		}
		fi := r.p.fields[i]
		if !first {
			dst = append(dst, ' ')
		}
		first = false
		dst = append(dst, fi.name...)
		dst = append(dst, '=')
		switch {
		case fi.kind == KindBytes:
			dst = AppendPrintable(dst, v.Bytes)
		case fi.time:
			s, _ := v.Int()
			dst = time.UnixMilli(s).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000Z")
		case v.Signed:
			dst = strconv.AppendInt(dst, int64(v.N), 10)
		default:
			dst = strconv.AppendUint(dst, v.N, 10)
		}
	}
	return dst
}

// Field returns the value of a named field of the last cell r parsed.
func (r *Rekey) Field(name string) (Value, Kind, error) {
	idx, ok := r.p.index[name]
	if !ok {
		return Value{}, KindNone, errors.New("transform: no field " + strconv.Quote(name))
	}
	return r.rec.vals[idx], r.p.fields[idx].kind, nil
}
