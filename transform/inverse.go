package transform

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rekeyhq/rekey/cell"
)

// The inverse reads a new cell back to the old cell it was made from: the
// new key is parsed under the target layout, and its fields build the old
// row and qualifier under the source layout. It never runs the forward
// mapping, so a bug there (a bucket off by one, a salt over the wrong
// bytes) shows as new cells that do not give back their old cells, instead
// of being computed again the same wrong way. Nor does it use the forward
// codec: keys are read and written by its own (inversecodec.go), written
// from the layout language's byte forms, so that a bug the forward parser
// and builder of a component share shows too.

// ErrNoInverse is returned by Unmap when the new key loses something of the
// old one (Program.Invertible says what), so new cells cannot give back
// their old cells.
var ErrNoInverse = errors.New("transform: the new key does not give back the old key")

// ErrMappedWrong marks a new cell whose key parses under the target layout
// but that no old cell maps to: a salt that is not the hash of its fields, a
// time bucket that does not hold its timestamp, a field the key holds twice
// with two values, a family no old family becomes, or fields the old layout
// cannot encode.
var ErrMappedWrong = errors.New("transform: the new key was not built from an old cell")

// inversePlan is what Unmap needs beyond the layouts, settled at compile
// time.
type inversePlan struct {
	// lost names what the new key cannot give back (DroppedFields).
	lost []string
	// dstRow and dstQual are the layouts new keys are read with (dstQual is
	// targetQual()), where salts and time buckets without a field of their
	// own store their value in a spare slot of the record, after the field
	// table, so it can be checked. srcRow and srcQual are the old key's.
	// All four are copies of the compiled descriptions, made once: the
	// inverse reads its own, so a test can give the forward codec a bug
	// (a changed width, a missing sign flip) that the inverse does not
	// share.
	dstRow, dstQual *Layout
	srcRow, srcQual *Layout
	slots           int
	// rowKept and qualKept say the new key holds the whole old row or old
	// qualifier ($row, $qualifier).
	rowKept, qualKept bool
	// bucketTS maps a time bucket field of the old key to the timestamp
	// field of the offset measured from it, which rebuilds it.
	bucketTS map[int]int
}

// planInverse settles the inverse of p once its layouts are compiled.
func (p *Program) planInverse() {
	inv := &p.inv
	inv.bucketTS = map[int]int{}
	for _, l := range []*Layout{p.srcRow, p.srcQual} {
		if l == nil {
			continue
		}
		for i := range l.comps {
			if c := &l.comps[i]; c.typ == Offset && len(c.of) == 1 {
				inv.bucketTS[c.bucket] = c.of[0]
			}
		}
	}
	for _, l := range []*Layout{p.dstRow, p.dstQual} {
		if l == nil {
			continue
		}
		for i := range l.comps {
			switch l.comps[i].field {
			case idxRow:
				inv.rowKept = true
			case idxQualifier:
				inv.qualKept = true
			}
		}
	}
	clone := func(l *Layout) *Layout {
		if l == nil {
			return nil
		}
		return &Layout{comps: slices.Clone(l.comps), fixedLen: l.fixedLen, minLen: l.minLen}
	}
	spare := func(l *Layout) *Layout {
		out := clone(l)
		for i := range out.comps {
			if c := &out.comps[i]; c.field < 0 && (c.typ == Salt || c.typ == TimeBucket) {
				c.field = len(p.fields) + inv.slots
				inv.slots++
			}
		}
		return out
	}
	inv.srcRow, inv.srcQual = clone(p.srcRow), clone(p.srcQual)
	inv.dstRow = spare(p.dstRow)
	if q := p.targetQual(); q != nil {
		inv.dstQual = spare(q)
	}
	inv.lost = p.lostFields()
}

