package sourcetest

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
)

// LateCommit is one row committed late (docs/guide.md#rows-committed-late):
// Hold writes it in a transaction left open while Early commits another row
// at once and a pass reads; then the transaction commits.
type LateCommit struct {
	Name string
	// Hold writes the late row in a transaction it leaves open and returns
	// what commits it.
	Hold func(t *testing.T) (commit func())
	// Early commits the row EarlyID at once.
	Early   func(t *testing.T)
	EarlyID string
	// LateEmail is the e-mail Hold writes: the first pass must not read it,
	// the pass after the commit must read it exactly when Want.
	LateEmail string
	Want      bool
}

// CheckLateCommit runs lc's passes over a keyset source from start (pages
// of 10), then a pass without changes, which must not move the cursor.
func CheckLateCommit(t *testing.T, src source.Source, start string, lc LateCommit) {
	t.Helper()
	commit := lc.Hold(t)
	lc.Early(t)
	got, next := readPass(t, src, start)
	if ids := fields(got, "id"); !slices.Contains(ids, lc.EarlyID) || slices.Contains(fields(got, "email"), lc.LateEmail) {
		t.Fatalf("%s: the pass before the commit read %v", lc.Name, ids)
	}
	commit()
	got, next = readPass(t, src, next)
	if late := slices.Contains(fields(got, "email"), lc.LateEmail); late != lc.Want {
		t.Fatalf("%s: the pass after the commit read %v (emails %v); want the late row: %v", lc.Name, fields(got, "id"), fields(got, "email"), lc.Want)
	}
	if _, last := readPass(t, src, next); last != next {
		t.Fatalf("%s: a pass without changes moved the cursor from %s to %s", lc.Name, next, last)
	}
}

// readPass reads src from cursor to its end and returns the records and the
// last page's Next.
func readPass(t *testing.T, src source.Source, cursor string) ([]source.Record, string) {
	t.Helper()
	var recs []source.Record
	for pages := 0; pages < 10_000; pages++ {
		page, err := src.ReadPage(context.Background(), cursor, 10)
		if err != nil {
			t.Fatalf("ReadPage after %d records: %v", len(recs), err)
		}
		recs = append(recs, page.Records...)
		if page.End {
			return recs, page.Next
		}
		cursor = page.Next
	}
	t.Fatal("no End")
	return nil, ""
}

// fields returns the field col of every record, as fmt.Sprint prints it.
func fields(recs []source.Record, col string) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = fmt.Sprint(r.Fields[col])
	}
	return out
}

// LongPass is a row committed late while a pass goes on for longer than the
// lookback: Hold stamps the late row just after the rows committed so far
// and leaves its transaction open; the pass reads its first page, Later
// commits rows stamped more than the lookback after the late row (the pass
// kept reading rows written meanwhile, or it stopped and was resumed
// later), the pass reads them, then the late row commits.
type LongPass struct {
	Name      string
	Hold      func(t *testing.T) (commit func())
	Later     func(t *testing.T)
	LateEmail string
}

// CheckLongPass reads a pass of lp over src from start in pages of 2 (the
// first must not be the last), then checks that the pass after the late
// commit reads the late row: the lookback counts from where the pass
// began, not only from the last row it read.
func CheckLongPass(t *testing.T, src source.Source, start string, lp LongPass) {
	t.Helper()
	commit := lp.Hold(t)
	first, err := src.ReadPage(context.Background(), start, 2)
	if err != nil || first.End {
		t.Fatalf("%s: first page: End %v, err %v", lp.Name, first.End, err)
	}
	lp.Later(t)
	got, next := readPass(t, src, first.Next)
	if slices.Contains(fields(append(first.Records, got...), "email"), lp.LateEmail) {
		t.Fatalf("%s: the pass before the commit read the late row", lp.Name)
	}
	commit()
	got, next = readPass(t, src, next)
	if !slices.Contains(fields(got, "email"), lp.LateEmail) {
		t.Fatalf("%s: the pass after the commit read %v (emails %v), not the late row: it is lost", lp.Name, fields(got, "id"), fields(got, "email"))
	}
	if _, last := readPass(t, src, next); last != next {
		t.Fatalf("%s: a pass without changes moved the cursor from %s to %s", lp.Name, next, last)
	}
}

// CheckFutureStamp reads a pass over src, whose rows are id 1 (v "a",
// stamped before the database's clock) and id 2 (stamped hours ahead of
// it); change then sets row 1's v to "a2", stamped by the clock. The pass
// after must read row 1 with that value: a cursor that followed row 2 ahead
// of the clock left it below (docs/guide.md#rows-committed-late).
func CheckFutureStamp(t *testing.T, src source.Source, change func(t *testing.T)) {
	t.Helper()
	_, next := readPass(t, src, "")
	change(t)
	got, _ := readPass(t, src, next)
	var seen bool
	for _, r := range got {
		if fmt.Sprint(r.Fields["id"]) == "1" {
			seen = r.Fields["v"] == "a2"
		}
	}
	if !seen {
		t.Fatalf("the next pass read ids %v: the row changed after a row stamped in the future was lost", fields(got, "id"))
	}
}
