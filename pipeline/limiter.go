package pipeline

import (
	"context"
	"math"
	"sync"
	"time"
)

// limiter is a token bucket whose rate can change while goroutines wait on
// it, and which can be paused. A rate of 0 means no limit. The bucket holds
// at most a fifth of a second of tokens, so a burst after an idle spell
// stays small and the measured rate over any few seconds stays at the cap.
type limiter struct {
	mu     sync.Mutex
	rate   float64 // tokens per second; 0 = unlimited
	tokens float64
	last   time.Time
	paused bool
	wake   chan struct{} // closed and replaced on every change
	now    func() time.Time
}

func newLimiter(rate float64, now func() time.Time) *limiter {
	return &limiter{rate: rate, last: now(), wake: make(chan struct{}), now: now}
}

// set changes the rate (0 = unlimited) and wakes the waiters.
func (l *limiter) set(rate float64) {
	l.mu.Lock()
	l.refill()
	l.rate = rate
	if l.tokens > l.burst() {
		l.tokens = l.burst()
	}
	l.changed()
	l.mu.Unlock()
}

func (l *limiter) get() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.rate
}

// pause stops or restarts every waiter.
func (l *limiter) pause(p bool) {
	l.mu.Lock()
	l.refill()
	l.paused = p
	l.changed()
	l.mu.Unlock()
}

func (l *limiter) changed() {
	close(l.wake)
	l.wake = make(chan struct{})
}

func (l *limiter) burst() float64 { return math.Max(l.rate/5, 1) }

func (l *limiter) refill() {
	t := l.now()
	if l.rate > 0 && !l.paused {
		l.tokens = math.Min(l.burst(), l.tokens+t.Sub(l.last).Seconds()*l.rate)
	}
	l.last = t
}

// wait takes n tokens, blocking until they are there, the limiter is
// unpaused, or ctx ends. A request larger than the bucket goes into debt,
// which later requests pay back, so large requests are still rate-limited.
func (l *limiter) wait(ctx context.Context, n float64) error {
	for {
		l.mu.Lock()
		l.refill()
		if !l.paused && l.rate == 0 {
			l.mu.Unlock()
			return nil
		}
		var delay time.Duration
		if !l.paused {
			if l.tokens > 0 {
				l.tokens -= n
				l.mu.Unlock()
				return nil
			}
			delay = time.Duration((-l.tokens + 1) / l.rate * float64(time.Second))
		} else {
			delay = time.Hour
		}
		wake := l.wake
		l.mu.Unlock()
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-wake:
			t.Stop()
		case <-t.C:
		}
	}
}