// lostFields names, in old-key order, what of the old key the new key
// cannot give back: fields it does not hold (or holds only through a salt
// or a time bucket, which keep a hash or the hour, not the value), parts of
// the old key read without a field, and the old qualifier when it is not
// parsed and the new qualifier neither copies nor holds it.
func (p *Program) lostFields() []string {
	inv := &p.inv
	kept := func(f int, inQual bool) bool {
		return p.fields[f].target || f == idxTS || f == idxFamily ||
			!inQual && inv.rowKept || inQual && inv.qualKept
	}
	var out []string
	add := func(name string) {
		if !slices.Contains(out, name) {
			out = append(out, name)
		}
	}
	for li, l := range []*Layout{p.srcRow, p.srcQual} {
		if l == nil {
			continue
		}
		inQual := li == 1
		for i := range l.comps {
			c := &l.comps[i]
			switch {
			case c.typ == Literal, c.typ == Salt && len(c.of) > 0:
				// Fixed bytes, or a salt computed from fields listed on
				// their own.
			case c.typ == Offset:
				if !kept(c.of[0], inQual) {
					add(p.fields[c.of[0]].name)
				}
			case c.field < 0:
				add(c.label)
			case c.typ == TimeBucket:
				ts, ok := inv.bucketTS[c.field]
				if !kept(c.field, inQual) && !(ok && kept(ts, p.inQual(ts))) {
					add(p.fields[c.field].name)
				}
			default:
				if !kept(c.field, inQual) {
					add(p.fields[c.field].name)
				}
			}
		}
	}
	if p.srcQual == nil && p.dstQual != nil && !inv.qualKept {
		add(FieldQualifier)
	}
	return out
}

// inQual reports whether field f is read from the old qualifier.
func (p *Program) inQual(f int) bool {
	if p.srcQual == nil {
		return false
	}
	for i := range p.srcQual.comps {
		c := &p.srcQual.comps[i]
		if c.field == f || c.typ == Offset && c.of[0] == f {
			return true
		}
	}
	return false
}

// Invertible reports whether every new cell gives back the old cell it was
// made from (Unmap), and why: "the new key keeps every old field", or what
// it loses ("the new key drops field ts", "old families a, b become c").
// It is true exactly when MayCollide is false.
func (p *Program) Invertible() (ok bool, why string) {
	if d := p.DroppedFields(); len(d) > 0 {
		noun := "field"
		if len(d) > 1 {
			noun = "fields"
		}
		return false, fmt.Sprintf("the new key drops %s %s", noun, strings.Join(d, ", "))
	}
	if m := p.MergedFamilies(); len(m) > 0 {
		for _, nw := range m {
			var olds []string
			for _, f := range p.families {
				if string(f[1]) == nw {
					olds = append(olds, string(f[0]))
				}
			}
			return false, fmt.Sprintf("old families %s become %s", strings.Join(olds, ", "), nw)
		}
	}
	return true, "the new key keeps every old field"
}

// unmapState is what a Rekey keeps for Unmap, made on first use so a Rekey
// that only maps forward carries none of it.
type unmapState struct {
	codec *backCodec
	// refuse is why the program has no inverse (nil: it has one), found
	// once: the question allocates, and Unmap runs once a cell.
	refuse error
}

// newUnmapState readies r for Unmap.
func newUnmapState(p *Program) *unmapState {
	u := &unmapState{codec: newBackCodec()}
	if len(p.inv.lost) > 0 || len(p.MergedFamilies()) > 0 {
		_, why := p.Invertible()
		u.refuse = fmt.Errorf("%w: %s", ErrNoInverse, why)
	}
	return u
}

// Unmap reads new cell c back to the old cell it was made from, without
// the forward mapping: its key is parsed under the target layout, the old
// row and qualifier are built from the fields under the source layout, the
// family is renamed back, and timestamp, type and value are kept. The cell
// returned is valid until the next call; LastEntity then gives its entity.
//
// Errors: ErrNoInverse when the program has none (Invertible); ErrBadKey
// when c's key does not parse under the target layout; ErrMappedWrong when
// it parses but no old cell maps to it (see ErrMappedWrong), in which case
// the old cell its key points at is returned beside the error when the
// fields build one (its Row is nil otherwise), so both keys can be named.
func (r *Rekey) Unmap(c *cell.Cell) (cell.Cell, error) {
	p, inv := r.p, &r.p.inv
	if r.u == nil {
		r.u = newUnmapState(p)
	}
	if r.u.refuse != nil {
		return cell.Cell{}, r.u.refuse
	}
	r.prepareUnmap(c)
	var wrong error // the first disagreement; the old cell is still built
	fam, err := p.oldFamily(c.Family)
	if err != nil {
		wrong = err
	}
	r.rec.vals[idxFamily] = Value{Bytes: fam, Set: true}
	famDel := c.Type == cell.DeleteFamily || c.Type == cell.DeleteFamilyVersion
	if err := r.readKey(inv.dstRow, c.Row, &wrong, fromNew); err != nil {
		return cell.Cell{}, fmt.Errorf("new row of %s: %w", cellName(c), err)
	}
	if famDel && (p.dstQual != nil || !p.rowToRow) && wrong == nil {
		wrong = errors.New("a family delete marker, which no old cell of this layout maps to")
	}
	if inv.dstQual != nil && !famDel {
		if err := r.readKey(inv.dstQual, c.Qualifier, &wrong, fromNew); err != nil {
			return cell.Cell{}, fmt.Errorf("new qualifier of %s: %w", cellName(c), err)
		}
	}
	old := *c
	old.Family = fam
	row, qual, err := r.oldKey(c, famDel, &wrong)
	if err != nil {
		return cell.Cell{}, fmt.Errorf("%w: %s maps back to no old key: %v", ErrMappedWrong, cellName(c), err)
	}
	old.Row, old.Qualifier = row, qual
	if wrong == nil {
		wrong = r.checkDerived()
	}
	if wrong != nil {
		return old, fmt.Errorf("%w: %s: %v", ErrMappedWrong, cellName(c), wrong)
	}
	return old, nil
}

