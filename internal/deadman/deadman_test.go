package deadman_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

func ts(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") }

// TestSilentSiblingRaisesPerSyncAlert is docs/guide.md#telling-silence-from-outside's reason for the per-sync
// check: a healthy sync keeps its workspace green while its sibling is
// silent; only the per-sync check notices.
func TestSilentSiblingRaisesPerSyncAlert(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "healthy", "acme")
		tb.sync(t, "silent", "acme")
		tb.clk.Advance(20 * time.Hour)
		tb.run(t, "healthy", store.RunSucceeded, "")
		tb.clk.Advance(5 * time.Hour)

		rep := tb.check(t)
		if v := tb.verdict(t, rep, deadman.ScopeWorkspace, "acme"); v.Status != deadman.StatusOK || v.Alerted {
			t.Errorf("workspace verdict = %+v, want ok: the workspace check alone sees a success", v)
		}
		if v := tb.verdict(t, rep, deadman.ScopeSync, "healthy"); v.Status != deadman.StatusOK {
			t.Errorf("healthy verdict = %+v, want ok", v)
		}
		v := tb.verdict(t, rep, deadman.ScopeSync, "silent")
		if v.Status != deadman.StatusSilent || v.Kind != deadman.KindNoRuns || !v.Alerted || v.Marker == nil {
			t.Errorf("silent verdict = %+v, want silent no_runs, alerted, marked", v)
		}
		alerts := tb.rec.take()
		if len(alerts) != 1 {
			t.Fatalf("alerts = %+v, want exactly one (the silent sync's)", alerts)
		}
		a := alerts[0]
		want := alert.Alert{
			ID: a.ID, Kind: alert.KindDeadmanNoRuns, Severity: alert.SeverityCritical,
			Workspace: "acme", SyncID: "silent", Owner: failure.OwnerOperator,
			Link: link("acme", "silent"), At: t0.Add(25 * time.Hour),
			WhatHappened: a.WhatHappened, NextStep: a.NextStep,
		}
		if a != want {
			t.Errorf("alert = %+v\nwant  %+v", a, want)
		}
		if a.ID == "" || v.Marker.AlertID != a.ID {
			t.Errorf("alert id %q, marker's %q: want the same, non-empty", a.ID, v.Marker.AlertID)
		}
		for _, s := range []string{"Sync silent", "no run in the last 24h", "enabled at " + ts(t0), "no run was ever recorded"} {
			if !strings.Contains(a.WhatHappened, s) {
				t.Errorf("WhatHappened %q lacks %q", a.WhatHappened, s)
			}
		}
		if !strings.Contains(a.NextStep, "oncesync serve") {
			t.Errorf("NextStep %q does not point at the scheduler", a.NextStep)
		}
	})
}

