// Package deadman is oncesync's dead-man check (docs/guide.md#telling-silence-from-outside): every hour at
// minute 13 the leader asks, for every workspace with an active sync and for
// every active sync on its own, whether a run succeeded within the dead-man
// window, and raises one critical alert per silence.
//
// A silence is one of two kinds: runs_without_success (runs were recorded in
// the window, none succeeded: the sync's owner has a failure to fix) or
// no_runs (nothing was recorded: a stopped scheduler, a stuck queue, a worker
// that never started: the operator's). Workspaces and syncs enabled less than
// a window ago are skipped. An alert creates a marker (scope, id, kind, since)
// that suppresses repeats until the first successful run after the silence
// began; that run, as it is recorded (Resolve), removes the marker, sends an
// info-level resolution notice and so re-arms the alert (or the next check
// does, for a success recorded without it). A person who enables the target
// again (resume, republish: its changed_at moves past the alert) re-arms it
// too, without a notice: the target is young again, and a silence a window
// after that is a new incident, alerted.
//
// The per-sync check exists because a workspace check alone lets a healthy
// sync hide a silent sibling. The window is per-sync overridable; a
// workspace's is the longest of its active syncs' (the deployment's when
// none overrides it), so a workspace of weekly syncs is not silent while
// each of them is within its window.
//
// A sync the circuit breaker paused is judged like an active one (alone, not
// in its workspace's aggregate): it stays silent until a person resumes it,
// and the trip's own alert is sent once, to sinks that may be down. A sync a
// person paused is not judged.
//
// Everything the check reads comes from one query (Store.SyncActivity), so
// its cost is one scan of the syncs with a few index probes each, whatever
// the number of runs. Markers live in Redis when one is configured
// (RedisMarkers), else in the store.
package deadman

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// DefaultWindow is the dead-man window when none is configured (docs/guide.md#telling-silence-from-outside).
const DefaultWindow = 24 * time.Hour

// The types the store keeps for the check are the store's
// (internal/store/deadman.go).
type (
	// Scope says what a check or a marker is about.
	Scope = store.DeadmanScope
	// Kind is the kind of a silence.
	Kind = store.DeadmanKind
	// Activity is what the check needs to know about one sync.
	Activity = store.Activity
	// Store reads every sync's activity in one query.
	Store = store.ActivityReader
	// Marker is the record of one alerted silence.
	Marker = store.DeadmanMarker
	// MarkerStore keeps markers (SET NX semantics).
	MarkerStore = store.DeadmanMarkers
	// LastCheck is the latest recorded dead-man check.
	LastCheck = store.DeadmanCheck
	// CheckLog keeps when the check last ran (fallback.go).
	CheckLog = store.DeadmanCheckLog
)

// Scopes.
const (
	ScopeWorkspace = store.DeadmanScopeWorkspace
	ScopeSync      = store.DeadmanScopeSync
)

// Kinds of silence (docs/guide.md#telling-silence-from-outside).
const (
	// KindRunsWithoutSuccess: runs were recorded in the window, none
	// succeeded. Owner: the sync's owner.
	KindRunsWithoutSuccess = store.DeadmanRunsWithoutSuccess
	// KindNoRuns: no run was recorded in the window. Owner: the operator.
	KindNoRuns = store.DeadmanNoRuns
)

// AlertKind is the alert kind of a silence of kind k.
func AlertKind(k Kind) string {
	if k == KindNoRuns {
		return alert.KindDeadmanNoRuns
	}
	return alert.KindDeadmanRunsWithoutSuccess
}

// OwnerOf is who has to act on a silence of kind k: the operator for
// no_runs (the scheduler, queue or workers), the sync's owner otherwise.
func OwnerOf(k Kind) failure.Owner {
	if k == KindNoRuns {
		return failure.OwnerOperator
	}
	return failure.OwnerYou
}

// Notifier sends alerts; *alert.Dispatcher implements it.
type Notifier interface {
	Notify(ctx context.Context, a alert.Alert) (alert.Alert, error)
}

