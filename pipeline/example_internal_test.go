package pipeline

import (
	"fmt"
	"testing"
)

// TestExamplesKeepEachMessageOnce: the versions of one rejected cell give
// the same message, and the summary kept up to 20 copies of it; each
// message is kept once, up to 20 different ones.
func TestExamplesKeepEachMessageOnce(t *testing.T) {
	r := &Run{}
	for range 5 {
		r.example("rejected: %s", "u00225/e:q1")
	}
	if len(r.examples) != 1 {
		t.Fatalf("one message five times kept %d times", len(r.examples))
	}
	for i := range 40 {
		r.example("rejected: cell %d", i)
	}
	if len(r.examples) != 20 || r.examples[1] != fmt.Sprintf("rejected: cell %d", 0) {
		t.Errorf("kept %d examples (%q...), want the first 20", len(r.examples), r.examples[:2])
	}
}