// TestKindsOfSilence tells no_runs from runs_without_success, per sync and
// per workspace, with the owner and next step of each.
func TestKindsOfSilence(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		history func(t *testing.T, tb *bundle) // from t0, ends at the check
		kind    deadman.Kind
		owner   failure.Owner
		what    []string // in the sync alert's WhatHappened
		next    string   // in the sync alert's NextStep
	}{
		{
			name:    "nothing ever recorded",
			history: func(t *testing.T, tb *bundle) { tb.clk.Advance(25 * time.Hour) },
			kind:    deadman.KindNoRuns, owner: failure.OwnerOperator,
			what: []string{"recorded no run in the last 24h", "no run was ever recorded"},
			next: "oncesync serve",
		},
		{
			name: "failed runs after an old success",
			history: func(t *testing.T, tb *bundle) {
				tb.clk.Advance(2 * time.Hour)
				tb.run(t, "s1", store.RunSucceeded, "")
				tb.clk.Advance(20 * time.Hour)
				tb.run(t, "s1", store.RunFailed, string(failure.DestinationAuth))
				tb.clk.Advance(5 * time.Hour)
			},
			kind: deadman.KindRunsWithoutSuccess, owner: failure.OwnerYou,
			what: []string{"recorded runs but none succeeded in the last 24h", "the last success was at " + ts(t0.Add(2*time.Hour)),
				"failed with destination_auth"},
			next: failure.Lookup(failure.DestinationAuth).NextStep,
		},
		{
			// The failure's owner acts, as its next step says: a destination
			// that never answers is the operator's.
			name: "failed runs the operator owns",
			history: func(t *testing.T, tb *bundle) {
				tb.clk.Advance(2 * time.Hour)
				tb.run(t, "s1", store.RunSucceeded, "")
				tb.clk.Advance(20 * time.Hour)
				tb.run(t, "s1", store.RunFailed, string(failure.DestinationUnavailable))
				tb.clk.Advance(5 * time.Hour)
			},
			kind: deadman.KindRunsWithoutSuccess, owner: failure.OwnerOperator,
			what: []string{"recorded runs but none succeeded in the last 24h", "failed with destination_unavailable"},
			next: failure.Lookup(failure.DestinationUnavailable).NextStep,
		},
		{
			name: "runs only before the window",
			history: func(t *testing.T, tb *bundle) {
				tb.clk.Advance(time.Hour)
				tb.run(t, "s1", store.RunSucceeded, "")
				tb.clk.Advance(25 * time.Hour)
			},
			kind: deadman.KindNoRuns, owner: failure.OwnerOperator,
			what: []string{"recorded no run", "the latest run was recorded at " + ts(t0.Add(time.Hour))},
			next: "workers are started",
		},
		{
			// Its retry may wait out a backoff longer than the window: the
			// failure is told first, not the scheduler.
			name: "a failed run before the window",
			history: func(t *testing.T, tb *bundle) {
				tb.clk.Advance(time.Hour)
				tb.run(t, "s1", store.RunFailed, string(failure.DestinationAuth))
				tb.clk.Advance(25 * time.Hour)
			},
			kind: deadman.KindRunsWithoutSuccess, owner: failure.OwnerYou,
			what: []string{"has had no successful run in the last 24h", "failed with destination_auth",
				"none has run since: a failed run is retried after a backoff"},
			next: failure.Lookup(failure.DestinationAuth).NextStep,
		},
		{
			name: "skipped runs are recorded runs",
			history: func(t *testing.T, tb *bundle) {
				tb.clk.Advance(25 * time.Hour)
				tb.run(t, "s1", store.RunSkipped, "")
			},
			// ... but a skip is no failure of the sync's: another run held
			// its lease (TestSkippedRunsAreToldAsAHeldLease).
			kind: deadman.KindRunsWithoutSuccess, owner: failure.OwnerOperator,
			what: []string{"none succeeded", "was skipped", "another run of the sync holds its lease"},
			next: "oncesync status --config FILE s1",
		},
		{
			name: "a run still running counts as recorded",
			history: func(t *testing.T, tb *bundle) {
				tb.clk.Advance(24 * time.Hour)
				tb.run(t, "s1", store.RunRunning, "")
				tb.clk.Advance(time.Hour)
			},
			kind: deadman.KindRunsWithoutSuccess, owner: failure.OwnerYou,
			what: []string{"none succeeded", "is running"},
			next: "oncesync run s1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			forEachFlavour(t, func(t *testing.T, tb *bundle) {
				tb.sync(t, "s1", "acme")
				tt.history(t, tb)
				rep := tb.check(t)
				alerts := tb.rec.take()
				if len(alerts) != 2 {
					t.Fatalf("alerts = %+v, want the workspace's and the sync's", alerts)
				}
				for _, a := range alerts {
					// The sync's alert names its latest failure's owner, and
					// so does the workspace's, whose one sync it is (they
					// differed: an independent check, 2026-12-06).
					owner := tt.owner
					if a.Kind != deadman.AlertKind(tt.kind) || a.Owner != owner || a.Severity != alert.SeverityCritical {
						t.Errorf("alert %s/%s: kind %s owner %s severity %s; want %s %s critical",
							a.Workspace, a.SyncID, a.Kind, a.Owner, a.Severity, deadman.AlertKind(tt.kind), owner)
					}
					if a.Workspace != "acme" || a.WhatHappened == "" || a.NextStep == "" {
						t.Errorf("incomplete alert %+v", a)
					}
				}
				var syncAlert alert.Alert
				for _, a := range alerts {
					if a.SyncID == "s1" {
						syncAlert = a
					} else if a.SyncID != "" || a.Link != link("acme", "") {
						t.Errorf("workspace alert %+v: want no sync and the workspace link", a)
					}
				}
				for _, s := range tt.what {
					if !strings.Contains(syncAlert.WhatHappened, s) {
						t.Errorf("WhatHappened %q lacks %q", syncAlert.WhatHappened, s)
					}
				}
				if !strings.Contains(syncAlert.NextStep, tt.next) {
					t.Errorf("NextStep %q lacks %q", syncAlert.NextStep, tt.next)
				}
				for _, scope := range []deadman.Scope{deadman.ScopeWorkspace, deadman.ScopeSync} {
					id := map[deadman.Scope]string{deadman.ScopeWorkspace: "acme", deadman.ScopeSync: "s1"}[scope]
					v := tb.verdict(t, rep, scope, id)
					if v.Status != deadman.StatusSilent || v.Kind != tt.kind {
						t.Errorf("%s verdict %+v, want silent %s", scope, v, tt.kind)
					}
					if m, ok := tb.marker(t, scope, id); !ok || m.Kind != tt.kind {
						t.Errorf("%s marker = %+v, %v; want one of kind %s", scope, m, ok, tt.kind)
					}
				}
			})
		})
	}
}

// TestWorkspaceKindSpansItsSyncs: a workspace with one failing and one
// never-run sync recorded runs, so its silence is runs_without_success.
func TestWorkspaceKindSpansItsSyncs(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "failing", "acme")
		tb.sync(t, "idle", "acme")
		tb.clk.Advance(24 * time.Hour)
		tb.run(t, "failing", store.RunFailed, string(failure.DestinationRejectedRecords))
		tb.clk.Advance(time.Hour)
		rep := tb.check(t)
		for id, want := range map[string]deadman.Kind{"failing": deadman.KindRunsWithoutSuccess, "idle": deadman.KindNoRuns} {
			if v := tb.verdict(t, rep, deadman.ScopeSync, id); v.Kind != want {
				t.Errorf("sync %s: kind %s, want %s", id, v.Kind, want)
			}
		}
		if v := tb.verdict(t, rep, deadman.ScopeWorkspace, "acme"); v.Kind != deadman.KindRunsWithoutSuccess {
			t.Errorf("workspace kind %s, want runs_without_success", v.Kind)
		}
		if n := len(tb.rec.take()); n != 3 {
			t.Errorf("%d alerts, want 3", n)
		}
	})
}

