package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

func serviceURL(t *testing.T, env, def string) string {
	t.Helper()
	if v := os.Getenv(env); v != "" {
		return v
	}
	return def
}

// TestPostgresSourceStoreAndRedis: the several-machines setup in one run: a
// PostgreSQL source of 100,000 rows, the PostgreSQL store and Redis leases.
// Rows are inserted and updated while the run reads: every final row is
// delivered, changed rows are re-sent once, unchanged rows never twice.
func TestPostgresSourceStoreAndRedis(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dbURL := serviceURL(t, "ONCESYNC_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable")
	redisURL := serviceURL(t, "ONCESYNC_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("PostgreSQL unreachable in CI: %v", err)
		}
		t.Skipf("PostgreSQL unreachable: %v", err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "e2e_" + hex.EncodeToString(b[:])
	t.Cleanup(func() {
		c, err := pgx.Connect(context.Background(), dbURL)
		if err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			c.Close(context.Background())
		}
	})
	const rows = 100000
	if _, err := conn.Exec(ctx, fmt.Sprintf(`CREATE SCHEMA %[1]s;
		CREATE TABLE %[1]s.contacts (id bigint PRIMARY KEY, email text NOT NULL, first_name text NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT clock_timestamp())`, schema)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{schema, "contacts"}, []string{"id", "email", "first_name"},
		pgx.CopyFromSlice(rows, func(i int) ([]any, error) {
			return []any{int64(i + 1), fmt.Sprintf("pg%06d@example.com", i+1), "F"}, nil
		})); err != nil {
		t.Fatal(err)
	}

	fake := fakebrevo.New(fakebrevo.Options{APIKey: apiKey, Validate: true, Latency: 20 * time.Millisecond})
	tb := &testBundle{t: t, dir: t.TempDir(), fake: fake}
	tb.srv = newServer(t, fake)
	syncID := "pg-" + hex.EncodeToString(b[:3])
	srcDSN := dbURL
	tb.config = filepath.Join(tb.dir, "oncesync.yaml")
	cfg := fmt.Sprintf(`store: %s
redis: %s
syncs:
  - id: %s
    workspace: acme
    source: {type: postgres, dsn: "%s", table: %s.contacts, cursor_column: updated_at, identity: id, page_size: 500}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: bulk, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name}}
`, dbURL, redisURL, syncID, srcDSN, schema, tb.srv.URL)
	if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	// `oncesync check` says that rows committed late are read again.
	chk := tb.start("check", "--config", tb.config, syncID)
	if code := chk.Wait(t, time.Minute); code != 0 ||
		!strings.Contains(chk.Out.String(), "ok  source postgres:") ||
		!strings.Contains(chk.Out.String(), ": cursor_column updated_at is a timestamptz: rows committed late are read again within cursor_lookback (5m0s)") {
		t.Fatalf("check: exit %d:\n%s", code, chk.Out)
	}
	p := tb.start("run", "--config", tb.config, syncID)
	waitFor(t, 2*time.Minute, "progress", func() bool { return fake.Stats().Contacts >= 20000 })
	// While the run reads: update 500 rows it has read, 500 it has not, insert 1,000.
	if _, err := conn.Exec(ctx, fmt.Sprintf(`
		UPDATE %[1]s.contacts SET first_name = 'Changed', updated_at = clock_timestamp() WHERE id <= 500 OR id BETWEEN 90001 AND 90500;
		INSERT INTO %[1]s.contacts (id, email, first_name) SELECT g, 'pg' || lpad(g::text, 6, '0') || '@example.com', 'New' FROM generate_series(100001, 101000) g`, schema)); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("run exit %d:\n%s", code, p.Out)
	}
	// The next run reads only rows whose cursor moved: none, so nothing is sent.
	before := fake.Stats().Requests
	p2 := tb.start("run", "--config", tb.config, syncID)
	if code := p2.Wait(t, time.Minute); code != 0 {
		t.Fatalf("second run exit %d:\n%s", code, p2.Out)
	}
	st := fake.Stats()
	if st.Requests != before {
		t.Fatalf("the incremental run sent %d requests", st.Requests-before)
	}
	if st.Contacts != rows+1000 || st.DuplicateWrites != 0 || st.ContactsWritten != rows+1000+500 || st.Invalid != 0 {
		t.Fatalf("want %d contacts, %d writes (500 changed rows re-sent once), 0 duplicates; got %+v", rows+1000, rows+1500, st)
	}
	for _, email := range []string{"pg000001@example.com", "pg090001@example.com"} {
		c, ok := fake.Contact(email)
		if !ok || fmt.Sprint(c.Attributes["FIRSTNAME"]) != "Changed" {
			t.Fatalf("%s not updated: %+v", email, c)
		}
	}
	if c, ok := fake.Contact("pg100500@example.com"); !ok || fmt.Sprint(c.Attributes["FIRSTNAME"]) != "New" {
		t.Fatalf("an inserted row is missing: %+v", c)
	}
	if out := p.Out.String() + p2.Out.String(); strings.Contains(out, "@example.com") {
		t.Fatal("an e-mail address appears in the output")
	}

	// A row committed late (docs/guide.md#rows-committed-late): a writer
	// stamps row 7 with now(), its transaction's start, and commits only
	// after a run has read past that time (row 101001, committed at once
	// and stamped later). The run after the commit delivers row 7's new
	// value thanks to the default cursor_lookback; the rows of the window
	// that did not change are not written again.
	writer, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer writer.Close(ctx)
	tx, err := writer.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`UPDATE %s.contacts SET first_name = 'Late', updated_at = now() WHERE id = 7`, schema)); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.contacts (id, email, first_name) VALUES (101001, 'pg101001@example.com', 'New')`, schema)); err != nil {
		t.Fatal(err)
	}
	for i, commit := range []bool{true, false} {
		p := tb.start("run", "--config", tb.config, syncID)
		if code := p.Wait(t, time.Minute); code != 0 {
			t.Fatalf("run %d after the late writer began: exit %d:\n%s", i+3, code, p.Out)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	st = fake.Stats()
	if c, ok := fake.Contact("pg000007@example.com"); !ok || fmt.Sprint(c.Attributes["FIRSTNAME"]) != "Late" {
		t.Fatalf("the row committed late was not delivered: %+v", c)
	}
	if st.Contacts != rows+1001 || st.DuplicateWrites != 0 || st.ContactsWritten != rows+1500+2 {
		t.Fatalf("after the late commit: want %d contacts, %d writes (the new row and the late one), 0 duplicates; got %+v",
			rows+1001, rows+1502, st)
	}
}
