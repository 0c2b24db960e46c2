package mysql_test

import (
	"context"
	"errors"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/mysql"
)

// TestVersion: the default version changes when a row is added, removed or
// its cursor column grows, not when nothing changed; a version_query is
// used as given; a bad one is ErrInvalid.
func TestVersion(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	b.exec(t, "CREATE TABLE c (id INT PRIMARY KEY, updated_at DATETIME(6) NOT NULL, note TEXT)",
		"INSERT INTO c VALUES (1, '2024-05-01 00:00:01', 'a'), (2, '2024-05-01 00:00:02', 'b')")
	src := b.newSource(t, mysql.Params{Table: "c", CursorColumn: "updated_at", Identity: "id"})
	version := func() string {
		t.Helper()
		v, err := src.Version(ctx, "")
		if err != nil || len(v) != 64 {
			t.Fatalf("Version = %q, %v", v, err)
		}
		return v
	}
	v0 := version()
	if version() != v0 {
		t.Fatal("the version changed without a change")
	}
	b.exec(t, "UPDATE c SET updated_at = '2024-05-01 00:00:03', note = 'changed' WHERE id = 1")
	v1 := version()
	if v1 == v0 {
		t.Fatal("an update of the cursor column kept the version")
	}
	b.exec(t, "INSERT INTO c VALUES (3, '2024-05-01 00:00:00', 'old')")
	v2 := version()
	if v2 == v1 {
		t.Fatal("an insert kept the version")
	}
	b.exec(t, "DELETE FROM c WHERE id = 3")
	if version() != v1 {
		t.Fatal("deleting the inserted row did not restore the version")
	}
	// A version_query sees what the default does not: note alone changed.
	custom := b.newSource(t, mysql.Params{Table: "c", CursorColumn: "updated_at", Identity: "id",
		VersionQuery: "SELECT id, note FROM c ORDER BY id;"})
	s0, err := custom.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b.exec(t, "UPDATE c SET note = 'again' WHERE id = 2")
	s1, err := custom.Snapshot(ctx)
	if err != nil || s1["version"] == s0["version"] {
		t.Fatalf("version_query: %v then %v, %v", s0, s1, err)
	}
	bad := b.newSource(t, mysql.Params{Table: "c", CursorColumn: "id", VersionQuery: "SELECT nope FROM c"})
	if _, err := bad.Snapshot(ctx); !errors.Is(err, source.ErrInvalid) {
		t.Fatalf("bad version_query: %v, want ErrInvalid", err)
	}
	// The source can never write, not even through a version query.
	ro := b.newSource(t, mysql.Params{Table: "c", CursorColumn: "id", VersionQuery: "UPDATE c SET note = 'x'"})
	if _, err := ro.Snapshot(ctx); !errors.Is(err, source.ErrInvalid) {
		t.Fatalf("a writing version_query: %v, want ErrInvalid", err)
	}
	if got := b.queryStrings(t, "SELECT COUNT(*) FROM c WHERE note = 'x'"); got[0] != "0" {
		t.Fatal("the version query wrote")
	}
	// Nor DDL, which MySQL runs after committing a READ ONLY transaction.
	for _, q := range []string{"DROP TABLE c", "CREATE TABLE d (a INT)", "TRUNCATE TABLE c"} {
		ddl := b.newSource(t, mysql.Params{Table: "c", CursorColumn: "id", VersionQuery: q})
		if _, err := ddl.Snapshot(ctx); !errors.Is(err, source.ErrInvalid) {
			t.Fatalf("version_query %q: %v, want ErrInvalid", q, err)
		}
	}
	if got := b.queryStrings(t, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME IN ('c', 'd')"); got[0] != "1" {
		t.Fatalf("DDL ran: %s of c, d exist", got[0])
	}
	if got := b.queryStrings(t, "SELECT COUNT(*) FROM c"); got[0] != "2" {
		t.Fatalf("c has %s rows", got[0])
	}
}
