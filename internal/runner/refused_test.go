package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/store"
)

// setupTwoRefused is a sync of 20 records whose first run the destination
// refused records 3 and 7 of.
func setupTwoRefused(t *testing.T) *testBundle {
	t.Helper()
	tb := setup(t, 20, destination.CapVerify)
	refused := map[string]bool{"c00003@example.com": true, "c00007@example.com": true}
	tb.dest.reject = func(r destination.Record) bool { return refused[fmt.Sprint(r.Data["email"])] }
	if r, err := Run(context.Background(), tb.params(t, "id")); r.Rejected != 2 {
		t.Fatalf("first run: %+v, %v; want 2 rejected", r, err)
	}
	return tb
}

// listedRefused is the refused records' reasons by identity, as every list
// shows them (ledger.ListRefused), each listed rejected.
func listedRefused(t *testing.T, tb *testBundle) map[string]string {
	t.Helper()
	es, err := ledger.ListRefused(context.Background(), tb.store, "s1", 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range es {
		r := ledger.RecordOf(e)
		if r.State != ledger.RecordRejected {
			t.Errorf("listed %+v, want rejected", r)
		}
		out[r.Identity] = r.Reason
	}
	return out
}

// TestRefusedRecordsStayListedWhileRetried: a run sending refused records
// again claims them pending; while they are on the wire (or after that run
// died before recording the answer) they are still listed as refused, by
// identity, with a reason saying they are being sent again. They vanished
// from every list and count until the run's answer was recorded, and until
// the next run if that one died.
func TestRefusedRecordsStayListedWhileRetried(t *testing.T) {
	t.Parallel()
	tb := setupTwoRefused(t)
	listed := func() map[string]string { return listedRefused(t, tb) }
	if got := listed(); len(got) != 2 || got["3"] == "" || got["7"] == "" {
		t.Fatalf("after the first run: %v, want 3 and 7", got)
	}
	// The next run sends them again; while they are on the wire they are
	// listed, being sent again.
	var during map[string]string
	tb.dest.onWrite = func([]destination.Record) func() {
		if during == nil {
			during = listed()
		}
		return func() {}
	}
	r, err := Run(context.Background(), tb.params(t, "id"))
	if err != nil && r.Rejected != 2 {
		t.Fatalf("second run: %+v, %v", r, err)
	}
	if len(during) != 2 || !strings.Contains(during["3"], "is trying it again") || !strings.Contains(during["7"], "is trying it again") {
		t.Fatalf("while retried: %v, want 3 and 7 listed as being sent again", during)
	}
	// Refused again: listed with the destination's message, and no pending
	// entry is left to list twice.
	after := listed()
	if len(after) != 2 || strings.Contains(after["3"], "trying it again") {
		t.Fatalf("after the second run: %v", after)
	}
	if p, err := tb.store.LedgerList(context.Background(), "s1", store.LedgerPending, 0); err != nil || len(p) != 0 {
		t.Fatalf("pending entries left: %d (%v)", len(p), err)
	}
}

// TestRefusedRecordsStayListedWhileProcessed: refused records sent again in
// an import the destination accepted but had not processed when the run
// ended stay listed as refused, being sent again. Their accepted entries
// left every list until a later run learned the import's outcome (an
// independent check, 2026-12-06: "0 rejected" on the sync page while Brevo
// went on to skip the row again).
func TestRefusedRecordsStayListedWhileProcessed(t *testing.T) {
	t.Parallel()
	tb := setupTwoRefused(t)
	tb.dest.mu.Lock()
	tb.dest.reject, tb.dest.async, tb.dest.pollsToDone = nil, true, 1_000_000
	tb.dest.mu.Unlock()
	p := tb.params(t, "id")
	p.PollInterval, p.AcceptedWait = time.Millisecond, 20*time.Millisecond
	if _, err := Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if a, err := tb.store.LedgerList(context.Background(), "s1", store.LedgerAccepted, 0); err != nil || len(a) != 2 {
		t.Fatalf("accepted entries: %d (%v), want the 2 sent again", len(a), err)
	}
	got := listedRefused(t, tb)
	if len(got) != 2 || !strings.Contains(got["3"], "is trying it again") || !strings.Contains(got["7"], "is trying it again") {
		t.Fatalf("while the destination processes them: %v, want 3 and 7 listed as being sent again", got)
	}
}

// TestRefusalsOfOlderValuesEndWithTheDelivery: a row refused, changed while
// refused, and then delivered with its current values is no longer listed
// as rejected: the refusals of the values it held before are released with
// the delivery, and with a refusal of its new values (they stayed listed until the prune, 7 days by default,
// sending a person to fix records already delivered).
func TestRefusalsOfOlderValuesEndWithTheDelivery(t *testing.T) {
	t.Parallel()
	tb := setup(t, 10, destination.CapIdempotent)
	refusing := true
	tb.dest.reject = func(r destination.Record) bool {
		return refusing && fmt.Sprint(r.Data["email"]) == "c00003@example.com"
	}
	if r, err := Run(context.Background(), tb.params(t, "id")); r.Rejected != 1 {
		t.Fatalf("first run: %+v, %v; want 1 rejected", r, err)
	}
	var b strings.Builder
	b.WriteString("id,email,first_name\n")
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "%d,c%05d@example.com,M%d\n", i, i, i) // every first name changes, row 3's too, while it is refused
	}
	if err := os.WriteFile(tb.csv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	if r, err := Run(context.Background(), tb.params(t, "id")); r.Rejected != 1 {
		t.Fatalf("second run: %+v, %v; want 1 rejected", r, err)
	}
	// Refused again with its new values: listed once, with those (the
	// refusal of the values it no longer holds was listed beside it).
	if es, err := ledger.ListRefused(context.Background(), tb.store, "s1", 0); err != nil || len(es) != 1 || es[0].RunID != 2 {
		t.Fatalf("listed as refused after a second refusal of new values: %+v (%v), want the second run's only", es, err)
	}
	refusing = false
	if r, err := Run(context.Background(), tb.params(t, "id")); err != nil || r.Written != 1 {
		t.Fatalf("third run: %+v, %v; want row 3 written", r, err)
	}
	if got := fmt.Sprint(tb.dest.value("c00003@example.com")); got != "M3" {
		t.Fatalf("row 3 at the destination: %s, want M3", got)
	}
	es, err := ledger.ListRefused(context.Background(), tb.store, "s1", 0)
	if err != nil || len(es) != 0 {
		t.Fatalf("still listed as refused after the delivery: %d (%v)", len(es), err)
	}
}
