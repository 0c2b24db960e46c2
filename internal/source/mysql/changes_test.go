package mysql_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/source/mysql"
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
	at := func(sec float64) string {
		return fmt.Sprintf("TIMESTAMP('2024-05-01 00:00:00') + INTERVAL %d MICROSECOND", int64(sec*1e6))
	}
	b.seq(t, 10)
	b.exec(t, `CREATE TABLE contacts (id BIGINT PRIMARY KEY, email VARCHAR(100) NOT NULL, updated_at TIMESTAMP(6) NOT NULL, KEY (updated_at, id))`,
		`INSERT INTO contacts SELECT g, CONCAT('user', g, '@example.test'), `+at(0)+` + INTERVAL g SECOND FROM seq`)
	p := mysql.Params{Table: "contacts", CursorColumn: "updated_at", Identity: "id"}
	src := b.newSource(t, p)
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
		fmt.Sprintf(`UPDATE contacts SET email = 'changed2@example.test', updated_at = %s WHERE id = 2`, at(100)),
		// Not read yet: moves to the end and comes once.
		fmt.Sprintf(`UPDATE contacts SET email = 'changed8@example.test', updated_at = %s WHERE id = 8`, at(101)),
		// New rows: one at the end, one between rows not read yet.
		fmt.Sprintf(`INSERT INTO contacts VALUES (11, 'user11@example.test', %s), (12, 'user12@example.test', %s)`, at(102), at(5.5)),
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
	again := b.newSource(t, p)
	page, err := again.ReadPage(ctx, final, 3)
	if err != nil || !page.End || len(page.Records) != 0 || page.Next != final {
		t.Fatalf("run without changes: End=%v records=%d same Next=%v err=%v", page.End, len(page.Records), page.Next == final, err)
	}
	// One row changes: the next run reads it alone.
	b.exec(t, fmt.Sprintf(`UPDATE contacts SET email = 'changed5@example.test', updated_at = %s WHERE id = 5`, at(200)))
	got, nexts := readAll(t, again, final, 3)
	if g := column(got, "email"); !slices.Equal(g, []string{"changed5@example.test"}) {
		t.Fatalf("run after one update read %v", g)
	}
	if nexts[len(nexts)-1] == final {
		t.Fatal("the cursor did not move past the updated row")
	}
}

// TestLateCommit: a transaction stamps a row's updated_at when it writes
// and commits after a pass has read past that value. Without a lookback the
// next run never sees the row; with one it does, with the committed values,
// for DATETIME, TIMESTAMP and DATE cursors. A pass that reads nothing ends
// where it began, so the cursor does not creep back run after run. An
// integer cursor_column has its own lookback.
func TestLateCommit(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct{ typ, now string }{
		{"DATETIME(6)", "NOW(6)"},
		{"TIMESTAMP(6)", "NOW(6)"},
		{"DATE", "CURDATE()"},
	} {
		for _, lookback := range []time.Duration{0, 10 * time.Minute} {
			name := fmt.Sprintf("%s/lookback %s", tc.typ, lookback)
			table := fmt.Sprintf("late_%s_%d", strings.TrimSuffix(strings.ToLower(tc.typ), "(6)"), int(lookback.Minutes()))
			b.exec(t, fmt.Sprintf(`CREATE TABLE %s (id BIGINT PRIMARY KEY, email VARCHAR(100) NOT NULL, updated_at %s NOT NULL)`, table, tc.typ),
				fmt.Sprintf(`INSERT INTO %s VALUES (1, 'user1@example.test', %s - INTERVAL 1 DAY), (2, 'user2@example.test', %s - INTERVAL 1 DAY),
					(3, 'user3@example.test', %s - INTERVAL 1 DAY), (4, 'user4@example.test', %s - INTERVAL 1 DAY)`, table, tc.now, tc.now, tc.now, tc.now))
			src := b.newSource(t, mysql.Params{Table: table, CursorColumn: "updated_at", Identity: "id", Lookback: lookback})
			_, nexts := readAll(t, src, "", 10)
			first := nexts[len(nexts)-1]
			wantWindow := ""
			if lookback > 0 {
				wantWindow = fmt.Sprintf("cursor_lookback (%s)", lookback)
			}
			if col, _, w := src.CursorKind(); col != "updated_at" || w != wantWindow {
				t.Fatalf("%s: CursorKind = %s, lookback %q", name, col, w)
			}

			// A writer stamps row 3 and commits after the next pass; row 6
			// is committed at once, stamped later.
			sourcetest.CheckLateCommit(t, src, first, sourcetest.LateCommit{Name: name,
				Hold:    b.holdLate(fmt.Sprintf(`UPDATE %s SET email = 'late3@example.test', updated_at = %s WHERE id = 3`, table, tc.now)),
				Early:   b.commitNow(fmt.Sprintf(`INSERT INTO %s VALUES (6, 'user6@example.test', %s)`, table, tc.now)),
				EarlyID: "6", LateEmail: "late3@example.test", Want: lookback > 0})
		}
	}

	// An integer cursor (an AUTO_INCREMENT value is handed out at the insert
	// and seen at the commit, so row 6 appears after row 7 was read): the
	// values' lookback reads it; without one it is never read. A time
	// lookback does not apply to an integer. UNSIGNED: moved back below 0,
	// the next pass reads from the start.
	for _, tc := range []struct {
		typ string
		n   int64
	}{{"BIGINT", 0}, {"BIGINT", 100}, {"INT UNSIGNED", 3}} {
		name := fmt.Sprintf("%s/lookback %d values", tc.typ, tc.n)
		table := fmt.Sprintf("late_int_%d_%s", tc.n, strings.ReplaceAll(strings.ToLower(tc.typ), " ", "_"))
		b.exec(t, fmt.Sprintf(`CREATE TABLE %s (id %s PRIMARY KEY, email VARCHAR(100) NOT NULL)`, table, tc.typ),
			fmt.Sprintf(`INSERT INTO %s VALUES (1, 'a@example.test'), (2, 'b@example.test')`, table))
		src := b.newSource(t, mysql.Params{Table: table, Identity: "id", Lookback: time.Hour, LookbackValues: tc.n})
		_, nexts := readAll(t, src, "", 10)
		wantWindow := ""
		if tc.n > 0 {
			wantWindow = fmt.Sprintf("cursor_lookback_values (%d)", tc.n)
		}
		if col, _, w := src.CursorKind(); col != "id" || w != wantWindow {
			t.Fatalf("%s: CursorKind = %s %q, want id %q", name, col, w, wantWindow)
		}
		sourcetest.CheckLateCommit(t, src, nexts[len(nexts)-1], sourcetest.LateCommit{Name: name,
			Hold:    b.holdLate(fmt.Sprintf(`INSERT INTO %s VALUES (6, 'late6@example.test')`, table)),
			Early:   b.commitNow(fmt.Sprintf(`INSERT INTO %s VALUES (7, 'g@example.test')`, table)),
			EarlyID: "7", LateEmail: "late6@example.test", Want: tc.n > 0})
	}
}

