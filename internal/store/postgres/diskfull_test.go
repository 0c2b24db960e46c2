package postgres

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// TestDiskFullIsTold: the server's disk_full (53100) is an outage that
// says what to free (ErrDiskFull beside ErrUnavailable); the other
// insufficient-resources codes are outages only. PostgreSQL's disk cannot
// be filled here, so the server's error is built as pgx returns it.
func TestDiskFullIsTold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code string
		full bool
	}{
		{"53100", true},  // disk_full
		{"53300", false}, // too_many_connections
		{"53200", false}, // out_of_memory
	} {
		err := mapErr("ledger claim", &pgconn.PgError{Code: tc.code, Message: "x"})
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: %v is not ErrUnavailable", tc.code, err)
		}
		if got := errors.Is(err, store.ErrDiskFull); got != tc.full {
			t.Errorf("%s: ErrDiskFull %v, want %v", tc.code, got, tc.full)
		}
	}
}

// TestNoConnectionSlotIsTold: a PostgreSQL that refuses the store's
// connection because no slot is left (max_connections, or here the role's
// CONNECTION LIMIT 0) answers; it is an outage, but the detail a person reads
// says which, not only the catalog's "could not be reached". Before, `oncesync
// run` said "detail: open the PostgreSQL store" and nothing else.
func TestNoConnectionSlotIsTold(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	admin := adminConn(t)
	role := "nslot_" + strings.TrimPrefix(newSchema(t), "oncesync_test_")
	if _, err := admin.Exec(ctx, "CREATE ROLE "+role+" LOGIN CONNECTION LIMIT 0"); err != nil {
		t.Skipf("cannot create a role here: %v", err)
	}
	t.Cleanup(func() { _, _ = adminConn(t).Exec(context.Background(), "DROP ROLE IF EXISTS "+role) })
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	_, err = Open(ctx, OpenParams{URL: u.String(), Clock: clock.Real{}, Schema: "oncesync"})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open as a role without a slot: %v, want ErrUnavailable", err)
	}
	fe := failure.Wrap(failure.StoreUnavailable, err, "open the PostgreSQL store")
	if !strings.Contains(fe.Detail, "no connection slot left") {
		t.Fatalf("detail %q does not say that PostgreSQL has no connection slot left", fe.Detail)
	}
}
