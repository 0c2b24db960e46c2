package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/demo"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/runner"
	"github.com/oncesync/oncesync/internal/store"
)

// TestSummaryTellsInDoubt: the summary says what became of every in-doubt
// record, not only how many were settled.
func TestSummaryTellsInDoubt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		run  store.Run
		want string
	}{
		{store.Run{ID: 1, State: store.RunSucceeded}, "in doubt 0,"},
		{store.Run{ID: 2, State: store.RunSucceeded, Counters: store.Counters{InDoubt: 750, Settled: 250}},
			"in doubt 750 (250 found already delivered, 500 not found there and written once)"},
		{store.Run{ID: 3, State: store.RunFailed, FailureCode: string(failure.RecordsInDoubt), Counters: store.Counters{InDoubt: 3}},
			"in doubt 3 (0 found already delivered, 3 left for a person to settle"},
		{store.Run{ID: 4, State: store.RunFailed, FailureCode: string(failure.DestinationUnavailable), Counters: store.Counters{InDoubt: 5, Settled: 1}},
			"4 not found there or not read back yet: written once by this run, or settled by the next"},
		// Stopped before it read its own lost writes back: nothing was
		// looked for, so nothing may be said "not found" (an independent
		// check, 2026-12-04: a second Ctrl-C).
		{store.Run{ID: 5, State: store.RunInterrupted, FailureCode: string(failure.Interrupted), Counters: store.Counters{Read: 100, InDoubt: 100}},
			"in doubt 100 (0 found already delivered, 100 not found there or not read back yet: written once by this run, or settled by the next)"},
	} {
		var b bytes.Buffer
		printSummary(&b, tc.run, time.Second, destination.CapVerify)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("summary %q lacks %q", b.String(), tc.want)
		}
	}
	// A webhook is never read back: its records in doubt are sent again
	// under their key, not "not found there" (an independent check,
	// 2026-12-05: the receiver had them all).
	var b bytes.Buffer
	printSummary(&b, store.Run{ID: 6, State: store.RunSucceeded, Counters: store.Counters{InDoubt: 10}}, time.Second, destination.CapIdempotent)
	if got := b.String(); !strings.Contains(got, "in doubt 10 (sent again with their Idempotency-Key: the destination drops those it already has; rows changed since go with their new values once settings.in_doubt_grace has passed)") || strings.Contains(got, "not found") {
		t.Errorf("webhook summary %q", got)
	}
	b.Reset()
	printSummary(&b, store.Run{ID: 7, State: store.RunFailed, Counters: store.Counters{InDoubt: 4}}, time.Second, destination.CapIdempotent)
	if got := b.String(); !strings.Contains(got, "in doubt 4 (sent again with their Idempotency-Key by this run or the next: ") {
		t.Errorf("failed webhook run's summary %q", got)
	}
}

// TestDemoReadsRunSummary: the demo's summary reads its in-doubt figures
// from worker 2's run line, which printSummary writes.
func TestDemoReadsRunSummary(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	printSummary(&b, store.Run{ID: 2, State: store.RunSucceeded, Counters: store.Counters{Read: 5000, Written: 4500, InDoubt: 1250, Settled: 500}}, time.Second, destination.CapVerify)
	want := "1250 records; 500 found at Brevo by reading it back (not written again), 750 not there (written once)"
	if got := demo.InDoubtSummary(b.String()); got != want {
		t.Fatalf("demo.InDoubtSummary(%q) = %q, want %q", b.String(), got, want)
	}
	b.Reset()
	printSummary(&b, store.Run{ID: 2, State: store.RunSucceeded, Counters: store.Counters{Read: 5000, Written: 5000}}, time.Second, destination.CapVerify)
	if got := demo.InDoubtSummary(b.String()); got != "none" {
		t.Fatalf("demo.InDoubtSummary(%q) = %q, want none", b.String(), got)
	}
}

// TestCursorLine: `oncesync check` says whether rows committed late are read
// again: ok with a lookback, a notice without.
func TestCursorLine(t *testing.T) {
	if got := cursorLine("postgres:db:5432/crm/people", "updated_at", "timestamptz", "cursor_lookback (5m0s)"); got !=
		"ok  source postgres:db:5432/crm/people: cursor_column updated_at is a timestamptz: rows committed late are read again within cursor_lookback (5m0s)" {
		t.Errorf("with a lookback: %q", got)
	}
	if got := cursorLine("mysql:db:3306/crm/people", "id", "BIGINT", ""); !strings.HasPrefix(got, "--  source mysql:db:3306/crm/people: cursor_column id is a BIGINT: no lookback applies") {
		t.Errorf("without: %q", got)
	}
	// A time without a zone (an independent check, 2026-12-04: a DATETIME
	// stamped in local time lost rows when summer time ended).
	for typ, want := range map[string]bool{"DATETIME": true, "timestamp": true, "TIMESTAMP": false, "timestamptz": false, "BIGINT": false} {
		if got := localTimeLine("s", "updated_at", typ); (got != "") != want || (want && !strings.Contains(got, "summer time")) {
			t.Errorf("localTimeLine(%s) = %q", typ, got)
		}
	}
}

// TestDebugLogHoldsTheFailureChain: docs/recovery.md#reading-a-failure sends
// a person to `--log-level debug` for a failure's whole chain; a command
// that failed before any run logged nothing at any level.
func TestDebugLogHoldsTheFailureChain(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "no-such-dir", "s.db")+`
syncs:
  - id: crm
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: http://127.0.0.1:1/hook}
    mapping: {fields: {email: email}}
`)
	for _, level := range []string{"debug", "warn"} {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), []string{"run", "--config", cfg, "--log-level", level, "crm"},
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		logged := strings.Contains(errOut.String(), "level=DEBUG msg=failure err=") && strings.Contains(errOut.String(), "no-such-dir")
		if code != ExitFailed || !strings.Contains(out.String(), "failed: store_unavailable: ") || logged != (level == "debug") {
			t.Errorf("--log-level %s: exit %d, chain logged %v\nstdout:\n%s\nstderr:\n%s", level, code, logged, out.String(), errOut.String())
		}
	}
}

// TestRemovalCountWithAllowRemovals: `run --dry-run --allow-removals` of a
// mirror whose removals exceed max_removals says the run will remove them;
// it said the run "would fail" (an independent check).
func TestRemovalCountWithAllowRemovals(t *testing.T) {
	t.Parallel()
	pv := runner.Preview{Removals: 185, RemovalsAllowed: 19, Delivered: 195}
	if got := removalText(pv, false); !strings.Contains(got, "would fail with mirror_removals_refused") {
		t.Errorf("without --allow-removals: %q", got)
	}
	got := removalText(pv, true)
	if strings.Contains(got, "would fail") || !strings.Contains(got, "--allow-removals lets this run remove") {
		t.Errorf("with --allow-removals: %q", got)
	}
}
