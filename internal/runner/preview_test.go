package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/store"
)

// TestPreviewSettling: right after a run that left its imports accepted
// (the destination still processing them), a dry run counts those records
// as settling, not as creates: the next run asks the destination and sends
// none of them. With an identity, a row changed since is a create (its new
// value was never sent). A positional slot is a place in the file (its
// cursor sums every byte before it), so that file is left as it was.
func TestPreviewSettling(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		identity   string
		edit       bool
		settleOne  string // the first record named settling
		createSeen string // the records named created
	}{
		{identity: "id", edit: true, settleOne: "1", createSeen: "7"},
		{identity: "", settleOne: "record 1 of its page"},
	} {
		t.Run("identity="+tc.identity, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, 300, destination.CapVerify)
			tb.dest.async, tb.dest.pollsToDone = true, 1_000_000
			p := tb.params(t, tc.identity)
			p.PollInterval, p.AcceptedWait = time.Millisecond, 20*time.Millisecond
			if _, err := Run(context.Background(), p); err != nil {
				t.Fatal(err)
			}
			var creates int64
			if tc.edit {
				csv, err := os.ReadFile(tb.csv)
				if err != nil {
					t.Fatal(err)
				}
				changed := strings.Replace(string(csv), "7,c00007@example.com,N7\n", "7,c00007@example.com,Changed7\n", 1)
				if err := os.WriteFile(tb.csv, []byte(changed), 0o600); err != nil {
					t.Fatal(err)
				}
				creates = 1
			}

			pp := tb.params(t, tc.identity)
			pv, err := RunPreview(context.Background(), PreviewParams{Store: tb.store, Source: pp.Source, Sync: pp.Sync, Sample: 3})
			if err != nil {
				t.Fatal(err)
			}
			if pv.Read != 300 || pv.Settling != 300-creates || pv.Creates != creates || pv.Updates != 0 || pv.Unchanged != 0 {
				t.Fatalf("preview = %+v, want %d settling and %d create of 300", pv, 300-creates, creates)
			}
			if strings.Join(pv.CreateSample, ",") != tc.createSeen || len(pv.SettlingSample) != 3 || pv.SettlingSample[0] != tc.settleOne {
				t.Fatalf("samples: create %v, settling %v", pv.CreateSample, pv.SettlingSample)
			}

			// The run that follows does what the preview said: it settles
			// the accepted records (the destination finished them) and
			// sends the changed row only.
			tb.dest.mu.Lock()
			tb.dest.pollsToDone = 0
			tb.dest.mu.Unlock()
			callsBefore, _, _ := tb.dest.stats()
			r, err := Run(context.Background(), tb.params(t, tc.identity))
			if err != nil {
				t.Fatal(err)
			}
			calls, recs, dups := tb.dest.stats()
			if r.Written != 300 || int64(calls-callsBefore) != creates || dups != 0 || int64(recs) != 300+creates {
				t.Fatalf("the run after the preview: %+v; %d calls, %d records at the destination, %d duplicates", r, calls-callsBefore, recs, dups)
			}
		})
	}
}

// TestPreviewCountsWhatTheDestinationWouldRefuse: records the destination
// would reject before any write are counted as rejected, named with the
// reason, and not as creates; the run that follows rejects exactly those.
func TestPreviewCountsWhatTheDestinationWouldRefuse(t *testing.T) {
	t.Parallel()
	tb := setup(t, 50, destination.CapVerify)
	refused := map[string]bool{"c00003@example.com": true, "c00040@example.com": true}
	tb.dest.reject = func(r destination.Record) bool { return refused[fmt.Sprint(r.Data["email"])] }
	p := tb.params(t, "id")
	pv, err := RunPreview(context.Background(), PreviewParams{Store: tb.store, Source: p.Source, Sync: p.Sync, Judge: tb.dest})
	if err != nil {
		t.Fatal(err)
	}
	if pv.Read != 50 || pv.Creates != 48 || pv.Rejected != 2 || strings.Join(pv.RejectedSample, ";") != "3: refused by the test;40: refused by the test" {
		t.Fatalf("preview = %+v, want 48 creates and 2 rejected (3, 40)", pv)
	}
	r, err := Run(context.Background(), tb.params(t, "id"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Written != 48 || r.Rejected != 2 {
		t.Fatalf("the run after the preview: %+v, want 48 written and 2 rejected", r)
	}
	// Without a judge the same preview counts them as creates.
	pv, err = RunPreview(context.Background(), PreviewParams{Store: tb.store, Source: p.Source, Sync: p.Sync})
	if err != nil || pv.Creates != 2 || pv.Rejected != 0 {
		t.Fatalf("preview without a judge = %+v, %v; want the 2 rejected as creates", pv, err)
	}
}

// TestResendWritesEveryRecordOnce: after the destination lost its data, an
// ordinary run sends nothing (the ledger says the destination holds every
// value); a Resend run, previewed first, writes each record once more under
// a new key, and the run after it sends nothing again.
func TestResendWritesEveryRecordOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, 40, destination.CapVerify)
	ctx := context.Background()
	if r, err := Run(ctx, tb.params(t, "id")); err != nil || r.Written != 40 {
		t.Fatalf("first run: %+v, %v", r, err)
	}
	tb.dest.mu.Lock()
	clear(tb.dest.values) // the destination lost every contact
	tb.dest.mu.Unlock()
	if r, err := Run(ctx, tb.params(t, "id")); err != nil || r.Written != 0 {
		t.Fatalf("an ordinary run: %+v, %v; want nothing written", r, err)
	}

	p := tb.params(t, "id")
	pv, err := RunPreview(ctx, PreviewParams{Store: tb.store, Source: p.Source, Sync: p.Sync, Resend: true})
	if err != nil || pv.Read != 40 || pv.Updates != 40 || pv.Creates != 0 || pv.Unchanged != 0 {
		t.Fatalf("resend preview = %+v, %v; want 40 updates", pv, err)
	}
	p = tb.params(t, "id")
	p.Resend = true
	r, err := Run(ctx, p)
	if err != nil || r.Written != 40 || r.Replayed != 0 {
		t.Fatalf("resend run: %+v, %v; want 40 written", r, err)
	}
	_, recs, dups := tb.dest.stats()
	tb.dest.mu.Lock()
	held := len(tb.dest.values)
	tb.dest.mu.Unlock()
	if recs != 80 || dups != 0 || held != 40 {
		t.Fatalf("after the resend: %d keys written, %d written twice, %d contacts held; want 80, 0, 40", recs, dups, held)
	}
	if r, err := Run(ctx, tb.params(t, "id")); err != nil || r.Written != 0 || r.Replayed != 40 {
		t.Fatalf("the run after the resend: %+v, %v; want nothing written", r, err)
	}
}