// prepareUnmap clears the record for a new cell. Only the timestamp comes
// from the cell itself (a run keeps it); $row and $qualifier of a new cell
// are not the old ones, so they are set only by a new key that holds them.
func (r *Rekey) prepareUnmap(c *cell.Cell) {
	if r.u == nil {
		r.u = newUnmapState(r.p)
	}
	r.rec.reset()
	r.dirty = true
	r.u.codec.arena = r.u.codec.arena[:0]
	r.rec.vals[idxTS] = Value{N: uint64(c.Timestamp), Signed: true, Set: true}
}

// oldFamily renames a new family back to the old one that becomes it. A
// family that is itself renamed to another cannot hold re-keyed cells.
func (p *Program) oldFamily(f []byte) ([]byte, error) {
	for i := range p.families {
		if cell.SameName(p.families[i][1], f) {
			return p.families[i][0], nil
		}
	}
	for i := range p.families {
		if cell.SameName(p.families[i][0], f) {
			return f, fmt.Errorf("family %s is renamed to %s, so no old cell maps into it", printable(f), printable(p.families[i][1]))
		}
	}
	return f, nil
}

// What gave a field its earlier value when readKey reads it again, for
// its messages: for a new key, the cell or an earlier component; for a
// whole old key the new key holds, the rest of the new key.
const (
	fromNew = "the cell or an earlier part of its key gives"
	fromOld = "the new key gives"
)

// readKey reads key under l into the record with the inverse codec,
// component by component. A field the key holds twice (or one it also
// gives the cell, such as $ts, or a kept old key the new key holds) must
// read the same both times; the first that does not is kept in *wrong.
func (r *Rekey) readKey(l *Layout, key []byte, wrong *error, other string) error {
	pos := 0
	for i := range l.comps {
		c := &l.comps[i]
		f := c.field
		if c.typ == Offset {
			f = c.of[0]
		}
		var before Value
		if f >= 0 {
			before = r.rec.vals[f]
		}
		n, err := r.u.codec.get(c, key[pos:], &r.rec)
		if err != nil {
			return fmt.Errorf("%w: %s at byte %d of %s: %s", ErrBadKey, c.label, pos, printable(key), err)
		}
		if *wrong == nil && f >= 0 && before.Set && !sameValue(before, r.rec.vals[f]) {
			*wrong = fmt.Errorf("%s reads %s = %s, but %s %s",
				c.label, r.fieldName(f), r.showValue(f, r.rec.vals[f]), other, r.showValue(f, before))
		}
		pos += n
	}
	if pos != len(key) {
		return fmt.Errorf("%w: %d unexpected bytes after the last component at byte %d of %s", ErrBadKey, len(key)-pos, pos, printable(key))
	}
	return nil
}

// sameValue reports whether two reads of a field gave the same value.
func sameValue(a, b Value) bool { return a.N == b.N && bytes.Equal(a.Bytes, b.Bytes) }

// fieldName names field f, or the spare slot of a component without one.
func (r *Rekey) fieldName(f int) string {
	if f < len(r.p.fields) {
		return r.p.fields[f].name
	}
	return "(unnamed)"
}

// showValue renders a value of field f for messages.
func (r *Rekey) showValue(f int, v Value) string {
	if f < len(r.p.fields) && r.p.fields[f].kind == KindBytes {
		return strconv.Quote(printable(v.Bytes))
	}
	if f < len(r.p.fields) && r.p.fields[f].time {
		return time.UnixMilli(int64(v.N)).UTC().Format("2006-01-02T15:04:05.000Z")
	}
	if v.Signed {
		return strconv.FormatInt(int64(v.N), 10)
	}
	return strconv.FormatUint(v.N, 10)
}

