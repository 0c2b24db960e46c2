package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/postgres"
)

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	table := b.table("contacts")
	b.exec(t, "CREATE TABLE "+table+" (id bigint PRIMARY KEY, email text, updated_at timestamptz NOT NULL)",
		"INSERT INTO "+table+" SELECT g, 'user' || g || '@example.test', timestamptz '2024-05-01Z' + g * interval '1 s' FROM generate_series(1, 20) g")
	p := postgres.Params{Table: table, CursorColumn: "updated_at", Identity: "id"}
	src := b.newSource(t, p)
	ctx := context.Background()
	version := func(s *postgres.Source, q string) string {
		t.Helper()
		v, err := s.Version(ctx, q)
		if err != nil {
			t.Fatalf("Version(%q): %v", q, err)
		}
		if !hexSHA256.MatchString(v) {
			t.Fatalf("Version(%q) = %q, want 64 hex digits", q, v)
		}
		return v
	}
	v0 := version(src, "")
	if again, fresh := version(src, ""), version(b.newSource(t, p), ""); again != v0 || fresh != v0 {
		t.Fatalf("same data, versions %s, %s and %s", v0, again, fresh)
	}
	seen := []string{v0}
	changes := []struct {
		name string
		sql  string
	}{
		{"insert", "INSERT INTO " + table + " VALUES (21, 'new@example.test', timestamptz '2024-06-01Z')"},
		{"update of the cursor column", "UPDATE " + table + " SET updated_at = timestamptz '2024-07-01Z' WHERE id = 3"},
		{"delete", "DELETE FROM " + table + " WHERE id = 5"},
	}
	for _, c := range changes {
		b.exec(t, c.sql)
		v := version(src, "")
		if slices.Contains(seen, v) {
			t.Fatalf("after %s: version %s seen before", c.name, v)
		}
		seen = append(seen, v)
	}
	// An update that does not touch the default query's inputs keeps it;
	// a version query over the data sees it.
	custom := "SELECT md5(string_agg(email, ',' ORDER BY id)) FROM " + table + ";"
	before, beforeCustom := version(src, ""), version(src, custom)
	b.exec(t, "UPDATE "+table+" SET email = 'other@example.test' WHERE id = 7")
	if v := version(src, ""); v != before {
		t.Fatal("default version changed without a change to count or max(updated_at)")
	}
	if v := version(src, custom); v == beforeCustom {
		t.Fatal("custom version query: unchanged after an update of the column it hashes")
	}
	// NULL and the empty string hash apart; so do different column names.
	if version(src, "SELECT NULL::text AS a") == version(src, "SELECT ''::text AS a") {
		t.Fatal("NULL and '' hash alike")
	}
	if version(src, "SELECT 1 AS a") == version(src, "SELECT 1 AS b") {
		t.Fatal("different column names hash alike")
	}
	if version(src, "SELECT 'ab' AS a, 'c' AS b") == version(src, "SELECT 'a' AS a, 'bc' AS b") {
		t.Fatal("values are not length-prefixed")
	}
	if _, err := src.Version(ctx, "SELECT nope FROM "+table); !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("bad version query: %v; want source.ErrInvalid naming the column", err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := src.Version(cancelled, ""); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}

// TestQueryAndTable reads the same rows as a table and as a query: same
// records, and IDs that name the table, or hash the query's text without its
// layout.
func TestQueryAndTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	recs := recordsN(12)
	b.loadRecords(t, "contacts", recs)
	table := b.table("contacts")
	bySource := map[string][]string{}
	ids := map[string]string{}
	for name, p := range map[string]postgres.Params{
		"table":     {Table: table, CursorColumn: "id"},
		"query":     {Query: "SELECT * FROM " + table, CursorColumn: "id"},
		"reflowed":  {Query: "  SELECT *\n\tFROM   " + table + " /* all */ -- rows\n;", CursorColumn: "id"},
		"filtered":  {Query: "SELECT * FROM " + table + " WHERE id % 2 = 0", CursorColumn: "id"},
		"same rows": {Query: "SELECT * FROM " + table + " WHERE name <> '  x'", CursorColumn: "id"},
	} {
		src := b.newSource(t, p)
		ids[name] = src.ID()
		got, _ := readAll(t, src, "", 5)
		for _, r := range got {
			bySource[name] = append(bySource[name], fmt.Sprintf("%v|%v|%v|%v", r.Fields["id"], r.Fields["email"], r.Fields["name"], r.Fields["note"]))
		}
	}
	var want []string
	for _, r := range recs {
		want = append(want, fmt.Sprintf("%s|%s|%s|%s", r["id"], r["email"], r["name"], r["note"]))
	}
	for _, name := range []string{"table", "query", "reflowed", "same rows"} {
		if !slices.Equal(bySource[name], want) {
			t.Errorf("%s: %v, want %v", name, bySource[name], want)
		}
	}
	if len(bySource["filtered"]) != 6 {
		t.Errorf("filtered query: %d rows, want 6", len(bySource["filtered"]))
	}
	if want := "postgres:127.0.0.1:5432/postgres/" + table; !strings.HasSuffix(ids["table"], "/"+table) || !strings.HasPrefix(ids["table"], "postgres:") {
		t.Errorf("table ID %q, want like %q", ids["table"], want)
	}
	if !regexp.MustCompile(`^postgres:.+/query:[0-9a-f]{16}$`).MatchString(ids["query"]) {
		t.Errorf("query ID %q", ids["query"])
	}
	if ids["query"] != ids["reflowed"] {
		t.Errorf("layout and comments change the ID: %q vs %q", ids["query"], ids["reflowed"])
	}
	if ids["query"] == ids["filtered"] || ids["query"] == ids["same rows"] || ids["query"] == ids["table"] {
		t.Errorf("different sources share an ID: %v", ids)
	}
}

// TestVersionOfAKeyWithoutMax: the default version query of a cursor
// column whose type has no max() (uuid, the usual identity paged by
// itself) failed with "function max(uuid) does not exist", so a
// partitioned sync of such a table could never run. It versions the data.
func TestVersionOfAKeyWithoutMax(t *testing.T) {
	t.Parallel()
	b := setup(t)
	table := b.table("accounts")
	b.exec(t, "CREATE TABLE "+table+" (id uuid PRIMARY KEY, name text)",
		"INSERT INTO "+table+" SELECT ('00000000-0000-4000-8000-' || lpad(g::text, 12, '0'))::uuid, 'n' || g FROM generate_series(1, 5) g")
	src := b.newSource(t, postgres.Params{Table: table, Identity: "id"})
	ctx := context.Background()
	v0, err := src.Version(ctx, "")
	if err != nil {
		t.Fatalf("Version: %v", err)
	}
	b.exec(t, "UPDATE "+table+" SET id = 'ffffffff-0000-4000-8000-000000000001' WHERE name = 'n1'")
	if v1, err := src.Version(ctx, ""); err != nil || v1 == v0 {
		t.Fatalf("after the largest key changed: %s, %v; want a new version", v1, err)
	}
}
