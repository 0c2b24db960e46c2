package app_test

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/testenv"
)

func embeddedConfig(t *testing.T) *config.Config {
	return &config.Config{Path: filepath.Join(t.TempDir(), "oncesync.yaml"), Store: "sqlite://./oncesync.db", Settings: config.Defaults()}
}

// TestOpenEmbedded: without redis, the App holds the SQLite store, its SQL
// lease and the alert sinks, and no Redis.
func TestOpenEmbedded(t *testing.T) {
	ctx := context.Background()
	a, err := app.Open(ctx, app.OpenParams{Config: embeddedConfig(t)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	if _, ok := a.Leases.(*lease.SQL); !ok || a.RedisLeases != nil || a.Redis != nil || a.Alerts == nil || a.Store == nil {
		t.Fatalf("App %+v: want the store, its SQL lease, alert sinks and no Redis", a)
	}
	if _, err := a.Store.ListSyncs(ctx); err != nil {
		t.Fatalf("the store does not answer: %v", err)
	}
}

// TestOpenPublishesBeforeRedis: Published runs once the store is open and
// before Redis is reached: its refusal is what a command reports, even with
// Redis down; without it, the unreachable Redis is store_unavailable.
func TestOpenPublishesBeforeRedis(t *testing.T) {
	ctx := context.Background()
	cfg := embeddedConfig(t)
	addr, err := testenv.FreeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	cfg.Redis = "redis://" + addr + "/0"
	refused := errors.New("sync is paused")
	var saw store.Store
	_, err = app.Open(ctx, app.OpenParams{Config: cfg, Published: func(_ context.Context, st store.Store) error {
		saw = st
		return refused
	}})
	if !errors.Is(err, refused) || saw == nil {
		t.Fatalf("Open = %v (Published saw a store: %v), want Published's error", err, saw != nil)
	}
	_, err = app.Open(ctx, app.OpenParams{Config: cfg})
	if failure.CodeOf(err) != failure.StoreUnavailable {
		t.Fatalf("Open with Redis down = %v, want store_unavailable", err)
	}
}

// TestDeploymentsApartOnOneRedis: two deployments (two stores) on one Redis
// with a sync of the same id share its lease unless redis_namespace sets
// them apart; then each takes its own.
func TestDeploymentsApartOnOneRedis(t *testing.T) {
	ctx := context.Background()
	testenv.RedisOptions(t) // skips or fails when Redis does not answer
	suffix := strconv.FormatInt(time.Now().UnixNano(), 36)
	syncID := "contacts-" + suffix
	open := func(namespace string) *app.App {
		t.Helper()
		cfg := embeddedConfig(t)
		cfg.Redis = testenv.RedisURL()
		cfg.RedisNamespace = namespace
		a, err := app.Open(ctx, app.OpenParams{Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { a.Close(ctx) })
		return a
	}
	acquire := func(a *app.App) error {
		t.Helper()
		g, err := a.Leases.Acquire(ctx, lease.AcquireParams{SyncID: syncID, RunID: 1, TTL: time.Minute})
		if err == nil {
			t.Cleanup(func() { _ = a.Leases.Release(ctx, g) })
		}
		return err
	}

	if err := acquire(open("")); err != nil {
		t.Fatalf("first deployment, default namespace: %v", err)
	}
	if err := acquire(open("")); !errors.Is(err, lease.ErrHeld) {
		t.Fatalf("second deployment, default namespace: %v, want the first's lease held (one key space)", err)
	}
	if err := acquire(open("staging-" + suffix)); err != nil {
		t.Fatalf("deployment with its own redis_namespace: %v, want its own lease", err)
	}
}

// TestOpenRefusesAnEvictingRedis: docs/config.md's allow_evicting_redis
// (false by default) means a command does not start on a Redis whose
// maxmemory-policy may evict keys: an evicted lease or barrier reads as a
// fresh start. With it, the command starts.
func TestOpenRefusesAnEvictingRedis(t *testing.T) {
	var servers testenv.RedisServers
	t.Cleanup(servers.Stop)
	dir, err := servers.Dir("app-evicting-")
	if err != nil {
		t.Fatal(err)
	}
	addr, _, err := servers.Start(dir, "--maxmemory-policy", "volatile-lru") // a managed service's default
	if errors.Is(err, testenv.ErrNoRedisServer) {
		testenv.Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cfg := embeddedConfig(t)
	cfg.Redis = "redis://" + addr + "/0"
	_, err = app.Open(ctx, app.OpenParams{Config: cfg})
	if failure.CodeOf(err) != failure.StoreUnavailable || !errors.Is(err, barrier.ErrEvictingRedis) {
		t.Fatalf("Open on an evicting Redis = %v, want store_unavailable wrapping barrier.ErrEvictingRedis", err)
	}
	if d := failure.Detail(err); !strings.Contains(d, "maxmemory-policy volatile-lru") {
		t.Errorf("detail %q does not say what to change", d)
	}
	cfg.AllowEvictingRedis = true
	a, err := app.Open(ctx, app.OpenParams{Config: cfg})
	if err != nil {
		t.Fatalf("Open with allow_evicting_redis = %v", err)
	}
	a.Close(ctx)
}
