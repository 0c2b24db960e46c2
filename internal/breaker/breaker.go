// Package breaker is the circuit breaker of SPEC §8: after every recorded
// failure, by whatever path, it reads the sync's last N finished runs since the
// sync last changed; if all N failed, it pauses the sync, audits the trip and
// raises a critical alert. The streak comes from stored runs, never from a
// worker's counter, so every worker, process and machine sees the same one.
package breaker

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// DefaultThreshold is SPEC §8's streak length.
const DefaultThreshold = 5

// Notifier raises alerts (alert.Dispatcher).
type Notifier interface {
	Notify(ctx context.Context, a alert.Alert) (alert.Alert, error)
}

// Params configure a Breaker.
type Params struct {
	Store    store.Store
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

// AfterFailure evaluates the sync's streak after a failure was recorded and
// trips the breaker when the last threshold finished runs since the sync's
// changed_at all failed. It reports the trip, or nil.
func (b *Breaker) AfterFailure(ctx context.Context, syncID string, threshold int) (*Trip, error) {
	if threshold <= 0 {
		threshold = DefaultThreshold
	}
	s, err := b.p.Store.GetSync(ctx, syncID)
	if err != nil {
		return nil, fmt.Errorf("breaker: load sync %s: %w", syncID, err)
	}
	if s.State == store.SyncPaused {
		return nil, nil
	}
	runs, err := b.p.Store.ListRuns(ctx, syncID, threshold*4+20)
	if err != nil {
		return nil, fmt.Errorf("breaker: list runs of %s: %w", syncID, err)
	}
	var streak []store.Run
	for _, r := range runs { // newest first
		if r.StartedAt.Before(s.ChangedAt) {
			break // older than the last publish/resume: no longer counts
		}
		switch r.State {
		case store.RunSucceeded:
			return nil, nil // a success resets the streak
		case store.RunFailed:
			streak = append(streak, r)
		}
		if len(streak) == threshold {
			break
		}
	}
	if len(streak) < threshold {
		return nil, nil
	}
	trip := &Trip{SyncID: syncID, Failures: threshold, LastCode: streak[0].FailureCode}
	why := fmt.Sprintf("the last %d runs failed; last error %s: %s", threshold, trip.LastCode, streak[0].FailureDetail)
	if _, err := b.p.Store.SetSyncState(ctx, store.SetSyncStateParams{
		ID: syncID, State: store.SyncPaused, Reason: "breaker", By: "oncesync", Why: why,
	}); err != nil {
		return nil, fmt.Errorf("breaker: pause %s: %w", syncID, err)
	}
	if err := b.p.Store.InsertAudit(ctx, store.AuditEntry{
		SyncID: syncID, Action: string(failure.CircuitBreakerTripped), By: "oncesync", Why: why,
	}); err != nil {
		return trip, fmt.Errorf("breaker: audit %s: %w", syncID, err)
	}
	b.p.Logger.Error("circuit breaker tripped: sync paused", "sync", syncID, "failures", threshold, "last_code", trip.LastCode)
	if b.p.Notifier != nil {
		link := ""
		if b.p.Link != nil {
			link = b.p.Link(syncID)
		}
		a := alert.FromCatalog(failure.CircuitBreakerTripped, alert.KindCircuitBreakerTripped, alert.SeverityCritical, s.Workspace, syncID, link)
		a.WhatHappened = fmt.Sprintf("Sync %s failed %d times in a row (last error: %s) and was paused.", syncID, threshold, trip.LastCode)
		if _, err := b.p.Notifier.Notify(ctx, a); err != nil {
			return trip, fmt.Errorf("breaker: alert for %s: %w", syncID, err)
		}
	}
	return trip, nil
}
