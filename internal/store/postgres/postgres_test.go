package postgres

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
	"github.com/oncesync/oncesync/internal/testenv"
)

// testURLEnv names the database the tests use; each test works in its own
// random schema, dropped when it ends.
const (
	testURLEnv     = "ONCESYNC_TEST_DATABASE_URL"
	defaultTestURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
)

func testURL() string {
	if u := os.Getenv(testURLEnv); u != "" {
		return u
	}
	return defaultTestURL
}

// withParams returns raw with query parameters set.
func withParams(t testing.TB, raw string, kv ...string) string {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatalf("%s is not a URL", testURLEnv)
	}
	q := u.Query()
	for i := 0; i+1 < len(kv); i += 2 {
		q.Set(kv[i], kv[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// adminConn connects to the test database outside any store. When the server
// cannot be reached the test is skipped, or fails when CI is set: CI must run
// these tests, never skip them silently.
func adminConn(t testing.TB) *pgx.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, testURL())
	if err != nil {
		msg := fmt.Sprintf("PostgreSQL not reachable at %s (set %s): %v", redact(testURL()), testURLEnv, err)
		if os.Getenv("CI") != "" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// newSchema returns a fresh random schema name, dropped (with everything in
// it) when t ends.
func newSchema(t testing.TB) string {
	t.Helper()
	admin := adminConn(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "oncesync_test_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// storeURL is the test database with a small pool and an application_name
// that finds the store's connections in pg_stat_activity.
func storeURL(t testing.TB, schema string) string {
	return withParams(t, testURL(), "pool_max_conns", "4", "application_name", schema)
}

// openTest opens a store in a new schema; closed when t ends.
func openTest(t testing.TB, clk clock.Clock) (*Store, string) {
	t.Helper()
	schema := newSchema(t)
	s, err := Open(context.Background(), OpenParams{URL: storeURL(t, schema), Clock: clk, Schema: schema})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() }) // runs before the schema is dropped
	return s, schema
}

func TestStoreSuite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, clk *clock.Fake) store.Store {
		s, _ := openTest(t, clk)
		return s
	})
}

