package postgres

import (
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

// TestRoleIdleSessionTimeoutIsOff: a DBA sets idle_session_timeout on
// oncesync's role (ALTER ROLE ... SET) to reap forgotten sessions. The
// pools keep connections idle on purpose and River's LISTEN connection is
// idle between notifications: the server ended River's listener every few
// seconds (an ERROR logged each time, for as long as serve ran, and River's
// reconnection backing off up to 15 s meanwhile). The store's and the queue's
// sessions turn it off, unless the store URL sets it.
func TestRoleIdleSessionTimeoutIsOff(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	owner, err := Open(ctx, OpenParams{URL: storeURL(t, schema), Clock: clock.NewFake(storetest.Start), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	owner.Close()
	role, appURL := appRole(t)
	grantUse(t, role, schema)
	if _, err := adminConn(t).Exec(ctx, `ALTER ROLE `+role+` SET idle_session_timeout = '2s'`); err != nil {
		t.Skipf("this PostgreSQL has no idle_session_timeout (before 14): %v", err)
	}
	for _, c := range []struct {
		url, want string
	}{
		{withParams(t, appURL, "pool_max_conns", "2"), "0"},
		{withParams(t, appURL, "pool_max_conns", "2", "idle_session_timeout", "60000"), "1min"},
	} {
		s, err := Open(ctx, OpenParams{URL: c.url, Clock: clock.NewFake(storetest.Start), Schema: schema})
		if err != nil {
			t.Fatal(err)
		}
		var got string
		err = s.pool.QueryRow(ctx, `SELECT current_setting('idle_session_timeout')`).Scan(&got)
		s.Close()
		if err != nil || got != c.want {
			t.Errorf("idle_session_timeout of a store connection, the role's being 2s, URL %s: %q, %v; want %q", redact(c.url), got, err, c.want)
		}
	}
}

// TestRoleSerializableIsReadCommitted: a DBA sets
// default_transaction_isolation = serializable on oncesync's role (or
// database). The store's locking is designed for read committed: under
// serializable a ledger claim or a lease grant racing another failed with
// "could not serialize access due to concurrent update" (40001), and so did
// TestTwoPools, TestFenceRacesWrites, TestProcessesContendForLease and
// TestConcurrentMigration with the isolation set in the test URL. The
// store's and the queue's sessions use read committed whatever the role's.
func TestRoleSerializableIsReadCommitted(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	owner, err := Open(ctx, OpenParams{URL: storeURL(t, schema), Clock: clock.NewFake(storetest.Start), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	owner.Close()
	role, appURL := appRole(t)
	grantUse(t, role, schema)
	if _, err := adminConn(t).Exec(ctx, `ALTER ROLE `+role+` SET default_transaction_isolation = 'serializable'`); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, OpenParams{URL: withParams(t, appURL, "pool_max_conns", "2"), Clock: clock.NewFake(storetest.Start), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var got string
	err = s.tx(ctx, "isolation", func(tx pgx.Tx) error {
		return tx.QueryRow(ctx, `SELECT current_setting('transaction_isolation')`).Scan(&got)
	})
	if err != nil || got != "read committed" {
		t.Errorf("a store transaction's isolation, the role's default being serializable: %q, %v; want read committed", got, err)
	}
}
