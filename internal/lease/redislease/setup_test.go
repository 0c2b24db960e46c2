package redislease_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
	"github.com/oncesync/oncesync/internal/testenv"
)

// The test servers and the rule for one that does not answer (internal/testenv).
var (
	unavailable = testenv.Unavailable
	randHex     = testenv.RandHex
)

// Tests run against the Redis at ONCESYNC_TEST_REDIS_URL (default
// redis://127.0.0.1:6379/0) as a plain client, and through a go-redis Ring
// whose second shard is a redis-server this package starts on a free port.
// Every test uses its own key namespace and deletes its keys afterwards.
// Without Redis the tests skip, except under CI=true where they fail.

func TestMain(m *testing.M) {
	code := m.Run()
	stopServers()
	os.Exit(code)
}

// mainOptions returns the options of the test Redis, skipping (failing in
// CI) when it does not answer.
func mainOptions(t *testing.T) *redis.Options {
	t.Helper()
	return testenv.RedisOptions(t)
}

// Throwaway redis-servers started by this package, stopped by TestMain,
// and the shared second Ring shard.
var (
	servers testenv.RedisServers
	shard   struct {
		mu   sync.Mutex
		addr string
	}
)

func stopServers() { servers.Stop() }

// startServer starts a throwaway redis-server on a free port (no
// persistence) and returns its address and a function stopping it.
func startServer(t *testing.T) (string, func()) {
	t.Helper()
	addr, stop, err := servers.Start(t.TempDir())
	if errors.Is(err, testenv.ErrNoRedisServer) {
		unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return addr, stop
}

// shardAddr returns the address of the second Ring shard, started once.
func shardAddr(t *testing.T) string {
	t.Helper()
	shard.mu.Lock()
	addr := shard.addr
	shard.mu.Unlock()
	if addr != "" {
		return addr
	}
	addr, _ = startServer(t) // stopped by TestMain; t.TempDir outlives it harmlessly
	shard.mu.Lock()
	defer shard.mu.Unlock()
	if shard.addr == "" {
		shard.addr = addr
	}
	return shard.addr
}

func freeAddr(t *testing.T) string {
	t.Helper()
	addr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// backend builds the Redis client of one test flavour.
type backend struct {
	name string
	new  func(t *testing.T) redis.UniversalClient
}

func backends() []backend {
	return []backend{
		{"client", func(t *testing.T) redis.UniversalClient { return redis.NewClient(mainOptions(t)) }},
		{"ring", func(t *testing.T) redis.UniversalClient {
			opt := mainOptions(t)
			second := shardAddr(t)
			return redis.NewRing(&redis.RingOptions{
				Addrs: map[string]string{"main": opt.Addr, "second": second},
				DB:    opt.DB,
				NewClient: func(o *redis.Options) *redis.Client {
					if o.Addr == opt.Addr {
						o.Username, o.Password = opt.Username, opt.Password
					}
					return redis.NewClient(o)
				},
			})
		}},
	}
}

// forEachBackend runs fn as a parallel subtest per backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, tb *bundle)) {
	t.Helper()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t, be))
		})
	}
}

type bundle struct {
	ctx    context.Context
	client redis.UniversalClient
	store  *sqlite.Store
	keys   rediskey.Space
	mgr    *redislease.Manager
	syncID string
}

func setup(t *testing.T, be backend) *bundle {
	t.Helper()
	ctx := t.Context()
	client := be.new(t)
	keys, err := rediskey.New("test-" + randHex(6))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cleanKeys(t, client, keys)
		_ = client.Close()
	})
	st, err := sqliteStore(t)
	if err != nil {
		t.Fatal(err)
	}
	tb := &bundle{ctx: ctx, client: client, store: st, keys: keys, syncID: "contacts-" + randHex(4)}
	tb.mgr = tb.manager(lease.Process{})
	return tb
}

// manager returns another Manager on tb's Redis, store and keys.
func (tb *bundle) manager(self lease.Process) *redislease.Manager {
	return redislease.New(redislease.Params{Client: tb.client, Store: tb.store, Keys: tb.keys, Self: self})
}

// assertRegistered checks that fence is the store's registered fence of
// syncID without changing it: f is registered iff RaiseFence(f-1) is refused
// and RaiseFence(f) is accepted (which then raises nothing).
func (tb *bundle) assertRegistered(t *testing.T, syncID string, fence int64) {
	t.Helper()
	if fence > 1 {
		if err := tb.store.RaiseFence(tb.ctx, syncID, fence-1); !isFenced(err) {
			t.Errorf("RaiseFence(%d) = %v, want ErrFenced: fence %d is not registered", fence-1, err, fence)
		}
	}
	if err := tb.store.RaiseFence(tb.ctx, syncID, fence); err != nil {
		t.Errorf("RaiseFence(%d) = %v: a fence above %d is registered", fence, err, fence)
	}
}

func isFenced(err error) bool { return err != nil && errors.Is(err, store.ErrFenced) }

// redisNow returns the time of the Redis server holding c's keys (every
// server here runs on this machine).
func redisNow(t *testing.T, tb *bundle) time.Time {
	t.Helper()
	now, err := tb.client.Time(tb.ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return now
}

// expireLease ends the sync's lease now, as its expiry does: the key goes
// and its lease-end says it ended now. (A key deleted alone, its lease-end
// still ahead, reads as vanished: TestVanishedLease.)
func (tb *bundle) expireLease(t *testing.T) {
	t.Helper()
	tb.endNow(t)
	if err := tb.client.Del(tb.ctx, tb.keys.Lease(tb.syncID)).Err(); err != nil {
		t.Fatal(err)
	}
}

// endNow moves the sync's lease-end, if it lies ahead, to Redis's now.
func (tb *bundle) endNow(t *testing.T) {
	t.Helper()
	end, err := tb.client.Get(tb.ctx, tb.keys.LeaseEnd(tb.syncID)).Result()
	if errors.Is(err, redis.Nil) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	parts := strings.SplitN(end, ":", 3)
	now := redisNow(t, tb).UnixMicro()
	if len(parts) < 2 || atoi(t, parts[1]) <= now {
		return
	}
	parts[1] = strconv.FormatInt(now, 10)
	if err := tb.client.Set(tb.ctx, tb.keys.LeaseEnd(tb.syncID), strings.Join(parts, ":"), 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// hgetall reads a lease hash.
func hgetall(t *testing.T, tb *bundle, key string) map[string]string {
	t.Helper()
	m, err := tb.client.HGetAll(tb.ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("not an integer: %q", s)
	}
	return n
}

// sqliteStore opens a SQLite store in a temp dir, closed at cleanup.
func sqliteStore(t *testing.T) (*sqlite.Store, error) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), sqlite.OpenParams{Path: t.TempDir() + "/x.db"})
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, nil
}

// cleanKeys deletes keys's namespace on every server behind c.
func cleanKeys(t *testing.T, c redis.UniversalClient, keys rediskey.Space) {
	t.Helper()
	testenv.DeletePrefix(t, c, keys.Prefix())
}
