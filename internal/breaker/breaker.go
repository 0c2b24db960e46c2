// Package breaker is the circuit breaker of docs/guide.md#guardrails: after every recorded
// failure, by whatever path, it reads the sync's failure streak from its
// stored runs (Streak: failures the sync's owner must fix, since its last
// success and its changed_at); when the streak reaches the threshold, it
// pauses the sync, audits the trip and raises a critical alert. Failures the
// operator owns never count: when as many of them pile up, the operator gets
// one alert and the sync keeps its schedule. The streak comes from stored
// runs, never from a worker's counter, so every worker, process and machine
// sees the same one.
package breaker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// DefaultThreshold is docs/guide.md#guardrails's streak length.
const DefaultThreshold = 5

// Notifier raises alerts (alert.Dispatcher).
type Notifier interface {
	Notify(ctx context.Context, a alert.Alert) (alert.Alert, error)
}

// Store is what the breaker needs of the store: the sync (to pause it), its
// runs (the streak) and the audit log.
type Store interface {
	store.Syncs
	store.Runs
	store.Audit
}

// Params configure a Breaker.
type Params struct {
	Store    Store
	Notifier Notifier // nil: no alert (the audit entry and the pause still happen)
	Logger   *slog.Logger
	// Link returns the sync page's URL for alerts ("" when there is no UI).
	Link func(syncID string) string
}

// Breaker evaluates streaks.
type Breaker struct{ p Params }

// New returns a Breaker.
func New(p Params) *Breaker {
	if p.Logger == nil {
		p.Logger = slog.New(slog.DiscardHandler)
	}
	return &Breaker{p: p}
}

// Trip describes a tripped breaker.
type Trip struct {
	SyncID   string
	Failures int
	LastCode string
}

// AfterFailure evaluates the sync's streak after a failure was recorded. It
// trips the breaker when the streak of failures owned by `you` reaches
// threshold, and reports the trip (nil: not tripped). When the newest run is
// an operator failure and exactly threshold of them followed the last
// success, it sends the operator one alert instead (docs/guide.md#guardrails).
func (b *Breaker) AfterFailure(ctx context.Context, syncID string, threshold int) (*Trip, error) {
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	s, k, err := Read(ctx, b.p.Store, syncID, threshold)
	if err != nil {
		return nil, err
	}
	if s.State == store.SyncPaused {
		return nil, nil
	}
	if k.Failures < threshold {
		return nil, b.operatorAlert(ctx, s, k, threshold)
	}
	last := k.Last
	trip := &Trip{SyncID: syncID, Failures: k.Failures, LastCode: last.FailureCode}
	why := fmt.Sprintf("failure streak reached %d (breaker_failures %d; failures the operator owns are not counted); last error %s: %s",
		k.Failures, threshold, trip.LastCode, last.FailureDetail)
	// Only from active: of several evaluations at once (a worker after its
	// run, recovery closing another), one pauses, audits and alerts.
	if _, err := b.p.Store.SetSyncState(ctx, store.SetSyncStateParams{
		ID: syncID, State: store.SyncPaused, Reason: "breaker", By: "oncesync", Why: why, From: store.SyncActive,
	}); errors.Is(err, store.ErrStateChanged) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("breaker: pause %s: %w", syncID, err)
	}
	if err := b.p.Store.InsertAudit(ctx, store.AuditEntry{
		SyncID: syncID, Action: string(failure.CircuitBreakerTripped), By: "oncesync", Why: why,
	}); err != nil {
		return trip, fmt.Errorf("breaker: audit %s: %w", syncID, err)
	}
	b.p.Logger.Error("circuit breaker tripped: sync paused", "sync", syncID, "failures", k.Failures, "last_code", trip.LastCode)
	if b.p.Notifier != nil {
		a := alert.FromCatalog(failure.CircuitBreakerTripped, alert.KindCircuitBreakerTripped, alert.SeverityCritical, s.Workspace, syncID, b.link(syncID))
		streak := times(k.Failures)
		if k.Failures > 1 {
			streak += " in a row"
		}
		a.WhatHappened = fmt.Sprintf("Sync %s failed %s for reasons its owner must fix (last error: %s) and was paused.",
			syncID, streak, trip.LastCode)
		a.NextStep = fmt.Sprintf("Fix the cause shown by `oncesync status --config FILE %s` (or the sync page), then resume the sync with "+
			"`oncesync resume --config FILE %s --by NAME --reason TEXT` or from the sync page.", syncID, syncID)
		if _, err := b.p.Notifier.Notify(ctx, a); err != nil {
			return trip, fmt.Errorf("breaker: alert for %s: %w", syncID, err)
		}
	}
	return trip, nil
}

