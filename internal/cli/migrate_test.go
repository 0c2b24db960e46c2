package cli

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/testenv"
)

// TestMigrateAppliesTheStoreAndTheQueue: oncesync migrate applies the
// store's and the job queue's migrations and nothing else, so a schema's
// owner can apply them before processes that may only use the tables start
// (docs/guide.md#least-privilege-and-migrations).
func TestMigrateAppliesTheStoreAndTheQueue(t *testing.T) {
	t.Parallel()
	migrate := func(t *testing.T, store string) string {
		t.Helper()
		dir := t.TempDir()
		cfg := filepath.Join(dir, "oncesync.yaml")
		writeFile(t, cfg, "store: "+store+`
syncs:
  - id: crm
    workspace: acme
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: http://127.0.0.1:9/hook}
    mapping: {fields: {email: email}}
`)
		var out, errOut bytes.Buffer
		code := Main(t.Context(), []string{"migrate", "--config", cfg},
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		if code != ExitOK || !strings.Contains(out.String(), "and job queue: up to date") {
			t.Fatalf("migrate: exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
		}
		return dir
	}
	t.Run("sqlite", func(t *testing.T) {
		dir := migrate(t, "sqlite://./s.db")
		for _, f := range []string{"s.db", "s.db.queue"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				t.Errorf("after migrate: %v", err)
			}
		}
	})
	t.Run("postgres", func(t *testing.T) {
		dbURL := testenv.DatabaseURL()
		ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
		defer cancel()
		admin, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			testenv.Unavailable(t, "PostgreSQL unreachable: %v", err)
		}
		schema := "oncesync_mig_" + testenv.RandHex(4)
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if _, err := admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
				t.Logf("drop schema: %v", err)
			}
			_ = admin.Close(ctx)
		})
		u, err := url.Parse(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		q := u.Query()
		q.Set("search_path", schema)
		q.Set("pool_max_conns", "2")
		u.RawQuery = q.Encode()
		migrate(t, u.String())
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM information_schema.tables WHERE table_schema = $1
			AND table_name IN ('schema_migrations', 'syncs', 'ledger', 'river_job', 'river_migration')`, schema).Scan(&n); err != nil || n != 5 {
			t.Errorf("tables of the store and the queue in %s after migrate: %d of 5, %v", schema, n, err)
		}
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM `+schema+`.syncs`).Scan(&n); err != nil || n != 0 {
			t.Errorf("syncs published by migrate: %d, %v", n, err)
		}
	})
}