// TestOneAlertPerIncident: repeats are suppressed for the whole silence
// (even when its kind changes), the first success sends a resolution notice
// and re-arms the alert.
func TestOneAlertPerIncident(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "s1", "acme")
		tb.clk.Advance(25 * time.Hour)
		tb.check(t)
		if got := tb.rec.take(); len(got) != 2 {
			t.Fatalf("first check: %d alerts, want 2", len(got))
		}

		// Still silent an hour later: no repeat.
		tb.clk.Advance(time.Hour)
		rep := tb.check(t)
		if got := tb.rec.take(); len(got) != 0 {
			t.Fatalf("second check repeated: %+v", got)
		}
		v := tb.verdict(t, rep, deadman.ScopeSync, "s1")
		if v.Status != deadman.StatusSilent || v.Alerted || v.Marker == nil || v.Marker.RaisedAt != t0.Add(25*time.Hour) {
			t.Errorf("second check verdict %+v: want silent, not alerted again, marked at the first check", v)
		}

		// The scheduler comes back but the runs fail: another kind, same incident.
		tb.clk.Advance(time.Hour)
		tb.run(t, "s1", store.RunFailed, string(failure.DestinationUnavailable))
		rep = tb.check(t)
		if got := tb.rec.take(); len(got) != 0 {
			t.Fatalf("kind change repeated the alert: %+v", got)
		}
		if v := tb.verdict(t, rep, deadman.ScopeSync, "s1"); v.Kind != deadman.KindRunsWithoutSuccess || v.Marker.Kind != deadman.KindNoRuns {
			t.Errorf("verdict %+v: want runs_without_success under the no_runs marker", v)
		}

		// The first success ends the silence.
		tb.clk.Advance(time.Hour)
		succeeded := tb.clk.Now()
		tb.run(t, "s1", store.RunSucceeded, "")
		tb.clk.Advance(10 * time.Minute)
		rep = tb.check(t)
		notices := tb.rec.take()
		if len(notices) != 2 || len(rep.Resolved) != 2 {
			t.Fatalf("resolution: %d notices, %d resolved; want 2 and 2", len(notices), len(rep.Resolved))
		}
		for _, a := range notices {
			if a.Kind != alert.KindDeadmanResolved || a.Severity != alert.SeverityInfo || a.Owner != failure.OwnerOperator {
				t.Errorf("notice %+v: want deadman_resolved, info, owner operator (a no_runs incident)", a)
			}
			if !strings.Contains(a.WhatHappened, "succeeded again at "+ts(succeeded)) || !strings.Contains(a.WhatHappened, "no_runs") {
				t.Errorf("notice says %q", a.WhatHappened)
			}
			if a.NextStep == "" || a.Link == "" {
				t.Errorf("notice lacks next step or link: %+v", a)
			}
		}
		for _, scope := range []deadman.Scope{deadman.ScopeWorkspace, deadman.ScopeSync} {
			id := map[deadman.Scope]string{deadman.ScopeWorkspace: "acme", deadman.ScopeSync: "s1"}[scope]
			if v := tb.verdict(t, rep, scope, id); v.Status != deadman.StatusOK || !v.Resolved || v.Marker != nil {
				t.Errorf("%s verdict after success %+v: want ok, resolved, unmarked", scope, v)
			}
			if _, ok := tb.marker(t, scope, id); ok {
				t.Errorf("%s marker survived the success", scope)
			}
		}
		tb.check(t)
		if got := tb.rec.take(); len(got) != 0 {
			t.Fatalf("resolution repeated: %+v", got)
		}

		// Re-armed: the next silence alerts again, since the success.
		tb.clk.Advance(25 * time.Hour)
		rep = tb.check(t)
		again := tb.rec.take()
		if len(again) != 2 {
			t.Fatalf("after re-arm: %d alerts, want 2", len(again))
		}
		for _, a := range again {
			if a.Severity != alert.SeverityCritical || !strings.Contains(a.WhatHappened, "the last success was at "+ts(succeeded)) {
				t.Errorf("re-armed alert %+v", a)
			}
		}
		if v := tb.verdict(t, rep, deadman.ScopeSync, "s1"); !v.SilentSince.Equal(succeeded) || v.Marker == nil || !v.Marker.Since.Equal(succeeded) {
			t.Errorf("re-armed verdict %+v: want silent since %s", v, succeeded)
		}
	})
}

// TestSuccessResolvesAtOnce: a successful run ends the silences it ends
// right away (Resolve, called when the run is recorded): the resolution
// notices went out only at the next check, an hour later under serve. A
// silent sibling's marker is left alone.
func TestSuccessResolvesAtOnce(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "s1", "acme")
		tb.sync(t, "s2", "acme")
		tb.clk.Advance(25 * time.Hour)
		tb.check(t)
		if got := tb.rec.take(); len(got) != 3 {
			t.Fatalf("first check: %d alerts, want 3 (the workspace, s1, s2)", len(got))
		}
		tb.clk.Advance(time.Minute)
		succeeded := tb.clk.Now()
		tb.run(t, "s1", store.RunSucceeded, "")
		if err := tb.checker.Resolve(tb.ctx, "s1", "acme", succeeded); err != nil {
			t.Fatal(err)
		}
		notices := tb.rec.take()
		if len(notices) != 2 {
			t.Fatalf("after s1's success: %d notices, want 2 (s1's and the workspace's)", len(notices))
		}
		for _, a := range notices {
			if a.Kind != alert.KindDeadmanResolved || a.SyncID == "s2" || !strings.Contains(a.WhatHappened, "succeeded again at "+ts(succeeded)) {
				t.Errorf("notice %+v", a)
			}
		}
		if _, ok := tb.marker(t, deadman.ScopeSync, "s2"); !ok {
			t.Error("s2's silence was ended by s1's success")
		}
		// Twice (a recovery records the end again): nothing more.
		if err := tb.checker.Resolve(tb.ctx, "s1", "acme", succeeded); err != nil || len(tb.rec.take()) != 0 {
			t.Fatalf("a second Resolve sent notices again (%v)", err)
		}
		tb.check(t)
		if got := tb.rec.take(); len(got) != 0 {
			t.Fatalf("the next check: %+v, want nothing", got)
		}
	})
}

