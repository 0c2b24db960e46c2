package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

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
