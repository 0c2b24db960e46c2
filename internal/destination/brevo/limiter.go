package brevo

import (
	"math/rand/v2"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

// limiter paces requests at a steady rate (GCRA with a burst of one) and
// holds every request back while Brevo has said the window is spent
// (x-sib-ratelimit-remaining: 0 until the reset).
//
// It reserves a send time per request instead of polling, so it works with a
// fake clock and an injected Sleep that returns at once.
type limiter struct {
	clock    clock.Clock
	interval time.Duration

	mu          sync.Mutex
	tat         time.Time // theoretical arrival time of the next request
	pausedUntil time.Time
}

func newLimiter(c clock.Clock, perSecond float64) *limiter {
	return &limiter{clock: c, interval: time.Duration(float64(time.Second) / perSecond)}
}

// reserve returns how long the caller must wait before sending.
func (l *limiter) reserve() time.Duration {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	sendAt := now
	if l.tat.After(sendAt) {
		sendAt = l.tat
	}
	if l.pausedUntil.After(sendAt) {
		sendAt = l.pausedUntil
	}
	l.tat = sendAt.Add(l.interval)
	return sendAt.Sub(now)
}

// pause holds requests back until now+d.
func (l *limiter) pause(d time.Duration) {
	until := l.clock.Now().Add(d)
	l.mu.Lock()
	if until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
	l.mu.Unlock()
}

// Backoff bounds (SPEC §6, §11: exponential from 1 s, capped at 30 s, full jitter).
const (
	backoffBase = time.Second
	backoffCap  = 30 * time.Second
)

// backoff returns the full-jitter wait before retry number attempt (0-based).
func backoff(attempt int) time.Duration {
	d := backoffCap
	if attempt < 5 { // 1s << 5 = 32s > cap
		d = min(backoffBase<<attempt, backoffCap)
	}
	return rand.N(d + 1)
}
