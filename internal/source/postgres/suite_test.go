package postgres_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/postgres"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
)

// loadRecords creates table name (id bigint primary key, email, name, note
// text) holding recs, with COPY.
func (b *bundle) loadRecords(t testing.TB, name string, recs []map[string]string) {
	t.Helper()
	b.exec(t, fmt.Sprintf(`CREATE TABLE %s (id bigint PRIMARY KEY, email text NOT NULL, name text, note text)`, b.table(name)))
	rows := make([][]any, len(recs))
	for i, r := range recs {
		id, err := strconv.ParseInt(r["id"], 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = []any{id, r["email"], r["name"], r["note"]}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	n, err := b.admin.CopyFrom(context.Background(), pgx.Identifier{b.schema, name},
		[]string{"id", "email", "name", "note"}, pgx.CopyFromRows(rows))
	if err != nil || int(n) != len(recs) {
		t.Fatalf("copy %d rows: %d, %v", len(recs), n, err)
	}
}

// harness loads each distinct record set once (a table named by its hash), so
// sources over the same records read the same table, as a new process would;
// identity is the column the suite's Refetcher case re-reads rows by.
func harness(b *bundle, identity string, params func(table string) postgres.Params) sourcetest.Harness {
	var (
		mu     sync.Mutex
		loaded = map[string]bool{}
	)
	return sourcetest.Harness{New: func(t *testing.T, recs []map[string]string) source.Source {
		data, err := json.Marshal(recs)
		if err != nil {
			t.Fatal(err)
		}
		name := fmt.Sprintf("t_%x", sha256.Sum256(data))[:18]
		mu.Lock()
		if !loaded[name] {
			b.loadRecords(t, name, recs)
			loaded[name] = true
		}
		mu.Unlock()
		return b.newSource(t, params(b.table(name)))
	}, Identity: identity}
}

func TestSuiteTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sourcetest.Run(t, harness(b, "id", func(table string) postgres.Params {
		return postgres.Params{Table: table, CursorColumn: "id"}
	}))
}

func TestSuiteQueryWithIdentity(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sourcetest.Run(t, harness(b, "email", func(table string) postgres.Params {
		// id orders the rows; email (unique too) is the identity tie-breaker.
		return postgres.Params{
			Query:        "SELECT id, email, name, note\nFROM " + table + " -- every row\n;",
			CursorColumn: "id",
			Identity:     "email",
		}
	}))
}

func TestSuiteIdentityOnly(t *testing.T) {
	t.Parallel()
	b := setup(t)
	sourcetest.Run(t, harness(b, "id", func(table string) postgres.Params {
		return postgres.Params{Table: table, Identity: "id"} // cursor_column defaults to identity
	}))
}