func countMigrations(t *testing.T, s *Store) int {
	t.Helper()
	var n int
	if err := s.pool.QueryRow(t.Context(), `SELECT count(*) FROM schema_migrations`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestOpenReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := clock.NewFake(storetest.Start)
	s, schema := openTest(t, clk)
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	newest := ms[len(ms)-1].Version
	if v, err := s.SchemaVersion(ctx); err != nil || v != newest {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, newest)
	}
	if s.Schema() != schema {
		t.Fatalf("Schema() = %q, want %q", s.Schema(), schema)
	}
	if _, err := s.PutSync(ctx, store.PutSyncParams{ID: "s1", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()

	// Reopening applies nothing twice and keeps the data (and the fence).
	for range 2 {
		s, err = Open(ctx, OpenParams{URL: storeURL(t, schema), Clock: clk, Schema: schema})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		if n := countMigrations(t, s); n != len(ms) {
			t.Fatalf("schema_migrations has %d rows, want %d", n, len(ms))
		}
		if _, err := s.GetSync(ctx, "s1"); err != nil {
			t.Fatalf("GetSync after reopen: %v", err)
		}
		_ = s.Close()
	}
	s, err = Open(ctx, OpenParams{URL: storeURL(t, schema), Clock: clk, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clk.Advance(2 * time.Minute)
	l, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "b", TTL: time.Minute})
	if err != nil || l.Fence != 2 {
		t.Fatalf("LeaseAcquire after reopen = %+v, %v; want fence 2", l, err)
	}
}

// TestSchemasIsolated: two stores in two schemas of one database see nothing
// of each other, and the tables live in the named schema, not public.
func TestSchemasIsolated(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, schemaA := openTest(t, clock.Real{})
	b, _ := openTest(t, clock.Real{})
	if _, err := a.PutSync(ctx, store.PutSyncParams{ID: "only-in-a", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := b.GetSync(ctx, "only-in-a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetSync through the other schema: %v, want ErrNotFound", err)
	}
	var n int
	err := adminConn(t).QueryRow(ctx, `SELECT count(*) FROM information_schema.tables
		WHERE table_schema = $1 AND table_name IN ('syncs', 'runs', 'fences', 'cursors', 'ledger', 'leases', 'audit', 'schema_migrations')`,
		schemaA).Scan(&n)
	if err != nil || n != 8 {
		t.Fatalf("tables in %s: %d, %v; want 8", schemaA, n, err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	s, schema := openTest(t, clock.Real{})
	if _, err := s.pool.Exec(t.Context(), `INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	_, err := Open(t.Context(), OpenParams{URL: storeURL(t, schema), Schema: schema})
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v, want a 'newer' error", err)
	}
}

func TestOpenInvalid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		params OpenParams
		secret string // must not appear in the error
	}{
		{name: "empty URL", params: OpenParams{URL: " "}},
		{name: "unparseable URL with a password", params: OpenParams{URL: "postgres://u:s3cr3t-pw@host:notaport/db"}, secret: "s3cr3t-pw"},
		{name: "upper-case schema", params: OpenParams{URL: defaultTestURL, Schema: "Oncesync"}},
		{name: "schema with a quote", params: OpenParams{URL: defaultTestURL, Schema: `x"; DROP TABLE y; --`}},
		{name: "pg_ schema", params: OpenParams{URL: defaultTestURL, Schema: "pg_temp"}},
		{name: "schema too long", params: OpenParams{URL: defaultTestURL, Schema: strings.Repeat("a", 64)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s, err := Open(t.Context(), tt.params)
			if err == nil {
				_ = s.Close()
				t.Fatal("Open succeeded, want an error")
			}
			var ie *invalidError
			if !errors.As(err, &ie) {
				t.Fatalf("error %v is not an invalid-argument error", err)
			}
			if errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("a bad argument reported as unavailable: %v", err)
			}
			if tt.secret != "" && strings.Contains(err.Error(), tt.secret) {
				t.Fatalf("error %q reveals the password", err)
			}
		})
	}
}

// closedPortURL returns a URL pointing at a local port nothing listens on.
func closedPortURL(t *testing.T) string {
	t.Helper()
	return "postgres://oncesync:pw-not-shown@" + testenv.RefusedAddr(t) + "/oncesync?sslmode=disable&connect_timeout=5"
}

func TestUnreachableIsUnavailable(t *testing.T) {
	t.Parallel()
	_, err := Open(t.Context(), OpenParams{URL: closedPortURL(t)})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open of a closed port: %v, want ErrUnavailable", err)
	}
	if strings.Contains(err.Error(), "pw-not-shown") {
		t.Fatalf("error %q reveals the password", err)
	}
}

// TestLostConnectionsAreUnavailable: a connection killed under a running
// statement (a server restart, a failover) surfaces as ErrUnavailable, and the
// store recovers by itself once the server is back.
func TestLostConnectionsAreUnavailable(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, schema := openTest(t, clock.Real{})
	admin := adminConn(t)
	if err := s.RaiseFence(ctx, "s1", 1); err != nil {
		t.Fatal(err)
	}
	// Hold the sync's fences row so the store's next fenced write waits on it.
	locker, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = locker.Rollback(context.Background()) }()
	if _, err := locker.Exec(ctx, `SELECT fence FROM `+pgx.Identifier{schema, "fences"}.Sanitize()+` WHERE sync_id = 's1' FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	claimed := make(chan error, 1)
	go func() {
		claimed <- s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: 1, RunID: 1, Keys: []string{"k"}})
	}()
	// Wait until the claim is blocked on the lock, then kill its backend.
	deadline := time.Now().Add(10 * time.Second)
	for {
		var killed int
		if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
			WHERE application_name = $1 AND wait_event_type = 'Lock'`, schema).Scan(&killed); err != nil {
			t.Fatal(err)
		}
		if killed > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the claim never waited on the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if err := <-claimed; !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("claim on a killed connection: %v, want ErrUnavailable", err)
	}
	_ = locker.Rollback(ctx)

	// The pool replaces dead connections: the store works again, and the
	// killed claim wrote nothing.
	got, err := s.LedgerGet(ctx, "s1", []string{"k"})
	if err != nil || len(got) != 0 {
		t.Fatalf("LedgerGet after the killed claim = %v, %v; want no entry", got, err)
	}
	if err := s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: 1, RunID: 1, Keys: []string{"k"}}); err != nil {
		t.Fatalf("claim after recovery: %v", err)
	}

	// A closed store is unavailable too (not a panic, not a bare error).
	_ = s.Close()
	if _, err := s.GetSync(ctx, "s1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("GetSync on a closed store: %v, want ErrUnavailable", err)
	}
}

