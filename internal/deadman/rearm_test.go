package deadman_test

import (
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// TestResumeRearmsTheAlert: a person who resumes (or republishes) a silent
// sync starts its window again (it is young, docs/guide.md#guardrails), and
// so starts a new incident: if the sync is still silent a window after the
// resume, that is alerted. Before, the marker of the alert raised before the
// pause outlived the resume and suppressed it: a sync resumed "fixed" that
// never ran again was never alerted, until its first success.
func TestResumeRearmsTheAlert(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "s1", "acme")
		tb.clk.Advance(time.Hour)
		tb.run(t, "s1", store.RunSucceeded, "")
		lastOK := tb.clk.Now()
		tb.clk.Advance(25 * time.Hour)
		tb.check(t)
		if got := tb.rec.take(); len(got) != 2 {
			t.Fatalf("first silence: %d alerts, want 2 (the workspace's and s1's)", len(got))
		}

		// A person pauses s1 to look into it, then resumes it a few days later.
		tb.clk.Advance(time.Hour)
		if _, err := tb.st.SetSyncState(tb.ctx, store.SetSyncStateParams{ID: "s1", State: store.SyncPaused, Reason: "person", By: "ops", Why: "investigating"}); err != nil {
			t.Fatal(err)
		}
		tb.clk.Advance(3 * day)
		if _, err := tb.st.SetSyncState(tb.ctx, store.SetSyncStateParams{ID: "s1", State: store.SyncActive, By: "ops", Why: "fixed"}); err != nil {
			t.Fatal(err)
		}
		resumed := tb.clk.Now()

		// Within a window of the resume: young, nothing said.
		tb.clk.Advance(23 * time.Hour)
		rep := tb.check(t)
		if v := tb.verdict(t, rep, deadman.ScopeSync, "s1"); v.Status != deadman.StatusYoung || v.Marker != nil {
			t.Errorf("verdict a day after the resume %+v: want young, no marker of the incident before it", v)
		}
		if got := tb.rec.take(); len(got) != 0 {
			t.Fatalf("alerts while young: %+v", got)
		}

		// Still nothing ran a window after the resume: a new incident, alerted.
		tb.clk.Advance(2 * time.Hour)
		rep = tb.check(t)
		got := tb.rec.take()
		if len(got) != 2 {
			t.Fatalf("silent a window after the resume: %d alerts %+v, want 2 (the workspace's and s1's)", len(got), got)
		}
		for _, a := range got {
			if a.Kind != alert.KindDeadmanNoRuns || a.Severity != alert.SeverityCritical ||
				!strings.Contains(a.WhatHappened, "the last success was at "+ts(lastOK)) {
				t.Errorf("alert %+v", a)
			}
		}
		v := tb.verdict(t, rep, deadman.ScopeSync, "s1")
		if v.Status != deadman.StatusSilent || !v.Alerted || v.Marker == nil || v.Marker.RaisedAt.Before(resumed) {
			t.Errorf("verdict %+v: want silent, alerted now, marked after the resume", v)
		}
		// One alert per (new) incident.
		tb.clk.Advance(time.Hour)
		tb.check(t)
		if got := tb.rec.take(); len(got) != 0 {
			t.Errorf("the new incident alerted twice: %+v", got)
		}
	})
}

// TestBreakerResumeRearmsTheAlert: the same for a sync the breaker paused:
// its silence is alerted while it is paused; a person resumes it and the
// runs that follow fail for reasons the operator owns (which never trip the
// breaker again): a window after the resume that silence is alerted.
func TestBreakerResumeRearmsTheAlert(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "s1", "acme")
		tb.clk.Advance(time.Hour)
		tb.run(t, "s1", store.RunFailed, string(failure.DestinationAuth))
		if _, err := tb.st.SetSyncState(tb.ctx, store.SetSyncStateParams{ID: "s1", State: store.SyncPaused, Reason: "breaker", By: "oncesync", Why: "test"}); err != nil {
			t.Fatal(err)
		}
		tb.clk.Advance(25 * time.Hour)
		tb.check(t)
		if got := tb.rec.take(); len(got) != 1 || got[0].SyncID != "s1" {
			t.Fatalf("tripped silence: alerts %+v, want s1's", got)
		}
		tb.clk.Advance(time.Hour)
		if _, err := tb.st.SetSyncState(tb.ctx, store.SetSyncStateParams{ID: "s1", State: store.SyncActive, By: "ops", Why: "new key"}); err != nil {
			t.Fatal(err)
		}
		for range 26 {
			tb.clk.Advance(time.Hour)
			tb.run(t, "s1", store.RunFailed, string(failure.DestinationUnavailable))
		}
		tb.check(t)
		got := tb.rec.take()
		var synced bool
		for _, a := range got {
			synced = synced || (a.SyncID == "s1" && a.Kind == alert.KindDeadmanRunsWithoutSuccess)
		}
		if !synced {
			t.Fatalf("a window after the resume, runs still failing: alerts %+v, want s1's runs_without_success", got)
		}
	})
}
