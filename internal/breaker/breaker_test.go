package breaker

import (
	"context"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

type recorder struct {
	mu     sync.Mutex
	alerts []alert.Alert
}

func (r *recorder) Notify(ctx context.Context, a alert.Alert) (alert.Alert, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.alerts = append(r.alerts, a)
	return a, nil
}

type testBundle struct {
	store   store.Store
	clock   *clock.Fake
	alerts  *recorder
	breaker *Breaker
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(context.Background(), sqlite.OpenParams{Path: filepath.Join(t.TempDir(), "b.db"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.PutSync(context.Background(), store.PutSyncParams{ID: "s", Workspace: "w", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	rec := &recorder{}
	return &testBundle{store: st, clock: clk, alerts: rec, breaker: New(Params{Store: st, Notifier: rec})}
}

// record stores a finished run and evaluates the breaker if it failed.
func (tb *testBundle) record(t *testing.T, state store.RunState, code failure.Code) *Trip {
	t.Helper()
	ctx := context.Background()
	tb.clock.Advance(time.Minute)
	var r store.Run
	var err error
	if code == failure.InvalidSyncDefinition {
		// An enqueue-time failure: recorded as failed at once (docs/guide.md#running-on-a-schedule-serve-and-worker).
		r, err = tb.store.InsertRun(ctx, store.InsertRunParams{SyncID: "s", State: store.RunFailed, FailureCode: string(code), Detail: "bad definition"})
	} else {
		r, err = tb.store.InsertRun(ctx, store.InsertRunParams{SyncID: "s", State: store.RunRunning})
		if err == nil {
			r.State, r.FailureCode = state, string(code)
			err = tb.store.UpdateRun(ctx, r)
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if state != store.RunFailed {
		return nil
	}
	trip, err := tb.breaker.AfterFailure(ctx, "s", 5)
	if err != nil {
		t.Fatal(err)
	}
	return trip
}

func (tb *testBundle) state(t *testing.T) store.Sync {
	t.Helper()
	s, err := tb.store.GetSync(context.Background(), "s")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestFiveFailuresTrip(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for i := 0; i < 4; i++ {
		if trip := tb.record(t, store.RunFailed, failure.SourceQueryInvalid); trip != nil {
			t.Fatalf("tripped after %d failures", i+1)
		}
	}
	trip := tb.record(t, store.RunFailed, failure.InvalidSyncDefinition) // the 5th fails at enqueue
	if trip == nil || trip.LastCode != string(failure.InvalidSyncDefinition) || trip.Failures != 5 {
		t.Fatalf("five failures did not trip: %+v", trip)
	}
	s := tb.state(t)
	if s.State != store.SyncPaused || s.PauseReason != "breaker" {
		t.Fatalf("sync %+v", s)
	}
	if !strings.Contains(s.PausedWhy, "failure streak reached 5") {
		t.Errorf("pause why %q does not say the streak", s.PausedWhy)
	}
	audit, _ := tb.store.ListAudit(context.Background(), "s", 10)
	var found bool
	for _, a := range audit {
		found = found || a.Action == string(failure.CircuitBreakerTripped)
	}
	if !found {
		t.Fatalf("no circuit_breaker_tripped audit entry: %+v", audit)
	}
	if len(tb.alerts.alerts) != 1 || tb.alerts.alerts[0].Severity != alert.SeverityCritical ||
		tb.alerts.alerts[0].Kind != alert.KindCircuitBreakerTripped || tb.alerts.alerts[0].Owner != failure.OwnerYou {
		t.Fatalf("alerts %+v", tb.alerts.alerts)
	}
	if next := tb.alerts.alerts[0].NextStep; !strings.Contains(next, "oncesync resume --config FILE s ") {
		t.Errorf("next step %q does not name the sync", next)
	}
	// A sixth failure on the paused sync raises nothing more.
	if trip := tb.record(t, store.RunFailed, failure.DestinationAuth); trip != nil || len(tb.alerts.alerts) != 1 {
		t.Fatal("a paused sync tripped again")
	}
}

// operatorCodes are the failures docs/guide.md#guardrails says the operator owns.
var operatorCodes = []failure.Code{
	failure.StoreUnavailable, failure.LeaseLost, failure.DestinationUnavailable,
	failure.DestinationRateLimited, failure.Interrupted,
}

// TestOutageDoesNotPause is issue 13's finding 8: Redis or Brevo down for a
// while makes every run of a sync fail with an operator's code; that must
// not pause the sync (a person would have to resume every sync one by one).
// The operator is alerted once, when the threshold's worth piled up.
func TestOutageDoesNotPause(t *testing.T) {
	t.Parallel()
	for _, code := range operatorCodes {
		t.Run(string(code), func(t *testing.T) {
			t.Parallel()
			tb := setup(t)
			for i := 0; i < 12; i++ {
				if trip := tb.record(t, store.RunFailed, code); trip != nil {
					t.Fatalf("%s failure %d tripped the breaker", code, i+1)
				}
				if i == 4 {
					// Evaluating the same failure again (recovery does) repeats
					// the alert with the same id, which receivers deduplicate.
					if _, err := tb.breaker.AfterFailure(context.Background(), "s", 5); err != nil {
						t.Fatal(err)
					}
				}
			}
			if s := tb.state(t); s.State != store.SyncActive {
				t.Fatalf("sync paused by an outage: %+v", s)
			}
			if len(tb.alerts.alerts) != 2 || tb.alerts.alerts[0].ID != tb.alerts.alerts[1].ID {
				t.Fatalf("alerts %+v, want one operator alert (sent twice with one id)", tb.alerts.alerts)
			}
			a := tb.alerts.alerts[0]
			if a.Kind != "operator_failures" || a.Owner != failure.OwnerOperator || a.Severity != alert.SeverityWarning ||
				!strings.Contains(a.WhatHappened, string(code)) || len(a.ID) != 32 {
				t.Fatalf("operator alert %+v", a)
			}
			tb.alerts.alerts = nil
			// A success re-arms the operator alert.
			tb.record(t, store.RunSucceeded, "")
			for i := 0; i < 5; i++ {
				tb.record(t, store.RunFailed, code)
			}
			if len(tb.alerts.alerts) != 1 || tb.alerts.alerts[0].ID == a.ID {
				t.Fatalf("after a success and 5 more failures: %+v, want one new alert", tb.alerts.alerts)
			}
		})
	}
}

// TestOperatorFailuresNeitherCountNorReset: failures the operator owns
// between the owner's failures do not reset the streak either.
func TestOperatorFailuresNeitherCountNorReset(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	codes := []failure.Code{
		failure.DestinationAuth, failure.DestinationUnavailable, failure.DestinationUnavailable,
		failure.DestinationAuth, failure.StoreUnavailable, failure.SourceUnavailable, failure.SourceQueryInvalid,
		failure.LeaseLost, failure.DestinationRateLimited, failure.DestinationAuth,
	}
	for i, c := range codes {
		if trip := tb.record(t, store.RunFailed, c); trip != nil {
			t.Fatalf("tripped at failure %d (%s) with 4 counted", i+1, c)
		}
	}
	tb.record(t, store.RunInterrupted, failure.Interrupted)
	trip := tb.record(t, store.RunFailed, failure.DestinationRejectedRecords)
	if trip == nil || trip.Failures != 5 || trip.LastCode != string(failure.DestinationRejectedRecords) {
		t.Fatalf("the 5th counted failure did not trip: %+v", trip)
	}
}

// TestStreakCounts: Read reports both owners' failures since the last
// success and the sync's changed_at, the figures status and the sync page
// show.
func TestStreakCounts(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.record(t, store.RunFailed, failure.DestinationAuth) // before the resume below
	tb.clock.Advance(time.Minute)
	if _, err := tb.store.SetSyncState(context.Background(), store.SetSyncStateParams{ID: "s", State: store.SyncActive, By: "ada", Why: "fixed"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []failure.Code{failure.DestinationAuth, failure.LeaseLost, failure.SourceQueryInvalid, failure.SourceUnavailable} {
		tb.record(t, store.RunFailed, c)
	}
	tb.record(t, store.RunSkipped, failure.AlreadyRunning)
	tb.record(t, store.RunInterrupted, failure.Interrupted)
	_, k, err := Read(context.Background(), tb.store, "s", 0)
	if err != nil {
		t.Fatal(err)
	}
	if k.Failures != 2 || k.Operator != 2 || !k.Ended || k.Last.FailureCode != string(failure.SourceQueryInvalid) ||
		k.LastOperator.FailureCode != string(failure.SourceUnavailable) || k.Newest.State != store.RunInterrupted {
		t.Fatalf("streak %+v, want 2 counted and 2 operator failures since the resume", k)
	}
}

// TestStreakReadsPastTheFirstWindow: a long outage between the owner's
// failures does not hide the older ones from the breaker.
func TestStreakReadsPastTheFirstWindow(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for i := 0; i < 3; i++ {
		tb.record(t, store.RunFailed, failure.DestinationAuth)
	}
	for i := 0; i < firstRead+10; i++ {
		tb.record(t, store.RunFailed, failure.DestinationUnavailable)
	}
	tb.record(t, store.RunFailed, failure.DestinationAuth)
	if trip := tb.record(t, store.RunFailed, failure.DestinationAuth); trip == nil {
		t.Fatal("five counted failures around a long outage did not trip")
	}
}

func TestSuccessResets(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for i := 0; i < 4; i++ {
		tb.record(t, store.RunFailed, failure.DestinationAuth)
	}
	tb.record(t, store.RunSucceeded, "")
	for i := 0; i < 4; i++ {
		if trip := tb.record(t, store.RunFailed, failure.DestinationAuth); trip != nil {
			t.Fatal("the streak survived a success")
		}
	}
	// Skipped runs neither count nor reset.
	tb.record(t, store.RunSkipped, failure.AlreadyRunning)
	if trip := tb.record(t, store.RunFailed, failure.DestinationAuth); trip == nil {
		t.Fatal("five failures after the success did not trip")
	}
}

func TestResumeRearms(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	for i := 0; i < 5; i++ {
		tb.record(t, store.RunFailed, failure.DestinationAuth)
	}
	if tb.state(t).State != store.SyncPaused {
		t.Fatal("not paused")
	}
	tb.clock.Advance(time.Hour)
	if _, err := tb.store.SetSyncState(context.Background(), store.SetSyncStateParams{
		ID: "s", State: store.SyncActive, By: "ada", Why: "rotated the API key",
	}); err != nil {
		t.Fatal(err)
	}
	if trip := tb.record(t, store.RunFailed, failure.DestinationAuth); trip != nil {
		t.Fatal("one failure after resume re-tripped on the old streak")
	}
	if tb.state(t).State != store.SyncActive {
		t.Fatal("paused again")
	}
}

func TestPerSyncThreshold(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	tb.record(t, store.RunFailed, failure.SourceQueryInvalid)
	tb.clock.Advance(time.Minute)
	trip, err := tb.breaker.AfterFailure(context.Background(), "s", 1)
	if err != nil || trip == nil {
		t.Fatalf("threshold 1 did not trip: %v", err)
	}
}

// TestConcurrentEvaluationsTripOnce: several processes evaluate the same
// streak at once (a worker after its run, recovery closing another, the
// scheduler's enqueue-time failure): the sync is paused, audited and alerted
// once, not once per evaluation.
func TestConcurrentEvaluationsTripOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	for range 5 {
		tb.clock.Advance(time.Minute)
		if _, err := tb.store.InsertRun(ctx, store.InsertRunParams{SyncID: "s", State: store.RunFailed,
			FailureCode: string(failure.DestinationAuth), Detail: "401"}); err != nil {
			t.Fatal(err)
		}
	}
	var wg sync.WaitGroup
	trips := make(chan *Trip, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			trip, err := tb.breaker.AfterFailure(ctx, "s", 5)
			if err != nil {
				t.Error(err)
			}
			trips <- trip
		}()
	}
	wg.Wait()
	close(trips)
	n := 0
	for trip := range trips {
		if trip != nil {
			n++
		}
	}
	audit, _ := tb.store.ListAudit(ctx, "s", 100)
	var trippedEntries int
	for _, a := range audit {
		if a.Action == string(failure.CircuitBreakerTripped) {
			trippedEntries++
		}
	}
	if n != 1 || len(tb.alerts.alerts) != 1 || trippedEntries != 1 {
		t.Errorf("%d trips, %d alerts, %d audit entries, want one of each", n, len(tb.alerts.alerts), trippedEntries)
	}
}

// TestOperatorAlertSurvivesAMissedEvaluation: the operator's alert fired only
// on the evaluation of exactly breaker_failures operator failures, so when
// that one evaluation did not happen (the process died after recording the
// run, the store flapped while reading the streak) the outage was never
// told. A later evaluation of the same streak sends it, once, and says so in
// the audit log.
func TestOperatorAlertSurvivesAMissedEvaluation(t *testing.T) {
	t.Parallel()
	tb := setup(t)
	ctx := context.Background()
	for range 5 { // recorded, never evaluated
		tb.clock.Advance(time.Minute)
		if _, err := tb.store.InsertRun(ctx, store.InsertRunParams{SyncID: "s", State: store.RunFailed,
			FailureCode: string(failure.DestinationUnavailable), Detail: "503"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		tb.record(t, store.RunFailed, failure.DestinationUnavailable)
	}
	if len(tb.alerts.alerts) != 1 || tb.alerts.alerts[0].Kind != alert.KindOperatorFailures {
		t.Fatalf("alerts %+v, want one operator_failures alert", tb.alerts.alerts)
	}
	audit, _ := tb.store.ListAudit(ctx, "s", 100)
	n := 0
	for _, a := range audit {
		if a.Action == alert.KindOperatorFailures {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d operator_failures audit entries, want 1: %+v", n, audit)
	}
	// A success re-arms it: the next outage is told again.
	tb.alerts.alerts = nil
	tb.record(t, store.RunSucceeded, "")
	for range 7 {
		tb.record(t, store.RunFailed, failure.StoreUnavailable)
	}
	if len(tb.alerts.alerts) != 1 {
		t.Fatalf("after a success and 7 failures: %+v, want one new alert", tb.alerts.alerts)
	}
}

// TestTimes: alerts say "failed once", not "failed 1 times".
func TestTimes(t *testing.T) {
	t.Parallel()
	if got := times(1); got != "once" {
		t.Errorf("times(1) = %q", got)
	}
	if got := times(5); got != "5 times" {
		t.Errorf("times(5) = %q", got)
	}
}
