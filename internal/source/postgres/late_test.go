package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/source/postgres"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
)

// TestLookbackWhenTheRowAheadIsGone: a pass reads a page and the row ahead
// of it (which made it not the last) is deleted before the next page, so
// the pass ends on an empty page. That page's cursor is the last row read,
// not moved back: a row committed late, stamped before it, was never read
// again. The cursor a pass ends at is moved back from the last row at or
// before it; a pass without changes then keeps it, and an emptied source
// starts again from its start.
func TestLookbackWhenTheRowAheadIsGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, tc := range []struct {
		typ  string
		at   func(i int) string
		late string
		p    postgres.Params
	}{
		{"timestamptz", func(i int) string { return fmt.Sprintf("'2024-05-01 10:%02d:00Z'", i) }, "'2024-05-01 10:01:30Z'",
			postgres.Params{CursorColumn: "k", Identity: "id", Lookback: 5 * time.Minute}},
		{"bigint", func(i int) string { return fmt.Sprint(i * 10) }, "15",
			postgres.Params{CursorColumn: "k", Identity: "id", LookbackValues: 100}},
	} {
		table := b.table("gone_" + tc.typ)
		tc.p.Table = table
		b.exec(t, "CREATE TABLE "+table+" (id int PRIMARY KEY, k "+tc.typ+" NOT NULL)",
			fmt.Sprintf("INSERT INTO %s VALUES (1, %s), (2, %s), (3, %s)", table, tc.at(1), tc.at(2), tc.at(3)))
		src := b.newSource(t, tc.p)
		page, err := src.ReadPage(ctx, "", 2)
		if err != nil || page.End {
			t.Fatalf("%s: first page: End %v, %v", tc.typ, page.End, err)
		}
		// The row ahead goes; a transaction stamped before row 2 commits.
		b.exec(t, "DELETE FROM "+table+" WHERE id = 3", "INSERT INTO "+table+" VALUES (4, "+tc.late+")")
		end, err := src.ReadPage(ctx, page.Next, 2)
		if err != nil || !end.End || len(end.Records) != 0 {
			t.Fatalf("%s: second page: %d rows, End %v, %v", tc.typ, len(end.Records), end.End, err)
		}
		got, nexts := readAll(t, src, end.Next, 10)
		if ids := column(got, "id"); !slices.Contains(ids, "4") {
			t.Fatalf("%s: the next pass read ids %v: the late row 4 was lost", tc.typ, ids)
		}
		if _, again := readAll(t, src, nexts[len(nexts)-1], 10); again[len(again)-1] != nexts[len(nexts)-1] {
			t.Fatalf("%s: a pass without changes moved the cursor", tc.typ)
		}
		b.exec(t, "DELETE FROM "+table)
		if empty, err := src.ReadPage(ctx, nexts[len(nexts)-1], 10); err != nil || !empty.End || empty.Next != "" {
			t.Fatalf("%s: an emptied source: End %v, Next %q, %v; want its start", tc.typ, empty.End, empty.Next, err)
		}
	}
}

// TestRowStampedInTheFuture: a row whose timestamptz cursor is ahead of the
// database's clock (a writer whose clock runs ahead, a bug) moved the cursor
// a pass ends at ahead of it, and a row changed afterwards, stamped by the
// clock, sat below the cursor: a lost update, for good once the clock passed
// it. The cursor a pass ends at is the database's clock at most (less the
// lookback), so the row changed meanwhile is read by the next pass.
func TestRowStampedInTheFuture(t *testing.T) {
	t.Parallel()
	b := setup(t)
	table := b.table("future")
	b.exec(t, "CREATE TABLE "+table+" (id int PRIMARY KEY, k timestamptz NOT NULL, v text NOT NULL)",
		"INSERT INTO "+table+" VALUES (1, now() - interval '1 hour', 'a'), (2, now() + interval '2 hours', 'b')")
	src := b.newSource(t, postgres.Params{Table: table, CursorColumn: "k", Identity: "id", Lookback: time.Minute})
	sourcetest.CheckFutureStamp(t, src, func(t *testing.T) {
		b.exec(t, "UPDATE "+table+" SET v = 'a2', k = now() WHERE id = 1")
	})
}
