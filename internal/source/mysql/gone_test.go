package mysql_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/source/mysql"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
)

// TestLookbackWhenTheRowAheadIsGone: a pass reads a page and the row ahead
// of it (which made it not the last) is deleted before the next page, so
// the pass ends on an empty page. The cursor it ends at must still be
// moved back, from the last row at or before it: a row committed late,
// stamped before the page's last row, was never read again. A pass without
// changes then keeps the cursor, and an emptied source starts again from
// its start. (Shown on the PostgreSQL source first, 2026-12-04.)
func TestLookbackWhenTheRowAheadIsGone(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ctx := context.Background()
	for _, tc := range []struct {
		typ  string
		at   func(i int) string
		late string
		p    mysql.Params
	}{
		{"DATETIME(6)", func(i int) string { return fmt.Sprintf("'2024-05-01 10:%02d:00'", i) }, "'2024-05-01 10:01:30'",
			mysql.Params{CursorColumn: "k", Identity: "id", Lookback: 5 * time.Minute}},
		{"BIGINT", func(i int) string { return fmt.Sprint(i * 10) }, "15",
			mysql.Params{CursorColumn: "k", Identity: "id", LookbackValues: 100}},
	} {
		table := fmt.Sprintf("gone_%d", len(tc.typ))
		tc.p.Table = table
		b.exec(t, "CREATE TABLE "+table+" (id INT PRIMARY KEY, k "+tc.typ+" NOT NULL)",
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

// TestRowStampedInTheFuture: a TIMESTAMP cursor value ahead of the server's
// clock moved the cursor a pass ends at ahead of it, and a row changed
// afterwards, stamped by the clock, sat below the cursor for good. The
// cursor a pass ends at is the server's clock at most, less the lookback.
func TestRowStampedInTheFuture(t *testing.T) {
	t.Parallel()
	b := setup(t)
	table := "future_ts"
	b.exec(t, "CREATE TABLE "+table+" (id INT PRIMARY KEY, k TIMESTAMP(6) NOT NULL, v VARCHAR(10) NOT NULL)",
		"INSERT INTO "+table+" VALUES (1, NOW(6) - INTERVAL 1 HOUR, 'a'), (2, NOW(6) + INTERVAL 2 HOUR, 'b')")
	src := b.newSource(t, mysql.Params{Table: table, CursorColumn: "k", Identity: "id", Lookback: time.Minute})
	sourcetest.CheckFutureStamp(t, src, func(t *testing.T) {
		b.exec(t, "UPDATE "+table+" SET v = 'a2', k = NOW(6) WHERE id = 1")
	})
}
