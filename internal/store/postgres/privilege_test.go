package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

// appRole creates a login role that may connect but owns nothing and may
// create nothing, dropped when t ends, and returns its name and the test
// URL with it as the user.
func appRole(t *testing.T) (string, string) {
	t.Helper()
	admin := adminConn(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	role := "oncesync_test_app_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(t.Context(), `CREATE ROLE `+role+` LOGIN`); err != nil {
		t.Fatal(err)
	}
	// Registered after newSchema's clean-up by the caller, so it runs first.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, _ = admin.Exec(ctx, `DROP OWNED BY `+role)
		if _, err := admin.Exec(ctx, `DROP ROLE `+role); err != nil {
			t.Errorf("drop role %s: %v", role, err)
		}
	})
	u, err := url.Parse(testURL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User(role)
	return role, u.String()
}

// grantUse grants role the use of schema's tables and sequences, as a DBA
// gives it to oncesync's role (docs/guide.md#least-privilege-and-migrations).
func grantUse(t *testing.T, role, schema string) {
	t.Helper()
	sch := pgx.Identifier{schema}.Sanitize()
	for _, g := range []string{
		`GRANT USAGE ON SCHEMA ` + sch + ` TO ` + role,
		`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ` + sch + ` TO ` + role,
		`GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA ` + sch + ` TO ` + role,
	} {
		if _, err := adminConn(t).Exec(t.Context(), g); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLeastPrivilegeRoleOpensAMigratedStore: a DBA applies the migrations
// with the schema's owner and gives oncesync's own role only the use of the
// tables. Open ran CREATE SCHEMA IF NOT EXISTS and CREATE TABLE IF NOT EXISTS
// every time, which check the CREATE privilege before looking whether there
// is anything to create, so such a role never opened the store ("permission
// denied for database"). A store at this binary's version is now opened
// without DDL; one with migrations pending is refused with advice naming the
// missing privilege and the way out.
func TestLeastPrivilegeRoleOpensAMigratedStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	schema := newSchema(t)
	owner, err := Open(ctx, OpenParams{URL: storeURL(t, schema), Clock: clock.NewFake(storetest.Start), Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	owner.Close()
	role, appURL := appRole(t)
	admin := adminConn(t)
	sch := pgx.Identifier{schema}.Sanitize()
	grantUse(t, role, schema)
	u := withParams(t, appURL, "pool_max_conns", "2")
	s, err := Open(ctx, OpenParams{URL: u, Clock: clock.NewFake(storetest.Start), Schema: schema})
	if err != nil {
		t.Fatalf("Open as a role that may use the tables but not create them: %v", err)
	}
	if _, err := s.PutSync(ctx, store.PutSyncParams{ID: "s1", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	if l, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "a", TTL: time.Minute}); err != nil || l.Fence != 1 {
		t.Fatalf("LeaseAcquire = %+v, %v", l, err)
	}

	// A table it was not granted (a later migration's, without default
	// privileges): the advice names it and the grants.
	if _, err := admin.Exec(ctx, `REVOKE ALL ON `+sch+`.runs FROM `+role); err != nil {
		t.Fatal(err)
	}
	_, err = s.ListRuns(ctx, "s1", 10)
	s.Close()
	if d := detail(err); !strings.Contains(d, "permission denied for table runs") || !strings.Contains(d, "grant it USAGE on the schema") {
		t.Errorf("ListRuns without SELECT on runs: detail %q", d)
	}

	// A migration pending: the role may not apply it, and is told so.
	if _, err := admin.Exec(ctx, `DELETE FROM `+sch+`.schema_migrations WHERE version = (SELECT max(version) FROM `+sch+`.schema_migrations)`); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, OpenParams{URL: u, Clock: clock.NewFake(storetest.Start), Schema: schema})
	if d := detail(err); err == nil || !strings.Contains(d, "oncesync migrate") || !strings.Contains(d, "permission denied for") {
		t.Errorf("Open with a migration pending, as a role that may not create: %v (detail %q)", err, d)
	}
}

// detail is what a person reads of a store error.
func detail(err error) string {
	if err == nil {
		return ""
	}
	return failure.Wrap(failure.StoreUnavailable, err, "the store").Detail
}
