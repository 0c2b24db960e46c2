package postgres

import (
	"context"
	"sync"
	"time"
)

// A ledger entry's times (claimed, completed, last seen) and a run's (start,
// end) are compared by processes on other machines: the in-doubt grace
// counts from a claim, a mirror waits out a removal claimed a moment ago,
// retention reads how old a claim is, recovery how old a running run is.
// On each writer's own clock, a claim made on a machine two minutes behind
// read as two minutes older on one that is right, whose grace then ended
// before the write it waited for could have landed, and the record went
// again (a duplicate). With ServerTime they are written on the
// server's clock, which every machine shares, and read back on the Store's
// (docs/guide.md#the-store-and-the-leases), as leases are.

// clockReadingAge is how long one reading of the server's clock is used:
// clocks drift by milliseconds an hour, but an NTP correction or a resumed VM
// steps one, which the next reading catches.
const clockReadingAge = 30 * time.Second

// serverClock is the last reading of the server's clock against the
// Store's.
type serverClock struct {
	mu  sync.Mutex
	off time.Duration // the server's clock less the Store's
	at  time.Time     // the Store's time of the reading; zero before the first
}

// offsetOf is the server's clock less the Store's, from a statement that
// read the server's clock serverUS (serverNowSQL), sent at before and
// answered at after on the Store's clock: known within half the round trip.
func offsetOf(before, after time.Time, serverUS int64) time.Duration {
	return time.UnixMicro(serverUS).Sub(before.Add(after.Sub(before) / 2))
}

// set records a reading, off, made at the Store's time at.
func (c *serverClock) set(off time.Duration, at time.Time) {
	c.mu.Lock()
	c.off, c.at = off, at
	c.mu.Unlock()
}

// shifted is t moved by d; the zero time (none) stays zero.
func shifted(t time.Time, d time.Duration) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(d)
}

// fresh returns the offset of a reading younger than clockReadingAge at now.
func (c *serverClock) fresh(now time.Time) (time.Duration, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at.IsZero() || now.Sub(c.at) >= clockReadingAge || now.Before(c.at) {
		return 0, false
	}
	return c.off, true
}

// ClockOffset returns the server's clock less the Store's
// (store.SharedClock), reading the server's clock when the last reading is
// old; 0 without ServerTime, where the Store's clock (a test's fake one)
// stamps everything.
func (s *Store) ClockOffset(ctx context.Context) (time.Duration, error) {
	if !s.serverTime {
		return 0, nil
	}
	if off, ok := s.sclock.fresh(s.now()); ok {
		return off, nil
	}
	// A statement of its own, which waits for no lock: a lease
	// statement's reading comes after its locks, and a wait for them
	// would leave the offset uncertain by half that wait.
	var serverUS int64
	before := s.now()
	if err := s.pool.QueryRow(ctx, `SELECT `+serverNowSQL).Scan(&serverUS); err != nil {
		return 0, mapErr("read the server's clock", err)
	}
	after := s.now()
	off := offsetOf(before, after, serverUS)
	s.sclock.set(off, after)
	return off, nil
}