// TestYoungSkipped: syncs younger than their window and workspaces whose
// oldest active sync is are skipped, however silent; once old enough they
// are checked.
func TestYoungSkipped(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "veteran", "acme")
		tb.clk.Advance(22 * time.Hour)
		tb.run(t, "veteran", store.RunSucceeded, "")
		tb.clk.Advance(time.Hour)
		tb.sync(t, "rookie", "acme")
		tb.sync(t, "solo", "fresh")
		tb.clk.Advance(2 * time.Hour) // t0+25h

		rep := tb.check(t)
		if got := tb.rec.take(); len(got) != 0 {
			t.Fatalf("young syncs alerted: %+v", got)
		}
		want := map[string]deadman.Status{"workspace/acme": deadman.StatusOK, "sync/veteran": deadman.StatusOK,
			"sync/rookie": deadman.StatusYoung, "workspace/fresh": deadman.StatusYoung, "sync/solo": deadman.StatusYoung}
		if len(rep.Verdicts) != len(want) {
			t.Errorf("%d verdicts, want %d: %+v", len(rep.Verdicts), len(want), rep.Verdicts)
		}
		for _, v := range rep.Verdicts {
			if w := want[string(v.Scope)+"/"+v.ID]; v.Status != w {
				t.Errorf("%s %s: %s, want %s", v.Scope, v.ID, v.Status, w)
			}
		}
		if got := len(rep.Skipped()); got != 3 {
			t.Errorf("Skipped() = %d verdicts, want 3", got)
		}

		// A day later nobody is young and everybody is silent.
		tb.clk.Advance(day)
		tb.check(t)
		got := map[string]string{}
		for _, a := range tb.rec.take() {
			got[a.Workspace+"/"+a.SyncID] = a.Kind
		}
		// acme's latest run (veteran's success, at t0+22h) is 27h old: no_runs.
		wantAlerts := map[string]string{
			"acme/": alert.KindDeadmanNoRuns, "acme/veteran": alert.KindDeadmanNoRuns,
			"acme/rookie": alert.KindDeadmanNoRuns, "fresh/": alert.KindDeadmanNoRuns, "fresh/solo": alert.KindDeadmanNoRuns,
		}
		if len(got) != len(wantAlerts) {
			t.Errorf("alerts %v, want %v", got, wantAlerts)
		}
		for k, w := range wantAlerts {
			if got[k] != w {
				t.Errorf("alert %s: %q, want %q", k, got[k], w)
			}
		}
	})
}

// TestRepublishedSyncIsYoungAgain: a republish (or resume) moves changed_at,
// so the sync gets a fresh window before it is judged again.
func TestRepublishedSyncIsYoungAgain(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "s1", "acme")
		tb.clk.Advance(30 * time.Hour)
		tb.sync(t, "s1", "acme") // new definition
		tb.clk.Advance(time.Hour)
		rep := tb.check(t)
		if v := tb.verdict(t, rep, deadman.ScopeSync, "s1"); v.Status != deadman.StatusYoung || !v.ChangedAt.Equal(t0.Add(30*time.Hour)) {
			t.Errorf("verdict %+v: want young since the republish", v)
		}
		if got := tb.rec.take(); len(got) != 0 {
			t.Errorf("alerts %+v, want none", got)
		}
	})
}

// TestPerSyncWindowOverride: a sync's own window judges it (and its youth);
// its workspace keeps the deployment's.
func TestPerSyncWindowOverride(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, f, bundleOpts{windows: map[string]time.Duration{"hourly": 2 * time.Hour, "newish": 2 * time.Hour}})
			tb.sync(t, "hourly", "acme")
			tb.sync(t, "daily", "acme")
			tb.clk.Advance(25 * time.Hour)
			tb.run(t, "hourly", store.RunSucceeded, "")
			tb.run(t, "daily", store.RunSucceeded, "")
			tb.clk.Advance(90 * time.Minute)
			tb.sync(t, "newish", "acme")
			tb.clk.Advance(90 * time.Minute) // t0+28h: hourly's success is 3h old, newish is 1.5h old

			rep := tb.check(t)
			want := map[string]deadman.Status{"workspace/acme": deadman.StatusOK, "sync/daily": deadman.StatusOK,
				"sync/hourly": deadman.StatusSilent, "sync/newish": deadman.StatusYoung}
			for _, v := range rep.Verdicts {
				if w := want[string(v.Scope)+"/"+v.ID]; v.Status != w {
					t.Errorf("%s %s: %s, want %s", v.Scope, v.ID, v.Status, w)
				}
			}
			if v := tb.verdict(t, rep, deadman.ScopeSync, "hourly"); v.Window != 2*time.Hour {
				t.Errorf("hourly window %s, want 2h", v.Window)
			}
			if v := tb.verdict(t, rep, deadman.ScopeSync, "daily"); v.Window != day {
				t.Errorf("daily window %s, want the default 24h", v.Window)
			}
			alerts := tb.rec.take()
			if len(alerts) != 1 || alerts[0].SyncID != "hourly" || !strings.Contains(alerts[0].WhatHappened, "in the last 2h") {
				t.Fatalf("alerts %+v, want hourly's alone, naming its 2h window", alerts)
			}
		})
	}
}

// TestWorkspaceOfLongWindowsIsNotSilentEarly: a workspace whose syncs
// may all go quiet longer than the deployment's window (a weekly export with
// deadman_window: 192h) is not silent while each of them is within its own
// window: the workspace check must not cry wolf where every sync is fine.
func TestWorkspaceOfLongWindowsIsNotSilentEarly(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			week := 8 * day
			tb := setup(t, f, bundleOpts{windows: map[string]time.Duration{"weekly": week, "biweekly": 3 * day}})
			tb.sync(t, "weekly", "exports")
			tb.sync(t, "biweekly", "exports")
			tb.clk.Advance(time.Hour)
			tb.run(t, "weekly", store.RunSucceeded, "")
			tb.run(t, "biweekly", store.RunSucceeded, "")
			tb.clk.Advance(2 * day) // 2 days quiet: within both windows

			rep := tb.check(t)
			for _, v := range rep.Verdicts {
				if v.Status != deadman.StatusOK {
					t.Errorf("%s %s: %s (window %s), want ok", v.Scope, v.ID, v.Status, v.Window)
				}
			}
			if v := tb.verdict(t, rep, deadman.ScopeWorkspace, "exports"); v.Window != week {
				t.Errorf("workspace window %s, want its longest sync window %s", v.Window, week)
			}
			if got := tb.rec.take(); len(got) != 0 {
				t.Fatalf("alerts %+v, want none: every sync is within its window", got)
			}

			// Past the longest window, the workspace is silent too.
			tb.clk.Advance(7 * day)
			tb.check(t)
			got := map[string]string{}
			for _, a := range tb.rec.take() {
				got[a.Workspace+"/"+a.SyncID] = a.Kind
			}
			if len(got) != 3 || got["exports/"] != alert.KindDeadmanNoRuns {
				t.Errorf("alerts %v, want the workspace's and both syncs'", got)
			}
		})
	}
}

