package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"
	"github.com/rs/zerolog"

	"github.com/oncesync/oncesync/internal/rediskey"
)

// docs/guide.md#the-store-and-the-leases, "A write never outlives its lease", on real processes with the
// several-machines stores: PostgreSQL (a random schema) and Redis leases
// (a random sync id, so its keys meet no other test's; the shared Redis is
// never flushed).

// leaseStores is one test's PostgreSQL store and Redis.
type leaseStores struct {
	dbURL, redisURL string
	storeURL        string // dbURL with the test's schema
	redis           *redis.Client
	syncID          string
}

func newLeaseStores(t *testing.T) *leaseStores {
	t.Helper()
	ls := &leaseStores{
		dbURL:    serviceURL(t, "ONCESYNC_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		redisURL: serviceURL(t, "ONCESYNC_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
	}
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, ls.dbURL)
	if err != nil {
		skip("PostgreSQL unreachable: %v", err)
	}
	_ = conn.Close(ctx)
	opt, err := redis.ParseURL(ls.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	ls.redis = redis.NewClient(opt)
	t.Cleanup(func() { _ = ls.redis.Close() })
	if err := ls.redis.Ping(ctx).Err(); err != nil {
		skip("Redis unreachable: %v", err)
	}

	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "e2e_lease_" + hex.EncodeToString(b[:])
	ls.syncID = "lease-" + hex.EncodeToString(b[:4])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, ls.dbURL); err == nil {
			_, _ = c.Exec(ctx, "DROP SCHEMA IF EXISTS "+schema+" CASCADE")
			_ = c.Close(ctx)
		}
		ls.loseSyncKeys(t)
	})
	ls.storeURL = withQuery(t, ls.dbURL, "search_path", schema)
	return ls
}

func withQuery(t *testing.T, raw, key, value string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set(key, value)
	u.RawQuery = q.Encode()
	return u.String()
}

func withHost(t *testing.T, raw, host string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = host
	return u.String()
}

// syncKeys is the SCAN pattern of every Redis key of the test's sync.
func (ls *leaseStores) syncKeys() string {
	ks := rediskey.Default()
	return ks.Prefix() + ks.SyncTag(ls.syncID) + ":*"
}

// loseSyncKeys deletes every Redis key of the test's sync: what a flush or
// a restart without persistence does to it.
func (ls *leaseStores) loseSyncKeys(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	iter := ls.redis.Scan(ctx, 0, ls.syncKeys(), 100).Iterator()
	for iter.Next(ctx) {
		if err := ls.redis.Del(ctx, iter.Val()).Err(); err != nil {
			t.Error(err)
		}
	}
	if err := iter.Err(); err != nil {
		t.Error(err)
	}
}

