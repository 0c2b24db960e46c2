package deadman_test

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/postgres"
	"github.com/oncesync/oncesync/internal/store/sqlite"
	"github.com/oncesync/oncesync/internal/testenv"
)

// The test servers and the rule for one that does not answer (internal/testenv).
var (
	unavailable = testenv.Unavailable
	randHex     = testenv.RandHex
)

// Tests run on a real SQLite file, on the PostgreSQL at
// ONCESYNC_TEST_DATABASE_URL (a random schema per test) and with markers in
// the Redis at ONCESYNC_TEST_REDIS_URL (a random key namespace per test).
// An unreachable PostgreSQL or Redis skips its flavour, except under CI
// where it fails.

// t0 is the tests' start: a Tuesday, 10:05 UTC.
var t0 = time.Date(2026, 3, 3, 10, 5, 0, 0, time.UTC)

const day = 24 * time.Hour

// testStore is a store under test: store.Store plus the dead-man methods.
type testStore interface {
	store.Store
	deadman.Store
	deadman.MarkerStore
}

func openSQLite(t testing.TB, clk clock.Clock) *sqlite.Store {
	t.Helper()
	return openSQLiteAt(t, filepath.Join(t.TempDir(), "oncesync.db"), clk)
}

// openSQLiteAt opens the store at path, closed at cleanup.
func openSQLiteAt(t testing.TB, path string, clk clock.Clock) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.OpenParams{Path: path, Clock: clk})
	if err != nil {
		t.Fatalf("open sqlite: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st
}

func pgURL() string {
	if u := os.Getenv("ONCESYNC_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// pgAdmin connects to the test database outside any store.
func pgAdmin(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, pgURL())
	if err != nil {
		unavailable(t, "PostgreSQL not reachable at %s (set ONCESYNC_TEST_DATABASE_URL): %v", redacted(pgURL()), err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// openPostgres opens a store in a fresh random schema, dropped at cleanup.
// It returns the admin connection too, its search_path set to the schema.
func openPostgres(t testing.TB, clk clock.Clock) (*postgres.Store, *pgx.Conn) {
	t.Helper()
	admin := pgAdmin(t)
	schema := "oncesync_deadman_" + randHex(6)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(pgURL())
	if err != nil {
		t.Fatal("ONCESYNC_TEST_DATABASE_URL is not a URL")
	}
	q := u.Query()
	q.Set("pool_max_conns", "4")
	u.RawQuery = q.Encode()
	st, err := postgres.Open(context.Background(), postgres.OpenParams{URL: u.String(), Clock: clk, Schema: schema})
	if err != nil {
		t.Fatalf("open postgres: %v", err)
	}
	t.Cleanup(func() { _ = st.Close() }) // before the schema is dropped
	if _, err := admin.Exec(context.Background(), `SET search_path TO `+pgx.Identifier{schema}.Sanitize()); err != nil {
		t.Fatal(err)
	}
	return st, admin
}

// openRedis returns a client of the test Redis and a fresh key namespace
// whose keys are deleted at cleanup.
func openRedis(t testing.TB) (*redis.Client, rediskey.Space) {
	t.Helper()
	c := redis.NewClient(testenv.RedisOptions(t))
	keys, err := rediskey.New("test-deadman-" + randHex(6))
	if err != nil {
		_ = c.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		testenv.DeletePrefix(t, c, keys.Prefix())
		_ = c.Close()
	})
	return c, keys
}

// flavour is one combination of store and marker store.
type flavour struct {
	name string
	open func(t testing.TB, clk clock.Clock) (testStore, deadman.MarkerStore)
}

func flavours() []flavour {
	return []flavour{
		{"sqlite", func(t testing.TB, clk clock.Clock) (testStore, deadman.MarkerStore) {
			st := openSQLite(t, clk)
			return st, st
		}},
		{"postgres", func(t testing.TB, clk clock.Clock) (testStore, deadman.MarkerStore) {
			st, _ := openPostgres(t, clk)
			return st, st
		}},
		{"sqlite+redis", func(t testing.TB, clk clock.Clock) (testStore, deadman.MarkerStore) {
			c, keys := openRedis(t)
			return openSQLite(t, clk), deadman.NewRedisMarkers(c, keys)
		}},
	}
}

// forEachFlavour runs fn as a parallel subtest per flavour.
func forEachFlavour(t *testing.T, fn func(t *testing.T, tb *bundle)) {
	t.Helper()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t, f, bundleOpts{}))
		})
	}
}