// holdLate is a sourcetest.LateCommit's Hold: sql in a transaction left
// open.
func (b *bundle) holdLate(sql string) func(t *testing.T) func() {
	return func(t *testing.T) func() {
		ctx := context.Background()
		conn, err := b.admin.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = conn.Close() })
		tx, err := conn.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, sql); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond) // the early row's stamp comes after the late one's
		return func() {
			if err := tx.Commit(); err != nil {
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
		{"DATETIME(6)", "NOW(6) - INTERVAL 1 HOUR + INTERVAL id MINUTE", "NOW(6)", "NOW(6) + INTERVAL 20 MINUTE", 10 * time.Minute, 0},
		// In the past: a TIMESTAMP cursor a pass ends at is the server's
		// clock at most (TestRowStampedInTheFuture).
		{"TIMESTAMP(6)", "NOW(6) - INTERVAL 2 HOUR + INTERVAL id MINUTE", "NOW(6) - INTERVAL 1 HOUR", "NOW(6) - INTERVAL 40 MINUTE", 10 * time.Minute, 0},
		{"DATE", "CURDATE() - INTERVAL 10 DAY + INTERVAL id DAY", "CURDATE()", "CURDATE() + INTERVAL 5 DAY", 24 * time.Hour, 0},
		{"BIGINT", "90 + id", "100", "2000", 0, 100},
	} {
		table := "long_" + strings.TrimSuffix(strings.ToLower(tc.typ), "(6)")
		b.exec(t, fmt.Sprintf(`CREATE TABLE %s (id BIGINT PRIMARY KEY, email VARCHAR(100) NOT NULL, updated_at %s NOT NULL)`, table, tc.typ))
		for id := 1; id <= 5; id++ {
			b.exec(t, fmt.Sprintf(`INSERT INTO %s VALUES (%d, 'user%d@example.test', %s)`, table, id, id, strings.ReplaceAll(tc.before, "id", fmt.Sprint(id))))
		}
		src := b.newSource(t, mysql.Params{Table: table, CursorColumn: "updated_at", Identity: "id", Lookback: tc.lookback, LookbackValues: tc.values})
		sourcetest.CheckLongPass(t, src, "", sourcetest.LongPass{Name: tc.typ,
			Hold:      b.holdLate(fmt.Sprintf(`UPDATE %s SET email = 'late3@example.test', updated_at = %s WHERE id = 3`, table, tc.now)),
			Later:     b.commitNow(fmt.Sprintf(`INSERT INTO %s VALUES (6, 'user6@example.test', %s), (7, 'user7@example.test', %s)`, table, tc.later, tc.later)),
			LateEmail: "late3@example.test"})
	}
}
