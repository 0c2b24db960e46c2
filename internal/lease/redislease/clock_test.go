package redislease

import (
	"testing"
	"time"
)

// TestLeaseEndOnOwnClock: Redis's clock is two minutes off this machine's
// (no NTP on one of them, a VM resumed). A lease Redis holds for 30 s more
// must read as ending 30 s from now here, where recovery and the holder
// compare it: on Redis's time it would read as long expired (a live run
// recovered while it writes) or as lasting two minutes more.
func TestLeaseEndOnOwnClock(t *testing.T) {
	for _, skew := range []time.Duration{-2 * time.Minute, 2 * time.Minute} {
		redisNow := time.Now().Add(skew)
		// getScript's reply for a held lease: status, token, fence, holder,
		// run id, pttl ms, Redis's TIME (seconds, microseconds).
		res := []any{int64(1), "tok", "7", "host:1:2", "42", int64(30_000),
			redisNow.Unix(), int64(redisNow.Nanosecond() / 1000)}
		l := heldLease("s", res)
		if left := time.Until(l.ExpiresAt); left < 29*time.Second || left > 31*time.Second {
			t.Errorf("Redis's clock %s off: the lease ends %s from now, want 30s", skew, left.Round(time.Second))
		}
		if l.Fence != 7 || l.RunID != 42 || l.Token != "tok" {
			t.Errorf("lease %+v", l)
		}
	}
}