// operatorAlert tells the operator that threshold failures it owns followed
// the sync's last success. It fires on the evaluation of the failure that
// made it exactly threshold, so a longer outage sends one alert per sync and
// the next success re-arms it; the alert's id is derived from that run, so a
// second evaluation of the same failure (recovery re-evaluates) repeats the
// same id, which every sink lets its receiver deduplicate. The alert is
// audited (action operator_failures): when the evaluation at threshold did
// not happen (a process that died after recording the run, a store that did
// not answer), a later evaluation of the same streak finds no such entry
// since the streak began and sends it then.
func (b *Breaker) operatorAlert(ctx context.Context, s store.Sync, k Streak, threshold int) error {
	if b.p.Notifier == nil || k.Operator < threshold || k.Newest.ID == 0 || k.Newest.ID != k.LastOperator.ID {
		return nil
	}
	audited, err := b.operatorAudited(ctx, s.ID, k.Since)
	if k.Operator > threshold && (err != nil || audited) {
		return err
	}
	r := k.LastOperator
	code := failure.Code(r.FailureCode)
	e := failure.Lookup(code)
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s\x00%s\x00%d", alert.KindOperatorFailures, s.ID, r.ID)))
	a := alert.Alert{
		ID:        hex.EncodeToString(sum[:16]),
		Kind:      alert.KindOperatorFailures,
		Severity:  alert.SeverityWarning,
		Workspace: s.Workspace,
		SyncID:    s.ID,
		WhatHappened: fmt.Sprintf("Sync %s failed %s since its last success for reasons the operator owns (last error: %s: %s). "+
			"The sync is not paused: these failures do not count toward its circuit breaker.", s.ID, times(k.Operator), e.Code, e.WhatHappened),
		NextStep: e.NextStep,
		Owner:    failure.OwnerOperator,
		Link:     b.link(s.ID),
	}
	b.p.Logger.Warn("sync failing for operator-owned reasons; not paused", "sync", s.ID, "failures", k.Operator, "last_code", code)
	if _, err := b.p.Notifier.Notify(ctx, a); err != nil {
		return fmt.Errorf("breaker: operator alert for %s: %w", s.ID, err)
	}
	if audited {
		return nil
	}
	if err := b.p.Store.InsertAudit(ctx, store.AuditEntry{
		SyncID: s.ID, Action: alert.KindOperatorFailures, By: "oncesync",
		Why: fmt.Sprintf("%d failures the operator owns since the last success (last: %s); alerted, not paused", k.Operator, code),
	}); err != nil {
		return fmt.Errorf("breaker: audit the operator alert for %s: %w", s.ID, err)
	}
	return nil
}

// operatorAudited reports whether the operator's alert of syncID was
// audited after since (the start of the current streak).
func (b *Breaker) operatorAudited(ctx context.Context, syncID string, since time.Time) (bool, error) {
	entries, err := b.p.Store.ListAudit(ctx, syncID, auditWindow)
	if err != nil {
		return false, fmt.Errorf("breaker: read the audit log of %s: %w", syncID, err)
	}
	for _, e := range entries { // newest first
		if e.At.Before(since) {
			break
		}
		if e.Action == alert.KindOperatorFailures {
			return true, nil
		}
	}
	return false, nil
}

// auditWindow bounds the audit entries operatorAudited reads, newest first:
// far more than a streak writes (its operator alert, a person's "run now"s);
// a resume or a changed definition ends the streak.
const auditWindow = 50

func (b *Breaker) link(syncID string) string {
	if b.p.Link == nil {
		return ""
	}
	return b.p.Link(syncID)
}

// times is "once" or "N times".
func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}
