package pause

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestFor: a pause runs its length; an ended context cuts it short with
// the context's error, and a pause of zero only reports the context.
func TestFor(t *testing.T) {
	start := time.Now()
	if err := For(context.Background(), 20*time.Millisecond); err != nil {
		t.Fatalf("a full pause: %v", err)
	}
	if took := time.Since(start); took < 20*time.Millisecond {
		t.Errorf("a 20 ms pause returned after %v", took)
	}
	if err := For(context.Background(), 0); err != nil {
		t.Errorf("a zero pause on a live context: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := For(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Errorf("an hour's pause on a cancelled context: %v, want context.Canceled", err)
	}
	if err := For(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Errorf("a zero pause on a cancelled context: %v, want context.Canceled", err)
	}
}