// TestConcurrentMigration: several stores (separate pools, as separate
// processes would have) open one fresh schema at the same moment: all succeed
// and the migrations are applied once.
func TestConcurrentMigration(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	const n = 6
	stores := make([]*Store, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			stores[i], errs[i] = Open(t.Context(), OpenParams{URL: withParams(t, testURL(), "pool_max_conns", "2"), Schema: schema})
		})
	}
	close(start)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("Open %d: %v", i, err)
		}
		defer stores[i].Close()
	}
	ms, _ := migrations()
	if got := countMigrations(t, stores[0]); got != len(ms) {
		t.Fatalf("schema_migrations rows = %d, want %d", got, len(ms))
	}
}

// TestTwoPools: two *Store on one schema contend for one lease; exactly one
// wins each round, and a fence granted through one fences writes through the
// other.
func TestTwoPools(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := clock.NewFake(storetest.Start)
	a, schema := openTest(t, clk)
	b, err := Open(ctx, OpenParams{URL: storeURL(t, schema), Clock: clk, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stores := []*Store{a, b}

	// race has 8 acquirers (4 per store) contend for syncID's lease and
	// returns the winners.
	race := func(syncID string, round int) []store.Lease {
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []store.Lease
		)
		start := make(chan struct{})
		for i := range 8 {
			wg.Go(func() {
				<-start
				l, err := stores[i%2].LeaseAcquire(ctx, store.LeaseAcquireParams{
					SyncID: syncID, Token: fmt.Sprintf("tok-%d-%d", round, i), Holder: fmt.Sprint("g", i), TTL: time.Minute,
				})
				switch {
				case err == nil:
					mu.Lock()
					wins = append(wins, l)
					mu.Unlock()
				case !errors.Is(err, store.ErrLeaseHeld):
					t.Errorf("LeaseAcquire: %v", err)
				}
			})
		}
		close(start)
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("%s round %d: winners %+v, want exactly one", syncID, round, wins)
		}
		// The other store sees the winner at once.
		l, err := stores[1].LeaseGet(ctx, syncID)
		if err != nil || l.Token != wins[0].Token || l.Fence != wins[0].Fence {
			t.Fatalf("%s round %d: LeaseGet = %+v, %v; want %+v", syncID, round, l, err, wins[0])
		}
		return wins
	}
	// Fresh syncs (no fences row yet).
	for round := range 5 {
		if w := race(fmt.Sprintf("s%d", round), round); w[0].Fence != 1 {
			t.Fatalf("round %d: fence %d, want 1", round, w[0].Fence)
		}
	}
	// One sync whose lease expires between rounds (the fences row exists).
	for round := range 5 {
		clk.Advance(2 * time.Minute)
		if w := race("again", round); w[0].Fence != int64(round+1) {
			t.Fatalf("expired round %d: fence %d, want %d", round, w[0].Fence, round+1)
		}
	}

	clk.Advance(2 * time.Minute)
	l, err := b.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s0", Token: "late", TTL: time.Minute})
	if err != nil || l.Fence != 2 {
		t.Fatalf("LeaseAcquire = %+v, %v", l, err)
	}
	err = a.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s0", Value: "x", Fence: 1, RunID: 1})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("SaveCursor with the old fence through the other store: %v, want ErrFenced", err)
	}
	err = a.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s0", Fence: 1, RunID: 1, Keys: []string{"k"}})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("LedgerClaim with the old fence through the other store: %v, want ErrFenced", err)
	}
}

