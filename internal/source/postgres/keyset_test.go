package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/postgres"
)

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

// queryStrings returns the first column of sql's rows as text.
func (b *bundle) queryStrings(t *testing.T, sql string) []string {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	rows, err := b.admin.Query(context.Background(), sql)
	if err != nil {
		t.Fatalf("%s: %v", sql, err)
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

// TestKeysetTies pages tables whose cursor_column has only a few distinct
// values (ties everywhere) of several types: the identity breaks the ties, so
// every row comes exactly once in (cursor_column, identity) order, and every
// Next resumes exactly, also in a fresh Source.
func TestKeysetTies(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const n = 40
	tests := []struct {
		name         string
		keyType, key string // cursor column type and value for row g
		idType, id   string // identity type and value for row g
	}{
		{"timestamptz/bigint", "timestamptz", "timestamptz '2024-05-01 10:00:00.123456+02' + (g % 3) * interval '1.000001 s'", "bigint", "(g * 919) % 1000"},
		{"timestamp/uuid", "timestamp", "timestamp '1999-12-31 23:59:59.999999' + (g % 4) * interval '1 us'", "uuid", "md5(g::text)::uuid"},
		{"numeric/text", "numeric(12,4)", "round((g % 3)::numeric / 7, 4)", "text", "'id-' || g"},
		{"float8/int", "double precision", "(g % 3) * 0.1", "integer", "1000 - g"},
		{"text/bigint", "text", "(ARRAY['a', 'B', 'é', 'a b', 'O''Brien, \"x\"'])[g % 5 + 1]", "bigint", "g"},
		{"date/text", "date", "date '2024-02-28' + (g % 3)", "text", "md5(g::text)"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			table := b.table(fmt.Sprintf("ties%d", i))
			b.exec(t,
				fmt.Sprintf("CREATE TABLE %s (k %s NOT NULL, id %s NOT NULL, v integer)", table, tt.keyType, tt.idType),
				fmt.Sprintf("INSERT INTO %s SELECT %s, %s, g FROM generate_series(1, %d) g ORDER BY random()", table, tt.key, tt.id, n),
			)
			want := b.queryStrings(t, fmt.Sprintf("SELECT v::text FROM %s ORDER BY k, id", table))
			if distinct := b.queryStrings(t, fmt.Sprintf("SELECT count(DISTINCT k)::text FROM %s", table)); distinct[0] == fmt.Sprint(n) {
				t.Fatalf("no ties in %s", table)
			}
			p := postgres.Params{Table: table, CursorColumn: "k", Identity: "id"}
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