// writeConfig points tb's config at the test's stores (storeURL and
// redisURL, which may go through proxies) under its random sync id.
func (ls *leaseStores) writeConfig(t *testing.T, tb *testBundle, storeURL, redisURL, settings string) {
	t.Helper()
	cfg := fmt.Sprintf(`store: %s
redis: %s
settings: %s
syncs:
  - id: %s
    workspace: acme
    source: {type: csv, path: contacts.csv, page_size: 250, identity: id}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: bulk, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}
`, storeURL, redisURL, settings, ls.syncID, tb.srv.URL)
	tb.config = filepath.Join(tb.dir, "oncesync.yaml")
	if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (ls *leaseStores) run(tb *testBundle) *proc {
	return tb.start("run", "--config", tb.config, ls.syncID, "--log-level", "debug")
}

func isImport(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/contacts/import")
}

// readBody reads r's whole body (the request has then fully left the
// client) and puts it back for the fake.
func readBody(t *testing.T, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		t.Error(err)
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
}

// TestLeaseStoreLossWithAWriteOnTheWire is finding 5 of issue 13: a run's
// bulk import is on the wire (slow: the destination applies it only after
// the run gave up on it), Redis loses the sync's keys, and a second run
// starts at once. Before docs/guide.md#the-store-and-the-leases's quarantine the second run took the lease,
// found the page in doubt, read it back (not landed yet) and sent it again:
// one page of duplicates. Now the second run is refused for one TTL
// (store_unavailable, retryable), the first stops within its lease, and a
// run after the quarantine reads the late page back and sends the rest:
// every contact once.
func TestLeaseStoreLossWithAWriteOnTheWire(t *testing.T) {
	t.Parallel()
	ls := newLeaseStores(t)
	tb := setup(t, setupParams{records: 1000, pageSize: 250, mode: "bulk"})
	ls.writeConfig(t, tb, ls.storeURL, ls.redisURL, "{lease_ttl: 3s, lease_renew: 1s}")

	onWire, release, applied := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var first sync.Once
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) }) // before the server closes
	tb.mu.Lock()
	tb.intercept = func(w http.ResponseWriter, r *http.Request) bool {
		held := false
		if isImport(r) {
			first.Do(func() { held = true })
		}
		if !held {
			return false
		}
		readBody(t, r)
		close(onWire)
		<-release
		// The destination applies what it received, whether or not the
		// client is still waiting for the answer.
		tb.fake.ServeHTTP(w, r.WithContext(context.WithoutCancel(r.Context())))
		close(applied)
		return true
	}
	tb.mu.Unlock()

	a := ls.run(tb)
	select {
	case <-onWire:
	case <-time.After(time.Minute):
		t.Fatalf("run A never sent its first import:\n%s", a.Out)
	}
	ls.loseSyncKeys(t) // Redis flushed while A's import is on the wire
	b := ls.run(tb)
	codeB := b.Wait(t, time.Minute)
	codeA := a.Wait(t, time.Minute)
	releaseOnce.Do(func() { close(release) }) // A's import lands late
	select {
	case <-applied:
	case <-time.After(30 * time.Second):
		t.Fatal("the held import was not applied")
	}
	// Once no quarantine is on, a third run finishes the sync.
	loss := rediskey.Default().LeaseLoss(ls.syncID)
	waitFor(t, 30*time.Second, "the quarantine's end", func() bool {
		n, err := ls.redis.Exists(context.Background(), loss).Result()
		return err == nil && n == 0
	})
	c := ls.run(tb)
	if code := c.Wait(t, time.Minute); code != 0 {
		t.Fatalf("run C exit %d:\n%s", code, c.Out)
	}
	st := tb.stats()
	if st.DuplicateWrites != 0 || st.Contacts != int64(len(tb.emails)) {
		t.Fatalf("%d duplicate writes, %d of %d contacts; want every contact once\nrun A (exit %d):\n%s\nrun B (exit %d):\n%s",
			st.DuplicateWrites, st.Contacts, len(tb.emails), codeA, a.Out, codeB, b.Out)
	}
	if codeB != 1 || !strings.HasPrefix(b.LastLine(), "failed: store_unavailable: ") {
		t.Errorf("run B exit %d, last line %q; want store_unavailable during the quarantine", codeB, b.LastLine())
	}
	if codeA != 1 || !strings.HasPrefix(a.LastLine(), "failed: lease_lost: ") {
		t.Errorf("run A exit %d, last line %q; want lease_lost", codeA, a.LastLine())
	}
	tb.checkDelivered(t)
}

// cutProxy is a Toxiproxy in front of a TCP service that can stop passing
// bytes silently: the timeout toxic with timeout 0 holds every byte in both
// directions and closes nothing, like packets dropped on the way.
type cutProxy struct {
	p *toxiproxy.Proxy
}

func newCutProxy(t *testing.T, name, upstream string) *cutProxy {
	t.Helper()
	srv := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	p := toxiproxy.NewProxy(srv, name, "127.0.0.1:0", upstream)
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return &cutProxy{p: p}
}

func (c *cutProxy) addr() string { return c.p.Listen }

func (c *cutProxy) cut(t *testing.T) {
	for _, stream := range []string{"upstream", "downstream"} {
		toxic := fmt.Sprintf(`{"name": "cut_%s", "type": "timeout", "stream": %q, "attributes": {"timeout": 0}}`, stream, stream)
		if _, err := c.p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
			t.Error(err)
		}
	}
}

