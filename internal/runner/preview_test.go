package runner

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
)

// TestPreviewSettling: right after a run that left its imports accepted
// (the destination still processing them), a dry run counts those records
// as settling, not as creates: the next run asks the destination and sends
// none of them. A row changed since is a create (its new value was never
// sent).
func TestPreviewSettling(t *testing.T) {
	t.Parallel()
	tb := setup(t, 300, destination.CapVerify)
	tb.dest.async, tb.dest.pollsToDone = true, 1_000_000
	p := tb.params(t, "id")
	p.PollInterval, p.AcceptedWait = time.Millisecond, 20*time.Millisecond
	if _, err := Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	csv, err := os.ReadFile(tb.csv)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(csv), "7,c00007@example.com,N7\n", "7,c00007@example.com,Changed7\n", 1)
	if err := os.WriteFile(tb.csv, []byte(changed), 0o600); err != nil {
		t.Fatal(err)
	}

	pp := tb.params(t, "id")
	pv, err := RunPreview(context.Background(), PreviewParams{Store: tb.store, Source: pp.Source, Sync: pp.Sync, Sample: 3})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Read != 300 || pv.Settling != 299 || pv.Creates != 1 || pv.Updates != 0 || pv.Unchanged != 0 {
		t.Fatalf("preview = %+v, want 299 settling and 1 create of 300", pv)
	}
	if strings.Join(pv.CreateSample, ",") != "7" || len(pv.SettlingSample) != 3 || pv.SettlingSample[0] != "1" {
		t.Fatalf("samples: create %v, settling %v", pv.CreateSample, pv.SettlingSample)
	}

	// The run that follows does what the preview said: it settles the 299
	// (the destination finished them) and sends the changed row only.
	tb.dest.mu.Lock()
	tb.dest.pollsToDone = 0
	tb.dest.mu.Unlock()
	callsBefore, _, _ := tb.dest.stats()
	r, err := Run(context.Background(), tb.params(t, "id"))
	if err != nil {
		t.Fatal(err)
	}
	calls, recs, dups := tb.dest.stats()
	if r.Written != 300 || calls-callsBefore != 1 || dups != 0 || recs != 301 {
		t.Fatalf("the run after the preview: %+v; %d calls, %d records at the destination, %d duplicates", r, calls-callsBefore, recs, dups)
	}
}
