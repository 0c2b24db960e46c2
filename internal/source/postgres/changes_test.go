package postgres_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/source/postgres"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
)

// TestChangesBetweenPages changes the table between the pages of a pass with
// cursor_column updated_at: rows inserted or updated after the cursor are
// picked up later in the same pass, a row updated after it was read comes once
// more with its new values, and nothing else repeats or goes missing. The
// next run, from the final Next, reads only rows changed since.
func TestChangesBetweenPages(t *testing.T) {
	t.Parallel()
	b := setup(t)
	table := b.table("contacts")
	at := func(sec float64) string {
		return fmt.Sprintf("timestamptz '2024-05-01 00:00:00Z' + %g * interval '1 s'", sec)
	}
	b.exec(t, fmt.Sprintf(`CREATE TABLE %s (id bigint PRIMARY KEY, email text NOT NULL, updated_at timestamptz NOT NULL)`, table),
		fmt.Sprintf(`INSERT INTO %s SELECT g, 'user' || g || '@example.test', %s FROM generate_series(1, 10) g`, table, at(0)+" + g * interval '1 s'"),
		fmt.Sprintf(`CREATE INDEX ON %s (updated_at, id)`, table))
	src := b.newSource(t, postgres.Params{Table: table, CursorColumn: "updated_at", Identity: "id"})
	ctx := context.Background()

	var ids, emails []string
	first, err := src.ReadPage(ctx, "", 3)
	if err != nil {
		t.Fatal(err)
	}
	ids = append(ids, column(first.Records, "id")...)
	emails = append(emails, column(first.Records, "email")...)
	if !slices.Equal(ids, []string{"1", "2", "3"}) || first.End {
		t.Fatalf("first page: ids %v End %v", ids, first.End)
	}

	b.exec(t,
		// Already read: comes again, once, with its new values.
		fmt.Sprintf(`UPDATE %s SET email = 'changed2@example.test', updated_at = %s WHERE id = 2`, table, at(100)),
		// Not read yet: moves to the end and comes once.
		fmt.Sprintf(`UPDATE %s SET email = 'changed8@example.test', updated_at = %s WHERE id = 8`, table, at(101)),
		// New rows: one at the end, one between rows not read yet.
		fmt.Sprintf(`INSERT INTO %s VALUES (11, 'user11@example.test', %s), (12, 'user12@example.test', %s)`, table, at(102), at(5.5)),
	)
	rest, nexts := readAll(t, src, first.Next, 3)
	ids = append(ids, column(rest, "id")...)
	emails = append(emails, column(rest, "email")...)
	wantIDs := []string{"1", "2", "3", "4", "5", "12", "6", "7", "9", "10", "2", "8", "11"}
	if !slices.Equal(ids, wantIDs) {
		t.Fatalf("ids in the pass: %v, want %v", ids, wantIDs)
	}
	if emails[1] != "user2@example.test" || emails[10] != "changed2@example.test" || emails[11] != "changed8@example.test" {
		t.Fatalf("emails %v: want the old then the new value of 2, and only the new value of 8", emails)
	}

	// The next run starts at the final Next: nothing changed, nothing read.
	final := nexts[len(nexts)-1]
	again := b.newSource(t, postgres.Params{Table: table, CursorColumn: "updated_at", Identity: "id"})
	page, err := again.ReadPage(ctx, final, 3)
	if err != nil || !page.End || len(page.Records) != 0 || page.Next != final {
		t.Fatalf("run without changes: End=%v records=%d same Next=%v err=%v", page.End, len(page.Records), page.Next == final, err)
	}
	// One row changes: the next run reads it alone.
	b.exec(t, fmt.Sprintf(`UPDATE %s SET email = 'changed5@example.test', updated_at = %s WHERE id = 5`, table, at(200)))
	got, nexts := readAll(t, again, final, 3)
	if g := column(got, "email"); !slices.Equal(g, []string{"changed5@example.test"}) {
		t.Fatalf("run after one update read %v", g)
	}
	if nexts[len(nexts)-1] == final {
		t.Fatal("the cursor did not move past the updated row")
	}
}

