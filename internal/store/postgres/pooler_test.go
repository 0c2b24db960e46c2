package postgres

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestBehindPgBouncerInSessionMode: PgBouncer refuses a connection whose
// startup packet carries a parameter it does not know (search_path,
// idle_in_transaction_session_timeout), in every pool mode, so a store
// behind it never opened ("could not be reached"). In session mode a client
// keeps one server session, and the store works as on a direct connection,
// with its schema (named in the URL) and its session settings in effect.
func TestBehindPgBouncerInSessionMode(t *testing.T) {
	t.Parallel()
	adminConn(t) // skips without PostgreSQL
	ctx := t.Context()
	schema := newSchema(t)
	u := withParams(t, testenv.PgBouncer(t, testURL(), "session"), "search_path", schema, "pool_max_conns", "4")
	s, err := Open(ctx, OpenParams{URL: u, Clock: clock.NewFake(storetest.Start), Schema: schema})
	if err != nil {
		t.Fatalf("Open behind PgBouncer in session mode: %v", err)
	}
	defer s.Close()
	if _, err := s.PutSync(ctx, store.PutSyncParams{ID: "s1", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	if l, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "a", TTL: time.Minute}); err != nil || l.Fence != 1 {
		t.Fatalf("LeaseAcquire = %+v, %v", l, err)
	}
	var current, idle string
	if err := s.pool.QueryRow(ctx, `SELECT current_schema(), current_setting('idle_in_transaction_session_timeout')`).Scan(&current, &idle); err != nil {
		t.Fatal(err)
	}
	if current != schema || idle != "10s" {
		t.Fatalf("session: schema %q, idle_in_transaction_session_timeout %q; want %q, 10s", current, idle, schema)
	}
	var n int
	err = adminConn(t).QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'syncs'`, schema).Scan(&n)
	if err != nil || n != 1 {
		t.Fatalf("syncs in %s: %d, %v", schema, n, err)
	}
}

// TestBehindPgBouncerInTransactionModeIsRefused: in transaction mode one
// server session serves many clients in turn, so settings made on
// connecting and pgx's prepared statements land on other clients' sessions.
// With the startup parameters ignored (ignore_startup_parameters, the usual
// answer to PgBouncer's refusal), such a store opened, then failed part-way
// ("relation ... does not exist", "prepared statement ... already exists").
// It is refused when it opens, saying what to change, whatever the pool size.
func TestBehindPgBouncerInTransactionModeIsRefused(t *testing.T) {
	t.Parallel()
	adminConn(t)
	bouncer := testenv.PgBouncer(t, testURL(), "transaction",
		"ignore_startup_parameters = search_path,idle_in_transaction_session_timeout")
	for _, size := range []string{"4", "1"} {
		schema := newSchema(t)
		u := withParams(t, bouncer, "search_path", schema, "pool_max_conns", size)
		s, err := Open(t.Context(), OpenParams{URL: u, Clock: clock.NewFake(storetest.Start), Schema: schema})
		if err == nil {
			// What a run met next on the old code.
			_, err = s.PutSync(t.Context(), store.PutSyncParams{ID: "s1", Definition: "{}"})
			s.Close()
			t.Fatalf("pool of %s: Open behind PgBouncer in transaction mode succeeded (then PutSync: %v)", size, err)
		}
		if !errors.Is(err, ErrSessionsNotKept) {
			t.Errorf("pool of %s: Open = %v, want ErrSessionsNotKept", size, err)
		}
		d := failure.Wrap(failure.StoreUnavailable, err, "open the PostgreSQL store").Detail
		if !strings.Contains(d, "session mode") || !strings.Contains(d, "pool_mode") {
			t.Errorf("pool of %s: detail %q does not say what to change", size, d)
		}
	}
}

// TestOpenSaysWhy: a PostgreSQL that refuses oncesync said only "open the
// PostgreSQL store" and store_unavailable's "could not be reached"; the
// detail now says what stands in the way.
func TestOpenSaysWhy(t *testing.T) {
	t.Parallel()
	adminConn(t)
	ctx := t.Context()
	detail := func(err error) string {
		return failure.Wrap(failure.StoreUnavailable, err, "open the PostgreSQL store").Detail
	}
	noDB, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	noDB.Path = "/oncesync_no_such_database"
	_, err = Open(ctx, OpenParams{URL: noDB.String(), Schema: newSchema(t)})
	if d := detail(err); !strings.Contains(d, "database named in store does not exist") {
		t.Errorf("a missing database: %v; detail %q", err, d)
	}

	// A DBA's statement_timeout shorter than a store statement.
	s, schema := openTest(t, clock.Real{}) // migrated
	s.Close()
	s, err = Open(ctx, OpenParams{URL: withParams(t, storeURL(t, schema), "statement_timeout", "100"), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.tx(ctx, "slow", func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT pg_sleep(1)`)
		return err
	})
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(detail(err), "statement_timeout") {
		t.Errorf("a statement past statement_timeout: %v; detail %q", err, detail(err))
	}

	// sslmode=require where the server has no TLS (PgBouncer without
	// client_tls_sslmode refuses a client's TLS).
	_, err = Open(ctx, OpenParams{URL: withParams(t, testenv.PgBouncer(t, testURL(), "session"), "sslmode", "require"), Schema: newSchema(t)})
	if d := detail(err); !strings.Contains(d, "does not offer it") {
		t.Errorf("sslmode=require without TLS: %v; detail %q", err, d)
	}
}