// TestPausedSyncsAreNotChecked: a paused sync is not judged, and a
// workspace whose syncs are all paused is not either.
func TestPausedSyncsAreNotChecked(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "paused", "acme")
		tb.sync(t, "live", "acme")
		tb.sync(t, "asleep", "dormant")
		for _, id := range []string{"paused", "asleep"} {
			if _, err := tb.st.SetSyncState(tb.ctx, store.SetSyncStateParams{ID: id, State: store.SyncPaused, Reason: "person", By: "ops", Why: "test"}); err != nil {
				t.Fatal(err)
			}
		}
		tb.clk.Advance(25 * time.Hour)
		tb.run(t, "live", store.RunSucceeded, "")
		rep := tb.check(t)
		if len(rep.Verdicts) != 2 {
			t.Errorf("verdicts %+v, want workspace acme and sync live", rep.Verdicts)
		}
		for _, id := range []string{"paused", "asleep"} {
			if _, ok := rep.Find(deadman.ScopeSync, id); ok {
				t.Errorf("paused sync %s was judged", id)
			}
		}
		if _, ok := rep.Find(deadman.ScopeWorkspace, "dormant"); ok {
			t.Error("workspace without an active sync was judged")
		}
		if got := tb.rec.take(); len(got) != 0 {
			t.Errorf("alerts %+v, want none", got)
		}
	})
}

// TestBreakerPausedSyncsAreChecked: a sync the circuit breaker paused is
// silent until a person resumes it, and the trip's own alert may have been
// lost (a sink down, a process that exited before delivering it), so the
// check judges it like an active sync and its alert says it is paused
// (docs/guide.md#guardrails). A person's pause stays unjudged.
func TestBreakerPausedSyncsAreChecked(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "tripped", "acme")
		tb.sync(t, "held", "acme")
		tb.clk.Advance(time.Hour)
		tb.run(t, "tripped", store.RunFailed, string(failure.DestinationAuth))
		for id, reason := range map[string]string{"tripped": "breaker", "held": "person"} {
			if _, err := tb.st.SetSyncState(tb.ctx, store.SetSyncStateParams{ID: id, State: store.SyncPaused, Reason: reason, By: "oncesync", Why: "test"}); err != nil {
				t.Fatal(err)
			}
		}
		tb.clk.Advance(25 * time.Hour)
		rep := tb.check(t)
		v := tb.verdict(t, rep, deadman.ScopeSync, "tripped")
		if v.Status != deadman.StatusSilent || !v.Alerted {
			t.Fatalf("verdict of the breaker-paused sync %+v, want silent and alerted", v)
		}
		if _, ok := rep.Find(deadman.ScopeSync, "held"); ok {
			t.Error("a sync a person paused was judged")
		}
		got := tb.rec.take()
		if len(got) != 1 || got[0].SyncID != "tripped" {
			t.Fatalf("alerts %+v, want one for sync tripped", got)
		}
		if !strings.Contains(got[0].WhatHappened, "paused by the circuit breaker") || !strings.Contains(got[0].NextStep, "oncesync resume") {
			t.Errorf("alert %q / %q, want it to say the breaker paused the sync and how to resume it", got[0].WhatHappened, got[0].NextStep)
		}
		// One alert per incident: the next check does not repeat it.
		tb.clk.Advance(time.Hour)
		tb.check(t)
		if got := tb.rec.take(); len(got) != 0 {
			t.Errorf("second check sent %+v, want nothing", got)
		}
	})
}

// TestWorkspaceKindLeavesPausedSyncsOut: a workspace whose only active sync
// never ran is no_runs (the operator's: a scheduler or worker), whatever a
// breaker-paused sibling's failed runs say; that sibling is judged alone.
// The workspace was told runs_without_success, owner you.
func TestWorkspaceKindLeavesPausedSyncsOut(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "tripped", "w12")
		tb.sync(t, "idle", "w12")
		tb.clk.Advance(25 * time.Hour)
		tb.run(t, "tripped", store.RunFailed, string(failure.SourceUnavailable))
		if _, err := tb.st.SetSyncState(tb.ctx, store.SetSyncStateParams{ID: "tripped", State: store.SyncPaused, Reason: "breaker", By: "oncesync", Why: "test"}); err != nil {
			t.Fatal(err)
		}
		tb.clk.Advance(time.Minute)
		rep := tb.check(t)
		if v := tb.verdict(t, rep, deadman.ScopeWorkspace, "w12"); v.Status != deadman.StatusSilent || v.Kind != deadman.KindNoRuns {
			t.Fatalf("workspace verdict %+v, want silent, no_runs", v)
		}
		if v := tb.verdict(t, rep, deadman.ScopeSync, "tripped"); v.Kind != deadman.KindRunsWithoutSuccess {
			t.Fatalf("tripped sync's verdict %+v, want runs_without_success", v)
		}
		// Its text says whose runs it looked at: "no run was ever
		// recorded" denied the tripped sync's runs.
		for _, a := range tb.rec.take() {
			if a.SyncID == "" && (!strings.Contains(a.WhatHappened, "no run of its active syncs was ever recorded") ||
				strings.Contains(a.WhatHappened, "no run was ever recorded")) {
				t.Errorf("workspace alert %q", a.WhatHappened)
			}
		}
	})
}

