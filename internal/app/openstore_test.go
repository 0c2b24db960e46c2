package app_test

import (
	"context"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestOpenStoreSaysWhatIsWrong: a PostgreSQL store that cannot be opened
// says where it is and what was wrong there (nothing listening, no such
// database, a user it refuses), never the password; a schema it cannot use
// is the config's to fix (invalid_sync_definition), not a store to restore.
// Until 2026-12-04 all four read "open the PostgreSQL store", even with
// --log-level debug (an independent check).
func TestOpenStoreSaysWhatIsWrong(t *testing.T) {
	ctx := context.Background()
	base := reachableDatabaseURL(t)
	with := func(f func(u *url.URL)) string {
		u := *base
		f(&u)
		return u.String()
	}
	free, err := testenv.FreeAddr() // nothing listens there
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, store string
		code        failure.Code
		want        []string
	}{
		{"nothing listens", with(func(u *url.URL) { u.Host = free; u.User = url.UserPassword("oncesync", "pw-c2-secret") }),
			failure.StoreUnavailable, []string{"PostgreSQL at " + free, "nothing listens there"}},
		{"no such database", with(func(u *url.URL) { u.Path = "/oncesync_no_such_db_c2" }),
			failure.StoreUnavailable, []string{"PostgreSQL at " + base.Host, `has no database "oncesync_no_such_db_c2"`}},
		{"no such user", with(func(u *url.URL) { u.User = url.UserPassword("oncesync_no_such_role_c2", "pw-c2-secret") }),
			failure.StoreUnavailable, []string{"PostgreSQL at " + base.Host, "refused the store URL's user or password"}},
		{"bad schema", with(func(u *url.URL) { u.RawQuery = "search_path=Bad-Schema" }),
			failure.InvalidSyncDefinition, []string{`store: schema "Bad-Schema"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st, err := app.OpenStore(ctx, &config.Config{Store: tc.store}, nil)
			if err == nil {
				st.Close()
				t.Fatalf("OpenStore(%s) opened", tc.name)
			}
			detail := failure.Detail(err)
			if failure.CodeOf(err) != tc.code {
				t.Errorf("code %s, want %s (detail %q)", failure.CodeOf(err), tc.code, detail)
			}
			for _, w := range tc.want {
				if !strings.Contains(detail, w) {
					t.Errorf("detail %q does not say %q", detail, w)
				}
			}
			if strings.Contains(detail, "pw-c2-secret") || strings.Contains(failure.LastLine(err), "pw-c2-secret") {
				t.Errorf("the password is shown: %q", detail)
			}
		})
	}
}

// reachableDatabaseURL is the test PostgreSQL's URL once its port accepted
// a connection. A dial, not an open: opening would create oncesync's schema
// in the shared server's database.
func reachableDatabaseURL(t *testing.T) *url.URL {
	t.Helper()
	base, err := url.Parse(testenv.DatabaseURL())
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.DialTimeout("tcp", base.Host, 2*time.Second)
	if err != nil {
		testenv.Unavailable(t, "PostgreSQL at %s: %v", base.Host, err)
	}
	c.Close()
	return base
}

// TestNewSQLiteStoreNeedsItsDirectory: a store file in a directory that
// does not exist is not created, so it is not told as a new store (its open
// fails and says to create the directory).
func TestNewSQLiteStoreNeedsItsDirectory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		store string
		isNew bool
	}{
		{"sqlite://" + filepath.Join(dir, "o.db"), true},
		{"sqlite://" + filepath.Join(dir, "nodir", "sub", "o.db"), false},
	} {
		if _, isNew := app.NewSQLiteStore(&config.Config{Store: tc.store}); isNew != tc.isNew {
			t.Errorf("%s: new %v, want %v", tc.store, isNew, tc.isNew)
		}
	}
}