// Confirmer is a Notifier that tells how an alert fared at its sinks
// (*alert.Dispatcher). With one, a silence counts as alerted only once the
// alert reached somebody (alert.Delivery.Told); without, once it was
// queued.
type Confirmer interface {
	Send(ctx context.Context, a alert.Alert) (alert.Alert, *alert.Delivery, error)
}

// DefaultDeliveryWait is Params.DeliveryWait's default: long enough for
// the dispatcher's retries of a sink that answers (alert.DefaultAttempts),
// well within the hourly job's JobTimeout.
const DefaultDeliveryWait = 3 * time.Minute

// Params configure a Checker.
type Params struct {
	Store    Store       // required
	Markers  MarkerStore // required
	Notifier Notifier    // required
	// Clock tells the time of the check (nil: the wall clock).
	Clock clock.Clock
	// Logger receives one summary line per check (nil: discarded).
	Logger *slog.Logger
	// DefaultWindow is the deployment's window (config settings.deadman_window;
	// 0: DefaultWindow). A workspace is checked with the longest window of
	// its active syncs.
	DefaultWindow time.Duration
	// Window returns a sync's window (its override or the deployment's, see
	// config.Sync.EffectiveDeadmanWindow); nil or a result <= 0 means
	// DefaultWindow.
	Window func(syncID string) time.Duration
	// Link returns the page of a sync, or of a workspace when syncID is ""
	// (nil: no link).
	Link func(workspace, syncID string) string
	// MaxAlerts caps the alerts and notices one check sends (0:
	// DefaultMaxAlerts; < 0: no cap). Beyond it, silences stay unmarked and
	// ended silences marked, so the next check sends them: a mass silence
	// (a stopped scheduler silences every sync) must not overflow the alert
	// sinks' queues (alert.DefaultQueueSize), which drop what does not fit.
	// Workspaces are judged first, so their alerts go out first.
	MaxAlerts int
	// Checks records every check (CheckLog); nil means Markers when it
	// implements CheckLog, else no record (CheckIfDue then refuses).
	Checks CheckLog
	// Who names this checker in the record ("serve host:pid", "oncesync
	// deadman check"); shown by `oncesync deadman check`.
	Who string
	// DeliveryWait bounds how long a check waits for its alerts to reach
	// somebody when the Notifier is a Confirmer (0: DefaultDeliveryWait).
	// A silence whose alert reached no sink but the log by then (every
	// sink down, refusing, or still retrying) is not marked: the check
	// returns an error and the next one sends the alert again, so a sink
	// that is down for a moment cannot swallow an incident's only alert.
	DeliveryWait time.Duration
	// Configured reports whether the deployment still runs a sync (it is in
	// the config); nil means every sync of the store. A sync removed from
	// the config keeps its row and runs in the store, but nothing schedules
	// it any more: its quiet is no silence, and its marker is dropped
	// (docs/guide.md#telling-silence-from-outside).
	Configured func(syncID string) bool
}

// DefaultMaxAlerts is Params.MaxAlerts' default: below alert.DefaultQueueSize.
const DefaultMaxAlerts = 200

// Checker runs the dead-man check. It is safe for concurrent use; concurrent
// checks (two leaders for a moment) alert once, thanks to the markers' NX.
type Checker struct {
	st       Store
	markers  MarkerStore
	notifier Notifier
	clock    clock.Clock
	log      *slog.Logger
	window   time.Duration
	windowOf func(string) time.Duration
	link     func(string, string) string
	max      int
	checks   CheckLog
	who      string
	known    func(string) bool
	wait     time.Duration
}

// ErrInvalidParams is returned by New when a required parameter is missing.
var ErrInvalidParams = errors.New("deadman: invalid parameters")

