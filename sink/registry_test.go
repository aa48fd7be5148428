package sink

import (
	"context"
	"strings"
	"testing"

	"github.com/rekeyhq/rekey/job"
)

// TestRegisterTwicePanics: a kind registered twice is a mistake of the
// build, and Register panics naming it rather than let the second
// builder replace the first; the first stays.
func TestRegisterTwicePanics(t *testing.T) {
	const k job.SinkKind = "test-twice"
	first := Kind{Build: func(context.Context, Env) (Sink, error) { return DryRun{}, nil }, Spread: true}
	Register(k, first)
	t.Cleanup(func() {
		mu.Lock()
		delete(kinds, k)
		mu.Unlock()
	})
	func() {
		defer func() {
			r := recover()
			if r == nil {
				t.Fatal("a second Register of one kind did not panic")
			}
			if msg, _ := r.(string); !strings.Contains(msg, string(k)) || !strings.Contains(msg, "twice") {
				t.Errorf("panic %v does not name the kind registered twice", r)
			}
		}()
		Register(k, Kind{Build: first.Build})
	}()
	if got, ok := Lookup(k); !ok || !got.Spread {
		t.Errorf("after the refused second Register, Lookup(%s) = %+v, %v: want the first kind", k, got, ok)
	}
}

// TestLookupUnknown: a kind no package registered is not found; the
// empty kind is puts, the job's default (not linked into this package's
// test, so not found either); Kinds and KindList name what is.
func TestLookupUnknown(t *testing.T) {
	if _, ok := Lookup("kafka"); ok {
		t.Error("Lookup(kafka) found a kind no package registered")
	}
	if _, ok := Lookup(""); ok {
		t.Error("Lookup(\"\") found puts, which this test binary does not link")
	}
	if got := KindList(); got != "dry-run" {
		t.Errorf("KindList() = %q, want only dry-run, the one kind package sink registers", got)
	}
}
