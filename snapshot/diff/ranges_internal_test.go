package diff

import (
	"fmt"
	"testing"
)

func r(a, b string) Range { return Range{[]byte(a), []byte(b)} }

func show(rs []Range) string {
	s := ""
	for _, x := range rs {
		s += fmt.Sprintf("[%s,%s)", x.Start, x.Stop)
	}
	return s
}

// TestUnion: overlapping and touching ranges merge, others stay apart,
// in row order whatever the input order.
func TestUnion(t *testing.T) {
	for _, tc := range []struct {
		in   []Range
		want string
	}{
		{nil, ""},
		{[]Range{r("c", "d"), r("a", "b")}, "[a,b)[c,d)"},
		{[]Range{r("a", "c"), r("b", "d")}, "[a,d)"},
		{[]Range{r("a", "b"), r("b", "c")}, "[a,c)"},              // a split's two halves
		{[]Range{r("a", "z"), r("c", "d"), r("e", "f")}, "[a,z)"}, // inside
	} {
		if got := show(union(tc.in)); got != tc.want {
			t.Errorf("union(%s) = %s, want %s", show(tc.in), got, tc.want)
		}
	}
}

// TestWithinAndMeets: the touched ranges clipped to a split's rows, and
// the test that decides whether a file is read.
func TestWithinAndMeets(t *testing.T) {
	p := &Plan{ranges: []Range{r("b", "d"), r("f", "h"), r("k", "m")}}
	for _, tc := range []struct {
		start, stop string
		want        string
	}{
		{"", "", "[b,d)[f,h)[k,m)"},
		{"c", "g", "[c,d)[f,g)"},
		{"d", "f", ""},
		{"l", "", "[l,m)"},
	} {
		if got := show(p.within([]byte(tc.start), []byte(tc.stop))); got != tc.want {
			t.Errorf("within(%q, %q) = %s, want %s", tc.start, tc.stop, got, tc.want)
		}
	}
	for _, tc := range []struct {
		start, stop string
		want        bool
	}{
		{"a", "b", false}, {"a", "b\x00", true}, {"d", "f", false}, {"g", "j", true}, {"m", "z", false}, {"a", "z", true},
	} {
		if got := p.meets([]byte(tc.start), []byte(tc.stop)); got != tc.want {
			t.Errorf("meets(%q, %q) = %v, want %v", tc.start, tc.stop, got, tc.want)
		}
	}
}
