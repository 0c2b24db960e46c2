package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/ratelimit"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
)

// AlertWait is how long Close gives queued alerts to go out: a failing sink
// never holds a process longer.
const AlertWait = 10 * time.Second

// App is what a command runs on, opened once from the config in one order
// (store, Redis, leases, alert sinks) and closed together: `run`, `serve`,
// `worker` and `deadman check` all start here.
type App struct {
	Config *config.Config
	Store  store.Store
	// Redis is nil when the config names no redis.
	Redis *redis.Client
	// Leases are Redis's when the config names redis, else the store's
	// SQL lease.
	Leases lease.Manager
	// RedisLeases is Leases when they live in Redis (nil otherwise), for
	// what must read a lease where it lives (recovery's liveness check).
	RedisLeases *redislease.Manager
	Alerts      *alert.Dispatcher
	// Accounts share each destination account's request budget: on Redis
	// between every process when the config names redis, else between the
	// runs of this process (docs/guide.md#one-rate-limit-per-account).
	Accounts destination.AccountPacer
}

// OpenParams configure Open.
type OpenParams struct {
	Config *config.Config
	Clock  clock.Clock
	Logger *slog.Logger
	// Published, when set, runs right after the store opened, before Redis
	// is reached (a command that publishes its syncs or refuses a paused
	// one says so even while Redis is down).
	Published func(ctx context.Context, st store.Store) error
}

// Open opens p.Config's store, Redis, leases and alert sinks. Its errors are
// failures of the catalog (store_unavailable, invalid_sync_definition);
// what it opened before one is closed again.
func Open(ctx context.Context, p OpenParams) (_ *App, err error) {
	clk := p.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	a := &App{Config: p.Config}
	defer func() {
		if err != nil {
			a.Close(ctx)
		}
	}()
	if a.Store, err = OpenStore(ctx, p.Config, clk); err != nil {
		return nil, err
	}
	if p.Published != nil {
		if err := p.Published(ctx, a.Store); err != nil {
			return nil, err
		}
	}
	if a.Redis, err = Redis(ctx, p.Config); err != nil {
		return nil, err
	}
	a.Leases, a.RedisLeases = Leases(a.Store, a.Redis, p.Config.RedisKeys(), p.Config.Settings.LeaseTTL)
	a.Accounts = Accounts(a.Redis, clk)
	if a.Alerts, err = alert.FromConfig(p.Config.Alerts, p.Logger, clk); err != nil {
		return nil, failure.Wrap(failure.InvalidSyncDefinition, err, "set up the alert sinks")
	}
	return a, nil
}

// Close gives queued alerts up to AlertWait to go out, less if ctx's
// deadline comes first (a daemon's exit deadline, docs/guide.md#commands),
// then closes Redis and the store. ctx being canceled does not cut the wait:
// a run stopped by a signal still sends the alert it queued.
func (a *App) Close(ctx context.Context) {
	if a.Alerts != nil {
		wait := AlertWait
		if dl, ok := ctx.Deadline(); ok {
			wait = min(wait, time.Until(dl))
		}
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), wait)
		_ = a.Alerts.Close(actx) // an alert still undelivered is logged by its sink
		cancel()
	}
	if a.Redis != nil {
		_ = a.Redis.Close()
	}
	if a.Store != nil {
		_ = a.Store.Close()
	}
}

// Accounts is the pacer of destination accounts: on rdb when there is one
// (in this process while rdb does not answer), else in this process
// (docs/guide.md#one-rate-limit-per-account).
func Accounts(rdb *redis.Client, clk clock.Clock) destination.AccountPacer {
	if rdb != nil {
		// Not under the config's redis_namespace: a vendor counts every
		// deployment with the same credentials together.
		return ratelimit.NewFallback(ratelimit.NewRedis(rdb, rediskey.Default()), ratelimit.NewMemory(clk))
	}
	return ratelimit.NewMemory(clk)
}
