package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/postgres"
)

// identityCol is a column name that needs quoting.
const identityCol = "Contact Key"

// byID indexes recs by fmt.Sprint of their column col (as mapping.Identity
// renders it), failing on a repeat.
func byID(t *testing.T, recs []source.Record, col string) map[string]source.Record {
	t.Helper()
	out := make(map[string]source.Record, len(recs))
	for _, r := range recs {
		id := fmt.Sprint(r.Fields[col])
		if _, dup := out[id]; dup {
			t.Fatalf("identity %q twice", id)
		}
		out[id] = r
	}
	return out
}

// sameRecords fails unless got and want hold the same records by identity,
// with deeply equal Fields (same values, same Go types).
func sameRecords(t *testing.T, what string, got []source.Record, want map[string]source.Record, col string) {
	t.Helper()
	g := byID(t, got, col)
	for id, w := range want {
		r, ok := g[id]
		if !ok {
			t.Errorf("%s: identity %q missing", what, id)
			continue
		}
		if !reflect.DeepEqual(r.Fields, w.Fields) {
			t.Errorf("%s: identity %q: %#v, want %#v", what, id, r.Fields, w.Fields)
		}
	}
	for id := range g {
		if _, ok := want[id]; !ok {
			t.Errorf("%s: identity %q not expected", what, id)
		}
	}
}

