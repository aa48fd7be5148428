package verify

import (
	"fmt"

	"github.com/rekeyhq/rekey/transform"
)

// Method is how a comparison relates the old cells to the new ones.
type Method string

// Methods. The zero Method chooses: Inverse when the job's new key keeps
// every old field (transform.Program.Invertible), else Forward.
const (
	// Inverse reads every new cell back to the old cell it was made from
	// (transform.Rekey.Unmap: the new key parsed under the new layout, the
	// old key built under the old one, salts and time buckets checked) and
	// compares that with the old cells read as they are. The forward
	// mapping is never run, and keys are read and written by a codec of
	// the inverse's own, so a bug in the mapping, or one a component's
	// forward parser and builder share, shows as a mismatch.
	Inverse Method = "inverse"
	// Forward maps the old cells through the job's transform (or
	// Config.NewMapper) and compares the result with the new cells. It is
	// the only way when the new key drops or merges fields, and it cannot
	// see a bug in the mapping, which it computes again the same way.
	Forward Method = "forward"
	// Both runs the two. An entity they disagree on is mapped wrong by
	// the transform, not damaged in the data.
	Both Method = "both"
)

// ParseMethod reads a method name as the job file and --method give it;
// the empty string is the zero Method.
func ParseMethod(s string) (Method, error) {
	switch m := Method(s); m {
	case "", Inverse, Forward, Both:
		return m, nil
	}
	return "", fmt.Errorf("method %q is not one of inverse, forward, both", s)
}

// ChooseMethod returns the method a comparison of p uses for m, and why
// (for the report): the zero Method is Inverse when p has an inverse and
// Forward when it does not, the reason being p.Invertible's ("the new key
// keeps every old field", "the new key drops field ts"). Inverse or Both
// for a program without an inverse is an error wrapping
// transform.ErrNoInverse that says what the new key drops.
func ChooseMethod(p *transform.Program, m Method) (Method, string, error) {
	ok, why := p.Invertible()
	switch m {
	case "":
		if ok {
			return Inverse, why, nil
		}
		return Forward, why, nil
	case Forward:
		return Forward, "asked for; " + why, nil
	case Inverse, Both:
		if !ok {
			return "", "", noInverse{m, why}
		}
		return m, "asked for; " + why, nil
	}
	return "", "", fmt.Errorf("verify: method %q is not one of inverse, forward, both", m)
}

// noInverse refuses a method that needs an inverse the layouts lack.
type noInverse struct {
	m   Method
	why string
}

func (e noInverse) Error() string {
	return fmt.Sprintf("method %s: %s, so new cells cannot be read back to old ones (use method forward)", e.m, e.why)
}

func (e noInverse) Unwrap() error { return transform.ErrNoInverse }

// describe says in a few words what a method compares, for reports.
func (m Method) describe() string {
	switch m {
	case Inverse:
		return "each new cell read back to its old key and compared with the old cells as they are"
	case Forward:
		return "old cells mapped through the job's transform and compared with the new cells"
	case Both:
		return "both ways; an entity they disagree on is mapped wrong by the transform, not damaged in the data"
	}
	return string(m)
}