// recorder is a Notifier that records every alert; fail makes it refuse.
type recorder struct {
	mu     sync.Mutex
	alerts []alert.Alert
	fail   error
}

func (r *recorder) Notify(_ context.Context, a alert.Alert) (alert.Alert, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return a, r.fail
	}
	if a.ID == "" {
		a.ID = alert.NewID()
	}
	r.alerts = append(r.alerts, a)
	return a, nil
}

// take returns the alerts recorded since the last take.
func (r *recorder) take() []alert.Alert {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.alerts
	r.alerts = nil
	return out
}

func (r *recorder) setFail(err error) {
	r.mu.Lock()
	r.fail = err
	r.mu.Unlock()
}

type bundleOpts struct {
	windows   map[string]time.Duration // per-sync overrides
	maxAlerts int
	// configured, when set, is Params.Configured.
	configured func(syncID string) bool
}

// bundle is one test's checker on its store, markers, clock and recorder.
type bundle struct {
	ctx     context.Context
	clk     *clock.Fake
	st      testStore
	markers deadman.MarkerStore
	rec     *recorder
	checker *deadman.Checker
	params  deadman.Params
}

func link(workspace, syncID string) string {
	if syncID == "" {
		return "https://oncesync.test/w/" + workspace
	}
	return "https://oncesync.test/w/" + workspace + "/syncs/" + syncID
}

func setup(t *testing.T, f flavour, o bundleOpts) *bundle {
	t.Helper()
	clk := clock.NewFake(t0)
	st, markers := f.open(t, clk)
	tb := &bundle{ctx: t.Context(), clk: clk, st: st, markers: markers, rec: &recorder{}}
	tb.params = deadman.Params{
		Store: st, Markers: markers, Notifier: tb.rec, Clock: clk,
		DefaultWindow: day,
		Window:        func(id string) time.Duration { return o.windows[id] },
		Link:          link,
		MaxAlerts:     o.maxAlerts,
		Configured:    o.configured,
	}
	var err error
	if tb.checker, err = deadman.New(tb.params); err != nil {
		t.Fatal(err)
	}
	return tb
}

// sync publishes (or republishes with a new definition) a sync now.
func (tb *bundle) sync(t *testing.T, id, workspace string) {
	t.Helper()
	if _, err := tb.st.PutSync(tb.ctx, store.PutSyncParams{ID: id, Workspace: workspace,
		Definition: fmt.Sprintf(`{"id":%q,"at":%d}`, id, tb.clk.Now().UnixNano())}); err != nil {
		t.Fatal(err)
	}
}

// run records a finished run of syncID now.
func (tb *bundle) run(t *testing.T, syncID string, state store.RunState, code string) store.Run {
	t.Helper()
	r, err := tb.st.InsertRun(tb.ctx, store.InsertRunParams{SyncID: syncID, State: state, FailureCode: code})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func (tb *bundle) check(t *testing.T) deadman.Report {
	t.Helper()
	rep, err := tb.checker.Check(tb.ctx)
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return rep
}

func (tb *bundle) verdict(t *testing.T, rep deadman.Report, scope deadman.Scope, id string) deadman.Verdict {
	t.Helper()
	v, ok := rep.Find(scope, id)
	if !ok {
		t.Fatalf("no verdict for %s %s in %+v", scope, id, rep.Verdicts)
	}
	return v
}

func (tb *bundle) marker(t *testing.T, scope deadman.Scope, id string) (deadman.Marker, bool) {
	t.Helper()
	ms, err := tb.markers.ListDeadmanMarkers(tb.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.Scope == scope && m.ID == id {
			return m, true
		}
	}
	return deadman.Marker{}, false
}
