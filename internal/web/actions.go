package web

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
)

// Settle outcomes: what a person found at the destination.
const (
	// SettleDelivered: the record arrived; its entry becomes complete and
	// no run sends it again.
	SettleDelivered = "delivered"
	// SettleResend: the record did not arrive; its entry becomes rejected,
	// which the next run that reads the record claims and sends again.
	SettleResend = "resend"
)

// Audit actions written by the UI and the API (pause and resume are written
// by store.SetSyncState).
const (
	AuditRunNow = "run_now"
	// AuditResendAll: a run that writes every record again was queued.
	AuditResendAll = "resend_all"
	AuditSettle    = "settle"
	AuditRequeue   = "requeue"
)

const (
	maxBy        = 100
	maxWhy       = 500
	maxSettleKey = 1000
)

var ledgerKey = regexp.MustCompile(`^[0-9a-f]{64}$`)

// ActionInput is who acts and why (every action is audited with both).
// By is always the principal's name (a user's or a token's): a "by" sent
// by a client is accepted and ignored, so that nobody can act as someone
// else.
type ActionInput struct {
	By  string `json:"by"`
	Why string `json:"why"`
}

// RunInput is "run now": who and why, and Resend to write every record
// again, also those the destination already holds (why is then required).
type RunInput struct {
	ActionInput
	Resend bool `json:"resend"`
}

// SettleInput settles in-doubt records of a run.
type SettleInput struct {
	ActionInput
	Keys    []string `json:"keys"`
	Outcome string   `json:"outcome"`
}

func cleanText(field, v string, max int, required bool) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" && required {
		return "", fmt.Errorf("%w: %s is required", ErrInvalid, field)
	}
	if len(v) > max {
		return "", fmt.Errorf("%w: %s is longer than %d bytes", ErrInvalid, field, max)
	}
	if strings.IndexFunc(v, unicode.IsControl) >= 0 {
		return "", fmt.Errorf("%w: %s holds control characters", ErrInvalid, field)
	}
	return v, nil
}

// clean names the request's principal as who acts and checks the reason.
func (in ActionInput) clean(ctx context.Context, whyRequired bool) (ActionInput, error) {
	in.By = ""
	if p := principalFrom(ctx); p != nil {
		in.By = p.Name
	}
	var err error
	if in.By, err = cleanText("by", in.By, maxBy, true); err != nil {
		return in, err
	}
	if in.Why, err = cleanText("why", in.Why, maxWhy, whyRequired); err != nil {
		return in, err
	}
	return in, nil
}

// runNow queues a run of the sync and audits it. joined: a run of the
// sync was already queued or running, so none was added (a second click,
// a page reloaded, a schedule's run under way).
func (s *Server) runNow(ctx context.Context, id string, rin RunInput) (joined bool, err error) {
	if rin.Resend {
		return false, s.resendAll(ctx, id, rin.ActionInput)
	}
	if s.p.Enqueue == nil {
		return false, fmt.Errorf("%w: run now is not enabled on this server", ErrDisabled)
	}
	in, err := rin.ActionInput.clean(ctx, false)
	if err != nil {
		return false, err
	}
	if err := s.notPaused(ctx, id); err != nil {
		return false, err
	}
	if err := s.p.Enqueue(ctx, id, ReasonManual); err != nil {
		switch {
		case errors.Is(err, ErrAlreadyQueued):
			joined = true
		case errors.Is(err, ErrConflict) || errors.Is(err, store.ErrNotFound):
			return false, err // the person's to read, as resendAll's
		default:
			return false, &enqueueError{err: err}
		}
	}
	why := in.Why
	if why == "" {
		why = "run now"
	}
	if joined {
		why += " (a run was already queued or running: none added)"
	}
	if err := s.p.Store.InsertAudit(ctx, store.AuditEntry{SyncID: id, Action: AuditRunNow, By: in.By, Why: why}); err != nil {
		return joined, fmt.Errorf("audit run now: %w", err)
	}
	return joined, nil
}

// notPaused refuses a run of a paused sync (ErrConflict).
func (s *Server) notPaused(ctx context.Context, id string) error {
	sy, err := s.p.Store.GetSync(ctx, id)
	if err != nil {
		return err
	}
	if sy.State == store.SyncPaused {
		return fmt.Errorf("%w: the sync is paused; resume it first", ErrConflict)
	}
	return nil
}