// oldKey builds the old row and qualifier from the fields read. A whole old
// row or qualifier the new key holds is taken as it is, and parsed under the
// source layout so its fields join (and must agree with) the others.
func (r *Rekey) oldKey(c *cell.Cell, famDel bool, wrong *error) (row, qual []byte, err error) {
	inv := &r.p.inv
	if inv.rowKept {
		row = r.rec.vals[idxRow].Bytes
		if err := r.readKey(inv.srcRow, row, wrong, fromOld); err != nil {
			return nil, nil, fmt.Errorf("old row %s: %v", printable(row), err)
		}
	}
	keptQual := inv.qualKept && !famDel
	if keptQual {
		qual = r.rec.vals[idxQualifier].Bytes
		if inv.srcQual != nil {
			if err := r.readKey(inv.srcQual, qual, wrong, fromOld); err != nil {
				return nil, nil, fmt.Errorf("old qualifier %s: %v", printable(qual), err)
			}
		}
	}
	if !inv.rowKept {
		if r.row, err = r.writeKey(r.row[:0], inv.srcRow); err != nil {
			return nil, nil, fmt.Errorf("old row: %v", err)
		}
		row = r.row
	}
	switch {
	case keptQual:
	case famDel || inv.srcQual == nil:
		// Not parsed on either side: the qualifier passed through.
		qual = c.Qualifier
	default:
		if r.qual, err = r.writeKey(r.qual[:0], inv.srcQual); err != nil {
			return nil, nil, fmt.Errorf("old qualifier: %v", err)
		}
		qual = r.qual
	}
	return row, qual, nil
}

// writeKey appends the old key of layout l built from the record with
// the inverse codec. Salts with fields are recomputed; those without, and
// time buckets, are the values the new key held, or for a time bucket the
// bucket of the timestamp its offset is measured in.
func (r *Rekey) writeKey(dst []byte, l *Layout) ([]byte, error) {
	for i := range l.comps {
		c := &l.comps[i]
		if c.typ == TimeBucket {
			if err := r.fillBucket(c); err != nil {
				return dst, fmt.Errorf("%s: %v", c.label, err)
			}
		}
		var err error
		if dst, err = r.u.codec.put(dst, c, &r.rec); err != nil {
			return dst, fmt.Errorf("%s: %v", c.label, err)
		}
	}
	return dst, nil
}

// fillBucket gives a time bucket of the old key that the new key does not
// hold the start of the bucket of its offset's timestamp.
func (r *Rekey) fillBucket(c *component) error {
	if r.rec.vals[c.field].Set {
		return nil
	}
	f, ok := r.p.inv.bucketTS[c.field]
	if !ok || !r.rec.vals[f].Set {
		return errors.New("neither the bucket nor its timestamp has a value")
	}
	start, err := bucketStart(int64(r.rec.vals[f].N), c.span)
	if err != nil {
		return err
	}
	r.rec.vals[c.field] = Value{N: uint64(start), Signed: true, Set: true}
	return nil
}

// checkDerived recomputes what the new key derives from its fields: every
// salt must be the hash of its fields, every time bucket must hold its
// timestamp.
func (r *Rekey) checkDerived() error {
	inv := &r.p.inv
	for _, l := range []*Layout{inv.dstRow, inv.dstQual} {
		if l == nil {
			continue
		}
		for i := range l.comps {
			c := &l.comps[i]
			switch c.typ {
			case Salt:
				want, err := r.u.codec.saltValue(c, &r.rec)
				if got := r.rec.vals[c.field].N; err == nil && got != want {
					return fmt.Errorf("%s is %d, but the salted fields hash to %d", c.label, got, want)
				}
			case TimeBucket:
				ts := r.rec.vals[c.of[0]]
				if !ts.Set {
					continue
				}
				t := int64(ts.N)
				want, err := bucketStart(t, c.span)
				if err != nil || want != int64(r.rec.vals[c.field].N) {
					return fmt.Errorf("%s starts at %s, but its timestamp %s = %s is not in it", c.label,
						r.showValue(c.field, r.rec.vals[c.field]), r.fieldName(c.of[0]), time.UnixMilli(t).UTC().Format("2006-01-02T15:04:05.000Z"))
				}
			}
		}
	}
	return nil
}

// NewFamily returns the family old cells of family old are written to:
// its rename, or old itself.
func (p *Program) NewFamily(old []byte) []byte {
	for i := range p.families {
		if cell.SameName(p.families[i][0], old) {
			return p.families[i][1]
		}
	}
	return old
}
