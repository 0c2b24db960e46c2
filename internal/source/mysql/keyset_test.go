package mysql_test

import (
	"context"
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/oncesync/oncesync/internal/source/mysql"
)

// seq creates table seq(g) holding 1..n, for generating rows in SQL.
func (b *bundle) seq(t *testing.T, n int) {
	t.Helper()
	b.exec(t, "CREATE TABLE seq (g INT PRIMARY KEY)")
	for g := 1; g <= n; g++ {
		b.exec(t, fmt.Sprintf("INSERT INTO seq VALUES (%d)", g))
	}
}

// TestKeysetTies pages tables whose cursor_column has only a few distinct
// values (ties everywhere) of several types: the identity breaks the ties, so
// every row comes exactly once in (cursor_column, identity) order (MySQL's
// ORDER BY, collations included), and every Next resumes exactly, also in a
// fresh Source.
func TestKeysetTies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 40
	b.seq(t, n)
	tests := []struct {
		name         string
		keyType, key string // cursor column type and value for row g
		idType, id   string // identity type and value for row g
	}{
		{"datetime/bigint", "DATETIME(6)", "TIMESTAMP('2024-05-01 10:00:00.123456') + INTERVAL (g % 3) * 1000001 MICROSECOND", "BIGINT", "(g * 919) % 1000"},
		{"timestamp/char", "TIMESTAMP(6)", "TIMESTAMP('1999-12-31 23:59:59.999999') + INTERVAL (g % 4) MICROSECOND", "CHAR(32)", "MD5(g)"},
		{"decimal/varchar", "DECIMAL(12,4)", "ROUND((g % 3) / 7, 4) - 0.1", "VARCHAR(20)", "CONCAT('id-', g)"},
		{"double/int", "DOUBLE", "(g % 3) * 0.1 - 0.1", "INT", "1000 - g"},
		{"case-insensitive text/bigint", "VARCHAR(20) COLLATE utf8mb4_general_ci", "ELT(g % 6 + 1, 'a', 'B', 'é', 'a b', 'O''Brien, \"x\"', 'A')", "BIGINT", "g"},
		{"date/binary text", "DATE", "DATE('2024-02-28') + INTERVAL (g % 3) DAY", "VARCHAR(32) COLLATE utf8mb4_bin", "MD5(g)"},
		{"varbinary/unsigned", "VARBINARY(8)", "UNHEX(LPAD(HEX(g % 3), 4, '0'))", "BIGINT UNSIGNED", "18446744073709551615 - g"},
		{"time/int", "TIME(6)", "SEC_TO_TIME((g % 3) * 3600 - 3600)", "INT", "g"},
		{"bit/bigint", "BIT(16)", "(g % 3) * 1000", "BIGINT", "g"},
		{"int/bit", "INT", "g % 3", "BIT(64)", "18446744073709551615 - g * 7"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			table := fmt.Sprintf("ties%d", i)
			b.exec(t,
				fmt.Sprintf("CREATE TABLE %s (k %s NOT NULL, id %s NOT NULL, v INT, PRIMARY KEY (k, id))", table, tt.keyType, tt.idType),
				fmt.Sprintf("INSERT INTO %s SELECT %s, %s, g FROM seq ORDER BY RAND()", table, tt.key, tt.id),
			)
			want := b.queryStrings(t, fmt.Sprintf("SELECT v FROM %s ORDER BY k, id", table))
			if len(want) != n {
				t.Fatalf("%d rows, want %d", len(want), n)
			}
			if distinct := b.queryStrings(t, fmt.Sprintf("SELECT COUNT(DISTINCT k) FROM %s", table)); distinct[0] == fmt.Sprint(n) {
				t.Fatalf("no ties in %s", table)
			}
			p := mysql.Params{Table: table, CursorColumn: "k", Identity: "id"}
			src := b.newSource(t, p)
			for _, size := range []int{1, 3, 7, n, n + 1} {
				got, nexts := readAll(t, src, "", size)
				if g := column(got, "v"); !slices.Equal(g, want) {
					t.Fatalf("size %d: order %v, want %v", size, g, want)
				}
				// Resume from every Next in a fresh Source, with another size.
				fresh := b.newSource(t, p)
				for j, next := range nexts[:len(nexts)-1] {
					rest, _ := readAll(t, fresh, next, 4)
					before := min((j+1)*size, n)
					if g := column(rest, "v"); !slices.Equal(g, want[before:]) {
						t.Fatalf("size %d: resumed after %d rows: %v, want %v", size, before, g, want[before:])
					}
				}
				// At the end, Next reads nothing more.
				page, err := fresh.ReadPage(context.Background(), nexts[len(nexts)-1], size)
				if err != nil || !page.End || len(page.Records) != 0 || page.Next != nexts[len(nexts)-1] {
					t.Fatalf("size %d: read at the final Next: End=%v, %d records, Next changed %v, err %v",
						size, page.End, len(page.Records), page.Next != nexts[len(nexts)-1], err)
				}
			}
		})
	}
}

// TestKeysetComputedTextKey pages a query whose keys are text computed from
// numbers and literals (a composite identity, CONCAT(a, '-', b)): such text
// takes the connection's collation, and a cursor's literal must compare with
// it. With a connection collation that is not utf8mb4's default (a DSN's
// collation=, or MySQL 8's default connection from the driver,
// utf8mb4_general_ci, against its utf8mb4_0900_ai_ci) the second page failed
// with "Illegal mix of collations" (error 1267; an independent check,
// 2026-12-04).
func TestKeysetComputedTextKey(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 40
	b.seq(t, n)
	want := b.queryStrings(t, "SELECT g FROM seq ORDER BY CONCAT(g DIV 7, '-', g), CONCAT('id-', g)")
	for _, params := range []string{"", "collation=utf8mb4_unicode_ci", "charset=utf8mb4&collation=utf8mb4_unicode_ci"} {
		t.Run(params, func(t *testing.T) {
			dsn := b.withDSN(t, func(u *url.URL) { u.RawQuery = params })
			for _, p := range []mysql.Params{
				{DSN: dsn, Query: "SELECT CONCAT(g DIV 7, '-', g) AS k, CONCAT('id-', g) AS id, g FROM seq", CursorColumn: "k", Identity: "id"},
				{DSN: dsn, Query: "SELECT CONCAT('c-', g) AS k, g FROM seq", CursorColumn: "k"},
			} {
				src := b.newSource(t, p)
				got, _ := readAll(t, src, "", 3)
				if len(got) != n {
					t.Fatalf("%s: read %d rows, want %d", p.Query, len(got), n)
				}
				if p.Identity != "" && !slices.Equal(column(got, "g"), want) {
					t.Fatalf("%s: order %v, want %v", p.Query, column(got, "g"), want)
				}
				ids := column(got, "g")
				slices.Sort(ids)
				if len(slices.Compact(ids)) != n {
					t.Fatalf("%s: a row read twice", p.Query)
				}
				// Rows read again by identity compare in the same collation.
				if p.Identity != "" {
					recs, err := src.ReadIdentities(context.Background(), "id", []string{"id-1", "id-40"})
					if err != nil || len(recs) != 2 {
						t.Fatalf("ReadIdentities: %d records, %v", len(recs), err)
					}
				}
			}
		})
	}
}