func keys(m map[string]source.Record) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestReadIdentitiesTypes re-reads rows by identity columns of several types,
// from a table and from a query: every row comes back with the Fields
// ReadPage gave it; ids that are not the type's values, or not their
// canonical rendering, match nothing (and fail nothing); a deleted row is
// left out and an updated one comes with its new values.
func TestReadIdentitiesTypes(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.exec(t, "CREATE TYPE "+b.table("mood")+" AS ENUM ('sad', 'happy', 'ok')")
	cases := []struct {
		name, typ string
		// values are the identities' input text, one row each.
		values []string
		// wrong are ids that must match nothing.
		wrong []string
	}{
		{"integer", "integer", []string{"-2147483648", "-1", "0", "7", "2147483647"},
			[]string{"2147483648", "7.0", "07", "+7", " 7", "7 ", "x", "7e0", "", "-0", "0x7"}},
		{"bigint", "bigint", []string{"-9223372036854775808", "1", "42", "9223372036854775807"},
			[]string{"9223372036854775808", "042", "4_2", "0x2A", "42.0", "forty-two"}},
		{"smallint", "smallint", []string{"-32768", "5", "32767"}, []string{"32768", "05", "five"}},
		{"text", "text", []string{"", "Ada Lovelace", `O'Brien, "Pat"`, "{1,2}", "NULL", `a\b`, "  spaced  ", "李雷", "line\nbreak", "🚀"},
			[]string{"ada lovelace", "Ada Lovelace ", "null", "{1,2,3}", "a\x00b", "\xff"}},
		{"varchar", "varchar(12)", []string{"Ada Lovelace", "Bob"},
			// A cast to varchar(12) would truncate this to the first row's id.
			[]string{"Ada Lovelace!", "bob"}},
		{"uuid", "uuid", []string{"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "00000000-0000-0000-0000-000000000000"},
			[]string{"A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11", "a0eebc999c0b4ef8bb6d6bb9bd380a11",
				"{a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11}", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1", "not-a-uuid", "42"}},
		// The types below are checked by the server's input function.
		{"numeric", "numeric", []string{"12.50", "-3", "0.001", "NaN"},
			[]string{"12.5", "12.500", "abc", "1..2", "Infinity", "nan"}},
		{"timestamptz", "timestamptz", []string{"2024-05-01 10:00:00.123456+00", "2024-05-01 12:00:00+02", "infinity"},
			[]string{"2024-05-01 10:00:00.123456+00", "2024-05-01T10:00:00.123456+00:00", "2024-13-45T00:00:00Z", "yesterday", "soon", "42"}},
		{"enum", b.table("mood"), []string{"sad", "happy"}, []string{"ok", "angry", "Happy", "sad "}},
		{"bytea", "bytea", []string{`\x00ff10`, `\x`}, []string{"AP8", "AP8Q==", "not base64!", `\x00ff10`, "ap8q"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			table := b.table("ids_" + c.name)
			b.exec(t, fmt.Sprintf(`CREATE TABLE %s (%q %s PRIMARY KEY, payload text NOT NULL, n integer NOT NULL UNIQUE)`, table, identityCol, c.typ))
			for i, v := range c.values {
				b.mu.Lock()
				_, err := b.admin.Exec(context.Background(),
					fmt.Sprintf(`INSERT INTO %s VALUES ($1::text::%s, $2, $3)`, table, c.typ), v, fmt.Sprintf("row %d", i), i)
				b.mu.Unlock()
				if err != nil {
					t.Fatalf("insert %q: %v", v, err)
				}
			}
			ctx := context.Background()
			src := b.newSource(t, postgres.Params{Table: table, CursorColumn: "n", Identity: identityCol})
			read, _ := readAll(t, src, "", 2)
			rows := byID(t, read, identityCol)
			if len(rows) != len(c.values) {
				t.Fatalf("read %d rows, want %d", len(rows), len(c.values))
			}

			ids := append(keys(rows), c.wrong...)
			got, err := src.ReadIdentities(ctx, identityCol, ids)
			if err != nil {
				t.Fatalf("ReadIdentities: %v", err)
			}
			sameRecords(t, "every row among wrong ids", got, rows, identityCol)
			for _, id := range c.wrong {
				if _, ok := rows[id]; ok {
					t.Fatalf("wrong id %q is a row's identity", id)
				}
				got, err := src.ReadIdentities(ctx, identityCol, []string{id})
				if err != nil || len(got) != 0 {
					t.Errorf("ReadIdentities(%q): %d records, %v; want none", id, len(got), err)
				}
			}

			// A query source: only its own rows, with its own columns.
			query := b.newSource(t, postgres.Params{
				Query:        fmt.Sprintf(`SELECT %q, upper(payload) AS up, n FROM %s WHERE n %% 2 = 0`, identityCol, table),
				CursorColumn: "n",
			})
			qread, _ := readAll(t, query, "", 2)
			qrows := byID(t, qread, identityCol)
			got, err = query.ReadIdentities(ctx, identityCol, ids)
			if err != nil {
				t.Fatalf("query source: ReadIdentities: %v", err)
			}
			sameRecords(t, "query source", got, qrows, identityCol)

			// Row 0 is deleted and row 1 updated: a new process re-reads them.
			b.exec(t, fmt.Sprintf(`DELETE FROM %s WHERE n = 0`, table),
				fmt.Sprintf(`UPDATE %s SET payload = 'changed' WHERE n = 1`, table))
			after := b.newSource(t, postgres.Params{Table: table, CursorColumn: "n", Identity: identityCol})
			want, _ := readAll(t, after, "", 100)
			got, err = after.ReadIdentities(ctx, identityCol, ids)
			if err != nil {
				t.Fatalf("after changes: ReadIdentities: %v", err)
			}
			sameRecords(t, "after a delete and an update", got, byID(t, want, identityCol), identityCol)
			if len(got) != len(c.values)-1 {
				t.Fatalf("after deleting one of %d rows: %d records", len(c.values), len(got))
			}
			for _, r := range got {
				if r.Fields["n"] == int64(1) && r.Fields["payload"] != "changed" {
					t.Fatalf("updated row read as %#v", r.Fields)
				}
			}
		})
	}
}

// TestReadIdentitiesOneSnapshot re-reads 2,500 rows, by an identity checked
// in Go (bigint) and by one the server checks (timestamptz), with wrong ids
// among them: several statements, one REPEATABLE READ, READ ONLY
// transaction (the query's transaction_timestamp is the same on every row).
func TestReadIdentitiesOneSnapshot(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 2500
	table := b.table("big")
	b.exec(t, fmt.Sprintf(`CREATE TABLE %s (id bigint PRIMARY KEY, at timestamptz NOT NULL UNIQUE, email text NOT NULL)`, table),
		fmt.Sprintf(`INSERT INTO %s SELECT g, timestamptz '2024-05-01 00:00:00Z' + g * interval '1.5 s', 'user' || g || '@example.test'
			FROM generate_series(1, %d) g`, table, n))
	src := b.newSource(t, postgres.Params{
		Query: `SELECT id, at, email, transaction_timestamp()::text AS tx_at,
			current_setting('transaction_isolation') AS iso, current_setting('transaction_read_only') AS ro FROM ` + table,
		CursorColumn: "id",
	})
	read, _ := readAll(t, src, "", 1000)
	if len(read) != n {
		t.Fatalf("read %d rows", len(read))
	}
	for _, col := range []string{"id", "at"} {
		var ids []string
		for i, r := range read {
			ids = append(ids, fmt.Sprint(r.Fields[col]))
			if i%97 == 0 {
				ids = append(ids, "not a "+col, fmt.Sprint(r.Fields["email"]))
			}
		}
		got, err := src.ReadIdentities(context.Background(), col, ids)
		if err != nil {
			t.Fatalf("%s: ReadIdentities: %v", col, err)
		}
		if len(got) != n {
			t.Fatalf("%s: %d records, want %d", col, len(got), n)
		}
		seen := map[string]bool{}
		for _, r := range got {
			id := fmt.Sprint(r.Fields[col])
			if seen[id] {
				t.Fatalf("%s: %q twice", col, id)
			}
			seen[id] = true
			if r.Fields["tx_at"] != got[0].Fields["tx_at"] || r.Fields["iso"] != "repeatable read" || r.Fields["ro"] != "on" {
				t.Fatalf("%s: rows read in transaction %v, %v, read only %v; want one repeatable read, read-only transaction (first: %v)",
					col, r.Fields["tx_at"], r.Fields["iso"], r.Fields["ro"], got[0].Fields["tx_at"])
			}
		}
	}
}

// TestReadIdentitiesUsesIndex: the ids are bound as the identity column's own
// type, so the plan is an index scan on the primary key, for a table and for
// a query over it (a comparison of identity::text would scan every row).
func TestReadIdentitiesUsesIndex(t *testing.T) {
	t.Parallel()
	b := setup(t)
	cases := []struct{ typ, expr, id string }{
		{"integer", "g", "77"},
		{"bigint", "g * 1000000000::bigint", "77000000000"},
		{"text", "'user' || g", "user77"},
		{"uuid", "md5(g::text)::uuid", "28dd2c79-6efd-1c11-9e3d-0a4e3b4d8f3a"},
		{"numeric", "g / 4.0", "19.2500000000000000"},
	}
	for _, c := range cases {
		table := b.table("ix_" + c.typ)
		b.exec(t, fmt.Sprintf(`CREATE TABLE %s (k %s PRIMARY KEY, updated_at timestamptz NOT NULL, payload text)`, table, c.typ),
			fmt.Sprintf(`INSERT INTO %s SELECT %s, now(), 'p' || g FROM generate_series(1, 20000) g`, table, c.expr),
			"ANALYZE "+table)
		for _, p := range []postgres.Params{
			{Table: table, CursorColumn: "updated_at", Identity: "k"},
			{Query: "SELECT k, payload, updated_at FROM " + table, CursorColumn: "updated_at", Identity: "k"},
		} {
			src := b.newSource(t, p)
			plan, err := src.ExplainIdentities(context.Background(), "k", []string{c.id})
			if err != nil {
				t.Fatalf("%s: explain: %v", c.typ, err)
			}
			if !strings.Contains(plan, "_pkey") || strings.Contains(plan, "Seq Scan") {
				t.Errorf("%s (query %v): plan does not use the primary key:\n%s", c.typ, p.Query != "", plan)
			}
		}
	}
}

// TestReadIdentitiesErrors: failures wrap the source sentinels, name the
// source, and quote neither ids nor row values.
func TestReadIdentitiesErrors(t *testing.T) {
	t.Parallel()
	b := setup(t)
	b.loadRecords(t, "contacts", recordsN(5))
	table := b.table("contacts")
	ctx := context.Background()
	ids := []string{"user1@example.test", "user2@example.test"}

	t.Run("data errors keep values out", func(t *testing.T) {
		src := b.newSource(t, postgres.Params{Query: "SELECT id, email, name::integer AS n FROM " + table, CursorColumn: "id"})
		_, err := src.ReadIdentities(ctx, "email", ids)
		if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "SQLSTATE 22P02") || !strings.Contains(err.Error(), src.ID()) {
			t.Fatalf("got %v; want source.ErrInvalid with SQLSTATE 22P02 naming the source", err)
		}
		if strings.Contains(err.Error(), "example.test") || strings.Contains(err.Error(), "Name") {
			t.Fatalf("error %q quotes an id or a row value", err)
		}
	})
	t.Run("unknown identity column", func(t *testing.T) {
		src := b.newSource(t, postgres.Params{Table: table, CursorColumn: "id"})
		for _, col := range []string{"nope", "Email", ""} {
			_, err := src.ReadIdentities(ctx, col, ids)
			if !errors.Is(err, source.ErrInvalid) || strings.Contains(err.Error(), "example.test") {
				t.Errorf("identity %q: %v; want source.ErrInvalid without ids", col, err)
			}
		}
	})
	t.Run("table dropped", func(t *testing.T) {
		b.loadRecords(t, "gone", recordsN(3))
		src := b.newSource(t, postgres.Params{Table: b.table("gone"), CursorColumn: "id"})
		b.exec(t, "DROP TABLE "+b.table("gone"))
		if _, err := src.ReadIdentities(ctx, "id", []string{"1"}); !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "does not exist") {
			t.Fatalf("got %v; want source.ErrInvalid: does not exist", err)
		}
	})
	t.Run("connection lost", func(t *testing.T) {
		app := "pgsrc-refetch-" + b.schema
		dsn := b.withDSN(t, func(u *url.URL) {
			q := u.Query()
			q.Set("application_name", app)
			u.RawQuery = q.Encode()
		})
		src := b.newSource(t, postgres.Params{DSN: dsn, Table: table, CursorColumn: "id"})
		var killed int
		if err := b.admin.QueryRow(ctx, "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1", app).Scan(&killed); err != nil || killed != 1 {
			t.Fatalf("terminated %d backends: %v", killed, err)
		}
		if _, err := src.ReadIdentities(ctx, "email", ids); err != nil && !errors.Is(err, source.ErrUnavailable) {
			t.Fatalf("first read after the connection was killed: %v; want success or source.ErrUnavailable", err)
		}
		got, err := src.ReadIdentities(ctx, "email", ids)
		if err != nil || len(got) != 2 {
			t.Fatalf("after reconnecting: %d records, %v", len(got), err)
		}
	})
}
