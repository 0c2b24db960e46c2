package runner

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/ledger"
)

// settledBy returns the sync's settled records by how, checking that each
// names a record of its own (identity set when the sync has one, no two
// alike) and was settled by run.
func settledBy(t *testing.T, tb *testBundle, run int64, identities bool) map[string]int {
	t.Helper()
	recs, err := ledger.Settled(context.Background(), tb.store, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	seen := map[string]bool{}
	for _, r := range recs {
		if r.State != ledger.RecordSettled || r.Reason == "" || r.RunID != run {
			t.Fatalf("settled record %+v: want state settled, a reason, run %d", r, run)
		}
		name := r.Key
		if identities {
			if r.Identity == "" {
				t.Fatalf("settled record %+v names no identity", r)
			}
			name = r.Identity
		}
		if seen[name] {
			t.Fatalf("record %s settled twice in the list", name)
		}
		seen[name] = true
		for how, reason := range map[string]string{
			ledger.SettledLanded: "it had landed", ledger.SettledResent: "it was not there",
			ledger.SettledIdempotent: "same idempotency key",
		} {
			if strings.Contains(r.Reason, reason) {
				out[how]++
			}
		}
	}
	return out
}

// TestSettledAreListed: every write in doubt a run settles is listed with
// the record's identity and how it was settled
// (docs/guide.md#the-ledger-and-its-retention), not only counted: an
// earlier run's page read back and found landed, answers lost in this run
// read back, writes not found and sent again, and resends under the same
// idempotency key.
func TestSettledAreListed(t *testing.T) {
	t.Parallel()
	t.Run("a killed run's page found landed", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, 500, destination.CapVerify)
		tb.killMidPage(context.Background(), t, tb.params(t, "id"), 3)
		r, err := Run(context.Background(), tb.params(t, "id"))
		if err != nil || r.Settled != 100 {
			t.Fatalf("%v %+v", err, r)
		}
		if got := settledBy(t, tb, r.ID, true); got[ledger.SettledLanded] != 100 || len(got) != 1 {
			t.Fatalf("settled by how: %v, want 100 landed", got)
		}
	})
	t.Run("answers lost in the run, read back", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, 500, destination.CapVerify)
		tb.dest.lose = 2
		r, err := Run(context.Background(), tb.params(t, "id"))
		if err != nil || r.Settled != 200 {
			t.Fatalf("%v %+v", err, r)
		}
		if got := settledBy(t, tb, r.ID, true); got[ledger.SettledLanded] != 200 || len(got) != 1 {
			t.Fatalf("settled by how: %v, want 200 landed", got)
		}
	})
	t.Run("not found, sent again", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, 100, destination.CapVerify)
		tb.dest.cut = []int{0} // nothing applied, answer lost
		p := tb.params(t, "id")
		p.InDoubtGrace = 50 * time.Millisecond
		r, err := Run(context.Background(), p)
		if err != nil || r.InDoubt != 100 || r.Written != 100 {
			t.Fatalf("%v %+v", err, r)
		}
		if got := settledBy(t, tb, r.ID, true); got[ledger.SettledResent] != 100 || len(got) != 1 {
			t.Fatalf("settled by how: %v, want 100 resent", got)
		}
	})
	t.Run("an earlier run's write not found, sent again", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, 100, destination.CapVerify)
		tb.dieWithWriteInDoubt(t)
		p := tb.params(t, "id")
		p.Leases = freeFor{Manager: p.Leases, d: time.Hour}
		p.InDoubtGrace = time.Hour
		r, err := Run(context.Background(), p)
		if err != nil || r.InDoubt != 100 || r.Written != 100 {
			t.Fatalf("%v %+v", err, r)
		}
		if got := settledBy(t, tb, r.ID, true); got[ledger.SettledResent] != 100 || len(got) != 1 {
			t.Fatalf("settled by how: %v, want 100 resent", got)
		}
	})
	t.Run("idempotent resends", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, 500, destination.CapIdempotent)
		tb.killMidPage(context.Background(), t, tb.params(t, ""), 2)
		r, err := Run(context.Background(), tb.params(t, ""))
		if err != nil || r.InDoubt != 100 {
			t.Fatalf("%v %+v", err, r)
		}
		if got := settledBy(t, tb, r.ID, false); got[ledger.SettledIdempotent] != 100 || len(got) != 1 {
			t.Fatalf("settled by how: %v, want 100 resent under their idempotency keys", got)
		}
	})
	t.Run("nothing in doubt, nothing listed", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, 300, destination.CapVerify)
		r, err := Run(context.Background(), tb.params(t, "id"))
		if err != nil {
			t.Fatal(err)
		}
		if got := settledBy(t, tb, r.ID, true); len(got) != 0 {
			t.Fatalf("settled by how: %v, want none", got)
		}
	})
}
