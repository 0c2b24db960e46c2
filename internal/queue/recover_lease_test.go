package queue

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
)

// TestRecoverWaitsOutALeaseStoreLoss: Redis loses a running run's lease
// keys while its worker is alive (it may still be writing to the
// destination). Lease-expiry recovery must not read the missing lease as a
// dead holder and resume the sync next to it: it leaves the run alone until
// one TTL after the loss was noticed (docs/guide.md#the-store-and-the-leases), then resumes it.
func TestRecoverWaitsOutALeaseStoreLoss(t *testing.T) {
	t.Parallel()
	u := os.Getenv("ONCESYNC_TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	client := redis.NewClient(opt)
	t.Cleanup(func() { _ = client.Close() })
	if err := client.Ping(t.Context()).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Redis unreachable: %v", err)
		}
		t.Skipf("Redis unreachable: %v", err)
	}
	var nb [6]byte
	_, _ = rand.Read(nb[:])
	keys, err := rediskey.New("test-" + hex.EncodeToString(nb[:]))
	if err != nil {
		t.Fatal(err)
	}
	del := func(ks ...string) {
		if err := client.Del(context.Background(), ks...).Err(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { del(keys.Lease("a"), keys.Fence("a"), keys.LeaseLoss("a"), keys.LeaseEnd("a")) })

	b := setup(t)
	ctx := b.ctx
	ttl := b.cfg.Settings.LeaseTTL
	m := redislease.New(redislease.Params{Client: client, Store: b.st, Keys: keys, TTL: ttl})
	svc, err := New(ctx, Params{Config: b.cfg, Store: b.st, Leases: m, LeaseInspector: LeaseInspectorFunc(m.Get), Clock: b.clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.b.close() })

	run, err := b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "a", State: store.RunRunning, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Acquire(ctx, lease.AcquireParams{SyncID: "a", RunID: run.ID, TTL: ttl}); err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(ttl + time.Second) // the run is older than recovery's grace
	left := func(t *testing.T, what string) {
		t.Helper()
		got, err := svc.Recover(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Runs) != 0 || len(got.Enqueued) != 0 || len(got.Rescued) != 0 {
			t.Fatalf("%s: Recover = %+v, want the run left alone", what, got)
		}
		if r, err := b.st.GetRun(ctx, run.ID); err != nil || r.State != store.RunRunning {
			t.Fatalf("%s: run is %s (%v), want running", what, r.State, err)
		}
	}
	left(t, "live holder")

	del(keys.Lease("a"), keys.Fence("a")) // Redis restarted empty
	left(t, "just after the loss")
	left(t, "during the quarantine")

	// One TTL later the quarantine's key expires, and the lease-end its
	// notice wrote has passed.
	del(keys.LeaseLoss("a"))
	if end, err := client.Get(ctx, keys.LeaseEnd("a")).Result(); err != nil {
		t.Fatal(err)
	} else if parts := strings.SplitN(end, ":", 3); len(parts) == 3 {
		now, err := client.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		parts[1] = strconv.FormatInt(now.UnixMicro(), 10)
		if err := client.Set(ctx, keys.LeaseEnd("a"), strings.Join(parts, ":"), 0).Err(); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Fatalf("lease-end %q after the notice, want fence:µs:ttl:server", end)
	}
	got, err := svc.Recover(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Runs) != 1 || got.Runs[0] != run.ID || len(got.Enqueued) != 1 {
		t.Fatalf("after the quarantine: Recover = %+v, want run %d interrupted and sync a resumed", got, run.ID)
	}
}
