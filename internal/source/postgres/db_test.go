package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/source/postgres"
)

// defaultTestURL is the server tests use when ONCESYNC_TEST_DATABASE_URL is
// unset (trust authentication).
const defaultTestURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"

// bundle is one test's database: a fresh schema, dropped at cleanup.
type bundle struct {
	// dsn connects to the test server.
	dsn string
	// admin is a connection for setting up data (not the Source's); hold mu
	// to use it, as parallel subtests share it.
	admin *pgx.Conn
	mu    sync.Mutex
	// schema is the test's own schema.
	schema string
}

// setup connects to the test server and creates a random schema for t. An
// unreachable server skips the test, or fails it when CI=true.
func setup(t testing.TB) *bundle {
	t.Helper()
	dsn := os.Getenv("ONCESYNC_TEST_DATABASE_URL")
	if dsn == "" {
		dsn = defaultTestURL
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("PostgreSQL at ONCESYNC_TEST_DATABASE_URL is unreachable (required in CI): %v", err)
		}
		t.Skipf("PostgreSQL unreachable (set ONCESYNC_TEST_DATABASE_URL): %v", err)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "pgsrc_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatalf("create schema: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
		_ = admin.Close(ctx)
	})
	return &bundle{dsn: dsn, admin: admin, schema: schema}
}

// exec runs SQL statements on the admin connection.
func (b *bundle) exec(t testing.TB, sqls ...string) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, sql := range sqls {
		if _, err := b.admin.Exec(context.Background(), sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// table returns schema.name.
func (b *bundle) table(name string) string { return b.schema + "." + name }

// newSource opens a Source and closes it at cleanup.
func (b *bundle) newSource(t testing.TB, p postgres.Params) *postgres.Source {
	t.Helper()
	if p.DSN == "" {
		p.DSN = b.dsn
	}
	src, err := postgres.New(context.Background(), p)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		if err := src.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return src
}

// withDSN returns the test DSN with user info and query parameters changed.
func (b *bundle) withDSN(t testing.TB, edit func(u *url.URL)) string {
	t.Helper()
	u, err := url.Parse(b.dsn)
	if err != nil {
		t.Fatalf("ONCESYNC_TEST_DATABASE_URL must be a URL for this test: %v", err)
	}
	edit(u)
	return u.String()
}
