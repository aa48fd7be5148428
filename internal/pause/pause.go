// Package pause waits between the attempts of a retried operation, no
// longer than its caller's context allows.
package pause

import (
	"context"
	"time"
)

// For waits d, or until ctx ends. It returns ctx's error when ctx ended
// first, or had ended already when d is zero or less.
func For(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