// twoPoolsAtFence1 opens two stores (two pools) on one schema, with sync
// s1's fence registered at 1.
func twoPoolsAtFence1(t *testing.T) (a, b *Store) {
	t.Helper()
	a, schema := openTest(t, clock.Real{})
	b, err := Open(t.Context(), OpenParams{URL: storeURL(t, schema), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := a.RaiseFence(t.Context(), "s1", 1); err != nil {
		t.Fatal(err)
	}
	return a, b
}

// TestFenceRacesWrites: a stream of fenced writes under fence 1 races a
// RaiseFence to 2 through another pool. Once the raise has returned no write
// under 1 is accepted; the accepted writes are a prefix of the stream, each
// one complete (no torn page), and the refused ones left nothing.
func TestFenceRacesWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := twoPoolsAtFence1(t)
	const (
		perPage   = 20
		raiseAt   = 10     // pages written before the raise is let go
		maxPages  = 100000 // the writer gives up if never refused
		afterward = 3      // pages tried after the first refusal
	)
	raised := make(chan struct{})
	var (
		accepted []int
		refused  int
	)
	done := make(chan error, 1)
	go func() {
		for i := range maxPages {
			ks := make([]string, perPage)
			for j := range ks {
				ks[j] = fmt.Sprintf("p%06d-k%02d", i, j)
			}
			if i == raiseAt {
				close(raised)
			}
			err := a.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: 1, RunID: 1, Keys: ks})
			switch {
			case err == nil:
				accepted = append(accepted, i)
			case errors.Is(err, store.ErrFenced):
				if refused++; refused > afterward {
					done <- nil
					return
				}
			default:
				done <- err
				return
			}
		}
		done <- errors.New("never refused")
	}()
	<-raised
	if err := b.RaiseFence(ctx, "s1", 2); err != nil {
		t.Fatal(err)
	}
	if err := a.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: 1, RunID: 1, Keys: []string{"after"}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("claim after the raise: %v, want ErrFenced", err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(accepted) < raiseAt {
		t.Fatalf("accepted %d pages, want at least the %d before the raise", len(accepted), raiseAt)
	}
	for i, p := range accepted {
		if p != i {
			t.Fatalf("accepted pages %v are not a prefix: a write was accepted after one was refused", accepted)
		}
	}
	var rows, pagesSeen int
	if err := a.pool.QueryRow(ctx, `SELECT count(*), count(DISTINCT substr(key, 1, 7)) FROM ledger WHERE sync_id = 's1'`).Scan(&rows, &pagesSeen); err != nil {
		t.Fatal(err)
	}
	if rows != perPage*len(accepted) || pagesSeen != len(accepted) {
		t.Fatalf("ledger has %d rows over %d pages, want %d over %d", rows, pagesSeen, perPage*len(accepted), len(accepted))
	}
}

