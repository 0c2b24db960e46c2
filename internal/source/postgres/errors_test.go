package postgres_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/postgres"
	"github.com/oncesync/oncesync/internal/testenv"
)

// secret is a password put in DSNs; it must never show.
const secret = "Pw-9zQ-s3cr3t"

// randomRole creates a login role without privileges, dropped at cleanup.
func (b *bundle) randomRole(t *testing.T) string {
	t.Helper()
	var r [6]byte
	_, _ = rand.Read(r[:])
	role := "pgsrc_role_" + hex.EncodeToString(r[:])
	b.exec(t, "CREATE ROLE "+role+" LOGIN")
	t.Cleanup(func() {
		// DROP OWNED revokes the role's privileges, so the role can go.
		if _, err := b.admin.Exec(context.Background(), "DROP OWNED BY "+role+"; DROP ROLE "+role); err != nil {
			t.Errorf("drop role: %v", err)
		}
	})
	return role
}

func TestNewErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	table := b.table("contacts")
	b.loadRecords(t, "contacts", recordsN(5))
	role := b.randomRole(t)
	b.exec(t, fmt.Sprintf("GRANT USAGE ON SCHEMA %s TO %s", b.schema, role))
	withPassword := b.withDSN(t, func(u *url.URL) { u.User = url.UserPassword(u.User.Username(), secret) })
	tests := []struct {
		name string
		p    postgres.Params
		want error
		// msg is a fragment of the error's text.
		msg string
	}{
		{"unreachable", postgres.Params{DSN: fmt.Sprintf("postgres://postgres:%s@127.0.0.1:%d/postgres?sslmode=disable", secret, testenv.RefusedPort(t)), Table: table, CursorColumn: "id"},
			source.ErrUnavailable, "connect"},
		{"unreachable key=value DSN", postgres.Params{DSN: fmt.Sprintf("host=127.0.0.1 port=%d user=postgres password=%s dbname=postgres sslmode=disable", testenv.RefusedPort(t), secret), Table: table, CursorColumn: "id"},
			source.ErrUnavailable, "connect"},
		{"bad DSN", postgres.Params{DSN: "postgres://postgres:" + secret + "@127.0.0.1:notaport/postgres", Table: table, CursorColumn: "id"},
			source.ErrInvalid, "dsn cannot be parsed"},
		{"syntax error", postgres.Params{DSN: withPassword, Query: "SELEC id FROM " + table, CursorColumn: "id"},
			source.ErrInvalid, "syntax error"},
		{"unknown table", postgres.Params{Table: b.table("nope"), CursorColumn: "id"},
			source.ErrInvalid, "does not exist (SQLSTATE 42P01)"},
		{"unknown cursor column", postgres.Params{Table: table, CursorColumn: "updated_at"},
			source.ErrInvalid, `column src.updated_at does not exist`},
		{"unknown identity", postgres.Params{Table: table, CursorColumn: "id", Identity: "uuid"},
			source.ErrInvalid, `column src.uuid does not exist`},
		{"case matters", postgres.Params{Table: table, CursorColumn: "ID"},
			source.ErrInvalid, `column src.ID does not exist`},
		{"permission denied", postgres.Params{DSN: b.withDSN(t, func(u *url.URL) { u.User = url.User(role) }), Table: table, CursorColumn: "id"},
			source.ErrAuth, "permission denied for table contacts (SQLSTATE 42501)"},
		{"unknown role", postgres.Params{DSN: b.withDSN(t, func(u *url.URL) { u.User = url.UserPassword(role+"_gone", secret) }), Table: table, CursorColumn: "id"},
			source.ErrAuth, "(SQLSTATE 28"},
		{"unknown database", postgres.Params{DSN: b.withDSN(t, func(u *url.URL) { u.Path = "/oncesync_no_such_db" }), Table: table, CursorColumn: "id"},
			source.ErrAuth, `database "oncesync_no_such_db" does not exist (SQLSTATE 3D000)`},
		{"duplicate column names", postgres.Params{Query: "SELECT id, email AS name, name FROM " + table, CursorColumn: "id"},
			source.ErrInvalid, `two columns named "name"`},
		{"query and table", postgres.Params{Query: "SELECT 1 AS id", Table: table, CursorColumn: "id"},
			source.ErrInvalid, "not both"},
		{"neither query nor table", postgres.Params{CursorColumn: "id"},
			source.ErrInvalid, "set a query or a table"},
		{"no cursor column", postgres.Params{Table: table},
			source.ErrInvalid, "cursor_column"},
		{"bad table name", postgres.Params{Table: "a.b.c", CursorColumn: "id"},
			source.ErrInvalid, "schema.name"},
		{"empty DSN", postgres.Params{DSN: " ", Table: table, CursorColumn: "id"},
			source.ErrInvalid, "dsn is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.p.DSN == "" {
				tt.p.DSN = b.dsn
			}
			src, err := postgres.New(context.Background(), tt.p)
			if err == nil {
				_ = src.Close()
				t.Fatal("New succeeded")
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("error %q does not wrap %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("error %q does not say %q", err, tt.msg)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// recordsN returns n records like sourcetest's, with plain values.
func recordsN(n int) []map[string]string {
	recs := make([]map[string]string, n)
	for i := range recs {
		recs[i] = map[string]string{
			"id": fmt.Sprint(i + 1), "email": fmt.Sprintf("user%d@example.test", i+1),
			"name": fmt.Sprintf("Name %d", i+1), "note": "",
		}
	}
	return recs
}

func TestReadPageErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.loadRecords(t, "contacts", recordsN(5))
	table := b.table("contacts")
	ctx := context.Background()

	t.Run("data errors keep row values out", func(t *testing.T) {
		src := b.newSource(t, postgres.Params{Query: "SELECT id, email::integer AS n FROM " + table, CursorColumn: "id"})
		_, err := src.ReadPage(ctx, "", 10)
		if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "SQLSTATE 22P02") {
			t.Fatalf("got %v; want source.ErrInvalid with SQLSTATE 22P02", err)
		}
		if strings.Contains(err.Error(), "example.test") {
			t.Fatalf("error %q quotes row data", err)
		}
	})
	t.Run("a raised error keeps row values out", func(t *testing.T) {
		fn := b.table("chk")
		b.exec(t, "CREATE FUNCTION "+fn+"(t text) RETURNS text LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'bad contact %', t; END $$")
		src := b.newSource(t, postgres.Params{Query: "SELECT id, " + fn + "(email) AS e FROM " + table, CursorColumn: "id"})
		_, err := src.ReadPage(ctx, "", 10)
		if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "SQLSTATE P0001") || !strings.Contains(err.Error(), source.RaisedByQuery) {
			t.Fatalf("got %v; want source.ErrInvalid with SQLSTATE P0001", err)
		}
		if strings.Contains(err.Error(), "example.test") {
			t.Fatalf("error %q quotes row data", err)
		}
	})
	t.Run("read only", func(t *testing.T) {
		b.exec(t, "CREATE SEQUENCE "+b.table("seq"))
		src := b.newSource(t, postgres.Params{Query: fmt.Sprintf("SELECT id, nextval('%s') AS n FROM %s", b.table("seq"), table), CursorColumn: "id"})
		_, err := src.ReadPage(ctx, "", 10)
		if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "read-only transaction") {
			t.Fatalf("got %v; want source.ErrInvalid: read-only transaction", err)
		}
	})
	t.Run("table dropped", func(t *testing.T) {
		b.loadRecords(t, "gone", recordsN(3))
		src := b.newSource(t, postgres.Params{Table: b.table("gone"), CursorColumn: "id"})
		b.exec(t, "DROP TABLE "+b.table("gone"))
		if _, err := src.ReadPage(ctx, "", 10); !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("got %v; want source.ErrInvalid: does not exist", err)
		}
	})
	t.Run("key type changed", func(t *testing.T) {
		b.loadRecords(t, "retyped", recordsN(5))
		p := postgres.Params{Table: b.table("retyped"), CursorColumn: "id"}
		src := b.newSource(t, p)
		page, err := src.ReadPage(ctx, "", 2)
		if err != nil {
			t.Fatal(err)
		}
		b.exec(t, "ALTER TABLE "+b.table("retyped")+" ALTER COLUMN id TYPE numeric")
		if _, err := src.ReadPage(ctx, page.Next, 2); !errors.Is(err, source.ErrChanged) || !strings.Contains(err.Error(), "int8") {
			t.Fatalf("got %v; want source.ErrChanged naming the old type", err)
		}
	})
	t.Run("bad cursors", func(t *testing.T) {
		withID := b.newSource(t, postgres.Params{Table: table, CursorColumn: "id", Identity: "email"})
		page, err := withID.ReadPage(ctx, "", 2)
		if err != nil {
			t.Fatal(err)
		}
		src := b.newSource(t, postgres.Params{Table: table, CursorColumn: "id"})
		b64 := func(s string) string { return "pg1:" + base64.RawURLEncoding.EncodeToString([]byte(s)) }
		for _, c := range []string{
			page.Next,         // two keys for a one-key source
			"csv:1:2:abc",     // another source's cursor
			"pg1:***",         // not base64url
			b64(`{"a":1}`),    // not an array
			b64(`[["int8"]]`), // not a pair
			b64(`[["int8",null]]`),
			b64(`[["","1"]]`),
			b64(`[[ "int8","1"]]`),    // not canonical
			b64(`[["int8","1"]] [1]`), // trailing data
			"pg1:" + base64.StdEncoding.EncodeToString([]byte(`[["int8","1"]]`)), // padded
		} {
			if _, err := src.ReadPage(ctx, c, 2); !errors.Is(err, source.ErrBadCursor) {
				t.Errorf("ReadPage(%q): %v; want source.ErrBadCursor", c, err)
			}
		}
		if _, err := src.ReadPage(ctx, b64(`[["int8","3"]]`), 2); err != nil {
			t.Fatalf("a hand-made canonical cursor: %v", err)
		}
	})
	t.Run("connection lost", func(t *testing.T) {
		app := "pgsrc-test-" + b.schema
		dsn := b.withDSN(t, func(u *url.URL) {
			q := u.Query()
			q.Set("application_name", app)
			u.RawQuery = q.Encode()
		})
		src := b.newSource(t, postgres.Params{DSN: dsn, Table: table, CursorColumn: "id"})
		page, err := src.ReadPage(ctx, "", 2)
		if err != nil {
			t.Fatal(err)
		}
		var killed int
		if err := b.admin.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&killed); err != nil || killed != 1 {
			t.Fatalf("terminated %d backends: %v", killed, err)
		}
		// The call that meets the dead connection may fail as unavailable
		// (retryable); the Source reconnects for the next.
		if _, err := src.ReadPage(ctx, page.Next, 2); err != nil && !errors.Is(err, source.ErrUnavailable) {
			t.Fatalf("first read after the connection was killed: %v; want success or source.ErrUnavailable", err)
		}
		rest, _ := readAll(t, src, page.Next, 2)
		if g := column(rest, "id"); strings.Join(g, ",") != "3,4,5" {
			t.Fatalf("after reconnecting: ids %v", g)
		}
	})
	t.Run("ties without identity", func(t *testing.T) {
		ties := b.table("ties")
		b.exec(t, "CREATE TABLE "+ties+" AS SELECT g / 3 AS k, g AS v FROM generate_series(1, 9) g")
		src := b.newSource(t, postgres.Params{Table: ties, CursorColumn: "k"})
		// One page holds every row: no boundary, nothing to skip.
		if got, _ := readAll(t, src, "", 100); len(got) != 9 {
			t.Fatalf("one page: %d rows, want 9", len(got))
		}
		// k = 0, 0 | 1, 1, 1: the boundary splits the 1s.
		page, err := src.ReadPage(ctx, "", 2)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := src.ReadPage(ctx, page.Next, 2); !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "set identity") {
			t.Fatalf("a page boundary inside a tie: %v; want source.ErrInvalid asking for an identity", err)
		}
	})
	t.Run("page size", func(t *testing.T) {
		src := b.newSource(t, postgres.Params{Table: table, CursorColumn: "id"})
		if _, err := src.ReadPage(ctx, "", 0); !errors.Is(err, source.ErrInvalid) {
			t.Fatalf("size 0: %v", err)
		}
	})
}

