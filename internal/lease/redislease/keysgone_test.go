package redislease_test

import (
	"errors"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/lease"
)

// TestLeaseKeysGoneWithTheirEnd: another application on the same Redis
// deletes keys by pattern (`redis-cli --scan --pattern '*lease*' | xargs
// redis-cli del`), or allkeys-lru evicts the lease with its lease-end, the
// fence counter staying. The lease then reads as free and its end as
// unknown, while its holder writes until its TTL runs out: no lease is
// granted, nor read as free by recovery, for one TTL. A quarantine whose
// lease-loss key goes the same way (volatile-ttl evicts it first) still
// lasts until its end. Without these, a second run wrote the same records
// while the first still did.
func TestLeaseKeysGoneWithTheirEnd(t *testing.T) {
	t.Parallel()
	const ttl = 2 * time.Second
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		m := tb.managerTTL(ttl)
		acquire := func(runID int64) (lease.Grant, error) {
			return m.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: runID, TTL: ttl})
		}
		asked := time.Now()
		g, err := acquire(1)
		if err != nil {
			t.Fatal(err)
		}
		// What the holder's writes stop by; g.ExpiresAt counts from the reply.
		heldUntil := lease.LocalExpiry(asked, ttl, g.ExpiresAt)
		del := func(keys ...string) {
			t.Helper()
			for _, k := range keys {
				if err := tb.client.Del(tb.ctx, k).Err(); err != nil {
					t.Fatal(err)
				}
			}
		}
		del(tb.keys.Lease(tb.syncID), tb.keys.LeaseEnd(tb.syncID))
		if _, err := m.Get(tb.ctx, tb.syncID); err == nil || !isQuarantine(err) {
			t.Fatalf("Get with the lease and its end deleted = %v, want a quarantine", err)
		}
		_, err = acquire(2)
		qe := wantQuarantine(t, "Acquire with the lease and its end deleted", err, lease.CauseVanished, heldUntil, time.Now().Add(ttl+time.Second))

		// The quarantine's own key deleted too: it still lasts until its end.
		del(tb.keys.LeaseLoss(tb.syncID))
		_, err = acquire(3)
		wantQuarantine(t, "Acquire with the quarantine's key deleted", err, lease.CauseVanished, qe.Until, qe.Until.Add(time.Second))

		tb.endQuarantine(t)
		after, err := acquire(4)
		if err != nil {
			t.Fatalf("Acquire after the quarantine: %v", err)
		}
		if after.Fence <= g.Fence {
			t.Errorf("grant after the quarantine: fence %d, want above %d", after.Fence, g.Fence)
		}
		if err := m.Release(tb.ctx, after); err != nil {
			t.Fatal(err)
		}

		// A loss of the fence counter (a flush) starts a quarantine; its
		// lease-loss key deleted alone (volatile-ttl evicts it first: it
		// has the shortest TTL) does not end it early.
		g, err = acquire(5)
		if err != nil {
			t.Fatal(err)
		}
		tb.lose(t)
		_, err = acquire(6)
		var lq *lease.QuarantineError
		if !errorsAs(err, &lq) {
			t.Fatalf("Acquire after a loss = %v, want a quarantine", err)
		}
		del(tb.keys.LeaseLoss(tb.syncID))
		if _, err := acquire(7); !isQuarantine(err) {
			t.Fatalf("Acquire with the loss's quarantine key deleted = %v, want a quarantine until %s", err, lq.Until.Format(time.StampMilli))
		}
		if _, err := m.Get(tb.ctx, tb.syncID); !isQuarantine(err) {
			t.Fatalf("Get with the loss's quarantine key deleted = %v, want a quarantine", err)
		}
	})
}

func isQuarantine(err error) bool { return errors.Is(err, lease.ErrQuarantined) }

func errorsAs(err error, target any) bool { return errors.As(err, target) }
