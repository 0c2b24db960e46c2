package deadman

import (
	"fmt"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// Alert texts: what happened (which silence, since when), the next step, the
// owner and a link (docs/guide.md#telling-silence-from-outside, docs/config.md). Ids of workspaces and syncs are config
// identifiers, never personal data.

const (
	nextNoRuns = "Check that `oncesync serve` is running (its leader enqueues the schedules), or, without serve, " +
		"that cron still runs `oncesync run`; that the job queue and the store are reachable and that workers " +
		"are started; `oncesync status %s` shows the last run. " +
		"A sync without a schedule only runs on demand: run it or pause it."
	nextRunsFailed = "Open the sync page: each failed run says what happened and what to do; fix the cause, then " +
		"run the sync again (`oncesync run %s`) to confirm."
	nextWorkspaceRunsFailed = "Open the workspace's syncs: each failed run says what happened and what to do; " +
		"fix the causes, then run the syncs again to confirm."
	nextHeld = "`oncesync status --config FILE %s` shows the run that holds the sync's lease; if it hangs, stop its " +
		"process (the `oncesync run`, serve or worker that runs it): its lease then expires, and the next run " +
		"resumes from the last checkpoint."
	nextWorkspaceHeld = "Open the workspace's syncs: runs that never end hold their leases, so every later run is " +
		"skipped; `oncesync status --config FILE SYNC` shows the run that holds one: if it hangs, stop its process."
	nextTripped = "Fix the cause shown by `oncesync status --config FILE %s` (or the sync page), then resume the sync " +
		"with `oncesync resume --config FILE %s --by NAME --reason TEXT` or from the sync page."
	nextResolved = "Nothing to do: the dead-man alert is re-armed for the next silence."
)

// silenceAlert is the critical alert of the silence judged in v.
func (c *Checker) silenceAlert(now time.Time, t target, v *Verdict) alert.Alert {
	recorded := "runs but none succeeded"
	if v.Kind == KindNoRuns {
		recorded = "no run"
	}
	head := fmt.Sprintf("%s recorded %s in the last %s", name(t), recorded, fmtWindow(t.window))
	quiet := v.Kind == KindRunsWithoutSuccess && t.lastRunAt.Before(now.Add(-t.window))
	if t.tripped || quiet {
		head = fmt.Sprintf("%s has had no successful run in the last %s", name(t), fmtWindow(t.window))
	}
	clauses := []string{
		head,
		sinceClause(t, v.SilentSince),
	}
	next, owner := "", OwnerOf(v.Kind)
	switch {
	case v.Kind == KindNoRuns:
		switch {
		case t.lastRunAt.IsZero() && t.scope == ScopeWorkspace:
			// Its paused syncs' runs are not its own (see Check).
			clauses = append(clauses, "no run of its active syncs was ever recorded")
		case t.lastRunAt.IsZero():
			clauses = append(clauses, "no run was ever recorded")
		case t.last != nil && t.last.LastRunState == store.RunRunning:
			// Not a scheduler at fault: a run that never ends (a destination
			// that never answers, a worker stuck or frozen).
			clauses = append(clauses, fmt.Sprintf("the latest run (#%d) started at %s and has not ended: it may hang "+
				"(a destination that never answers, a worker stuck or frozen)", t.last.LastRunID, fmtTime(t.lastRunAt)))
		default:
			clauses = append(clauses, "the latest run was recorded at "+fmtTime(t.lastRunAt))
		}
		id := t.id
		if t.scope == ScopeWorkspace {
			id = "SYNC"
		}
		next = fmt.Sprintf(nextNoRuns, id)
	case t.tripped:
		clauses = append(clauses, "it is paused by the circuit breaker: no run starts until a person resumes it")
		if code := t.last.LastFailureCode; code != "" {
			clauses = append(clauses, fmt.Sprintf("the latest run (#%d) failed with %s", t.last.LastRunID, code))
		}
		next = fmt.Sprintf(nextTripped, t.id, t.id)
	case t.scope == ScopeWorkspace:
		next = nextWorkspaceRunsFailed
		if t.heldLast && !t.failedLast {
			next = nextWorkspaceHeld
		}
		if t.failureOwner != "" {
			// Its syncs' alerts name their failures' owner: so does it.
			owner = t.failureOwner
		}
	case t.heldLast:
		// Not a failure: the run that holds the lease is the silence's.
		clauses = append(clauses, fmt.Sprintf("the latest run (#%d) was skipped at %s: another run of the sync holds its lease "+
			"and has not ended (it may hang: a source or destination that never answers, a worker stuck or frozen), "+
			"so every run started after it is skipped", t.last.LastRunID, fmtTime(t.lastRunAt)))
		next, owner = fmt.Sprintf(nextHeld, t.id), failure.OwnerOperator
	default:
		next = fmt.Sprintf(nextRunsFailed, t.id)
		if code := t.last.LastFailureCode; code != "" {
			e := failure.Lookup(failure.Code(code))
			clauses = append(clauses, fmt.Sprintf("the latest run (#%d) failed with %s", t.last.LastRunID, code))
			if quiet {
				clauses = append(clauses, fmt.Sprintf("it ended at %s and none has run since: a failed run is "+
					"retried after a backoff that grows with each attempt and can outlast the window "+
					"(if the sync is healthy again, run it now)", fmtTime(t.lastRunAt)))
			}
			// The next step is that failure's, and so is whoever takes it:
			// a destination that never answers (destination_unavailable)
			// is the operator's, not the sync owner's (an independent
			// check, 2026-12-06).
			next, owner = e.NextStep, e.Owner
		} else if t.last.LastRunState != "" {
			clauses = append(clauses, fmt.Sprintf("the latest run (#%d) is %s", t.last.LastRunID, t.last.LastRunState))
		}
	}
	return alert.Alert{
		Kind:         AlertKind(v.Kind),
		Severity:     alert.SeverityCritical,
		Workspace:    t.workspace,
		SyncID:       syncIDOf(t),
		WhatHappened: strings.Join(clauses, "; ") + ".",
		NextStep:     next,
		Owner:        owner,
		Link:         c.linkOf(t),
	}
}

// resolvedAlert is the info notice that the silence of m ended.
func (c *Checker) resolvedAlert(t target, m Marker) alert.Alert {
	return alert.Alert{
		Kind:      alert.KindDeadmanResolved,
		Severity:  alert.SeverityInfo,
		Workspace: t.workspace,
		SyncID:    syncIDOf(t),
		WhatHappened: fmt.Sprintf("%s succeeded again at %s, ending the %s silence alerted at %s (no success since %s).",
			name(t), fmtTime(t.lastSuccessAt), m.Kind, fmtTime(m.RaisedAt), fmtTime(m.Since)),
		NextStep: nextResolved,
		Owner:    OwnerOf(m.Kind),
		Link:     c.linkOf(t),
	}
}

func (c *Checker) linkOf(t target) string {
	if c.link == nil {
		return ""
	}
	return c.link(t.workspace, syncIDOf(t))
}

func syncIDOf(t target) string {
	if t.scope == ScopeSync {
		return t.id
	}
	return ""
}

func name(t target) string {
	if t.scope == ScopeWorkspace {
		return fmt.Sprintf("Workspace %s", t.id)
	}
	return fmt.Sprintf("Sync %s (workspace %s)", t.id, t.workspace)
}

func sinceClause(t target, since time.Time) string {
	if t.lastSuccessAt.IsZero() {
		what := "it was enabled"
		if t.scope == ScopeWorkspace {
			what = "its oldest active sync was enabled"
		}
		return fmt.Sprintf("nothing has succeeded since %s at %s", what, fmtTime(since))
	}
	return "the last success was at " + fmtTime(since)
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}

// FormatWindow prints a window the way it is configured: "24h", "90m",
// "1h30m0s".
func FormatWindow(d time.Duration) string { return fmtWindow(d) }

// fmtWindow prints a window the way it is configured: "24h", "90m", "1h30m".
func fmtWindow(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0 && d < time.Hour:
		return fmt.Sprintf("%dm", d/time.Minute)
	}
	return d.String()
}
