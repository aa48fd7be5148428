package transform

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Built-in fields, filled from the cell before its key is parsed.
const (
	FieldRow       = "$row"
	FieldFamily    = "$family"
	FieldQualifier = "$qualifier"
	FieldTS        = "$ts"
)

const (
	idxRow = iota
	idxFamily
	idxQualifier
	idxTS
	numBuiltins
)

// fieldInfo describes one entry of a Program's field table.
type fieldInfo struct {
	name   string
	kind   Kind
	source bool // parsed from the old key (or built in)
	target bool // readable back from the new key
	// time marks fields that hold epoch millis, so reports can show dates.
	time bool
	pos  Pos
	// bad marks a field whose defining component was already reported
	// (unknown type), so uses of it are not reported again.
	bad bool
}

// Program is a compiled Spec: the layouts of the old and new keys, the field
// table, the family mapping and the entity fields. It is immutable and safe
// for concurrent use; each goroutine maps cells through its own Rekey (New).
type Program struct {
	fields []fieldInfo
	index  map[string]int

	srcRow, srcQual *Layout // srcQual nil: the qualifier is not parsed
	dstRow, dstQual *Layout // dstQual nil: the qualifier passes through

	entity []int
	// entitySigned says, per entity field, whether its number is encoded
	// in entity keys as signed (the sign bit flipped): by the field's kind
	// in the old key (fieldSigned), the same on both sides whatever
	// component read the value, so an entity re-encoded from int to uint
	// is one entity.
	entitySigned []bool
	// families holds the renames as old, new pairs; a job has a handful, so
	// a scan beats a map lookup per cell.
	families [][2][]byte
	// notSource lists the fields a parse of the old key does not set, which
	// must be cleared before each cell; srcSalted says the old key has a
	// salt to check.
	notSource []int
	srcSalted bool
	// dstRowKeep is how many leading components of the new row are made
	// from literals and old-row fields alone: while cells share an old row
	// (a wide row's do), they share that much of their new row, which is
	// then built once (see Rekey.buildRow).
	dstRowKeep int
	// reuseRow says a Rekey keeps an old row's parse for the row's next
	// cells. Only layouts that read fields from the old qualifier do: their
	// rows are wide, while a row of a layout that does not hold a handful
	// of cells, too few to repay copying each row.
	reuseRow bool
	// rowToRow says each new row is made from exactly one old row (the new
	// row is built from old-row fields only and keeps all of them), so a
	// family delete marker means the same thing in the new table.
	rowToRow bool
	// entityOfRow says every entity field is read from the old row alone
	// (see EntityOfOldRow).
	entityOfRow bool
	// builtins says which built-in fields any component uses, so mapping a
	// cell fills only those.
	builtins [numBuiltins]bool
	// inv is how new keys are read back to old ones (Unmap).
	inv  inversePlan
	spec Spec
}

// compiler collects every error instead of stopping at the first, so a user
// fixes a job file in one pass.
type compiler struct {
	p    *Program
	errs SpecErrors
}

