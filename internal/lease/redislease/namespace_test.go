package redislease_test

import (
	"errors"
	"testing"

	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/rediskey"
)

// TestTwoLeaseSpacesOneStore: two processes of one deployment (one store)
// take leases in two key spaces, as during a rolling change of
// redis_namespace (or of the redis URL), or beside an oncesync older than
// redis_namespace. The second space's grant finds the store's fence ahead
// of its counter, registers a higher one and waits one TTL. The first
// holder's renewals in its own space kept succeeding, so it went on
// sending the page it had claimed past that TTL, until its next store
// write: two runs writing one sync's records. The background renewal now
// also confirms the holder's fence is still the store's (CheckFence; the
// lease package's TestRenewerChecksTheFence checks that the renewal asks).
func TestTwoLeaseSpacesOneStore(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		g := tb.acquire(t, tb.mgr, 1)
		other, err := rediskey.New("test-" + randHex(6))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cleanKeys(t, tb.client, other) })
		m2 := redislease.New(redislease.Params{Client: tb.client, Store: tb.store, Keys: other})
		if _, err := m2.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 2, TTL: ttl}); !errors.Is(err, lease.ErrQuarantined) {
			t.Fatalf("grant in the second key space: %v; want a quarantine (the store's fence is ahead of its counter)", err)
		}
		if err := tb.mgr.CheckFence(tb.ctx, g); !errors.Is(err, lease.ErrLost) {
			t.Fatalf("fence check of the first space's lease after the store registered a higher fence: %v; want lease.ErrLost", err)
		}
	})
}
