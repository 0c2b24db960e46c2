package runner

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
)

// TestRegeneratedFileAfterAKill: a run killed part-way through a file
// whose export is then written again (rows in another order, one changed,
// one inserted in the middle) is resumed by the next run from the top of
// the new file: with an identity every row of the new file reaches the
// destination with its value, what the killed run delivered is not
// written again, and nobody has to reset the cursor. It failed with
// source_changed_during_run on every run until a person ran
// --reset-cursor (docs/guide.md#sources).
func TestRegeneratedFileAfterAKill(t *testing.T) {
	t.Parallel()
	tb := setup(t, 500, destination.CapVerify)
	tb.killMidPage(context.Background(), t, tb.params(t, "id"), 3)
	_, before, _ := tb.dest.stats()
	// The export again: reversed, row 7 changed, a new row in the middle.
	var b strings.Builder
	b.WriteString("id,email,first_name\n")
	for i := 500; i >= 1; i-- {
		name := fmt.Sprintf("N%d", i)
		if i == 7 {
			name = "Seven"
		}
		fmt.Fprintf(&b, "%d,c%05d@example.com,%s\n", i, i, name)
		if i == 250 {
			b.WriteString("501,c00501@example.com,New\n")
		}
	}
	if err := os.WriteFile(tb.csv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), tb.params(t, "id"))
	if err != nil || r.State != store.RunSucceeded {
		t.Fatalf("the run after the new export: %v %+v", err, r)
	}
	for i := 1; i <= 501; i++ {
		want := fmt.Sprintf("N%d", i)
		switch i {
		case 7:
			want = "Seven"
		case 501:
			want = "New"
		}
		if got := tb.dest.value(fmt.Sprintf("c%05d@example.com", i)); got != want {
			t.Fatalf("row %d: the destination has %v, want %s", i, got, want)
		}
	}
	// The killed run delivered pages 1 and 2 (rows 1-200) and wrote page 3;
	// the new run writes rows 201-500 less page 3's that landed, row 7
	// and row 501, and never a record twice.
	_, recs, dups := tb.dest.stats()
	if dups != 0 || recs-before != 300-100+2 {
		t.Fatalf("the run wrote %d new records (%d twice); want 202, none twice", recs-before, dups)
	}
	// Without an identity rows are known by their place, which a new
	// export moved: a person decides (docs/recovery.md#source_changed_during_run).
	tb2 := setup(t, 500, destination.CapVerify)
	tb2.killMidPage(context.Background(), t, tb2.params(t, ""), 3)
	if err := os.WriteFile(tb2.csv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Run(context.Background(), tb2.params(t, "")); failure.CodeOf(err) != failure.SourceChangedDuringRun {
		t.Fatalf("without an identity: %v; want source_changed_during_run", err)
	}
}

// TestRegeneratedFileAfterAKillInAPartition is TestRegeneratedFileAfterAKill
// for one partition of a partitioned sync (Params.Slice and Filter, as
// serve's partition jobs and a run by hand run it). Its first read at the
// saved cursor of the old export failed source_changed_during_run, on every
// run, until a person reset the partition's cursor: a stuck sync whose rows
// kept their old values. A partitioned run's coordinator pins the new
// export's snapshot, which the partition's writes are checked against
// (BeforeWrite), so starting the slice over is as safe as for the whole
// source.
func TestRegeneratedFileAfterAKillInAPartition(t *testing.T) {
	t.Parallel()
	tb := setup(t, 500, destination.CapVerify)
	part := func() Params {
		p := tb.params(t, "id")
		p.Slice = source.Slice{Identity: "id", K: 1, N: 2}
		p.Filter = func(rec source.Record) bool {
			id, err := strconv.Atoi(fmt.Sprint(rec.Fields["id"]))
			return err == nil && id%2 == 1
		}
		return p
	}
	tb.killMidPage(context.Background(), t, part(), 2)
	var b strings.Builder
	b.WriteString("id,email,first_name\n")
	for i := 500; i >= 1; i-- {
		fmt.Fprintf(&b, "%d,c%05d@example.com,Again%d\n", i, i, i)
	}
	if err := os.WriteFile(tb.csv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), part())
	if err != nil || r.State != store.RunSucceeded {
		t.Fatalf("the partition's run after the new export: %v %+v", err, r)
	}
	for i := 1; i <= 500; i += 2 {
		if got, want := tb.dest.value(fmt.Sprintf("c%05d@example.com", i)), fmt.Sprintf("Again%d", i); got != want {
			t.Fatalf("row %d: the destination has %v, want %s", i, got, want)
		}
	}
	if _, _, dups := tb.dest.stats(); dups != 0 {
		t.Fatalf("%d records written twice", dups)
	}
}
