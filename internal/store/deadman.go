package store

import (
	"context"
	"time"
)

// What the dead-man check (internal/deadman) reads and keeps. The types live
// here so that the drivers implement interfaces of the package they build
// on; internal/deadman aliases them (deadman.Activity, deadman.Marker, ...).

// DeadmanScope says what a dead-man check or marker is about.
type DeadmanScope string

// Scopes.
const (
	DeadmanScopeWorkspace DeadmanScope = "workspace"
	DeadmanScopeSync      DeadmanScope = "sync"
)

// Valid reports whether s is a known scope.
func (s DeadmanScope) Valid() bool { return s == DeadmanScopeWorkspace || s == DeadmanScopeSync }

// DeadmanKind is the kind of a silence.
type DeadmanKind string

// Kinds of silence.
const (
	// DeadmanRunsWithoutSuccess: runs were recorded in the window, none
	// succeeded. Owner: the sync's owner.
	DeadmanRunsWithoutSuccess DeadmanKind = "runs_without_success"
	// DeadmanNoRuns: no run was recorded in the window. Owner: the operator.
	DeadmanNoRuns DeadmanKind = "no_runs"
)

// Valid reports whether k is a known kind.
func (k DeadmanKind) Valid() bool { return k == DeadmanRunsWithoutSuccess || k == DeadmanNoRuns }

// Activity is what the dead-man check needs to know about one sync, read for
// every sync in one query.
type Activity struct {
	SyncID    string
	Workspace string
	State     SyncState
	// PauseReason is "breaker" or "person" when the sync is paused: the
	// dead-man check judges a sync the breaker paused (docs/guide.md#guardrails).
	PauseReason string
	// ChangedAt is the sync's last publish, enable or resume.
	ChangedAt time.Time
	// LastSuccessAt is when the sync's latest successful run finished; zero
	// if none ever did.
	LastSuccessAt time.Time
	// LastRunID, LastRunState and LastFailureCode describe the sync's latest
	// recorded run (zero values if none).
	LastRunID       int64
	LastRunState    RunState
	LastFailureCode string
	// LastRunAt is the latest of that run's start and finish; zero if no run
	// was ever recorded.
	LastRunAt time.Time
}

// ActivityReader reads every sync's activity (active and paused) in one
// query. store/sqlite and store/postgres implement it.
type ActivityReader interface {
	SyncActivity(ctx context.Context) ([]Activity, error)
}

// DeadmanMarker is the record of one alerted silence: while it exists, the
// silence of Scope/ID is not alerted again.
type DeadmanMarker struct {
	Scope DeadmanScope
	// ID is the workspace or sync id.
	ID string
	// Workspace is the workspace of a sync marker (= ID for a workspace).
	Workspace string
	// Kind is the kind of silence alerted.
	Kind DeadmanKind
	// Since is when the silence began: the last success before it, or, when
	// there was none, the (oldest) sync's changed_at. The first success
	// after Since ends the incident.
	Since time.Time
	// RaisedAt is when the alert was sent, and AlertID its id.
	RaisedAt time.Time
	AlertID  string
}

// DeadmanMarkers keeps markers. PutDeadmanMarker has SET NX semantics: it
// creates m unless a marker of (m.Scope, m.ID) exists, and reports whether
// it did. store/sqlite, store/postgres and deadman.RedisMarkers implement it.
type DeadmanMarkers interface {
	ListDeadmanMarkers(ctx context.Context) ([]DeadmanMarker, error)
	PutDeadmanMarker(ctx context.Context, m DeadmanMarker) (created bool, err error)
	DeleteDeadmanMarker(ctx context.Context, scope DeadmanScope, id string) (deleted bool, err error)
}

// DeadmanCheck is the latest recorded dead-man check.
type DeadmanCheck struct {
	At time.Time // zero: no check was ever recorded
	By string    // who ran it
}

// String is c for people: "2026-03-03 10:13 UTC by serve host:42", or
// "never".
func (c DeadmanCheck) String() string {
	if c.At.IsZero() {
		return "never"
	}
	s := c.At.UTC().Format("2006-01-02 15:04 UTC")
	if c.By != "" {
		s += " by " + c.By
	}
	return s
}

// DeadmanCheckLog keeps when the dead-man check last ran. store/sqlite,
// store/postgres and deadman.RedisMarkers implement it.
type DeadmanCheckLog interface {
	// MarkDeadmanCheck records a check at `at` by `by` unless one was
	// recorded at or after notBefore, and reports whether it did. It is
	// atomic: of concurrent calls, those finding the same earlier record
	// race for one update, and only one reports true.
	MarkDeadmanCheck(ctx context.Context, at, notBefore time.Time, by string) (bool, error)
	// LastDeadmanCheck returns the latest recorded check.
	LastDeadmanCheck(ctx context.Context) (DeadmanCheck, error)
}
