package cli

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/testenv"
)

// TestCheckFindsNullKeys: `oncesync check` of a PostgreSQL table with a NULL
// in its cursor_column fails with source_query_invalid naming the column. A
// run reads up to it and fails at the end of every pass, holding back its
// last page and every later change (an independent check, 2026-12-06:
// check said "every check passed").
func TestCheckFindsNullKeys(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	dbURL := testenv.DatabaseURL()
	admin, schema := testenv.PostgresSchema(t, "oncesync_nullkeys_")
	if _, err := admin.Exec(ctx, `CREATE TABLE `+schema+`.people (id bigint PRIMARY KEY, email text NOT NULL, updated_at timestamptz);
		INSERT INTO `+schema+`.people VALUES (1, 'a@example.com', now()), (2, 'b@example.com', NULL), (3, 'c@example.com', now())`); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: people
    source: {type: postgres, dsn: "`+dbURL+`", table: `+schema+`.people, cursor_column: updated_at, identity: id}
    destination: {type: webhook, url: http://127.0.0.1:9/hook}
    mapping: {fields: {email: email}}
`)
	check := func() (int, string) {
		var out, errOut bytes.Buffer
		code := Main(ctx, []string{"check", "--config", cfg, "people"},
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		return code, out.String() + errOut.String()
	}
	code, out := check()
	if code != ExitFailed || !strings.Contains(out, "failed: source_query_invalid: ") || !strings.Contains(out, `some rows have a NULL "updated_at" or "id"`) {
		t.Fatalf("check with a NULL updated_at: exit %d, want %d and source_query_invalid naming the columns:\n%s", code, ExitFailed, out)
	}
	if _, err := admin.Exec(ctx, `UPDATE `+schema+`.people SET updated_at = now() WHERE updated_at IS NULL`); err != nil {
		t.Fatal(err)
	}
	if code, out = check(); !strings.Contains(out, `no row has a NULL "updated_at" or "id"`) {
		t.Fatalf("check once the NULL is gone: exit %d:\n%s", code, out)
	}
}
