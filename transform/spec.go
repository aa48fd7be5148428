package transform

import (
	"fmt"
	"strings"
)

// Pos is where a piece of a spec came from (a job file line and column), so
// compile errors can point at it. The zero Pos means "unknown".
type Pos struct {
	Line, Col int
}

// ComponentSpec is one component of a layout as the user wrote it. Which
// options apply depends on Type; see the package documentation.
type ComponentSpec struct {
	Type string
	// Field is the field the component parses into or builds from. Optional
	// for literal, salt and time_bucket (which then cannot be read back).
	Field string
	// Width is the byte width (uint, int, sortable_int, fixed, salt, offset)
	// or digit count (decimal).
	Width int
	// Pad is the fill byte of a fixed string.
	Pad byte
	// Sep is the separator of a string or variable decimal; HasSep says it
	// was given (0x00 is a valid separator).
	Sep    byte
	HasSep bool
	// Escape makes a string escape its separator instead of refusing it.
	Escape bool
	// Bytes is the content of a literal.
	Bytes []byte
	// Of names the input fields: the salted fields, or the one timestamp of a
	// time_bucket or offset.
	Of []string
	// Buckets is the salt bucket count.
	Buckets int
	// Unit is the time_bucket unit: hour, day or seconds; Seconds is the
	// bucket length for unit seconds.
	Unit    string
	Seconds int64
	// Format is the time_bucket encoding: binary (default) or iso.
	Format string
	// Bucket names the time_bucket field an offset is measured from.
	Bucket string

	// Pos is where the component starts; FieldPos maps option names to
	// where each was given, for errors about one option.
	Pos      Pos
	FieldPos map[string]Pos
}

// posOf returns where option name was given, or where the component starts.
func (c *ComponentSpec) posOf(name string) Pos {
	if p, ok := c.FieldPos[name]; ok {
		return p
	}
	return c.Pos
}

// LayoutSpec describes a row key and, optionally, a qualifier. A nil
// Qualifier means the qualifier is opaque: not parsed (source) or passed
// through unchanged (target).
type LayoutSpec struct {
	Row       []ComponentSpec
	Qualifier []ComponentSpec
	RowPos    Pos
	QualPos   Pos
}

// Spec is everything Compile needs to build a re-keying program.
type Spec struct {
	Source LayoutSpec
	Target LayoutSpec
	// Entity names the fields that identify an entity; they must be readable
	// from both the old and the new key.
	Entity    []string
	EntityPos Pos
	// Families renames column families (old -> new); families not listed
	// pass through.
	Families   map[string]string
	FamilyPos  map[string]Pos
	FamiliesAt Pos
}

// SpecError is one problem in a spec: where, which option, what is wrong and
// what was expected.
type SpecError struct {
	Pos   Pos
	Field string // dotted path, e.g. target.row[1].width
	Msg   string
}

// Error renders the problem as "line L col C: field: message".
func (e SpecError) Error() string {
	var b strings.Builder
	if e.Pos.Line > 0 {
		fmt.Fprintf(&b, "line %d col %d: ", e.Pos.Line, e.Pos.Col)
	}
	if e.Field != "" {
		b.WriteString(e.Field)
		b.WriteString(": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}

// SpecErrors is every problem Compile found, in spec order.
type SpecErrors []SpecError

// Error joins the problems, one per line.
func (es SpecErrors) Error() string {
	parts := make([]string, len(es))
	for i, e := range es {
		parts[i] = e.Error()
	}
	return strings.Join(parts, "\n")
}