// resendAll queues a run that writes every record again and audits it.
func (s *Server) resendAll(ctx context.Context, id string, in ActionInput) error {
	if s.p.Resend == nil {
		return fmt.Errorf("%w: sending everything again is not enabled on this server", ErrDisabled)
	}
	in, err := in.clean(ctx, true)
	if err != nil {
		return err
	}
	if err := s.notPaused(ctx, id); err != nil {
		return err
	}
	if err := s.p.Resend(ctx, id); err != nil {
		if errors.Is(err, ErrConflict) || errors.Is(err, store.ErrNotFound) {
			return err
		}
		return &enqueueError{err: err}
	}
	if err := s.p.Store.InsertAudit(ctx, store.AuditEntry{SyncID: id, Action: AuditResendAll, By: in.By, Why: in.Why}); err != nil {
		return fmt.Errorf("audit resend: %w", err)
	}
	return nil
}

// enqueueError is a run that could not be queued; its message is the
// failure catalog's (the cause stays out of responses).
type enqueueError struct{ err error }

func (e *enqueueError) Error() string {
	code := failure.CodeOf(e.err)
	if code == failure.Internal {
		return "the run could not be queued"
	}
	en := failure.Lookup(code)
	return fmt.Sprintf("the run could not be queued: %s: %s Next: %s", code, en.WhatHappened, en.NextStep)
}

func (e *enqueueError) Unwrap() error { return e.err }

// pause pauses an active sync as a person.
func (s *Server) pause(ctx context.Context, id string, in ActionInput) (store.Sync, error) {
	in, err := in.clean(ctx, true)
	if err != nil {
		return store.Sync{}, err
	}
	sy, err := s.p.Store.GetSync(ctx, id)
	if err != nil {
		return store.Sync{}, err
	}
	if sy.State == store.SyncPaused {
		return store.Sync{}, fmt.Errorf("%w: the sync is already paused", ErrConflict)
	}
	return s.p.Store.SetSyncState(ctx, store.SetSyncStateParams{
		ID: id, State: store.SyncPaused, Reason: "person", By: in.By, Why: in.Why,
	})
}

// resume re-publishes a paused sync (docs/guide.md#guardrails): it re-arms the breaker.
func (s *Server) resume(ctx context.Context, id string, in ActionInput) (store.Sync, error) {
	in, err := in.clean(ctx, true)
	if err != nil {
		return store.Sync{}, err
	}
	sy, err := s.p.Store.GetSync(ctx, id)
	if err != nil {
		return store.Sync{}, err
	}
	if sy.State != store.SyncPaused {
		return store.Sync{}, fmt.Errorf("%w: the sync is not paused", ErrConflict)
	}
	return s.p.Store.SetSyncState(ctx, store.SetSyncStateParams{
		ID: id, State: store.SyncActive, By: in.By, Why: in.Why,
	})
}

// requeue re-queues a dead letter.
func (s *Server) requeue(ctx context.Context, syncID, dl string, in ActionInput) error {
	if s.p.Requeue == nil {
		return fmt.Errorf("%w: re-queueing dead letters is not enabled on this server", ErrDisabled)
	}
	in, err := in.clean(ctx, false)
	if err != nil {
		return err
	}
	if _, err := s.p.Store.GetSync(ctx, syncID); err != nil {
		return err
	}
	if dl == "" || len(dl) > 200 {
		return fmt.Errorf("%w: dead letter id", ErrInvalid)
	}
	if err := s.p.Requeue(ctx, RequeueParams{SyncID: syncID, ID: dl, By: in.By, Why: in.Why}); err != nil {
		return err
	}
	why := fmt.Sprintf("dead letter %s re-queued", dl)
	if in.Why != "" {
		why += ": " + in.Why
	}
	if err := s.p.Store.InsertAudit(ctx, store.AuditEntry{SyncID: syncID, Action: AuditRequeue, By: in.By, Why: why}); err != nil {
		return fmt.Errorf("audit requeue: %w", err)
	}
	return nil
}