// A resend that is interrupted and run again with the same ResendBefore (a
// queued resend's retry) writes only what the first attempt did not: every
// record once, none twice.
func TestResendResumesWhereItStopped(t *testing.T) {
	t.Parallel()
	tb := setup(t, 40, destination.CapVerify)
	ctx := context.Background()
	p := tb.params(t, "id")
	p.Sync.PageSize = 10
	if r, err := Run(ctx, p); err != nil || r.Written != 40 {
		t.Fatalf("first run: %+v, %v", r, err)
	}
	tb.dest.mu.Lock()
	clear(tb.dest.values) // the destination lost every contact
	tb.dest.mu.Unlock()
	runs, err := tb.store.ListRuns(ctx, "s1", 1)
	if err != nil || len(runs) != 1 {
		t.Fatalf("runs: %v, %v", runs, err)
	}
	before := runs[0].ID + 1 // what a resend asked for now carries

	drain := make(chan struct{})
	var once sync.Once
	tb.dest.onWrite = func([]destination.Record) func() {
		return func() { once.Do(func() { close(drain) }) } // stop after the first page
	}
	p = tb.params(t, "id")
	p.Sync.PageSize = 10
	p.Resend, p.ResendBefore, p.Drain = true, before, drain
	first, err := Run(ctx, p) // err says interrupted
	if first.State != store.RunInterrupted || first.Written == 0 || first.Written >= 40 {
		t.Fatalf("interrupted resend: %+v, %v; want interrupted with part written", first, err)
	}
	tb.dest.onWrite = nil

	p = tb.params(t, "id")
	p.Sync.PageSize = 10
	p.Resend, p.ResendBefore = true, before
	second, err := Run(ctx, p)
	if err != nil || first.Written+second.Written != 40 || second.Replayed != first.Written {
		t.Fatalf("resumed resend: %+v, %v; want the %d records the first attempt did not write", second, err, 40-first.Written)
	}
	_, recs, dups := tb.dest.stats()
	tb.dest.mu.Lock()
	held := len(tb.dest.values)
	tb.dest.mu.Unlock()
	if recs != 80 || dups != 0 || held != 40 {
		t.Fatalf("after the resend: %d keys written, %d written twice, %d contacts held; want 80, 0, 40", recs, dups, held)
	}

	// A new resend (a later request) writes everything again.
	p = tb.params(t, "id")
	p.Sync.PageSize = 10
	p.Resend = true
	if r, err := Run(ctx, p); err != nil || r.Written != 40 {
		t.Fatalf("a new resend: %+v, %v; want 40 written", r, err)
	}
}

// TestRemovalSampleNamesARowOnce: a row that left two handles is named
// once in a dry run's sample of removals.
func TestRemovalSampleNamesARowOnce(t *testing.T) {
	t.Parallel()
	gs := []gone{{identity: "11"}, {identity: "7", moved: true}, {identity: "7"}, {identity: "11", moved: true}, {identity: "8"}}
	if got := fmt.Sprint(removalSample(gs, 10)); got != "[7 8 11]" {
		t.Fatalf("sample %s, want [7 8 11]", got)
	}
}