// TestNullKeys: rows with a NULL key cannot be paged; reaching the end says so
// rather than skipping them silently.
func TestNullKeys(t *testing.T) {
	t.Parallel()
	b := setup(t)
	table := b.table("t")
	b.exec(t, "CREATE TABLE "+table+" (id bigint, updated_at timestamptz)",
		"INSERT INTO "+table+" VALUES (1, now()), (2, now()), (3, NULL), (NULL, now())")
	for _, p := range []postgres.Params{
		{Table: table, CursorColumn: "updated_at", Identity: "id"},
		{Query: "SELECT * FROM " + table, CursorColumn: "updated_at"},
		{Table: table, Identity: "id"},
	} {
		src := b.newSource(t, p)
		_, err := src.ReadPage(context.Background(), "", 10)
		if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "NULL") {
			t.Errorf("%+v: %v; want source.ErrInvalid about NULL keys", p, err)
		}
		// A table's failure gives the query that finds the rows (an
		// independent check, 2026-12-06: the message named none).
		if _, q, ok := strings.Cut(err.Error(), "(find them with: "); p.Table != "" {
			q, _, _ = strings.Cut(q, "): ")
			b.mu.Lock()
			rows, qerr := b.admin.Query(context.Background(), q)
			n := 0
			for qerr == nil && rows.Next() {
				n++
			}
			if rows != nil {
				rows.Close()
			}
			b.mu.Unlock()
			want := 2 // a NULL id, a NULL updated_at
			if p.CursorColumn == "" {
				want = 1 // paged by id alone
			}
			if !ok || qerr != nil || n != want {
				t.Errorf("%+v: the query %q found %d rows (%v), want the %d with a NULL key", p, q, n, qerr, want)
			}
		}
		// `oncesync check` asks before a run stops at them.
		if cols, found, err := src.NullKeys(context.Background()); err != nil || !found || !strings.Contains(cols, `"`) {
			t.Errorf("%+v: NullKeys = %q, %v, %v; want found, naming the columns", p, cols, found, err)
		}
	}
	b.exec(t, "DELETE FROM "+table+" WHERE id IS NULL OR updated_at IS NULL")
	src := b.newSource(t, postgres.Params{Table: table, CursorColumn: "updated_at", Identity: "id"})
	got, _ := readAll(t, src, "", 10)
	if len(got) != 2 {
		t.Fatalf("read %d rows, want 2", len(got))
	}
	if _, found, err := src.NullKeys(context.Background()); err != nil || found {
		t.Fatalf("NullKeys after the NULLs were deleted: %v, %v", found, err)
	}
}

