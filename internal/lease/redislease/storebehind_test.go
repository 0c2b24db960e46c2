package redislease_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
)

// TestStoreThatWentBackInTime: a store restored from an older copy (a
// backup, a standby promoted before it had the last commits) has forgotten
// the claims and deliveries of the runs since, and a run on it sends those
// records again: 5,000 duplicate writes of 5,000 records in a manual try. Its
// registered fence is behind one it registered before, which Redis
// remembers: no lease is granted, and the failure says what happened and the
// two ways on. Deleting the key named accepts the loss.
func TestStoreThatWentBackInTime(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		g := tb.acquire(t, tb.mgr, 1)
		if err := tb.mgr.Release(tb.ctx, g); err != nil {
			t.Fatal(err)
		}
		// The backup: a store holding what tb.store holds now.
		backup, err := sqliteStore(t)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []int64{g.Fence - 1, g.Fence} {
			if err := backup.RaiseFence(tb.ctx, tb.syncID, f); err != nil {
				t.Fatal(err)
			}
		}
		// Later runs register higher fences in the live store.
		for run := int64(2); run <= 3; run++ {
			g = tb.acquire(t, tb.mgr, run)
			if err := tb.mgr.Release(tb.ctx, g); err != nil {
				t.Fatal(err)
			}
		}

		restored := redislease.New(redislease.Params{Client: tb.client, Store: backup, Keys: tb.keys})
		got, err := restored.Acquire(tb.ctx, lease.AcquireParams{SyncID: tb.syncID, RunID: 4, TTL: ttl})
		if err == nil {
			t.Fatalf("Acquire on the restored store granted %+v", got)
		}
		var sb *redislease.StoreBehindError
		if !errors.As(err, &sb) || !errors.Is(err, redislease.ErrStoreBehind) || sb.Fence != g.Fence {
			t.Fatalf("Acquire on the restored store = %v, want a *StoreBehindError at fence %d", err, g.Fence)
		}
		d := failure.Wrap(failure.StoreUnavailable, err, "take the sync's lease").Detail
		// Two deployments with their own stores sharing one namespace read
		// the same; deleting the key would let them take turns refusing
		// each other, so the advice names that case too.
		for _, want := range []string{"restored from a backup", tb.keys.FenceStored(tb.syncID), "its own redis_namespace, and delete nothing"} {
			if !strings.Contains(d, want) {
				t.Errorf("detail %q does not say %q", d, want)
			}
		}
		// The refused grant was given back, and the live store is not refused.
		g = tb.acquire(t, tb.mgr, 5)
		if err := tb.mgr.Release(tb.ctx, g); err != nil {
			t.Fatal(err)
		}

		// Accepting the loss: the key deleted, the restored store works.
		if err := tb.client.Del(tb.ctx, tb.keys.FenceStored(tb.syncID)).Err(); err != nil {
			t.Fatal(err)
		}
		g = tb.acquire(t, restored, 6)
		if err := restored.Release(tb.ctx, g); err != nil {
			t.Fatal(err)
		}
	})
}
