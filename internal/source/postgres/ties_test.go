package postgres_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/postgres"
)

// TestTiesInTheColumnsEquality: keys whose texts differ but that the column
// compares equal ('BOB@x.io' and 'bob@x.io' in a case-insensitive
// collation, 1.0 and 1.00 in numeric) are a tie the next page's
// ">" skips, as equal bytes are: a page boundary between them fails, never
// skips a row. Without the tie every row is read.
func TestTiesInTheColumnsEquality(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.exec(t, "CREATE COLLATION "+b.schema+".ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)")
	tests := []struct {
		name string
		// cols declares k (and whatever else p reads besides v); rows
		// are its values, v first. tie is the v of the row that ties.
		cols string
		rows []string
		tie  string
		p    func(table string) postgres.Params
	}{
		{"nondeterministic collation", "k text COLLATE " + b.schema + ".ci NOT NULL",
			[]string{"1, 'BOB@x.io'", "2, 'bob@x.io'", "3, 'carol@x.io'", "4, 'Dave@x.io'"}, "2",
			func(table string) postgres.Params { return postgres.Params{Table: table, CursorColumn: "k"} }},
		{"numeric scale", "k numeric NOT NULL",
			[]string{"1, 1.0", "2, 1.00", "3, 2", "4, 3.5"}, "2",
			func(table string) postgres.Params { return postgres.Params{Table: table, CursorColumn: "k"} }},
		{"identity tied in a query, one updated_at", "k text COLLATE " + b.schema + ".ci NOT NULL, updated_at timestamptz NOT NULL",
			[]string{"1, 'BOB@x.io', '2024-05-01Z'", "2, 'bob@x.io', '2024-05-01Z'", "3, 'carol@x.io', '2024-05-01Z'", "4, 'Dave@x.io', '2024-05-02Z'"}, "2",
			func(table string) postgres.Params {
				return postgres.Params{Query: "SELECT v, k, updated_at FROM " + table, CursorColumn: "updated_at", Identity: "k"}
			}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := b.table("ties" + string(rune('a'+i)))
			b.exec(t, "CREATE TABLE "+table+" (v int NOT NULL, "+tt.cols+")",
				"INSERT INTO "+table+" VALUES ("+strings.Join(tt.rows, "), (")+")")
			src := b.newSource(t, tt.p(table))
			var vs []string
			for cursor := ""; ; {
				page, err := src.ReadPage(ctx, cursor, 1)
				if err != nil {
					if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "share the key") {
						t.Fatalf("after %v: %v, want ErrInvalid for the tie", vs, err)
					}
					break
				}
				vs = append(vs, column(page.Records, "v")...)
				if page.End {
					t.Fatalf("read v=%v to the end without an error: a tied row was skipped", vs)
				}
				cursor = page.Next
			}
			b.exec(t, "DELETE FROM "+table+" WHERE v = "+tt.tie)
			got, _ := readAll(t, src, "", 1)
			if vs := column(got, "v"); !slices.Equal(vs, []string{"1", "3", "4"}) {
				t.Fatalf("without the tie, read v=%v; want 1, 3, 4", vs)
			}
		})
	}
}

// TestKeyOperatorsOffTheSearchPath: a key of an extension's type (citext)
// whose schema is not on the connection's search_path is ordered by its
// type's own comparison (ORDER BY finds it through the type), while a
// plain ">" finds only the built-in text one: 'Dave@x.io' sorts after
// 'carol@x.io' and compares below it, so the next page skipped it. Every
// row is read, and a tie of the type's equality still fails.
func TestKeyOperatorsOffTheSearchPath(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	// A database of the test's own: an extension is installed once per
	// database, and the shared one may have citext on its search_path.
	db := b.schema
	b.exec(t, "CREATE DATABASE "+db)
	t.Cleanup(func() { b.exec(t, "DROP DATABASE "+db+" WITH (FORCE)") })
	dsn := b.withDSN(t, func(u *url.URL) { u.Path = "/" + db })
	admin, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	run := func(sqls ...string) {
		t.Helper()
		for _, sql := range sqls {
			if _, err := admin.Exec(ctx, sql); err != nil {
				t.Fatalf("%s: %v", sql, err)
			}
		}
	}
	run("CREATE SCHEMA ext") // not on the search_path
	if _, err := admin.Exec(ctx, "CREATE EXTENSION citext SCHEMA ext"); err != nil {
		t.Skipf("citext is not available: %v", err)
	}
	run("CREATE TABLE emails (v int NOT NULL, k ext.citext NOT NULL, updated_at timestamptz NOT NULL)",
		"INSERT INTO emails VALUES (1, 'alice@x.io', '2024-05-01Z'), (2, 'Bob@x.io', '2024-05-01Z'), (3, 'carol@x.io', '2024-05-01Z'), (4, 'Dave@x.io', '2024-05-01Z'), (5, 'eve@x.io', '2024-05-02Z')")
	for _, p := range []postgres.Params{
		{Table: "emails", CursorColumn: "k"},
		{Table: "emails", CursorColumn: "updated_at", Identity: "k"},
		{Query: "SELECT * FROM emails WHERE v > 0", Identity: "k"},
	} {
		p.DSN = dsn
		got, _ := readAll(t, b.newSource(t, p), "", 1)
		if vs := column(got, "v"); !slices.Equal(vs, []string{"1", "2", "3", "4", "5"}) {
			t.Fatalf("%s %s by %s, %s: read v=%v; want 1 to 5", p.Table, p.Query, p.CursorColumn, p.Identity, vs)
		}
	}
	recs, err := b.newSource(t, postgres.Params{DSN: dsn, Table: "emails", Identity: "k"}).ReadIdentities(ctx, "k", []string{"Dave@x.io", "bob@x.io"})
	if err != nil || !slices.Equal(column(recs, "v"), []string{"4"}) {
		t.Fatalf("re-read by identity: v=%v, %v; want 4 (only the exact identity)", column(recs, "v"), err)
	}
	run("INSERT INTO emails VALUES (6, 'BOB@X.IO', '2024-05-01Z')")
	src := b.newSource(t, postgres.Params{DSN: dsn, Table: "emails", CursorColumn: "k"})
	page, err := src.ReadPage(ctx, "", 1)
	for err == nil && !page.End {
		page, err = src.ReadPage(ctx, page.Next, 1)
	}
	if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "share the key") {
		t.Fatalf("'Bob@x.io' and 'BOB@X.IO' in citext: %v; want ErrInvalid for the tie", err)
	}
}