// TestSessionSettingsFromTheURL: settings in the store URL reach the
// session, set after connecting, and options (a startup packet's only) stays
// in the startup packet.
func TestSessionSettingsFromTheURL(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	// %20, not the + that url.Values writes: pgx reads the query with
	// PathUnescape.
	u := withParams(t, storeURL(t, schema), "lock_timeout", "4321") + "&options=-c%20statement_timeout%3D1234"
	s, err := Open(ctx, OpenParams{URL: u, Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var lock, stmt, app string
	err = s.pool.QueryRow(ctx, `SELECT current_setting('lock_timeout'), current_setting('statement_timeout'), current_setting('application_name')`).Scan(&lock, &stmt, &app)
	if err != nil {
		t.Fatal(err)
	}
	if lock != "4321ms" || stmt != "1234ms" || app != schema {
		t.Fatalf("lock_timeout %q, statement_timeout %q, application_name %q; want 4321ms, 1234ms, %s", lock, stmt, app, schema)
	}
}

// TestBehindAFullSessionPoolFailsInSeconds: in session mode each client
// connection holds one of PgBouncer's server connections for its life. With
// the pool for the database and user (default_pool_size) smaller than the
// connections of every process, the process started last connected at once,
// then its first statement waited for PgBouncer's query_wait_timeout (120 s)
// and it exited with "open the job queue" alone (serve and a worker did,
// with a pool of 6). The store (and the queue) now give a first statement
// the connect timeout, and say which setting to raise.
func TestBehindAFullSessionPoolFailsInSeconds(t *testing.T) {
	t.Parallel()
	adminConn(t)
	// A pool of 1 is full at the store's first statement; of 2, at the
	// second connection its open compares with the first.
	for _, size := range []string{"1", "2"} {
		t.Run("default_pool_size "+size, func(t *testing.T) {
			t.Parallel()
			bouncer := testenv.PgBouncer(t, testURL(), "session", "default_pool_size = "+size)
			hog, err := pgx.Connect(t.Context(), bouncer)
			if err != nil {
				t.Fatal(err)
			}
			defer hog.Close(context.Background())
			if _, err := hog.Exec(t.Context(), `SELECT 1`); err != nil { // takes one of the pool's server connections
				t.Fatal(err)
			}
			schema := newSchema(t)
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			start := time.Now()
			s, err := Open(ctx, OpenParams{URL: withParams(t, bouncer, "search_path", schema, "connect_timeout", "2"),
				Clock: clock.NewFake(storetest.Start), Schema: schema})
			if err == nil {
				s.Close()
				t.Fatal("Open behind a full pool succeeded")
			}
			d := failure.Wrap(failure.StoreUnavailable, err, "open the PostgreSQL store").Detail
			if took := time.Since(start); took > 15*time.Second || !strings.Contains(d, "default_pool_size") {
				t.Errorf("Open behind a full session pool: after %s, detail %q", took.Round(time.Second), d)
			}
		})
	}
}

// TestOpenSaysWhichReadOnly: a primary with default_transaction_read_only
// on (as managed services set it when the disk is nearly full) was called
// "a read-only standby: point store at the primary", which sends its
// operator looking for a server that does not exist. Open asks the server;
// a refusal after the open names both causes.
func TestOpenSaysWhichReadOnly(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	detail := func(err error) string {
		return failure.Wrap(failure.StoreUnavailable, err, "open the PostgreSQL store").Detail
	}
	readOnly := "&options=-c%20default_transaction_read_only%3Don"
	schema := newSchema(t)
	_, err := Open(ctx, OpenParams{URL: storeURL(t, schema) + readOnly, Schema: schema})
	if d := detail(err); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(d, "not a standby") || strings.Contains(d, "point store at the primary") {
		t.Errorf("a read-only primary at open: %v; detail %q", err, d)
	}

	// Migrated while writable, opened read-only: the first write refuses.
	s, schema := openTest(t, clock.Real{})
	s.Close()
	s, err = Open(ctx, OpenParams{URL: storeURL(t, schema) + readOnly, Schema: schema})
	if err != nil {
		t.Fatalf("open of a migrated store, read-only: %v", err)
	}
	defer s.Close()
	_, err = s.PutSync(ctx, store.PutSyncParams{ID: "s", Definition: "{}"})
	if d := detail(err); !errors.Is(err, store.ErrUnavailable) || !strings.Contains(d, "standby") || !strings.Contains(d, "default_transaction_read_only") {
		t.Errorf("a write refused as read-only: %v; detail %q", err, d)
	}
}
