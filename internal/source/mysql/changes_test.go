package mysql_test

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/oncesync/oncesync/internal/source/mysql"
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