// TestCutOffWorkerStopsWriting: a worker cut off from Redis and PostgreSQL
// (silently: its bytes are held, nothing is refused or closed) but not from
// the destination stops writing within its lease TTL, counted from the cut:
// its last renewal was before it. The destination is slow from the cut on
// (it holds the import in flight then, and any later one, until the client
// gives up or 20 s pass), so only the run's own lease timer can end them;
// before docs/guide.md#the-store-and-the-leases's attempt deadline the import ran its 30 s attempt timeout.
func TestCutOffWorkerStopsWriting(t *testing.T) {
	t.Parallel()
	const ttl = 3 * time.Second
	ls := newLeaseStores(t)
	dbURL, err := url.Parse(ls.dbURL)
	if err != nil {
		t.Fatal(err)
	}
	ropt, err := redis.ParseURL(ls.redisURL)
	if err != nil {
		t.Fatal(err)
	}
	pgProxy := newCutProxy(t, "postgres", net.JoinHostPort(dbURL.Hostname(), portOr(dbURL.Port(), "5432")))
	redisProxy := newCutProxy(t, "redis", ropt.Addr)
	tb := setup(t, setupParams{records: 5000, pageSize: 250, mode: "bulk"})
	ls.writeConfig(t, tb, withHost(t, ls.storeURL, pgProxy.addr()), withHost(t, ls.redisURL, redisProxy.addr()),
		fmt.Sprintf("{lease_ttl: %s, lease_renew: 1s}", ttl))

	type call struct{ start, end time.Time }
	var (
		mu      sync.Mutex
		imports int
		calls   []call
		cutAt   time.Time
	)
	cutDone := make(chan struct{})
	stopHolding := make(chan struct{})
	var stopOnce sync.Once
	t.Cleanup(func() { stopOnce.Do(func() { close(stopHolding) }) })
	tb.mu.Lock()
	tb.intercept = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost {
			return false // reads (in-doubt read-backs) are not writes
		}
		mu.Lock()
		i := len(calls)
		calls = append(calls, call{start: time.Now()})
		if isImport(r) {
			imports++
		}
		cut := isImport(r) && imports == 4 && cutAt.IsZero()
		held := !cutAt.IsZero() || cut
		mu.Unlock()
		defer func() {
			mu.Lock()
			calls[i].end = time.Now()
			mu.Unlock()
		}()
		if !held {
			tb.fake.ServeHTTP(w, r)
			return true
		}
		readBody(t, r)
		if cut { // the 4th import has fully left the worker: cut it off
			pgProxy.cut(t)
			redisProxy.cut(t)
			mu.Lock()
			cutAt = time.Now()
			mu.Unlock()
			close(cutDone)
		}
		select {
		case <-r.Context().Done(): // the worker gave up on it
		case <-time.After(20 * time.Second):
			http.Error(w, "slow", http.StatusServiceUnavailable)
		case <-stopHolding:
		}
		return true
	}
	tb.mu.Unlock()

	a := ls.run(tb)
	select {
	case <-cutDone:
	case <-time.After(time.Minute):
		t.Fatalf("the run never sent its 4th import:\n%s", a.Out)
	}
	// Wait past the TTL and the 20 s a held import may last, or for the
	// run's end.
	select {
	case <-a.Done:
	case <-time.After(25 * time.Second):
	}
	mu.Lock()
	got, at := append([]call(nil), calls...), cutAt
	mu.Unlock()
	limit := at.Add(ttl)
	for i, c := range got {
		end := c.end
		if end.IsZero() {
			end = time.Now() // still in flight
		}
		if !c.start.Before(at) || !end.Before(at) {
			t.Logf("write %d after the cut: from %s to %s", i+1, c.start.Sub(at).Round(time.Millisecond), end.Sub(at).Round(time.Millisecond))
		}
		if c.start.After(limit) || end.After(limit) {
			t.Errorf("write %d ran from %s to %s after the cut; want it over within the TTL (%s)",
				i+1, c.start.Sub(at).Round(time.Millisecond), end.Sub(at).Round(time.Millisecond), ttl)
		}
	}
	stopOnce.Do(func() { close(stopHolding) })
	select {
	case <-a.Done:
	default:
		_ = a.Cmd.Process.Kill() // stuck on its cut-off stores: not what is tested
		<-a.Done
	}
	if t.Failed() {
		t.Logf("run output:\n%s", a.Out)
	}
}

func portOr(p, def string) string {
	if p == "" {
		return def
	}
	return p
}
