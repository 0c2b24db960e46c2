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