// TestLateCommit: a transaction stamps a row's updated_at with now() (its
// start) and commits after a pass has read past that value. Without a
// lookback the next run never sees the row; with one it does, once, with
// the committed values, for timestamptz, timestamp and date cursors. A
// pass that reads nothing ends where it began, so the cursor does not creep
// back run after run. An integer cursor_column has its own lookback.
func TestLateCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		typ, now string
	}{
		{"timestamptz", "now()"},
		{"timestamp", "localtimestamp"},
		{"date", "current_date"},
	} {
		for _, lookback := range []time.Duration{0, 10 * time.Minute} {
			name := fmt.Sprintf("%s/lookback %s", tc.typ, lookback)
			table := b.table(fmt.Sprintf("late_%s_%d", tc.typ, int(lookback.Minutes())))
			b.exec(t, fmt.Sprintf(`CREATE TABLE %s (id bigint PRIMARY KEY, email text NOT NULL, updated_at %s NOT NULL)`, table, tc.typ),
				fmt.Sprintf(`INSERT INTO %s SELECT g, 'user' || g || '@example.test', %s - interval '1 day' FROM generate_series(1, 5) g`, table, tc.now))
			params := postgres.Params{Table: table, CursorColumn: "updated_at", Identity: "id", Lookback: lookback}
			src := b.newSource(t, params)
			_, nexts := readAll(t, src, "", 10)
			first := nexts[len(nexts)-1]
			wantWindow := ""
			if lookback > 0 {
				wantWindow = fmt.Sprintf("cursor_lookback (%s)", lookback)
			}
			if col, _, w := src.CursorKind(); col != "updated_at" || w != wantWindow {
				t.Fatalf("%s: CursorKind = %s, lookback %q", name, col, w)
			}

			// A writer stamps row 3 at its start and commits after the
			// next pass; row 6 is committed at once, stamped later.
			sourcetest.CheckLateCommit(t, src, first, sourcetest.LateCommit{Name: name,
				Hold:    b.holdLate(fmt.Sprintf(`UPDATE %s SET email = 'late3@example.test', updated_at = %s WHERE id = 3`, table, tc.now)),
				Early:   b.commitNow(fmt.Sprintf(`INSERT INTO %s VALUES (6, 'user6@example.test', %s)`, table, tc.now)),
				EarlyID: "6", LateEmail: "late3@example.test", Want: lookback > 0})
		}
	}

	// An integer cursor: a sequence value is handed out at the insert and
	// seen at the commit, so row 6 appears after row 7 was read. The
	// values' lookback reads it; without one it is never read. A time
	// lookback does not apply to an integer.
	for _, n := range []int64{0, 100} {
		name := fmt.Sprintf("int8/lookback %d values", n)
		table := b.table(fmt.Sprintf("late_int_%d", n))
		b.exec(t, fmt.Sprintf(`CREATE TABLE %s (id bigint PRIMARY KEY, email text NOT NULL)`, table),
			fmt.Sprintf(`INSERT INTO %s SELECT g, 'user' || g || '@example.test' FROM generate_series(1, 5) g`, table))
		src := b.newSource(t, postgres.Params{Table: table, Identity: "id", Lookback: time.Hour, LookbackValues: n})
		_, nexts := readAll(t, src, "", 10)
		wantWindow := ""
		if n > 0 {
			wantWindow = "cursor_lookback_values (100)"
		}
		if col, typ, w := src.CursorKind(); col != "id" || typ != "int8" || w != wantWindow {
			t.Fatalf("%s: CursorKind = %s %s %q, want id int8 %q", name, col, typ, w, wantWindow)
		}
		sourcetest.CheckLateCommit(t, src, nexts[len(nexts)-1], sourcetest.LateCommit{Name: name,
			Hold:    b.holdLate(fmt.Sprintf(`INSERT INTO %s VALUES (6, 'late6@example.test')`, table)),
			Early:   b.commitNow(fmt.Sprintf(`INSERT INTO %s VALUES (7, 'user7@example.test')`, table)),
			EarlyID: "7", LateEmail: "late6@example.test", Want: n > 0})
	}
}

// holdLate is a sourcetest.LateCommit's Hold: sql in a transaction left
// open.
func (b *bundle) holdLate(sql string) func(t *testing.T) func() {
	return func(t *testing.T) func() {
		ctx := context.Background()
		writer, err := pgx.Connect(ctx, b.dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = writer.Close(ctx) })
		tx, err := writer.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, sql); err != nil {
			t.Fatal(err)
		}
		return func() {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// commitNow is a sourcetest.LateCommit's Early: sql committed at once.
func (b *bundle) commitNow(sql string) func(t *testing.T) {
	return func(t *testing.T) { b.exec(t, sql) }
}

// TestLateCommitInLongPass: a transaction stamps row 3 and stays open while
// a pass reads past it and goes on reading rows stamped more than the
// lookback later (a long pass, or one stopped and resumed later); it
// commits well within the lookback of its stamp. The next pass reads it:
// before, the pass ended at its last row less the lookback, past row 3's
// stamp, and the row's new values never reached the destination.
func TestLateCommitInLongPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		typ, before, now, later string
		lookback                time.Duration
		values                  int64
	}{
		// In the past: a cursor a pass ends at is the clock at most (see
		// TestRowStampedInTheFuture).
		{"timestamptz", "now() - interval '2 hours' + g * interval '1 minute'", "now() - interval '1 hour'", "now() - interval '40 minutes'", 10 * time.Minute, 0},
		{"timestamp", "localtimestamp - interval '1 hour' + g * interval '1 minute'", "localtimestamp", "localtimestamp + interval '20 minutes'", 10 * time.Minute, 0},
		{"date", "current_date - 10 + g", "current_date", "current_date + 5", 24 * time.Hour, 0},
		{"bigint", "90 + g", "100", "2000", 0, 100},
	} {
		table := b.table("long_" + tc.typ)
		b.exec(t, fmt.Sprintf(`CREATE TABLE %s (id bigint PRIMARY KEY, email text NOT NULL, updated_at %s NOT NULL)`, table, tc.typ),
			fmt.Sprintf(`INSERT INTO %s SELECT g, 'user' || g || '@example.test', %s FROM generate_series(1, 5) g`, table, tc.before))
		src := b.newSource(t, postgres.Params{Table: table, CursorColumn: "updated_at", Identity: "id", Lookback: tc.lookback, LookbackValues: tc.values})
		sourcetest.CheckLongPass(t, src, "", sourcetest.LongPass{Name: tc.typ,
			Hold:      b.holdLate(fmt.Sprintf(`UPDATE %s SET email = 'late3@example.test', updated_at = %s WHERE id = 3`, table, tc.now)),
			Later:     b.commitNow(fmt.Sprintf(`INSERT INTO %s VALUES (6, 'user6@example.test', %s), (7, 'user7@example.test', %s)`, table, tc.later, tc.later)),
			LateEmail: "late3@example.test"})
	}
}