// TestHungRunIsToldAsSuch: a sync whose latest run started long ago and
// never ended is silent (no run recorded in the window), and the alert
// says that run hangs, not only that schedulers and workers may be down.
func TestHungRunIsToldAsSuch(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "s1", "acme")
		tb.clk.Advance(time.Hour)
		hung := tb.run(t, "s1", store.RunRunning, "")
		tb.clk.Advance(25 * time.Hour)
		tb.check(t)
		var found bool
		for _, a := range tb.rec.take() {
			if a.SyncID != "s1" {
				continue
			}
			found = true
			if a.Kind != alert.KindDeadmanNoRuns || !strings.Contains(a.WhatHappened, fmt.Sprintf("the latest run (#%d) started at", hung.ID)) ||
				!strings.Contains(a.WhatHappened, "has not ended: it may hang") {
				t.Errorf("alert %q (%s), want the hung run named", a.WhatHappened, a.Kind)
			}
		}
		if !found {
			t.Fatal("no alert for s1")
		}
	})
}

// TestEvaluateChangesNothing: Evaluate reports the silence without alerting
// or marking; after a Check it shows the marker.
func TestEvaluateChangesNothing(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "s1", "acme")
		tb.clk.Advance(25 * time.Hour)
		rep, err := tb.checker.Evaluate(tb.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v := tb.verdict(t, rep, deadman.ScopeSync, "s1"); v.Status != deadman.StatusSilent || v.Alerted || v.Marker != nil {
			t.Errorf("Evaluate verdict %+v: want silent, not alerted, unmarked", v)
		}
		if got := tb.rec.take(); len(got) != 0 {
			t.Errorf("Evaluate alerted: %+v", got)
		}
		if _, ok := tb.marker(t, deadman.ScopeSync, "s1"); ok {
			t.Error("Evaluate wrote a marker")
		}
		tb.check(t)
		tb.rec.take()
		tb.clk.Advance(time.Hour)
		tb.run(t, "s1", store.RunSucceeded, "")
		rep, err = tb.checker.Evaluate(tb.ctx)
		if err != nil {
			t.Fatal(err)
		}
		if v := tb.verdict(t, rep, deadman.ScopeSync, "s1"); v.Status != deadman.StatusOK || v.Marker == nil || v.Resolved {
			t.Errorf("Evaluate after success %+v: want ok with the marker still held (the next Check resolves)", v)
		}
		if got := tb.rec.take(); len(got) != 0 {
			t.Errorf("Evaluate sent notices: %+v", got)
		}
	})
}

// TestNotifyFailureRetriesAtNextCheck: an alert the notifier refused leaves
// no marker, so the next check sends it.
func TestNotifyFailureRetriesAtNextCheck(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "s1", "acme")
		tb.clk.Advance(25 * time.Hour)
		tb.rec.setFail(alert.ErrClosed)
		rep, err := tb.checker.Check(tb.ctx)
		if !errors.Is(err, alert.ErrClosed) {
			t.Fatalf("Check = %v, want the notifier's error", err)
		}
		if len(rep.Alerted()) != 0 || len(rep.Verdicts) != 2 {
			t.Errorf("report %+v: want 2 verdicts, none alerted", rep)
		}
		if _, ok := tb.marker(t, deadman.ScopeSync, "s1"); ok {
			t.Error("marker kept for an alert never sent")
		}
		tb.rec.setFail(nil)
		tb.clk.Advance(time.Hour)
		tb.check(t)
		if got := tb.rec.take(); len(got) != 2 {
			t.Errorf("retry sent %d alerts, want 2", len(got))
		}
	})
}

// flakySink is an alert sink that refuses every alert while down, and
// keeps those it delivers (and the ids of those it refused).
type flakySink struct {
	mu      sync.Mutex
	down    bool
	got     []alert.Alert
	refused []string
}

func (s *flakySink) Name() string { return "webhook" }

func (s *flakySink) Send(_ context.Context, a alert.Alert) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		s.refused = append(s.refused, a.ID)
		return errors.New("status 503")
	}
	s.got = append(s.got, a)
	return nil
}

func (s *flakySink) set(down bool) []alert.Alert {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
	out := s.got
	s.got = nil
	return out
}

// TestUndeliveredAlertIsSentAgain: with a real dispatcher whose one sink
// besides the log gives up on the alert (down through all its retries), the
// silence is not marked: the check says alert_undelivered, and the next
// one, with the sink back, sends the alert. A marker set when the alert was
// merely queued swallowed the incident's only alert.
func TestUndeliveredAlertIsSentAgain(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, f, bundleOpts{})
			sink := &flakySink{down: true}
			d := alert.NewDispatcher(alert.DispatcherParams{
				Sinks:  []alert.Sink{alert.NewLogSink(slog.New(slog.DiscardHandler)), sink},
				Logger: slog.New(slog.DiscardHandler), Clock: tb.clk,
				Retry: alert.RetryPolicy{Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }},
			})
			t.Cleanup(func() { _ = d.Close(context.Background()) })
			p := tb.params
			p.Notifier = d
			checker, err := deadman.New(p)
			if err != nil {
				t.Fatal(err)
			}
			tb.sync(t, "s1", "acme")
			tb.clk.Advance(25 * time.Hour)

			rep, err := checker.Check(tb.ctx)
			var fe *failure.Error
			if !errors.As(err, &fe) || fe.Code != failure.AlertUndelivered || !strings.Contains(fe.Detail, "webhook") {
				t.Fatalf("Check = %v, want alert_undelivered naming the webhook", err)
			}
			if len(rep.Alerted()) != 0 || rep.Sent != 0 {
				t.Errorf("report %+v: want nothing alerted", rep)
			}
			if _, ok := tb.marker(t, deadman.ScopeSync, "s1"); ok {
				t.Error("marker kept for an alert that reached nobody")
			}

			sink.set(false)
			tb.clk.Advance(time.Hour)
			rep, err = checker.Check(tb.ctx)
			if err != nil || len(rep.Alerted()) != 2 {
				t.Fatalf("second check: %v, alerted %+v: want the workspace's and s1's", err, rep.Alerted())
			}
			refused := slices.Clone(sink.refused)
			got := sink.set(false)
			if len(got) != 2 {
				t.Errorf("the sink got %d alerts, want 2", len(got))
			}
			// The alert sent again is the same alert: a receiver that got
			// the first one after all (an answer lost on its way back)
			// drops the second by its id (the webhook-id, Sentry's event id).
			for _, a := range got {
				if !slices.Contains(refused, a.ID) {
					t.Errorf("alert %s (%s) sent again under a new id; the refused ones were %v", a.ID, a.Kind, refused)
				}
			}
			if _, ok := tb.marker(t, deadman.ScopeSync, "s1"); !ok {
				t.Error("no marker once the alert was delivered")
			}
		})
	}
}

