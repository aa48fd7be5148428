package transform

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoEntityRange marks a layout in which one entity's rows are not one
// contiguous key range: its entity fields are not a leading prefix of the
// row key (after literals and salts of entity fields).
var ErrNoEntityRange = errors.New("transform: the entity's rows are not one key range")

// KeyRange is a range of row keys: Start inclusive, Stop exclusive; an empty
// Stop means to the end of the table.
type KeyRange struct {
	Start, Stop []byte
}

// String renders the range with both ends printable.
func (k KeyRange) String() string {
	stop := printable(k.Stop)
	if len(k.Stop) == 0 {
		stop = "(end)"
	}
	return "[" + printable(k.Start) + ", " + stop + ")"
}

// SourceRange returns the old row keys that hold every row of the entity
// whose key (SourceEntity's bytes) is given.
func (p *Program) SourceRange(entity []byte) (KeyRange, error) {
	return p.entityRange(p.srcRow, "source_layout.row", entity)
}

// TargetRange returns the new row keys that hold every row of the entity.
// With a salted new layout the salt is computed from the entity, so the
// range lies in the entity's one bucket.
func (p *Program) TargetRange(entity []byte) (KeyRange, error) {
	return p.entityRange(p.dstRow, "target_layout.row", entity)
}

// entityRange builds the longest key prefix the entity fixes: literals,
// salts of entity fields and the entity fields' own components, up to the
// first component that varies within the entity. Every entity field must be
// in that prefix, else the entity's rows interleave with other entities'.
func (p *Program) entityRange(l *Layout, name string, entity []byte) (KeyRange, error) {
	rec, err := p.decodeEntity(entity)
	if err != nil {
		return KeyRange{}, err
	}
	isEntity := make(map[int]bool, len(p.entity))
	for _, f := range p.entity {
		isEntity[f] = true
	}
	covered := 0
	var prefix []byte
	exact := true // the prefix is the whole key
	for i := range l.comps {
		c := &l.comps[i]
		switch {
		case c.typ == Literal:
		case c.typ == Salt:
			for _, f := range c.of {
				if !isEntity[f] {
					return KeyRange{}, fmt.Errorf("%w: %s: %s hashes %s, which is not an entity field, so one entity's rows lie in every bucket", ErrNoEntityRange, name, c.label, p.fields[f].name)
				}
			}
		case c.field >= 0 && isEntity[c.field] && c.typ != TimeBucket && c.typ != Offset:
			covered++
		default:
			exact = false
		}
		if !exact {
			break
		}
		if prefix, err = c.build(prefix, rec); err != nil {
			return KeyRange{}, fmt.Errorf("%s: %s: entity %s: %w", name, c.label, p.FormatEntity(entity), err)
		}
		if c.encodedWidth() < 0 && !c.hasSep && i < len(l.comps)-1 {
			// An unterminated string or decimal that is not last: a
			// longer value would share the prefix (compile refuses such
			// layouts; this guards the range).
			return KeyRange{}, fmt.Errorf("%w: %s: %s has no end marker", ErrNoEntityRange, name, c.label)
		}
	}
	if covered < len(p.entity) {
		return KeyRange{}, fmt.Errorf("%w: %s does not start with the entity fields %s (after any literal or salt)", ErrNoEntityRange, name, strings.Join(p.Entity(), ", "))
	}
	if exact {
		// One row: the entity fixes the whole key.
		return KeyRange{Start: prefix, Stop: append(append([]byte(nil), prefix...), 0)}, nil
	}
	return KeyRange{Start: prefix, Stop: prefixEnd(prefix)}, nil
}

// prefixEnd returns the smallest key greater than every key that starts
// with prefix, or nil (the end of the table) when there is none.
func prefixEnd(prefix []byte) []byte {
	end := append([]byte(nil), prefix...)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] != 0xFF {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}