func (cc *compiler) errorf(pos Pos, field, format string, args ...any) {
	cc.errs = append(cc.errs, SpecError{Pos: pos, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// Compile checks spec and builds its Program. On failure the error is a
// SpecErrors listing every problem with its position.
func Compile(spec Spec) (*Program, error) {
	p := &Program{index: map[string]int{}, spec: spec}
	cc := &compiler{p: p}
	for _, b := range []struct {
		name string
		kind Kind
	}{{FieldRow, KindBytes}, {FieldFamily, KindBytes}, {FieldQualifier, KindBytes}, {FieldTS, KindNumber}} {
		p.index[b.name] = len(p.fields)
		p.fields = append(p.fields, fieldInfo{name: b.name, kind: b.kind, source: true, time: b.name == FieldTS})
	}

	if len(spec.Source.Row) == 0 {
		cc.errorf(spec.Source.RowPos, "source_layout.row", "no components (expected a list such as [{field: user, type: string}])")
	}
	if len(spec.Target.Row) == 0 {
		cc.errorf(spec.Target.RowPos, "target_layout.row", "no components (expected a list of components)")
	}
	p.srcRow = cc.layout("source_layout.row", spec.Source.Row, true)
	if spec.Source.Qualifier != nil {
		p.srcQual = cc.layout("source_layout.qualifier", spec.Source.Qualifier, true)
	}
	p.dstRow = cc.layout("target_layout.row", spec.Target.Row, false)
	if spec.Target.Qualifier != nil {
		p.dstQual = cc.layout("target_layout.qualifier", spec.Target.Qualifier, false)
	}
	cc.markTargetReadable()

	seen := map[string]bool{}
	for i, name := range spec.Entity {
		path := fmt.Sprintf("entity[%d]", i)
		idx, ok := p.index[name]
		switch {
		case seen[name]:
			cc.errorf(spec.EntityPos, path, "field %q is listed twice", name)
		case !ok || !p.fields[idx].source:
			cc.errorf(spec.EntityPos, path, "field %q is not read from the old key (expected one of: %s)", name, strings.Join(p.sourceFieldNames(), ", "))
		case !p.fields[idx].target:
			cc.errorf(spec.EntityPos, path, "field %q cannot be read back from the new key, so verification could not find it in the new table; put it in the target layout", name)
		default:
			p.entity = append(p.entity, idx)
		}
		seen[name] = true
	}
	if len(spec.Entity) == 0 {
		cc.errorf(spec.EntityPos, "entity", "no entity fields (expected the fields that identify an entity, e.g. [user])")
	}
	for _, f := range p.entity {
		p.entitySigned = append(p.entitySigned, p.fieldSigned(f))
	}

	olds := make([]string, 0, len(spec.Families))
	for old := range spec.Families {
		olds = append(olds, old)
	}
	sort.Strings(olds)
	for _, old := range olds {
		nw := spec.Families[old]
		if old == "" || nw == "" {
			cc.errorf(spec.FamilyPos[old], "families."+old, "family names must not be empty")
			continue
		}
		p.families = append(p.families, [2][]byte{[]byte(old), []byte(nw)})
	}
	p.rowToRow = cc.rowToRow()
	for _, l := range []*Layout{p.srcRow, p.srcQual, p.dstRow, p.dstQual} {
		if l == nil {
			continue
		}
		for i := range l.comps {
			c := &l.comps[i]
			if c.field >= 0 && c.field < numBuiltins {
				p.builtins[c.field] = true
			}
			for _, f := range c.of {
				if f < numBuiltins {
					p.builtins[f] = true
				}
			}
		}
	}
	for _, f := range p.entity {
		if f < numBuiltins {
			p.builtins[f] = true
		}
	}
	p.dstRowKeep = p.rowDerivedPrefix()
	p.reuseRow = p.srcQual != nil
	for i := numBuiltins; i < len(p.fields); i++ {
		if !p.fields[i].source {
			p.notSource = append(p.notSource, i)
		}
	}
	for _, l := range []*Layout{p.srcRow, p.srcQual} {
		if l == nil {
			continue
		}
		for i := range l.comps {
			if c := &l.comps[i]; c.typ == Salt && len(c.of) > 0 && c.field >= 0 {
				p.srcSalted = true
			}
		}
	}
	if len(cc.errs) > 0 {
		sort.SliceStable(cc.errs, func(i, j int) bool {
			a, b := cc.errs[i].Pos, cc.errs[j].Pos
			return a.Line < b.Line || a.Line == b.Line && a.Col < b.Col
		})
		return nil, cc.errs
	}
	p.entityOfRow = p.entityReadFromRow()
	p.planInverse()
	return p, nil
}

// entityReadFromRow says each entity field is the old row itself or a
// field the old row's layout sets and the old qualifier's does not.
func (p *Program) entityReadFromRow() bool {
	inRow, inQual := map[int]bool{idxRow: true}, map[int]bool{}
	mark := func(l *Layout, in map[int]bool) {
		if l == nil {
			return
		}
		for i := range l.comps {
			c := &l.comps[i]
			if c.field >= 0 {
				in[c.field] = true
			}
			if c.typ == Offset {
				// An offset sets the timestamp field its bucket starts.
				in[c.of[0]] = true
			}
		}
	}
	mark(p.srcRow, inRow)
	mark(p.srcQual, inQual)
	for _, f := range p.entity {
		if !inRow[f] || inQual[f] {
			return false
		}
	}
	return len(p.entity) > 0
}

// EntityOfOldRow says an old cell's entity is read from its row alone, so
// the cells of one old row share their entity.
func (p *Program) EntityOfOldRow() bool { return p.entityOfRow }

func (p *Program) sourceFieldNames() []string {
	var out []string
	for _, f := range p.fields {
		if f.source {
			out = append(out, f.name)
		}
	}
	return out
}

// allowed lists the options each type accepts besides type and field.
var allowed = map[Type][]string{
	Uint: {"width"}, Int: {"width"}, SortableInt: {"width"}, ReversedTS: {"width"},
	Fixed: {"width", "pad"}, String: {"sep", "escape"}, Decimal: {"width", "sep"},
	Literal: {"bytes", "hex"}, Salt: {"of", "buckets", "width"},
	TimeBucket: {"of", "unit", "seconds", "format"}, Offset: {"of", "bucket", "width"},
}

func (cc *compiler) layout(path string, specs []ComponentSpec, source bool) *Layout {
	p := cc.p
	l := &Layout{fixedLen: 0}
	for i := range specs {
		s := &specs[i]
		cpath := fmt.Sprintf("%s[%d]", path, i)
		t, ok := ParseType(s.Type)
		if !ok {
			names := make([]string, 0, len(typeNames))
			for _, n := range typeNames {
				if n != "" {
					names = append(names, n)
				}
			}
			cc.errorf(s.posOf("type"), cpath+".type", "unknown type %q (expected one of: %s)", s.Type, strings.Join(names, ", "))
			if source && s.Field != "" && !strings.HasPrefix(s.Field, "$") {
				f := cc.define(s.Field, KindNone, s.posOf("field"))
				p.fields[f].source, p.fields[f].target, p.fields[f].bad = true, true, true
			}
			continue
		}
		for opt := range s.FieldPos {
			if opt == "type" || opt == "field" {
				continue
			}
			if !contains(allowed[t], opt) {
				cc.errorf(s.posOf(opt), cpath+"."+opt, "option %q does not apply to type %s (it takes: type, field, %s)", opt, t, strings.Join(allowed[t], ", "))
			}
		}
		c := component{typ: t, field: -1, width: s.Width, pad: s.Pad, sep: s.Sep, hasSep: s.HasSep, escape: s.Escape}
		c.label = cpath + " (" + t.String()
		if s.Field != "" {
			c.label += " " + s.Field
		}
		c.label += ")"
		last := i == len(specs)-1
		// Bind the fields even when an option is wrong, so one mistake is
		// not reported again by every component that uses the field.
		cc.checkComponent(&c, s, cpath, last)
		cc.bindFields(&c, s, cpath, source, l)
		switch w := c.encodedWidth(); {
		case w < 0 || l.fixedLen < 0:
			l.fixedLen = -1
		default:
			l.fixedLen += w
		}
		if w := c.encodedWidth(); w > 0 {
			l.minLen += w
		}
		l.comps = append(l.comps, c)
	}
	oneTooLong := false // already reported on its own
	for i := range l.comps {
		oneTooLong = oneTooLong || l.comps[i].encodedWidth() > MaxRowKeyLength
	}
	if strings.HasSuffix(path, ".row") && l.minLen > MaxRowKeyLength && !oneTooLong && len(specs) > 0 {
		cc.errorf(specs[0].Pos, path, "the fixed-width components add up to %d bytes, above HBase's row key limit of %d bytes", l.minLen, MaxRowKeyLength)
	}
	return l
}

// inRow reports whether a component path is in a row layout.
func inRow(path string) bool { return strings.Contains(path, ".row[") }

// checkComponent validates the options of one component and fills in
// defaults; it reports false when the component cannot be compiled at all.
func (cc *compiler) checkComponent(c *component, s *ComponentSpec, path string, last bool) bool {
	ok := true
	bad := func(opt, format string, args ...any) {
		cc.errorf(s.posOf(opt), path+"."+opt, format, args...)
		ok = false
	}
	switch c.typ {
	case Uint, Int, SortableInt:
		if s.Width != 1 && s.Width != 2 && s.Width != 4 && s.Width != 8 {
			bad("width", "width %d is not allowed (expected 1, 2, 4 or 8)", s.Width)
		}
	case ReversedTS:
		if s.Width != 0 && s.Width != 8 {
			bad("width", "width %d is not allowed (a reversed timestamp is 8 bytes)", s.Width)
		}
		c.width = 8
	case Fixed:
		if s.Width < 1 || s.Width > 1<<16 {
			bad("width", "width %d is not allowed (expected 1 to 65536 bytes)", s.Width)
		} else if inRow(path) && s.Width > MaxRowKeyLength {
			bad("width", "width %d is above HBase's row key limit of %d bytes", s.Width, MaxRowKeyLength)
		}
	case String:
		if s.Escape && !s.HasSep {
			bad("escape", "escape needs a separator (expected sep: as well)")
		}
		if !s.HasSep && !last {
			bad("sep", "a string with no separator must be the last component, or its end cannot be found (expected sep:, or type fixed with a width)")
		}
	case Decimal:
		switch {
		case s.Width < 0 || s.Width > 20:
			bad("width", "width %d is not allowed (expected 1 to 20 digits, or none with a separator)", s.Width)
		case s.Width > 0 && s.HasSep:
			bad("sep", "a decimal takes either a width or a separator, not both")
		case s.Width == 0 && !s.HasSep && !last:
			bad("width", "a decimal with neither width nor separator must be the last component (expected width: N for zero-padded digits)")
		}
	case Literal:
		if len(s.Bytes) == 0 {
			bad("bytes", "a literal needs bytes (expected bytes: \"text\" or hex: \"00ff\")")
		} else if inRow(path) && len(s.Bytes) > MaxRowKeyLength {
			bad("bytes", "a %d-byte literal is above HBase's row key limit of %d bytes", len(s.Bytes), MaxRowKeyLength)
		}
		if s.Field != "" {
			bad("field", "a literal has no field")
		}
		c.lit = s.Bytes
	case Salt:
		if s.Buckets < 2 || s.Buckets > 65536 {
			bad("buckets", "buckets %d is not allowed (expected 2 to 65536)", s.Buckets)
		}
		switch {
		case s.Width == 0 && s.Buckets <= 256:
			c.width = 1
		case s.Width == 0:
			c.width = 2
		case s.Width != 1 && s.Width != 2:
			bad("width", "width %d is not allowed (expected 1 or 2)", s.Width)
		case s.Width == 1 && s.Buckets > 256:
			bad("width", "%d buckets do not fit in one byte (expected width 2)", s.Buckets)
		}
		c.buckets = uint32(s.Buckets)
	case TimeBucket:
		c.unit = s.Unit
		switch s.Unit {
		case "hour":
			c.span = 3_600_000
		case "day":
			c.span = msPerDay
		case "seconds":
			if s.Seconds < 1 || s.Seconds > math.MaxInt64/1000 {
				bad("seconds", "seconds %d is not allowed (expected a positive bucket length)", s.Seconds)
			}
			c.span = s.Seconds * 1000
		default:
			bad("unit", "unit %q is not allowed (expected hour, day or seconds)", s.Unit)
		}
		if s.Unit != "seconds" && s.Seconds != 0 {
			bad("seconds", "seconds applies only to unit: seconds")
		}
		switch s.Format {
		case "", "binary":
		case "iso":
			c.iso = true
			c.isoW, c.isoLayout = isoWidth(s.Unit), isoLayouts[s.Unit]
		default:
			bad("format", "format %q is not allowed (expected binary or iso)", s.Format)
		}
	case Offset:
		switch s.Width {
		case 0:
			c.width = 4
		case 4, 8:
		default:
			bad("width", "width %d is not allowed (expected 4 or 8)", s.Width)
		}
	}
	return ok
}

// bindFields resolves the field names a component reads or writes.
func (cc *compiler) bindFields(c *component, s *ComponentSpec, path string, source bool, l *Layout) {
	p := cc.p
	if strings.HasPrefix(s.Field, "$") && (source || c.typ == TimeBucket || c.typ == Salt) {
		cc.errorf(s.posOf("field"), path+".field", "names starting with $ are reserved for the built-in fields")
		return
	}
	kind := c.kind()
	if source {
		// The old key defines the field.
		switch c.typ {
		case Literal:
		case Offset:
			cc.bindOffset(c, s, path, l, true)
			return
		default:
			if s.Field == "" {
				if c.typ == Salt || c.typ == TimeBucket {
					break
				}
				cc.errorf(s.Pos, path+".field", "missing field name (expected field: NAME)")
				return
			}
			if idx, dup := p.index[s.Field]; dup && p.fields[idx].source {
				cc.errorf(s.posOf("field"), path+".field", "field %q is read twice from the old key", s.Field)
				return
			}
			c.field = cc.define(s.Field, kind, s.posOf("field"))
			p.fields[c.field].source = true
			p.fields[c.field].time = c.typ == ReversedTS || c.typ == TimeBucket
		}
		if c.typ == Salt && len(s.Of) > 0 {
			// Salts of the old key are checked once the fields are read.
			cc.bindOf(c, s, path, true)
		}
		if c.typ == TimeBucket && len(s.Of) > 0 {
			cc.errorf(s.posOf("of"), path+".of", "a time bucket in the old key cannot rebuild its timestamp (drop of:, add an offset component)")
		}
		return
	}
	// The new key is built from fields of the old one.
	switch c.typ {
	case Literal:
		return
	case Offset:
		cc.bindOffset(c, s, path, l, false)
		return
	case Salt, TimeBucket:
		if !cc.bindOf(c, s, path, false) {
			return
		}
		if s.Field != "" {
			if idx, ok := p.index[s.Field]; ok && p.fields[idx].source {
				cc.errorf(s.posOf("field"), path+".field", "field %q already names a field of the old key (expected a new name for the %s)", s.Field, c.typ)
				return
			}
			c.field = cc.define(s.Field, KindNumber, s.posOf("field"))
			p.fields[c.field].time = c.typ == TimeBucket
		}
		return
	}
	if s.Field == "" {
		cc.errorf(s.Pos, path+".field", "missing field name (expected field: NAME, one of: %s)", strings.Join(p.sourceFieldNames(), ", "))
		return
	}
	idx, ok := p.index[s.Field]
	if !ok || !p.fields[idx].source {
		cc.errorf(s.posOf("field"), path+".field", "field %q is not read from the old key (expected one of: %s)", s.Field, strings.Join(p.sourceFieldNames(), ", "))
		return
	}
	if p.fields[idx].bad {
		return
	}
	if p.fields[idx].kind != kind {
		cc.errorf(s.posOf("field"), path+".field", "field %q holds %s but type %s encodes %s", s.Field, p.fields[idx].kind, c.typ, kind)
		return
	}
	c.field = idx
	if c.typ == ReversedTS {
		p.fields[idx].time = true
	}
}

// bindOf resolves the of: list of a salt or time bucket.
func (cc *compiler) bindOf(c *component, s *ComponentSpec, path string, source bool) bool {
	p := cc.p
	switch {
	case len(s.Of) == 0:
		cc.errorf(s.posOf("of"), path+".of", "missing of: (expected the field(s) the %s is computed from)", c.typ)
		return false
	case c.typ == TimeBucket && len(s.Of) != 1:
		cc.errorf(s.posOf("of"), path+".of", "a time bucket takes one timestamp field, got %d", len(s.Of))
		return false
	}
	for _, name := range s.Of {
		idx, ok := p.index[name]
		if source && !ok {
			// A salt's fields may come later in the old key.
			idx = cc.define(name, KindNone, s.posOf("of"))
			ok = true
		}
		if !ok || !source && !p.fields[idx].source {
			cc.errorf(s.posOf("of"), path+".of", "field %q is not read from the old key (expected one of: %s)", name, strings.Join(p.sourceFieldNames(), ", "))
			return false
		}
		if c.typ == TimeBucket && p.fields[idx].kind != KindNumber && !p.fields[idx].bad {
			cc.errorf(s.posOf("of"), path+".of", "field %q holds %s; a time bucket needs a number of epoch millis", name, p.fields[idx].kind)
			return false
		}
		if c.typ == TimeBucket {
			p.fields[idx].time = true
		}
		c.of = append(c.of, idx)
		c.ofKinds = append(c.ofKinds, p.fields[idx].kind)
	}
	return true
}

// bindOffset links an offset to its time bucket (which must come earlier in
// the same key: row before qualifier) and its timestamp field.
func (cc *compiler) bindOffset(c *component, s *ComponentSpec, path string, l *Layout, source bool) {
	p := cc.p
	if s.Bucket == "" {
		cc.errorf(s.Pos, path+".bucket", "missing bucket: (expected the field of a time_bucket earlier in the key)")
		return
	}
	if len(s.Of) != 1 {
		cc.errorf(s.posOf("of"), path+".of", "an offset takes one timestamp field (expected of: [ts])")
		return
	}
	var tb *component
	layouts := []*Layout{l}
	if source && l != p.srcRow && p.srcRow != nil {
		layouts = append(layouts, p.srcRow)
	}
	if !source && l != p.dstRow && p.dstRow != nil {
		layouts = append(layouts, p.dstRow)
	}
	for _, ll := range layouts {
		for i := range ll.comps {
			if b := &ll.comps[i]; b.typ == TimeBucket && b.field >= 0 && p.fields[b.field].name == s.Bucket {
				tb = b
			}
		}
	}
	if tb == nil {
		cc.errorf(s.posOf("bucket"), path+".bucket", "no time_bucket with field %q earlier in this key", s.Bucket)
		return
	}
	c.bucket, c.span = tb.field, tb.span
	if c.width == 4 && c.span > math.MaxUint32+1 {
		cc.errorf(s.posOf("width"), path+".width", "a bucket of %d ms does not fit in a 4-byte offset (expected width 8)", c.span)
		return
	}
	name := s.Of[0]
	if source {
		if idx, dup := p.index[name]; dup && p.fields[idx].source {
			cc.errorf(s.posOf("of"), path+".of", "field %q is read twice from the old key", name)
			return
		}
		c.of = []int{cc.define(name, KindNumber, s.posOf("of"))}
		p.fields[c.of[0]].source = true
		p.fields[c.of[0]].time = true
		return
	}
	idx, ok := p.index[name]
	if ok && p.fields[idx].bad {
		return
	}
	if !ok || !p.fields[idx].source || p.fields[idx].kind != KindNumber {
		cc.errorf(s.posOf("of"), path+".of", "field %q is not a number read from the old key", name)
		return
	}
	if len(tb.of) != 1 || tb.of[0] != idx {
		cc.errorf(s.posOf("of"), path+".of", "the offset must be of the same timestamp as its bucket %q", s.Bucket)
		return
	}
	c.of = []int{idx}
}

// define adds a field, or completes one that a salt's of: named before its
// component was seen.
func (cc *compiler) define(name string, kind Kind, pos Pos) int {
	p := cc.p
	if idx, ok := p.index[name]; ok {
		if p.fields[idx].kind == KindNone {
			p.fields[idx].kind = kind
		}
		return idx
	}
	p.index[name] = len(p.fields)
	p.fields = append(p.fields, fieldInfo{name: name, kind: kind, pos: pos})
	return len(p.fields) - 1
}

// markTargetReadable records which fields a parse of the new key recovers,
// and checks that salts in the old key named fields that exist.
func (cc *compiler) markTargetReadable() {
	p := cc.p
	for i := range p.fields {
		if p.fields[i].kind == KindNone && !p.fields[i].bad {
			cc.errorf(p.fields[i].pos, "source_layout", "salt field %q is not read from the old key", p.fields[i].name)
		}
	}
	// A salt of the old key may name fields defined after it: settle the
	// kinds it hashes by now that every field is known.
	for _, l := range []*Layout{p.srcRow, p.srcQual, p.dstRow, p.dstQual} {
		if l == nil {
			continue
		}
		for i := range l.comps {
			c := &l.comps[i]
			c.ofKinds = c.ofKinds[:0]
			for _, f := range c.of {
				c.ofKinds = append(c.ofKinds, p.fields[f].kind)
			}
		}
	}
	for _, l := range []*Layout{p.dstRow, p.targetQual()} {
		if l == nil {
			continue
		}
		for i := range l.comps {
			c := &l.comps[i]
			if c.field >= 0 && c.typ != Offset {
				p.fields[c.field].target = true
			}
			if c.typ == Offset && len(c.of) == 1 {
				p.fields[c.of[0]].target = true
			}
		}
	}
	if p.dstQual == nil {
		p.fields[idxQualifier].target = true
	}
}

func (cc *compiler) rowToRow() bool {
	p := cc.p
	if p.srcRow == nil || p.dstRow == nil {
		return false
	}
	fromRow := map[int]bool{idxRow: true}
	for i := range p.srcRow.comps {
		if c := &p.srcRow.comps[i]; c.field >= 0 {
			fromRow[c.field] = true
		}
	}
	kept := map[int]bool{}
	for i := range p.dstRow.comps {
		c := &p.dstRow.comps[i]
		if c.typ == TimeBucket {
			return false
		}
		if c.typ != Salt && c.field >= 0 {
			if !fromRow[c.field] {
				return false
			}
			kept[c.field] = true
		}
		for _, f := range c.of {
			if !fromRow[f] {
				return false
			}
		}
	}
	if kept[idxRow] {
		return true
	}
	for i := range p.srcRow.comps {
		if c := &p.srcRow.comps[i]; c.field >= 0 && c.typ != Salt && !kept[c.field] {
			return false
		}
	}
	return true
}

// targetQual is the layout the new qualifier is read with: its own, or the
// old one when the qualifier passes through unchanged.
func (p *Program) targetQual() *Layout {
	if p.dstQual != nil {
		return p.dstQual
	}
	return p.srcQual
}

func (c *component) kind() Kind {
	switch c.typ {
	case Fixed, String:
		return KindBytes
	case Literal:
		return KindNone
	}
	return KindNumber
}

// encodedWidth is the component's byte width, or -1 when it varies.
func (c *component) encodedWidth() int {
	switch c.typ {
	case String:
		return -1
	case Decimal:
		if c.width == 0 {
			return -1
		}
		return c.width
	case Literal:
		return len(c.lit)
	case TimeBucket:
		if c.iso {
			return c.isoW
		}
		return 8
	}
	return c.width
}

// Sorts reports whether the component's bytes sort in the order of its
// value (reversed timestamps sort newest first, which is their point).
func (c *component) sorts() bool {
	switch c.typ {
	case Int:
		return false
	case Decimal:
		return c.width > 0
	case String:
		return !c.hasSep || c.sep == 0x00
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// String renders the layout as its components joined by " | ", e.g.
// "user:fixed(6) | day:time_bucket(day)".
func (l *Layout) String() string {
	return l.describe(nil)
}

func (l *Layout) describe(fields []fieldInfo) string {
	parts := make([]string, 0, len(l.comps))
	name := func(f int) string {
		if f >= 0 && f < len(fields) {
			return fields[f].name
		}
		return "?"
	}
	for i := range l.comps {
		c := &l.comps[i]
		var b strings.Builder
		switch {
		case c.typ == Literal:
			b.WriteString(strconv.Quote(string(c.lit)))
			parts = append(parts, b.String())
			continue
		case c.typ == Offset:
			fmt.Fprintf(&b, "%s:offset(in %s", name(c.of[0]), name(c.bucket))
		case c.field >= 0:
			fmt.Fprintf(&b, "%s:%s(", name(c.field), c.typ)
		default:
			fmt.Fprintf(&b, "%s(", c.typ)
		}
		var opts []string
		switch c.typ {
		case Uint, Int, SortableInt, Fixed:
			opts = append(opts, strconv.Itoa(c.width))
		case Decimal:
			if c.width > 0 {
				opts = append(opts, strconv.Itoa(c.width)+" digits")
			}
		case Salt:
			ofs := make([]string, len(c.of))
			for j, f := range c.of {
				ofs[j] = name(f)
			}
			opts = append(opts, strings.Join(ofs, ","), strconv.Itoa(int(c.buckets))+" buckets")
		case TimeBucket:
			if len(c.of) > 0 {
				opts = append(opts, name(c.of[0]))
			}
			unit := c.unit
			if unit == "seconds" {
				unit = strconv.FormatInt(c.span/1000, 10) + "s"
			}
			opts = append(opts, unit)
			if c.iso {
				opts = append(opts, "iso")
			}
		}
		if (c.typ == String || c.typ == Decimal && c.width == 0) && !c.hasSep {
			opts = append(opts, "to the end")
		}
		if c.hasSep {
			sep := fmt.Sprintf("sep %q", c.sep)
			if c.escape {
				sep += " escaped"
			}
			opts = append(opts, sep)
		}
		if c.typ == Offset {
			if len(opts) > 0 {
				b.WriteString(", ")
			}
		}
		b.WriteString(strings.Join(opts, ", "))
		b.WriteByte(')')
		parts = append(parts, strings.TrimSuffix(b.String(), "()"))
	}
	return strings.Join(parts, " | ")
}

// Describe renders the old and new key layouts, one line each, as
// "row / qualifier" (a qualifier that is not parsed or copied shows as *).
func (p *Program) Describe() (old, new string) {
	side := func(row, qual *Layout, pass string) string {
		q := pass
		if qual != nil {
			q = qual.describe(p.fields)
		}
		return row.describe(p.fields) + "  /  " + q
	}
	return side(p.srcRow, p.srcQual, "* (not parsed)"), side(p.dstRow, p.dstQual, "* (copied)")
}

// rowDerivedPrefix counts the leading components of the new row whose
// inputs are literals and fields the old row's own components set (not
// built-ins: $row is the whole old row, but $family and $ts are not).
func (p *Program) rowDerivedPrefix() int {
	if p.srcRow == nil || p.dstRow == nil {
		return 0
	}
	fromRow := map[int]bool{}
	for i := range p.srcRow.comps {
		if f := p.srcRow.comps[i].field; f >= numBuiltins {
			fromRow[f] = true
		}
	}
	for i := range p.dstRow.comps {
		c := &p.dstRow.comps[i]
		var inputs []int
		switch c.typ {
		case Literal:
		case Salt, TimeBucket, Offset:
			inputs = c.of
		default:
			inputs = []int{c.field}
		}
		for _, f := range inputs {
			if !fromRow[f] {
				return i
			}
		}
	}
	return len(p.dstRow.comps)
}