// TestConcurrentChecksAlertOnce: two checkers (two leaders for a moment)
// racing on the same markers send each alert once.
func TestConcurrentChecksAlertOnce(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		for i := range 5 {
			tb.sync(t, "s"+string(rune('a'+i)), "acme")
		}
		tb.clk.Advance(25 * time.Hour)
		other, err := deadman.New(tb.params)
		if err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		reps := make([]deadman.Report, 2)
		for i, c := range []*deadman.Checker{tb.checker, other} {
			wg.Go(func() {
				rep, err := c.Check(tb.ctx)
				if err != nil {
					t.Errorf("Check: %v", err)
				}
				reps[i] = rep
			})
		}
		wg.Wait()
		alerts := tb.rec.take()
		if len(alerts) != 6 {
			t.Errorf("%d alerts, want 6 (1 workspace + 5 syncs), each once", len(alerts))
		}
		if n := len(reps[0].Alerted()) + len(reps[1].Alerted()); n != 6 {
			t.Errorf("reports claim %d alerts, want 6", n)
		}
		for _, rep := range reps {
			for _, v := range rep.Verdicts {
				if v.Marker == nil {
					t.Errorf("%s %s: no marker in the report", v.Scope, v.ID)
				}
			}
		}
	})
}

// TestMarkersOfVanishedTargetsAreDropped: a marker whose sync or workspace
// is gone from the store is removed without a notice.
func TestMarkersOfVanishedTargetsAreDropped(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "s1", "acme")
		tb.run(t, "s1", store.RunSucceeded, "")
		for _, m := range []deadman.Marker{
			{Scope: deadman.ScopeSync, ID: "ghost", Workspace: "acme", Kind: deadman.KindNoRuns, Since: t0, RaisedAt: t0},
			{Scope: deadman.ScopeWorkspace, ID: "gone", Workspace: "gone", Kind: deadman.KindNoRuns, Since: t0, RaisedAt: t0},
		} {
			if ok, err := tb.markers.PutDeadmanMarker(tb.ctx, m); err != nil || !ok {
				t.Fatalf("put %+v: %v, %v", m, ok, err)
			}
		}
		tb.clk.Advance(time.Hour)
		rep := tb.check(t)
		if len(rep.Dropped) != 2 {
			t.Errorf("dropped %+v, want ghost and gone", rep.Dropped)
		}
		if ms, _ := tb.markers.ListDeadmanMarkers(tb.ctx); len(ms) != 0 {
			t.Errorf("markers left: %+v", ms)
		}
		if got := tb.rec.take(); len(got) != 0 {
			t.Errorf("dropping sent %+v", got)
		}
	})
}

// TestSyncsOutsideTheConfigAreNotJudged: a sync the store keeps but the
// config no longer lists (Params.Configured) is neither judged nor counted
// in its workspace, and the markers of its earlier silence, and of a
// workspace left with no configured sync, are dropped without a notice.
func TestSyncsOutsideTheConfigAreNotJudged(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			inConfig := map[string]bool{"kept": true, "removed": true, "alone": true}
			var mu sync.Mutex
			tb := setup(t, f, bundleOpts{configured: func(id string) bool {
				mu.Lock()
				defer mu.Unlock()
				return inConfig[id]
			}})
			tb.sync(t, "kept", "acme")
			tb.sync(t, "removed", "acme")
			tb.sync(t, "alone", "solo")
			tb.sync(t, "stranger", "acme") // another deployment's, or long gone
			tb.clk.Advance(25 * time.Hour)
			tb.run(t, "kept", store.RunSucceeded, "")
			rep := tb.check(t)
			if _, ok := rep.Find(deadman.ScopeSync, "stranger"); ok {
				t.Errorf("a sync outside the config was judged: %+v", rep.Verdicts)
			}
			got := map[string]bool{}
			for _, a := range tb.rec.take() {
				got[a.Workspace+"/"+a.SyncID] = true
			}
			if want := map[string]bool{"acme/removed": true, "solo/": true, "solo/alone": true}; len(got) != len(want) ||
				!got["acme/removed"] || !got["solo/"] || !got["solo/alone"] {
				t.Fatalf("alerts %v, want %v", got, want)
			}

			// removed and alone leave the config.
			mu.Lock()
			delete(inConfig, "removed")
			delete(inConfig, "alone")
			mu.Unlock()
			tb.clk.Advance(time.Hour)
			rep = tb.check(t)
			if n := rep.Count("", deadman.StatusSilent); n != 0 {
				t.Errorf("%d silent verdicts, want none: %+v", n, rep.Verdicts)
			}
			if len(rep.Dropped) != 3 {
				t.Errorf("dropped %+v, want the markers of removed, alone and solo", rep.Dropped)
			}
			if ms, _ := tb.markers.ListDeadmanMarkers(tb.ctx); len(ms) != 0 {
				t.Errorf("markers left: %+v", ms)
			}
			if got := tb.rec.take(); len(got) != 0 {
				t.Errorf("alerts %+v, want none", got)
			}
		})
	}
}