// decodeEntity reads an entity key back into a record with the entity
// fields set; numbers take the signedness of the old-key component that
// reads them, as appendEntity wrote them.
func (p *Program) decodeEntity(key []byte) (*record, error) {
	rec := &record{vals: make([]Value, len(p.fields))}
	rest := key
	for _, f := range p.entity {
		fi := p.fields[f]
		if fi.kind == KindNumber {
			if len(rest) < 8 {
				return nil, fmt.Errorf("%w: entity key %x: %s needs 8 bytes, %d left", ErrBadKey, key, fi.name, len(rest))
			}
			u := binary.BigEndian.Uint64(rest)
			rest = rest[8:]
			v := Value{N: u, Set: true}
			if p.fieldSigned(f) {
				v.N, v.Signed = u^1<<63, true
			}
			rec.vals[f] = v
			continue
		}
		var val []byte
		done := false
		for len(rest) > 0 && !done {
			switch {
			case rest[0] != 0x00:
				val = append(val, rest[0])
				rest = rest[1:]
			case len(rest) > 1 && rest[1] == 0xFF:
				val = append(val, 0)
				rest = rest[2:]
			case len(rest) > 1 && rest[1] == 0x01:
				rest = rest[2:]
				done = true
			default:
				return nil, fmt.Errorf("%w: entity key %x: %s has a bad escape", ErrBadKey, key, fi.name)
			}
		}
		if !done {
			return nil, fmt.Errorf("%w: entity key %x: %s is not terminated", ErrBadKey, key, fi.name)
		}
		rec.vals[f] = Value{Bytes: val, Set: true}
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%w: entity key %x: %d bytes after the last entity field", ErrBadKey, key, len(rest))
	}
	return rec, nil
}

// ParseEntity turns an entity written by a person into its key: either
// "hex:" and the key's hex (as reports print it), or name=value pairs for
// every entity field in order, separated by commas, as FormatEntity writes
// them (string values in the printable form, \xHH for other bytes; a comma
// inside a value must be written \x2C).
func (p *Program) ParseEntity(s string) ([]byte, error) {
	if h, ok := strings.CutPrefix(s, "hex:"); ok {
		key, err := hex.DecodeString(h)
		if err != nil {
			return nil, fmt.Errorf("entity %q: %w", s, err)
		}
		if _, err := p.decodeEntity(key); err != nil {
			return nil, err
		}
		return key, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != len(p.entity) {
		return nil, fmt.Errorf("entity %q: expected %d field(s) %s as name=value", s, len(p.entity), strings.Join(p.Entity(), ","))
	}
	var key []byte
	for i, f := range p.entity {
		fi := p.fields[f]
		name, val, ok := strings.Cut(parts[i], "=")
		if !ok || name != fi.name {
			return nil, fmt.Errorf("entity %q: field %d should be %s=VALUE", s, i+1, fi.name)
		}
		if fi.kind == KindNumber {
			var u uint64
			if p.fieldSigned(f) {
				n, err := strconv.ParseInt(val, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("entity %q: %s: %w", s, name, err)
				}
				u = uint64(n) ^ 1<<63
			} else {
				n, err := strconv.ParseUint(val, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("entity %q: %s: %w", s, name, err)
				}
				u = n
			}
			key = binary.BigEndian.AppendUint64(key, u)
			continue
		}
		b, err := parsePrintable(val)
		if err != nil {
			return nil, fmt.Errorf("entity %q: %s: %w", s, name, err)
		}
		for _, c := range b {
			if c == 0 {
				key = append(key, 0x00, 0xFF)
			} else {
				key = append(key, c)
			}
		}
		key = append(key, 0x00, 0x01)
	}
	return key, nil
}

// parsePrintable reverses AppendPrintable.
func parsePrintable(s string) ([]byte, error) {
	var out []byte
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' {
			out = append(out, s[i])
			continue
		}
		if i+4 > len(s) || s[i+1] != 'x' {
			return nil, fmt.Errorf("bad escape at byte %d of %q (expected \\xHH)", i, s)
		}
		b, err := hex.DecodeString(s[i+2 : i+4])
		if err != nil {
			return nil, fmt.Errorf("bad escape at byte %d of %q: %w", i, s, err)
		}
		out = append(out, b[0])
		i += 3
	}
	return out, nil
}