// TestFencedWritesShareTheLock: a holder's fenced writes do not wait for
// each other (a claim goes through while a checkpoint's transaction, holding
// its fenced finish, is open), but a raise of the fence waits for that
// transaction, and once the raise returned the old fence's writes are
// refused while what the transaction wrote before it stays.
func TestFencedWritesShareTheLock(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	a, b := twoPoolsAtFence1(t)
	tx, err := a.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if err := a.ledgerFinish(ctx, tx, store.LedgerFinishParams{SyncID: "s1", Fence: 1, RunID: 1,
		Entries: []store.LedgerFinish{{Key: "in-tx", State: store.LedgerComplete}}}, 0); err != nil {
		t.Fatal(err)
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	err = b.LedgerClaim(cctx, store.LedgerClaimParams{SyncID: "s1", Fence: 1, RunID: 1, Keys: []string{"beside"}})
	cancel()
	if err != nil {
		t.Fatalf("claim beside an open fenced transaction of the same fence: %v, want it to go through", err)
	}
	raised := make(chan error, 1)
	go func() { raised <- b.RaiseFence(ctx, "s1", 2) }()
	select {
	case err := <-raised:
		t.Fatalf("the raise returned (%v) while a fenced transaction of the old fence was open", err)
	case <-time.After(300 * time.Millisecond):
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-raised; err != nil {
		t.Fatal(err)
	}
	if err := a.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: 1, RunID: 1, Keys: []string{"after"}}); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("claim under the old fence after the raise: %v, want ErrFenced", err)
	}
	got, err := a.LedgerGet(ctx, "s1", []string{"in-tx", "beside", "after"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got["in-tx"].State != store.LedgerComplete || got["beside"].State != store.LedgerPending {
		t.Fatalf("ledger %v, want in-tx complete and beside pending, nothing of after", got)
	}
}

const (
	helperEnv   = "ONCESYNC_PG_TEST_HELPER"
	helperSyncs = 20 // leases each helper process contends for
)

// TestHelperProcess is not a test: TestProcessesContendForLease re-executes
// the test binary to run it as a separate process.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process only")
	}
	dbURL, schema, token := os.Getenv("HELPER_URL"), os.Getenv("HELPER_SCHEMA"), os.Getenv("HELPER_TOKEN")
	// Wait for the go signal so every process opens the fresh schema at once.
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Println("error: stdin:", err)
		return
	}
	ctx := context.Background()
	s, err := Open(ctx, OpenParams{URL: dbURL, Schema: schema})
	if err != nil {
		fmt.Println("error: open:", err)
		return
	}
	defer s.Close()
	for i := range helperSyncs {
		syncID := fmt.Sprint("shared-", i)
		l, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: syncID, Token: token, Holder: fmt.Sprint("pid-", os.Getpid()), TTL: time.Hour})
		switch {
		case err == nil:
			if err := s.SaveCursor(ctx, store.SaveCursorParams{SyncID: syncID, Value: token, Fence: l.Fence, RunID: 1}); err != nil {
				fmt.Println("error: save cursor:", err)
				continue
			}
			fmt.Printf("%s won fence=%d\n", syncID, l.Fence)
		case errors.Is(err, store.ErrLeaseHeld):
			fmt.Printf("%s held\n", syncID)
		default:
			fmt.Printf("%s error: %v\n", syncID, err)
		}
	}
}

