// Package alert delivers oncesync's alerts (docs/config.md) to their sinks: a log
// line always, and optionally a signed webhook (Standard Webhooks), e-mail
// over SMTP and Sentry.
//
// A Dispatcher fans every alert out to its sinks. Each sink has its own queue
// and goroutine, so a slow or failing sink never blocks the caller (a run, the
// breaker, the dead-man check) nor another sink; failed deliveries are retried
// with exponential backoff and a final failure is logged.
//
// Secrets (the webhook secret, the SMTP password, the Sentry DSN) and e-mail
// addresses never appear in the errors or log lines of this package.
package alert

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/failure"
)

// Severity says how urgent an alert is.
type Severity string

// Severities.
const (
	// SeverityCritical needs a person now (breaker tripped, silent workspace).
	SeverityCritical Severity = "critical"
	// SeverityWarning needs attention soon.
	SeverityWarning Severity = "warning"
	// SeverityInfo is a notice, such as a resolution.
	SeverityInfo Severity = "info"
)

// Alert kinds. Kind is a plain string so callers may add kinds; these are the
// ones docs/guide.md#guardrails, docs/guide.md#telling-silence-from-outside name.
const (
	// KindCircuitBreakerTripped: a sync failed too many times in a row and was
	// paused (docs/guide.md#guardrails).
	KindCircuitBreakerTripped = "circuit_breaker_tripped"
	// KindDeadmanRunsWithoutSuccess: runs were recorded in the dead-man
	// window but none succeeded (docs/guide.md#telling-silence-from-outside).
	KindDeadmanRunsWithoutSuccess = "deadman_runs_without_success"
	// KindDeadmanNoRuns: no run was recorded in the dead-man window (docs/guide.md#telling-silence-from-outside).
	KindDeadmanNoRuns = "deadman_no_runs"
	// KindDeadmanResolved: a silence ended with a successful run (docs/guide.md#telling-silence-from-outside).
	KindDeadmanResolved = "deadman_resolved"
	// KindOperatorFailures: a sync failed breaker_failures times since its
	// last success for reasons the operator owns (an outage of the store,
	// Redis or the destination); such failures never pause a sync (docs/guide.md#guardrails).
	KindOperatorFailures = "operator_failures"
)

// Alert is one alert. ID is random (a dead-man alert's is its incident's,
// the same when a later check sends it again) and stable for the alert's
// lifetime: every sink and every retry uses it (it is the webhook-id, the Sentry event id and
// part of the e-mail Message-ID), so receivers can deduplicate.
type Alert struct {
	// ID identifies the alert; Dispatcher.Notify fills it with NewID when empty.
	ID string
	// Kind is what the alert is about, e.g. KindCircuitBreakerTripped.
	Kind string
	// Severity is critical, warning or info.
	Severity Severity
	// Workspace and SyncID name what the alert is about; SyncID is empty for
	// a workspace-wide alert.
	Workspace string
	SyncID    string
	// WhatHappened and NextStep are one sentence each (docs/recovery.md).
	WhatHappened string
	NextStep     string
	// Owner says who has to act.
	Owner failure.Owner
	// Link points at the sync (or workspace) page.
	Link string
	// At is when the alert was raised; Dispatcher.Notify fills it from its
	// clock when zero.
	At time.Time
}

// Subject is a one-line summary of the alert, used as the e-mail subject.
func (a Alert) Subject() string {
	target := a.Workspace
	if a.SyncID != "" {
		if target != "" {
			target += "/"
		}
		target += a.SyncID
	}
	s := fmt.Sprintf("[oncesync %s] %s", a.Severity, a.Kind)
	if target != "" {
		s += ": " + target
	}
	return s
}

// FromCatalog returns an alert of kind and severity whose what-happened,
// next-step and owner come from the failure catalog entry of code.
func FromCatalog(code failure.Code, kind string, severity Severity, workspace, syncID, link string) Alert {
	e := failure.Lookup(code)
	return Alert{
		Kind:         kind,
		Severity:     severity,
		Workspace:    workspace,
		SyncID:       syncID,
		WhatHappened: e.WhatHappened,
		NextStep:     e.NextStep,
		Owner:        e.Owner,
		Link:         link,
	}
}

// NewID returns a random alert id: 32 lowercase hex digits (128 bits), which
// is also a valid Sentry event id.
func NewID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+).
	return hex.EncodeToString(b[:])
}

// Sink delivers alerts to one destination.
type Sink interface {
	// Name identifies the sink in logs ("log", "webhook", "email", "sentry").
	Name() string
	// Send delivers one alert. It honours ctx's deadline and cancellation.
	// An error wrapping ErrPermanent is not retried.
	Send(ctx context.Context, a Alert) error
}

// Errors.
var (
	// ErrPermanent marks a delivery failure that retrying cannot fix (for
	// example a webhook endpoint answering 404). Sinks wrap it.
	ErrPermanent = errors.New("permanent failure")
	// ErrInvalidConfig is returned when a sink cannot be built from its
	// configuration.
	ErrInvalidConfig = errors.New("invalid alert sink configuration")
	// ErrClosed is returned by Notify after Close.
	ErrClosed = errors.New("alert dispatcher closed")
)

// redacted replaces secrets and e-mail addresses in error messages.
const redacted = "[redacted]"

// scrubbedError is an error whose message has had secrets removed; it still
// unwraps to the original so errors.Is/As keep working.
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// scrub returns err with every non-empty secret replaced in its message.
func scrub(err error, secrets ...string) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	changed := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, redacted)
			changed = true
		}
	}
	if !changed {
		return err
	}
	return &scrubbedError{msg: msg, err: err}
}