// TestPasswordNeverShown: the password is in no ID and no error, whatever
// fails.
func TestPasswordNeverShown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.loadRecords(t, "contacts", recordsN(3))
	dsn := b.withDSN(t, func(u *url.URL) { u.User = url.UserPassword(u.User.Username(), secret) })
	src := b.newSource(t, postgres.Params{DSN: dsn, Table: b.table("contacts"), CursorColumn: "id"})
	if strings.Contains(src.ID(), secret) || strings.Contains(src.ID(), "postgres@") {
		t.Fatalf("ID %q shows credentials", src.ID())
	}
	ctx := context.Background()
	var errs []error
	_, err := src.ReadPage(ctx, "pg1:bad", 2)
	errs = append(errs, err)
	_, err = src.Version(ctx, "SELECT nope FROM nowhere")
	errs = append(errs, err)
	_, err = src.ReadIdentities(ctx, "nope", []string{"1"})
	errs = append(errs, err)
	b.exec(t, "DROP TABLE "+b.table("contacts"))
	_, err = src.ReadPage(ctx, "", 2)
	errs = append(errs, err)
	for i, err := range errs {
		if err == nil {
			t.Fatalf("error %d: nil", i)
		}
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q shows the password", err)
		}
		if !strings.Contains(err.Error(), src.ID()) {
			t.Errorf("error %q does not name the source", err)
		}
	}
}