// TestMarkerStoreContract: every MarkerStore creates with NX semantics,
// round-trips every field and deletes once.
func TestMarkerStoreContract(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		ctx := tb.ctx
		marks := []deadman.Marker{
			{Scope: deadman.ScopeSync, ID: "contacts-to-brevo", Workspace: "acme", Kind: deadman.KindRunsWithoutSuccess,
				Since: t0.Add(123456789 * time.Nanosecond), RaisedAt: t0.Add(time.Hour), AlertID: "a1"},
			{Scope: deadman.ScopeWorkspace, ID: "acme", Workspace: "acme", Kind: deadman.KindNoRuns, RaisedAt: t0},
			{Scope: deadman.ScopeSync, ID: "odd {id}: é", Workspace: "acme", Kind: deadman.KindNoRuns, Since: t0, RaisedAt: t0},
			{Scope: deadman.ScopeWorkspace, ID: "contacts-to-brevo", Workspace: "contacts-to-brevo", Kind: deadman.KindNoRuns, Since: t0, RaisedAt: t0},
		}
		for _, m := range marks {
			if ok, err := tb.markers.PutDeadmanMarker(ctx, m); err != nil || !ok {
				t.Fatalf("put %+v = %v, %v; want created", m, ok, err)
			}
		}
		dup := marks[0]
		dup.Kind, dup.AlertID = deadman.KindNoRuns, "a2"
		if ok, err := tb.markers.PutDeadmanMarker(ctx, dup); err != nil || ok {
			t.Fatalf("second put = %v, %v; want not created", ok, err)
		}
		if _, err := tb.markers.PutDeadmanMarker(ctx, deadman.Marker{Scope: "team", ID: "x", Kind: deadman.KindNoRuns}); err == nil {
			t.Error("put with an unknown scope succeeded")
		}
		got, err := tb.markers.ListDeadmanMarkers(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(marks) {
			t.Fatalf("listed %d markers, want %d: %+v", len(got), len(marks), got)
		}
		for _, want := range marks {
			m, ok := tb.marker(t, want.Scope, want.ID)
			if !ok {
				t.Errorf("marker %s %q not listed", want.Scope, want.ID)
				continue
			}
			if m.Workspace != want.Workspace || m.Kind != want.Kind || m.AlertID != want.AlertID ||
				!m.Since.Equal(want.Since) || !m.RaisedAt.Equal(want.RaisedAt) {
				t.Errorf("marker = %+v, want %+v", m, want)
			}
		}
		for i, want := range []bool{true, false} {
			if ok, err := tb.markers.DeleteDeadmanMarker(ctx, marks[0].Scope, marks[0].ID); err != nil || ok != want {
				t.Errorf("delete #%d = %v, %v; want %v", i+1, ok, err, want)
			}
		}
		if _, ok := tb.marker(t, deadman.ScopeWorkspace, "contacts-to-brevo"); !ok {
			t.Error("deleting a sync marker removed the workspace marker of the same id")
		}
		if ok, err := tb.markers.PutDeadmanMarker(ctx, dup); err != nil || !ok {
			t.Errorf("put after delete = %v, %v; want created", ok, err)
		}
	})
}

// TestStoreUnavailableHasItsCode: a check that cannot read the store fails
// with store_unavailable.
func TestStoreUnavailableHasItsCode(t *testing.T) {
	t.Parallel()
	tb := setup(t, flavours()[0], bundleOpts{})
	if err := tb.st.Close(); err != nil {
		t.Fatal(err)
	}
	_, err := tb.checker.Check(tb.ctx)
	if got := failure.CodeOf(err); got != failure.StoreUnavailable {
		t.Errorf("Check on a closed store = %v (code %s), want store_unavailable", err, got)
	}
}

func TestNewRequiresItsParts(t *testing.T) {
	t.Parallel()
	if _, err := deadman.New(deadman.Params{}); !errors.Is(err, deadman.ErrInvalidParams) {
		t.Errorf("New(empty) = %v, want ErrInvalidParams", err)
	}
}

// TestAlertCapDefersTheRest: a mass silence sends at most MaxAlerts per
// check, workspaces first; the rest go out with the next check.
func TestAlertCapDefersTheRest(t *testing.T) {
	t.Parallel()
	for _, f := range flavours() {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, f, bundleOpts{maxAlerts: 3})
			for _, id := range []string{"a", "b", "c", "d", "e"} {
				tb.sync(t, id, "acme")
			}
			tb.clk.Advance(25 * time.Hour)
			rep := tb.check(t)
			first := tb.rec.take()
			if len(first) != 3 || rep.Sent != 3 || first[0].SyncID != "" {
				t.Fatalf("first check sent %d (Sent %d), first %+v; want 3, the workspace's first", len(first), rep.Sent, first)
			}
			var deferred []string
			for _, v := range rep.Verdicts {
				if v.Deferred {
					if v.Marker != nil || v.Alerted {
						t.Errorf("deferred verdict %+v is marked or alerted", v)
					}
					deferred = append(deferred, v.ID)
				}
			}
			if strings.Join(deferred, ",") != "c,d,e" {
				t.Errorf("deferred %v, want c,d,e", deferred)
			}
			tb.clk.Advance(time.Hour)
			tb.check(t)
			second := tb.rec.take()
			if len(second) != 3 {
				t.Fatalf("second check sent %d, want the 3 deferred", len(second))
			}
			for i, a := range second {
				if want := deferred[i]; a.SyncID != want {
					t.Errorf("second check alert %d for %q, want %q", i, a.SyncID, want)
				}
			}
		})
	}
}