// TestProcessesContendForLease: several oncesync processes open one fresh
// schema at the same moment (racing the migrations) and contend for the same
// leases: each lease has exactly one winner, with fence 1, whose fenced write
// lands, and the schema is applied once.
func TestProcessesContendForLease(t *testing.T) {
	t.Parallel()
	if os.Getenv(helperEnv) != "" {
		t.Skip("inside a helper process")
	}
	const procs = 4
	schema := newSchema(t)

	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   strings.Builder
	}
	ps := make([]*proc, procs)
	for i := range ps {
		p := &proc{cmd: exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")}
		p.cmd.Env = append(os.Environ(), helperEnv+"=1", "HELPER_URL="+withParams(t, testURL(), "pool_max_conns", "2"),
			"HELPER_SCHEMA="+schema, fmt.Sprint("HELPER_TOKEN=tok-", i))
		p.cmd.Stdout = &p.out
		p.cmd.Stderr = &p.out
		w, err := p.cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		p.stdin = w
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	for _, p := range ps {
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
		_ = p.stdin.Close()
	}
	winners := map[string]string{} // sync -> helper
	held := 0
	for i, p := range ps {
		err := p.cmd.Wait()
		out := p.out.String()
		if err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[1] == "won" && f[2] == "fence=1":
				if prev, dup := winners[f[0]]; dup {
					t.Fatalf("%s won by helpers %s and %d", f[0], prev, i)
				}
				winners[f[0]] = fmt.Sprint(i)
			case len(f) == 2 && f[1] == "held":
				held++
			case strings.HasPrefix(line, "PASS") || strings.HasPrefix(line, "ok"):
			default:
				t.Fatalf("helper %d: unexpected line %q\n%s", i, line, out)
			}
		}
	}
	if len(winners) != helperSyncs || held != helperSyncs*(procs-1) {
		t.Fatalf("%d syncs won (want %d), %d refusals (want %d)", len(winners), helperSyncs, held, helperSyncs*(procs-1))
	}

	s, err := Open(t.Context(), OpenParams{URL: storeURL(t, schema), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ms, _ := migrations()
	if got := countMigrations(t, s); got != len(ms) {
		t.Fatalf("schema_migrations rows = %d, want %d", got, len(ms))
	}
	for syncID, helper := range winners {
		l, err := s.LeaseGet(t.Context(), syncID)
		if err != nil || l.Fence != 1 || l.Token != "tok-"+helper {
			t.Fatalf("%s: LeaseGet = %+v, %v; want tok-%s fence 1", syncID, l, err, helper)
		}
		c, err := s.GetCursor(t.Context(), syncID)
		if err != nil || c.Value != "tok-"+helper {
			t.Fatalf("%s: cursor %+v, %v; want the winner's write", syncID, c, err)
		}
	}
}

// TestLedgerPruneWindows: a prune walks several windows (and window edges
// falling inside a sync) and deletes exactly the prunable entries.
func TestLedgerPruneWindows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := clock.NewFake(storetest.Start)
	s, _ := openTest(t, clk)
	s.pruneWindow = 7

	wantLeft := map[string]int{}
	for _, syncID := range []string{"a", "b", "c"} {
		l, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: syncID, Token: "t", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ks := make([]string, 40)
		var fin []store.LedgerFinish
		for i := range ks {
			ks[i] = fmt.Sprintf("%s-%02d", syncID, i)
			switch i % 4 {
			case 0:
				fin = append(fin, store.LedgerFinish{Key: ks[i], State: store.LedgerComplete})
			case 1:
				fin = append(fin, store.LedgerFinish{Key: ks[i], State: store.LedgerRejected})
			case 2:
				fin = append(fin, store.LedgerFinish{Key: ks[i], State: store.LedgerInDoubt})
			}
		}
		if err := s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: syncID, Fence: l.Fence, Keys: ks}); err != nil {
			t.Fatal(err)
		}
		if err := s.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: syncID, Fence: l.Fence, Entries: fin}); err != nil {
			t.Fatal(err)
		}
		wantLeft[syncID] = 20 // complete and pending
	}
	clk.Advance(time.Hour)
	if err := s.LedgerTouch(ctx, "b", []string{"b-01", "b-02"}); err != nil {
		t.Fatal(err)
	}
	wantLeft["b"] += 2
	n, err := s.LedgerPrune(ctx, clk.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if n != 3*20-2 {
		t.Fatalf("pruned %d, want %d", n, 3*20-2)
	}
	for syncID, want := range wantLeft {
		var got int
		if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM ledger WHERE sync_id = $1`, syncID).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("sync %s: %d entries left, want %d", syncID, got, want)
		}
	}
}

// TestQueryPlans guards the hot path against plans that read a whole sync's
// ledger: the keys must be an index condition, not a filter, even on a table
// never analyzed (a new deployment) where one sync holds every row. With the
// primary key (sync_id, key) the planner then scanned the sync_id prefix and
// filtered the keys, a cost linear in the ledger's size.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := openTest(t, clock.Real{})
	fence := int64(1)
	for p := range 50 { // 50,000 finished entries (a quarter rejected), all of one sync, and a page of claims
		keys := benchKeys(p, 1000)
		if err := s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "big", Fence: fence, RunID: 1, Keys: keys}); err != nil {
			t.Fatal(err)
		}
		fin := make([]store.LedgerFinish, len(keys))
		for i, k := range keys {
			fin[i] = store.LedgerFinish{Key: k, State: store.LedgerComplete}
			if i%4 == 0 { // some for the prune to walk
				fin[i].State = store.LedgerRejected
			}
		}
		if err := s.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "big", Fence: fence, RunID: 1, Entries: fin}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "big", Fence: fence, RunID: 1, Keys: benchKeys(50, 1000)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.pool.Exec(ctx, `ANALYZE ledger`); err != nil {
		t.Fatal(err)
	}
	page, claims := benchKeys(7, 250), benchKeys(50, 250)
	finishArgs := func(done, released []string) []any {
		states := make([]string, len(done))
		for i := range states {
			states[i] = "complete"
		}
		return []any{"big", fence, int64(1), int64(1), done, states, states, states, released, []string(nil), []string(nil), []string(nil), []string(nil)}
	}
	absentArgs := func(fresh []string) []any {
		states := make([]string, len(fresh))
		for i := range states {
			states[i] = "complete"
		}
		return []any{"big", fence, int64(1), int64(1), []string(nil), []string(nil), []string(nil), []string(nil), []string(nil), fresh, states, states, states}
	}
	// Each statement must reach ledger's rows by its primary key (a
	// sequential scan of ledger is a cost linear in every delivery ever
	// made), whether the server plans it for the page's values or with a
	// generic plan (what a prepared statement ends up with).
	tests := []struct {
		name string
		q    string
		args []any
		want []string
	}{
		{"ledger get", sqlLedgerGet, []any{"big", page}, []string{"Index Cond: ((key = k.key) AND (sync_id = "}},
		{"ledger claim", sqlLedgerClaim, []any{"big", fence, int64(1), int64(1), benchKeys(60, 250), []string(nil)},
			[]string{"Conflict Arbiter Indexes: ledger_pkey"}},
		{"ledger claim absent", sqlLedgerClaimAbsent, []any{"big", fence, int64(1), int64(1), benchKeys(61, 250), []string(nil)},
			[]string{"Insert on ledger"}},
		{"ledger touch", sqlLedgerTouch, []any{int64(1), "big", page}, []string{"Index Cond: ((key = ANY "}},
		{"ledger list rejected", sqlListListed, []any{"big", "rejected", int64(10)}, []string{"ledger_listed"}},
		{"ledger list accepted", sqlListListed, []any{"big", "accepted", int64(10)}, []string{"ledger_listed"}},
		{"ledger list pending", sqlListPending, []any{"big", "pending", int64(0)}, []string{"ledger_pending"}},
		{"finish releases", sqlLedgerFinish, finishArgs(nil, claims), []string{"Index Cond: ((key = ANY "}},
		{"finish outcomes", sqlLedgerFinish, finishArgs(page, nil), []string{"ledger_pkey"}},
		{"finish absent", sqlLedgerFinish, absentArgs(benchKeys(62, 250)), []string{"Insert on ledger"}},
		{"prune window", sqlLedgerPrune, []any{"", "", int64(100), int64(1)}, []string{"Index Cond: (ROW(key, sync_id) > "}},
		{"prune delete", sqlLedgerPrune, []any{"", "", int64(100), int64(1)}, []string{"Tid Scan on ledger"}},
	}
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	for _, mode := range []string{"force_custom_plan", "force_generic_plan"} {
		if _, err := conn.Exec(ctx, "SET plan_cache_mode = "+mode); err != nil {
			t.Fatal(err)
		}
		for _, tt := range tests {
			if _, err := conn.Conn().Prepare(ctx, "plan", "EXPLAIN "+tt.q); err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			rows, err := conn.Query(ctx, "plan", tt.args...)
			if err != nil {
				t.Fatalf("%s (%s): %v", tt.name, mode, err)
			}
			lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			if err := conn.Conn().Deallocate(ctx, "plan"); err != nil {
				t.Fatal(err)
			}
			plan := strings.Join(lines, "\n")
			for _, want := range tt.want {
				if !strings.Contains(plan, want) {
					t.Errorf("%s (%s): plan\n%s\nlacks %q", tt.name, mode, plan, want)
				}
			}
			if strings.Contains(plan, "Seq Scan on ledger ") || strings.HasSuffix(plan, "Seq Scan on ledger") {
				t.Errorf("%s (%s): plan\n%s\nscans ledger", tt.name, mode, plan)
			}
		}
	}
}

func TestIsURL(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]bool{
		"postgres://u@h/db":       true,
		"postgresql://u@h/db":     true,
		"sqlite://./oncesync.db":  false,
		"host=localhost dbname=x": false,
		"":                        false,
	} {
		if got := IsURL(in); got != want {
			t.Errorf("IsURL(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestMapErr(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"sentinel kept", fmt.Errorf("x: %w", store.ErrFenced), false},
		{"canceled", context.Canceled, false},
		{"deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), false},
		{"eof", io.ErrUnexpectedEOF, true},
		{"net", &net.OpError{Op: "dial", Err: errors.New("refused")}, true},
		{"plain", errors.New("syntax error"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := mapErr("op", tt.err)
			if !errors.Is(got, tt.err) {
				t.Fatalf("mapErr lost the cause: %v", got)
			}
			if errors.Is(got, store.ErrUnavailable) != tt.unavailable {
				t.Fatalf("mapErr(%v) unavailable = %v, want %v", tt.err, !tt.unavailable, tt.unavailable)
			}
		})
	}
}

func TestListRunsByState(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := openTest(t, clock.NewFake(storetest.Start))
	var running []int64
	for i, st := range []store.RunState{store.RunRunning, store.RunQueued, store.RunRunning, store.RunSucceeded, store.RunRunning} {
		r, err := s.InsertRun(ctx, store.InsertRunParams{SyncID: fmt.Sprint("s", i%2), State: st})
		if err != nil {
			t.Fatal(err)
		}
		if st == store.RunRunning {
			running = append(running, r.ID)
		}
	}
	tests := []struct {
		limit int
		want  []int64
	}{
		{0, running},
		{2, running[:2]},
	}
	for _, tt := range tests {
		got, err := s.ListRunsByState(ctx, store.RunRunning, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []int64
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		if fmt.Sprint(ids) != fmt.Sprint(tt.want) {
			t.Fatalf("limit %d: ids %v, want %v (oldest first)", tt.limit, ids, tt.want)
		}
	}
	if _, err := s.ListRunsByState(ctx, "bogus", 0); err == nil {
		t.Fatal("ListRunsByState(bogus) succeeded")
	}
}

// TestIdleTransactionsAreEnded: a store connection left idle inside a
// transaction (its process paused) is ended by the server, so its locks do
// not outlive IdleInTransactionTimeout; a URL may choose its own value.
func TestIdleTransactionsAreEnded(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := openTest(t, clock.NewFake(storetest.Start))
	var got string
	if err := s.pool.QueryRow(ctx, `SHOW idle_in_transaction_session_timeout`).Scan(&got); err != nil {
		t.Fatal(err)
	}
	if want := "10s"; got != want {
		t.Fatalf("idle_in_transaction_session_timeout = %q, want %q", got, want)
	}

	schema := newSchema(t)
	short, err := Open(ctx, OpenParams{URL: withParams(t, storeURL(t, schema), "idle_in_transaction_session_timeout", "200"), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = short.Close() })
	tx, err := short.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT fence FROM fences FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	time.Sleep(600 * time.Millisecond) // the "paused" client
	if err := tx.Commit(ctx); err == nil {
		t.Fatal("a transaction idle past the timeout committed")
	}
}