// settle records a person's decision about in-doubt records of a run.
//
// The ledger only takes fenced writes. A person holds no lease, so settle
// writes under the highest fence the store shows for the sync (its lease,
// cursor and recent runs): that never lowers the registered fence, and a run
// in flight does not touch in-doubt keys (claims leave them alone). A
// settlement refused as fenced asks the person to reload and try again.
func (s *Server) settle(ctx context.Context, runID int64, in SettleInput) (int, error) {
	ai, err := in.ActionInput.clean(ctx, true)
	if err != nil {
		return 0, err
	}
	var state store.LedgerState
	switch in.Outcome {
	case SettleDelivered:
		state = store.LedgerComplete
	case SettleResend:
		state = store.LedgerRejected
	default:
		return 0, fmt.Errorf("%w: outcome must be %q or %q", ErrInvalid, SettleDelivered, SettleResend)
	}
	if len(in.Keys) == 0 {
		return 0, fmt.Errorf("%w: choose at least one record", ErrInvalid)
	}
	if len(in.Keys) > maxSettleKey {
		return 0, fmt.Errorf("%w: at most %d records at once", ErrInvalid, maxSettleKey)
	}
	for _, k := range in.Keys {
		if !ledgerKey.MatchString(k) {
			return 0, fmt.Errorf("%w: %q is not a delivery key", ErrInvalid, k)
		}
	}
	run, err := s.p.Store.GetRun(ctx, runID)
	if err != nil {
		return 0, err
	}
	got, err := s.p.Store.LedgerGet(ctx, run.SyncID, in.Keys)
	if err != nil {
		return 0, fmt.Errorf("ledger get: %w", err)
	}
	entries := make([]store.LedgerFinish, 0, len(in.Keys))
	seen := map[string]bool{}
	for _, k := range in.Keys {
		e, ok := got[k]
		if !ok || e.RunID != runID {
			return 0, fmt.Errorf("%w: record %s is not a record of run %d", store.ErrNotFound, k, runID)
		}
		if e.State != store.LedgerInDoubt {
			return 0, fmt.Errorf("%w: record %s is %s, not in doubt", ErrConflict, k, e.State)
		}
		if seen[k] {
			continue
		}
		seen[k] = true
		id, _ := ledger.EntryIdentity(e)
		f := store.LedgerFinish{Key: k, State: state, Settled: ledger.Settlement(id, ledger.SettledToResend)}
		if state == store.LedgerComplete {
			f.Settled.How = ledger.SettledDelivered
			// The delivery key complete: the next run records it as its
			// slot's last delivered state.
			f.Result = "settled by a person: delivered"
		} else {
			// Rejected, naming the row: it is sent again by the next run,
			// read again by identity where the cursor has moved past it.
			f.Message = "marked to resend by a person"
			f.Result = ledger.ResendResult(e.Result)
		}
		entries = append(entries, f)
	}
	fence, err := s.settleFence(ctx, run.SyncID)
	if err != nil {
		return 0, err
	}
	for _, e := range got {
		fence = max(fence, e.Fence)
	}
	err = s.p.Store.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: run.SyncID, Fence: fence, RunID: runID, Entries: entries})
	if errors.Is(err, store.ErrFenced) {
		return 0, fmt.Errorf("%w: a newer run took the sync while settling; reload and try again", ErrConflict)
	}
	if err != nil {
		return 0, fmt.Errorf("ledger finish: %w", err)
	}
	why := fmt.Sprintf("run %d: %d in-doubt records marked %s: %s", runID, len(entries), in.Outcome, ai.Why)
	// Audited under the sync, whose page and audit log a partition's run
	// shows under.
	if err := s.p.Store.InsertAudit(ctx, store.AuditEntry{SyncID: partition.Parent(run.SyncID), Action: AuditSettle, By: ai.By, Why: why}); err != nil {
		return len(entries), fmt.Errorf("audit settle: %w", err)
	}
	return len(entries), nil
}

// settleFence is the highest fence the store shows for a sync.
func (s *Server) settleFence(ctx context.Context, syncID string) (int64, error) {
	fence := int64(1)
	switch l, err := s.p.Store.LeaseGet(ctx, syncID); {
	case err == nil:
		fence = max(fence, l.Fence)
	case !errors.Is(err, store.ErrNotFound):
		return 0, fmt.Errorf("get lease: %w", err)
	}
	cur, err := s.p.Store.GetCursor(ctx, syncID)
	if err != nil {
		return 0, fmt.Errorf("get cursor: %w", err)
	}
	fence = max(fence, cur.Fence)
	runs, err := s.p.Store.ListRuns(ctx, syncID, 20)
	if err != nil {
		return 0, fmt.Errorf("list runs: %w", err)
	}
	for _, r := range runs {
		fence = max(fence, r.Fence)
	}
	return fence, nil
}