// New returns a Checker.
func New(p Params) (*Checker, error) {
	if p.Store == nil || p.Markers == nil || p.Notifier == nil {
		return nil, fmt.Errorf("%w: Store, Markers and Notifier are required", ErrInvalidParams)
	}
	c := &Checker{
		st: p.Store, markers: p.Markers, notifier: p.Notifier,
		clock: p.Clock, log: p.Logger, window: p.DefaultWindow, windowOf: p.Window, link: p.Link,
		max: p.MaxAlerts, checks: p.Checks, who: p.Who, known: p.Configured,
		wait: cmp.Or(p.DeliveryWait, DefaultDeliveryWait),
	}
	if c.checks == nil {
		c.checks, _ = p.Markers.(CheckLog)
	}
	if c.max == 0 {
		c.max = DefaultMaxAlerts
	}
	if c.clock == nil {
		c.clock = clock.Real{}
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.window <= 0 {
		c.window = DefaultWindow
	}
	return c, nil
}

// Status is the outcome of one workspace's or sync's check.
type Status string

// Statuses.
const (
	// StatusOK: a run succeeded within the window.
	StatusOK Status = "ok"
	// StatusYoung: skipped, enabled less than a window ago.
	StatusYoung Status = "young"
	// StatusSilent: no run succeeded within the window.
	StatusSilent Status = "silent"
)

// Verdict is the check of one workspace or one active sync.
type Verdict struct {
	Scope     Scope
	ID        string // workspace or sync id
	Workspace string
	Status    Status
	// Kind is the kind of silence (StatusSilent only).
	Kind   Kind
	Window time.Duration
	// ChangedAt is the sync's changed_at; for a workspace, its oldest active
	// sync's.
	ChangedAt time.Time
	// LastSuccessAt and LastRunAt are the latest over the workspace's syncs
	// for a workspace (zero: never).
	LastSuccessAt time.Time
	LastRunAt     time.Time
	// SilentSince is when the silence began (StatusSilent only): the last
	// success, or ChangedAt when nothing ever succeeded.
	SilentSince time.Time
	// Marker is the incident's marker after the check (nil: none); a silent
	// verdict without one has not been alerted.
	Marker *Marker
	// Alerted: this check sent the silence's alert.
	Alerted bool
	// Resolved: this check ended the previous silence (marker removed,
	// resolution notice sent).
	Resolved bool
	// Deferred: this check reached Params.MaxAlerts before sending this
	// verdict's alert or notice; the next check sends it.
	Deferred bool
}

// Report is what one check saw and did.
type Report struct {
	At time.Time
	// Verdicts has one entry per workspace with an active sync, then one
	// per active sync, each group sorted by id.
	Verdicts []Verdict
	// Resolved are the markers removed with a resolution notice.
	Resolved []Marker
	// Dropped are the markers removed without a notice because their
	// workspace or sync no longer exists.
	Dropped []Marker
	// Rearmed are the markers removed without a notice because their
	// target was enabled again (resumed, republished) after the alert: its
	// window starts again, and a silence a window later is a new incident.
	Rearmed []Marker
	// Sent is the number of alerts and notices sent.
	Sent int
	// First, on a check CheckIfDue ran, says that no check had been
	// recorded before it (a new store): no leader's check was missed.
	First bool
}

// Find returns the verdict of scope/id.
func (r Report) Find(scope Scope, id string) (Verdict, bool) {
	for _, v := range r.Verdicts {
		if v.Scope == scope && v.ID == id {
			return v, true
		}
	}
	return Verdict{}, false
}

// Count returns the number of verdicts of scope (any scope when "") with
// status.
func (r Report) Count(scope Scope, status Status) int {
	n := 0
	for _, v := range r.Verdicts {
		if (scope == "" || v.Scope == scope) && v.Status == status {
			n++
		}
	}
	return n
}

// Alerted returns the verdicts whose alert this check sent.
func (r Report) Alerted() []Verdict {
	var out []Verdict
	for _, v := range r.Verdicts {
		if v.Alerted {
			out = append(out, v)
		}
	}
	return out
}

// Skipped returns the verdicts skipped as young.
func (r Report) Skipped() []Verdict {
	var out []Verdict
	for _, v := range r.Verdicts {
		if v.Status == StatusYoung {
			out = append(out, v)
		}
	}
	return out
}

type markerKey struct {
	scope Scope
	id    string
}

// workspaceAgg is a workspace's activity folded over its syncs.
type workspaceAgg struct {
	id            string
	anyActive     bool
	oldestActive  time.Time     // min changed_at of its active syncs
	window        time.Duration // the longest window of its active syncs
	lastSuccessAt time.Time     // over all its syncs
	lastRunAt     time.Time     // over all its syncs
	failedLast    bool          // an active sync's latest run failed
	heldLast      bool          // an active sync's latest run was skipped
	// owners of the latest failures of its active syncs whose latest run
	// failed or was skipped; one owner is the workspace alert's (as its
	// syncs' alerts say).
	owners map[failure.Owner]bool
}

// Check runs the dead-man check once: it records the check (CheckLog), alerts
// new silences, resolves ended ones and returns what it saw. A failure to
// alert or resolve one target does not stop the others; the returned error
// joins them (with a complete Report of what was done).
func (c *Checker) Check(ctx context.Context) (Report, error) {
	// Recorded first, so a fallback looking now sees this check coming.
	recErr := c.record(ctx, c.clock.Now())
	rep, err := c.run(ctx, true)
	return rep, errors.Join(recErr, err)
}

// Evaluate is Check without side effects: no alert, no notice, no marker
// change. Verdicts carry the markers as they are (`oncesync status`, the
// sync page).
func (c *Checker) Evaluate(ctx context.Context) (Report, error) {
	return c.run(ctx, false)
}

func (c *Checker) run(ctx context.Context, apply bool) (Report, error) {
	now := c.clock.Now()
	rep := Report{At: now}
	acts, err := c.st.SyncActivity(ctx)
	if err != nil {
		return rep, storeErr("read sync activity", err)
	}
	if c.known != nil {
		// Syncs removed from the config are judged as gone: neither they
		// nor their workspace's aggregate count, and their markers drop.
		acts = slices.DeleteFunc(acts, func(a Activity) bool { return !c.known(a.SyncID) })
	}
	list, err := c.markers.ListDeadmanMarkers(ctx)
	if err != nil {
		return rep, storeErr("list markers", err)
	}
	markers := make(map[markerKey]*Marker, len(list))
	for i := range list {
		m := &list[i]
		markers[markerKey{m.Scope, m.ID}] = m
	}

	// Fold the syncs into their workspaces.
	wsIndex := make(map[string]int)
	var workspaces []workspaceAgg
	syncIDs := make(map[string]struct{}, len(acts))
	for i := range acts {
		a := &acts[i]
		syncIDs[a.SyncID] = struct{}{}
		j, ok := wsIndex[a.Workspace]
		if !ok {
			j = len(workspaces)
			wsIndex[a.Workspace] = j
			workspaces = append(workspaces, workspaceAgg{id: a.Workspace})
		}
		w := &workspaces[j]
		if a.State == store.SyncActive {
			if !w.anyActive || a.ChangedAt.Before(w.oldestActive) {
				w.oldestActive = a.ChangedAt
			}
			w.anyActive = true
			w.window = max(w.window, c.windowFor(a.SyncID))
			// Only active syncs are the workspace's: a paused one is judged
			// alone (the breaker's) or not at all (a person's), and its
			// failed runs made an idle workspace read runs_without_success.
			w.lastSuccessAt = later(w.lastSuccessAt, a.LastSuccessAt)
			w.lastRunAt = later(w.lastRunAt, a.LastRunAt)
			w.failedLast = w.failedLast || a.LastRunState == store.RunFailed
			w.heldLast = w.heldLast || held(a)
			if o, ok := ownerOfLast(a); ok {
				if w.owners == nil {
					w.owners = map[failure.Owner]bool{}
				}
				w.owners[o] = true
			}
		}
	}
	slices.SortFunc(workspaces, func(a, b workspaceAgg) int { return cmp.Compare(a.id, b.id) })

	var errs []error
	var sent []sentAlert
	judge := func(t target) {
		v, d, err := c.judge(ctx, now, t, markers[markerKey{t.scope, t.id}], apply, &rep)
		if err != nil {
			errs = append(errs, err)
		}
		if v != nil {
			if d != nil {
				sent = append(sent, sentAlert{verdict: len(rep.Verdicts), delivery: d})
			}
			rep.Verdicts = append(rep.Verdicts, *v)
		}
	}
	rep.Verdicts = make([]Verdict, 0, len(workspaces)+len(acts))
	for i := range workspaces {
		w := &workspaces[i]
		judge(target{
			scope: ScopeWorkspace, id: w.id, workspace: w.id, active: w.anyActive, window: cmp.Or(w.window, c.window),
			changedAt: w.oldestActive, lastSuccessAt: w.lastSuccessAt, lastRunAt: w.lastRunAt, failedLast: w.failedLast,
			heldLast: w.heldLast, failureOwner: soleOwner(w.owners),
		})
	}
	slices.SortFunc(acts, func(a, b Activity) int { return cmp.Compare(a.SyncID, b.SyncID) })
	for i := range acts {
		a := &acts[i]
		judge(target{
			scope: ScopeSync, id: a.SyncID, workspace: a.Workspace,
			active: a.State == store.SyncActive || tripped(a), tripped: tripped(a),
			window: c.windowFor(a.SyncID), changedAt: a.ChangedAt,
			lastSuccessAt: a.LastSuccessAt, lastRunAt: a.LastRunAt, last: a, failedLast: a.LastRunState == store.RunFailed,
			heldLast: held(a),
		})
	}

	errs = append(errs, c.confirm(ctx, &rep, sent)...)

	// Markers whose workspace or sync is gone from the store.
	for _, m := range list {
		_, wsExists := wsIndex[m.ID]
		_, syncExists := syncIDs[m.ID]
		if (m.Scope == ScopeWorkspace && wsExists) || (m.Scope == ScopeSync && syncExists) {
			continue
		}
		if !apply {
			continue
		}
		if _, err := c.markers.DeleteDeadmanMarker(ctx, m.Scope, m.ID); err != nil {
			errs = append(errs, fmt.Errorf("deadman: drop the marker of %s %s: %w", m.Scope, m.ID, err))
			continue
		}
		rep.Dropped = append(rep.Dropped, m)
	}

	if apply {
		c.log.LogAttrs(ctx, slog.LevelInfo, "deadman check",
			slog.Int("workspaces", len(workspaces)), slog.Int("syncs", len(acts)),
			slog.Int("silent", rep.Count("", StatusSilent)), slog.Int("alerted", len(rep.Alerted())),
			slog.Int("resolved", len(rep.Resolved)), slog.Int("rearmed", len(rep.Rearmed)), slog.Int("young", rep.Count("", StatusYoung)),
			slog.Int("deferred", deferredCount(rep)),
			slog.Duration("took", c.clock.Now().Sub(now)))
	}
	return rep, errors.Join(errs...)
}

// capped reports whether rep reached the cap of alerts per check.
func (c *Checker) capped(rep *Report) bool { return c.max > 0 && rep.Sent >= c.max }

func (c *Checker) windowFor(syncID string) time.Duration {
	if c.windowOf != nil {
		if w := c.windowOf(syncID); w > 0 {
			return w
		}
	}
	return c.window
}

// target is one workspace or sync to judge.
type target struct {
	scope         Scope
	id            string
	workspace     string
	active        bool // a sync: active or tripped; a workspace: has an active sync
	tripped       bool // a sync paused by the circuit breaker
	window        time.Duration
	changedAt     time.Time
	lastSuccessAt time.Time
	lastRunAt     time.Time
	last          *Activity // a sync's latest run (nil for a workspace)
	// failedLast: a sync's latest run failed; for a workspace, one of its
	// active syncs'.
	failedLast bool
	// heldLast: a sync's latest run was skipped, another run holding its
	// lease; for a workspace, one of its active syncs'.
	heldLast bool
	// failureOwner: a workspace's, the one owner of its active syncs'
	// latest failures and skips ("" when none or several).
	failureOwner failure.Owner
}

// held reports whether a's latest run was skipped: another run of the sync
// held its lease. Every run after one that never ends (its process renews
// its lease) is skipped at once, so a silence whose latest run was skipped
// is that run's, not a failure's: the skip's own code (already_running:
// "nothing to do, the next run starts normally") would tell it wrongly.
func held(a *Activity) bool { return a.LastRunState == store.RunSkipped }

// ownerOfLast is who acts on a's latest run when it failed or was skipped:
// its failure's owner, the operator's for a skip (a run that holds the
// lease and does not end).
func ownerOfLast(a *Activity) (failure.Owner, bool) {
	switch {
	case held(a):
		return failure.OwnerOperator, true
	case a.LastRunState == store.RunFailed && a.LastFailureCode != "":
		return failure.Lookup(failure.Code(a.LastFailureCode)).Owner, true
	}
	return "", false
}

// soleOwner is the one owner in owners, or "".
func soleOwner(owners map[failure.Owner]bool) failure.Owner {
	if len(owners) != 1 {
		return ""
	}
	for o := range owners {
		return o
	}
	return ""
}

// tripped reports whether the circuit breaker paused a's sync.
func tripped(a *Activity) bool {
	return a.State == store.SyncPaused && a.PauseReason == "breaker"
}

// judge resolves t's ended silence, then judges t when it is active. It
// returns nil for an inactive target (a paused sync, a workspace without an
// active sync).
func (c *Checker) judge(ctx context.Context, now time.Time, t target, m *Marker, apply bool, rep *Report) (*Verdict, *alert.Delivery, error) {
	var errs []error
	resolved, deferred := false, false
	if m != nil && t.lastSuccessAt.After(m.Since) {
		switch {
		case apply && c.capped(rep):
			deferred = true
		case apply:
			done, err := c.resolve(ctx, now, t, *m)
			switch {
			case done:
				if err != nil {
					errs = append(errs, err)
				} else {
					rep.Sent++
				}
				rep.Resolved = append(rep.Resolved, *m)
				m, resolved = nil, true
			case err != nil:
				errs = append(errs, err)
			default: // another checker resolved it a moment ago
				m = nil
			}
		}
	}
	if m != nil && t.active && m.RaisedAt.Before(t.changedAt) && !t.lastSuccessAt.After(m.Since) {
		// Re-enabled (resumed, republished) since the alert: the window
		// starts again at changedAt (young until a window later), and so
		// does the incident. The old marker would keep the next silence
		// from ever being alerted: a sync resumed as fixed that still does
		// not run would be told to nobody until its first success.
		switch {
		case !apply:
			m = nil
		default:
			if _, err := c.markers.DeleteDeadmanMarker(ctx, m.Scope, m.ID); err != nil {
				errs = append(errs, fmt.Errorf("deadman: re-arm the alert of %s %s: %w", m.Scope, m.ID, err))
			} else {
				rep.Rearmed = append(rep.Rearmed, *m)
				m = nil
			}
		}
	}
	if !t.active {
		return nil, nil, errors.Join(errs...)
	}
	v := &Verdict{
		Scope: t.scope, ID: t.id, Workspace: t.workspace, Window: t.window, ChangedAt: t.changedAt,
		LastSuccessAt: t.lastSuccessAt, LastRunAt: t.lastRunAt, Marker: m, Resolved: resolved, Deferred: deferred,
	}
	horizon := now.Add(-t.window)
	switch {
	case !t.lastSuccessAt.Before(horizon):
		v.Status = StatusOK
	case t.changedAt.After(horizon):
		v.Status = StatusYoung
	default:
		v.Status = StatusSilent
		v.Kind = KindNoRuns
		if t.tripped || (!t.lastRunAt.IsZero() && !t.lastRunAt.Before(horizon)) || t.failedLast {
			// A tripped sync's runs failed; no scheduler is at fault. Nor,
			// first, is it when the latest run failed before the window:
			// its retry waits out a backoff that grows with each attempt
			// and can outlast the window (an independent check, 2026-12-06).
			v.Kind = KindRunsWithoutSuccess
		}
		v.SilentSince = t.changedAt
		if !t.lastSuccessAt.IsZero() {
			v.SilentSince = t.lastSuccessAt
		}
		switch {
		case m != nil || !apply:
		case c.capped(rep):
			v.Deferred = true
		default:
			d, err := c.raise(ctx, now, t, v)
			if err != nil {
				errs = append(errs, err)
			} else if v.Alerted {
				rep.Sent++
			}
			return v, d, errors.Join(errs...)
		}
	}
	return v, nil, errors.Join(errs...)
}

// incidentID is the id of the alert of t's silence since v.SilentSince:
// the same for every check that sends it, so that an alert sent again
// after it was taken for undelivered (a sink's answer lost on its way
// back) is the same alert to its receivers, which deduplicate by id (the
// webhook-id, Sentry's event id: 32 hex digits).
func incidentID(t target, v *Verdict) string {
	h := sha256.Sum256([]byte("deadman\x00" + string(t.scope) + "\x00" + t.id + "\x00" +
		strconv.FormatInt(v.SilentSince.UnixNano(), 10)))
	return hex.EncodeToString(h[:16])
}

// raise creates the marker of a new silence and, if this check created it,
// sends the alert, returning its Delivery when the notifier is a Confirmer
// (confirm waits on it). If the alert cannot be handed to the notifier, the
// marker is removed again so the next check retries.
func (c *Checker) raise(ctx context.Context, now time.Time, t target, v *Verdict) (*alert.Delivery, error) {
	a := c.silenceAlert(now, t, v)
	a.ID = incidentID(t, v)
	a.At = now
	m := Marker{
		Scope: t.scope, ID: t.id, Workspace: t.workspace, Kind: v.Kind,
		Since: v.SilentSince, RaisedAt: now, AlertID: a.ID,
	}
	created, err := c.markers.PutDeadmanMarker(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("deadman: mark the silence of %s %s: %w", t.scope, t.id, err)
	}
	if !created { // another checker raised it a moment ago
		if ms, err := c.markers.ListDeadmanMarkers(ctx); err == nil {
			for i := range ms {
				if ms[i].Scope == t.scope && ms[i].ID == t.id {
					v.Marker = &ms[i]
				}
			}
		}
		return nil, nil
	}
	var d *alert.Delivery
	if cf, ok := c.notifier.(Confirmer); ok {
		_, d, err = cf.Send(ctx, a)
	} else {
		_, err = c.notifier.Notify(ctx, a)
	}
	if err != nil {
		_, derr := c.markers.DeleteDeadmanMarker(ctx, t.scope, t.id)
		return nil, errors.Join(fmt.Errorf("deadman: alert the silence of %s %s: %w", t.scope, t.id, err), derr)
	}
	v.Marker, v.Alerted = &m, true
	return d, nil
}

// sentAlert is a silence's alert whose delivery confirm awaits.
type sentAlert struct {
	verdict  int // index in Report.Verdicts
	delivery *alert.Delivery
}

// confirm waits (DeliveryWait at most, for all of them together) until the
// alerts this check sent reached somebody. A silence whose alert reached no
// sink but the log loses its marker, so the next check alerts it again: an
// alert that only a log line kept is one nobody was told of.
func (c *Checker) confirm(ctx context.Context, rep *Report, sent []sentAlert) []error {
	if len(sent) == 0 {
		return nil
	}
	wctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	var errs []error
	for _, s := range sent {
		_ = s.delivery.Wait(wctx)
		if s.delivery.Told() {
			continue
		}
		v := &rep.Verdicts[s.verdict]
		var whys []string
		if failed := s.delivery.Failed(); len(failed) > 0 {
			whys = append(whys, "gave up: "+strings.Join(failed, ", "))
		}
		if pending := s.delivery.Pending(); len(pending) > 0 {
			whys = append(whys, "still retrying after "+c.wait.String()+": "+strings.Join(pending, ", "))
		}
		why := strings.Join(whys, "; ")
		_, derr := c.markers.DeleteDeadmanMarker(ctx, v.Scope, v.ID)
		errs = append(errs, failure.Wrap(failure.AlertUndelivered, derr,
			"the alert of the silence of %s %s reached nobody: %s; the next check sends it again", v.Scope, v.ID, why))
		v.Marker, v.Alerted = nil, false
		rep.Sent--
	}
	return errs
}

// resolve removes an ended silence's marker and, when this check removed it,
// sends the resolution notice and reports true.
func (c *Checker) resolve(ctx context.Context, now time.Time, t target, m Marker) (bool, error) {
	deleted, err := c.markers.DeleteDeadmanMarker(ctx, m.Scope, m.ID)
	if err != nil {
		return false, fmt.Errorf("deadman: clear the silence of %s %s: %w", m.Scope, m.ID, err)
	}
	if !deleted {
		return false, nil
	}
	a := c.resolvedAlert(t, m)
	a.At = now
	if _, err := c.notifier.Notify(ctx, a); err != nil {
		// The marker is gone: the alert is re-armed; only the notice is lost.
		return true, fmt.Errorf("deadman: notify the end of the silence of %s %s: %w", m.Scope, m.ID, err)
	}
	return true, nil
}

// storeErr wraps err, giving an unreachable store or Redis (the markers and
// the check record may live there) its catalog code.
func storeErr(what string, err error) error {
	if errors.Is(err, store.ErrUnavailable) || errors.Is(err, ErrRedis) {
		return failure.Wrap(failure.StoreUnavailable, err, "deadman: %s", what)
	}
	return fmt.Errorf("deadman: %s: %w", what, err)
}

func deferredCount(rep Report) int {
	n := 0
	for _, v := range rep.Verdicts {
		if v.Deferred {
			n++
		}
	}
	return n
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// Resolve ends, right after a run of syncID (in workspace) succeeded at
// succeededAt, the silences that success ends: the sync's own, and its
// workspace's (any success of a workspace ends its silence). Each marker is
// removed and its resolution notice sent at once, as the next check would
// (an hour later under serve); a marker another process removed meanwhile
// is left to it. Only the markers' store is read.
func (c *Checker) Resolve(ctx context.Context, syncID, workspace string, succeededAt time.Time) error {
	ms, err := c.markers.ListDeadmanMarkers(ctx)
	if err != nil {
		return storeErr("list markers", err)
	}
	var errs []error
	for _, m := range ms {
		mine := m.Scope == ScopeSync && m.ID == syncID || m.Scope == ScopeWorkspace && m.ID == workspace && workspace != ""
		if !mine || !succeededAt.After(m.Since) {
			continue
		}
		t := target{scope: m.Scope, id: m.ID, workspace: m.Workspace, lastSuccessAt: succeededAt}
		if t.workspace == "" {
			t.workspace = workspace
		}
		done, err := c.resolve(ctx, c.clock.Now(), t, m)
		if err != nil {
			errs = append(errs, err)
		}
		if done {
			c.log.LogAttrs(ctx, slog.LevelInfo, "dead-man silence ended by a successful run",
				slog.String("scope", string(m.Scope)), slog.String("id", m.ID), slog.String("kind", string(m.Kind)))
		}
	}
	return errors.Join(errs...)
}
