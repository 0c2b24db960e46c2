package mysql_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/mysql"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
	"github.com/oncesync/oncesync/internal/testenv"
)

// bundle is one test's database, dropped at cleanup.
type bundle struct {
	// dsn is the database's mysql:// URL.
	dsn string
	// admin sets up data (not the Source's connection).
	admin *sql.DB
}

// setup creates a database for t on the test server (testenv.MySQLDatabase).
func setup(t testing.TB) *bundle {
	t.Helper()
	dsn, db := testenv.MySQLDatabase(t)
	return &bundle{dsn: dsn, admin: db}
}

// exec runs SQL statements on the admin connection.
func (b *bundle) exec(t testing.TB, sqls ...string) {
	t.Helper()
	for _, q := range sqls {
		if _, err := b.admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

// queryStrings returns the first column of q's rows as text.
func (b *bundle) queryStrings(t testing.TB, q string) []string {
	t.Helper()
	rows, err := b.admin.Query(q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// newSource opens a Source and closes it at cleanup.
func (b *bundle) newSource(t testing.TB, p mysql.Params) *mysql.Source {
	t.Helper()
	if p.DSN == "" {
		p.DSN = b.dsn
	}
	src, err := mysql.New(context.Background(), p)
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
		t.Fatal(err)
	}
	edit(u)
	return u.String()
}

// loadRecords creates table name (id bigint primary key, email, name, note
// text) holding recs.
func (b *bundle) loadRecords(t testing.TB, name string, recs []map[string]string) {
	t.Helper()
	b.exec(t, fmt.Sprintf("CREATE TABLE `%s` (id BIGINT PRIMARY KEY, email VARCHAR(191) NOT NULL UNIQUE, name TEXT, note TEXT) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", name))
	for start := 0; start < len(recs); start += 500 {
		var (
			vals []string
			args []any
		)
		for _, r := range recs[start:min(start+500, len(recs))] {
			vals = append(vals, "(?, ?, ?, ?)")
			args = append(args, r["id"], r["email"], r["name"], r["note"])
		}
		if _, err := b.admin.Exec(fmt.Sprintf("INSERT INTO `%s` (id, email, name, note) VALUES %s", name, strings.Join(vals, ", ")), args...); err != nil {
			t.Fatalf("insert: %v", err)
		}
	}
}

// readAll reads src from cursor to the end with page size size and returns
// the records and the Next of every page (the last one included).
func readAll(t *testing.T, src source.Source, cursor string, size int) ([]source.Record, []string) {
	t.Helper()
	var (
		recs  []source.Record
		nexts []string
	)
	for pages := 0; ; pages++ {
		if pages > 100_000 {
			t.Fatal("no End")
		}
		page, err := src.ReadPage(context.Background(), cursor, size)
		if err != nil {
			t.Fatalf("ReadPage after %d records: %v", len(recs), err)
		}
		if len(page.Records) > size {
			t.Fatalf("page of %d records, size %d", len(page.Records), size)
		}
		recs = append(recs, page.Records...)
		nexts = append(nexts, page.Next)
		if page.End {
			return recs, nexts
		}
		cursor = page.Next
	}
}

// column returns the field col of every record, as fmt.Sprint prints it.
func column(recs []source.Record, col string) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprint(r.Fields[col])
	}
	return out
}

// harness loads each distinct record set once (a table named by its hash), so
// sources over the same records read the same table, as a new process would.
func harness(b *bundle, identity string, params func(table string) mysql.Params) sourcetest.Harness {
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
		return b.newSource(t, params(name))
	}, Identity: identity}
}
