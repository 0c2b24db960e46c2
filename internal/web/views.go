package web

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
)

// Health is a sync's state at a glance.
type Health string

// Health values, most urgent first.
const (
	HealthPausedBreaker Health = "paused_breaker"
	HealthPausedPerson  Health = "paused_person"
	HealthSilent        Health = "silent"
	HealthFailing       Health = "failing"
	HealthHealthy       Health = "healthy"
	HealthNeverRun      Health = "never_run"
	// HealthNotInConfig: serve's config does not have the sync (removed,
	// or published by a worker whose config has it): nothing schedules
	// it, and the dead-man check leaves it alone.
	HealthNotInConfig Health = "not_in_config"
)

var healthOrder = []Health{HealthPausedBreaker, HealthPausedPerson, HealthSilent, HealthFailing, HealthHealthy, HealthNeverRun, HealthNotInConfig}

// Label is the health as shown on a page.
func (h Health) Label() string {
	switch h {
	case HealthPausedBreaker:
		return "paused by breaker"
	case HealthPausedPerson:
		return "paused by a person"
	case HealthSilent:
		return "silent"
	case HealthFailing:
		return "failing"
	case HealthHealthy:
		return "healthy"
	case HealthNotInConfig:
		return "not in serve's config"
	default:
		return "no runs yet"
	}
}

// listLimit caps the records and entries a page or response lists.
const listLimit = 500

// ledgerCountCap caps the ledger figures counted for the sync page.
const ledgerCountCap = 100_000

// SyncSummary is a sync as the overview shows it (and GET /api/v1/syncs).
type SyncSummary struct {
	ID            string     `json:"id"`
	Workspace     string     `json:"workspace"`
	State         string     `json:"state"`
	PauseReason   string     `json:"pause_reason,omitempty"`
	Health        Health     `json:"health"`
	Running       bool       `json:"running"`
	Silence       string     `json:"silence,omitempty"`
	Schedule      string     `json:"schedule,omitempty"`
	NextRunAt     *time.Time `json:"next_run_at,omitempty"`
	LastSuccessAt *time.Time `json:"last_success_at,omitempty"`
	FailureStreak int        `json:"failure_streak"`
	// OperatorFailures are failures the breaker does not count (docs/guide.md#guardrails).
	OperatorFailures int      `json:"operator_failures"`
	LastRun          *RunView `json:"last_run,omitempty"`
}

// RunView is a run (GET /api/v1/runs/{id}, the runs tables).
type RunView struct {
	ID            int64      `json:"id"`
	SyncID        string     `json:"sync_id"`
	State         string     `json:"state"`
	Attempt       int        `json:"attempt"`
	Fence         int64      `json:"fence"`
	StartedAt     time.Time  `json:"started_at"`
	FinishedAt    *time.Time `json:"finished_at,omitempty"`
	DurationMS    int64      `json:"duration_ms"`
	FailureCode   string     `json:"failure_code,omitempty"`
	FailureDetail string     `json:"failure_detail,omitempty"`
	Read          int64      `json:"read"`
	Written       int64      `json:"written"`
	Skipped       int64      `json:"skipped"`
	Replayed      int64      `json:"replayed"`
	Rejected      int64      `json:"rejected"`
	InDoubt       int64      `json:"in_doubt"`
	Settled       int64      `json:"settled"`
	Pages         int64      `json:"pages"`
	Requests      int64      `json:"requests"`
}

// FailureView is a failure with its catalog entry.
type FailureView struct {
	RunID        int64  `json:"run_id"`
	Code         string `json:"code"`
	Detail       string `json:"detail,omitempty"`
	WhatHappened string `json:"what_happened"`
	NextStep     string `json:"next_step"`
	Owner        string `json:"owner"`
	Retryable    bool   `json:"retryable"`
	DocsURL      string `json:"docs_url"`
}

// PauseView says why and since when a sync is paused.
type PauseView struct {
	Reason string     `json:"reason"`
	By     string     `json:"by"`
	Why    string     `json:"why"`
	At     *time.Time `json:"at,omitempty"`
}

// CursorView is a sync's saved cursor.
type CursorView struct {
	Value     string     `json:"value"`
	Where     string     `json:"where,omitempty"` // Value in words, when the source can say
	Fence     int64      `json:"fence"`
	RunID     int64      `json:"run_id"`
	UpdatedAt *time.Time `json:"updated_at,omitempty"`
}

// LedgerFigures count a sync's entries that need attention.
type LedgerFigures struct {
	Rejected int  `json:"rejected"`
	InDoubt  int  `json:"in_doubt"`
	Capped   bool `json:"capped"`
}

// LeaseView is a sync's current lease.
type LeaseView struct {
	Holder    string    `json:"holder"`
	Fence     int64     `json:"fence"`
	RunID     int64     `json:"run_id"`
	ExpiresAt time.Time `json:"expires_at"`
	Live      bool      `json:"live"`
}

// AuditView is one audit entry.
type AuditView struct {
	ID     int64     `json:"id"`
	At     time.Time `json:"at"`
	SyncID string    `json:"sync_id"`
	Action string    `json:"action"`
	By     string    `json:"by"`
	Why    string    `json:"why"`
}

// SyncDetail is the sync page (GET /api/v1/syncs/{id}).
type SyncDetail struct {
	SyncSummary
	ChangedAt   time.Time       `json:"changed_at"`
	Paused      *PauseView      `json:"paused,omitempty"`
	LastError   *FailureView    `json:"last_error,omitempty"`
	Cursor      CursorView      `json:"cursor"`
	Ledger      LedgerFigures   `json:"ledger"`
	Lease       *LeaseView      `json:"lease,omitempty"`
	Runs        []RunView       `json:"runs"`
	Audit       []AuditView     `json:"audit"`
	DeadLetters []DeadLetter    `json:"dead_letters,omitempty"`
	Definition  json.RawMessage `json:"definition,omitempty"`
}

// LedgerView is one ledger entry on the run page. Key is a hex SHA-256 and
// holds no personal data; Identity is the sync's identity of the record
// (empty for entries that predate identities); Message is the
// destination's.
type LedgerView struct {
	Key       string    `json:"key"`
	Identity  string    `json:"identity,omitempty"`
	State     string    `json:"state"`
	Message   string    `json:"message,omitempty"`
	Attempts  int       `json:"attempts"`
	Fence     int64     `json:"fence"`
	ClaimedAt time.Time `json:"claimed_at"`
}

// RunPageView is one checkpointed page of a run (the run's timeline): the
// page's own figures. The page's cursor is never shown (it may hold data).
type RunPageView struct {
	Page           int64     `json:"page"`
	Read           int64     `json:"read"`
	Claimed        int64     `json:"claimed"`
	Sent           int64     `json:"sent"`
	Replayed       int64     `json:"replayed"`
	Rejected       int64     `json:"rejected"`
	InDoubt        int64     `json:"in_doubt"`
	Requests       int64     `json:"requests"`
	CheckpointedAt time.Time `json:"checkpointed_at"`
}

// RunDetail is the run page (GET /api/v1/runs/{id}).
type RunDetail struct {
	Run           RunView      `json:"run"`
	Workspace     string       `json:"workspace"`
	Failure       *FailureView `json:"failure,omitempty"`
	Rejected      []LedgerView `json:"rejected"`
	RejectedTotal int          `json:"rejected_total"`
	InDoubt       []LedgerView `json:"in_doubt"`
	InDoubtTotal  int          `json:"in_doubt_total"`
	// Pages is the run's timeline, oldest first, capped at listLimit;
	// PagesTotal counts every recorded page.
	Pages      []RunPageView `json:"pages"`
	PagesTotal int           `json:"pages_total"`
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

func (s *Server) runView(r store.Run) RunView {
	v := RunView{
		ID: r.ID, SyncID: r.SyncID, State: string(r.State), Attempt: r.Attempt, Fence: r.Fence,
		StartedAt: r.StartedAt.UTC(), FinishedAt: timePtr(r.FinishedAt),
		FailureCode: r.FailureCode, FailureDetail: r.FailureDetail,
		Read: r.Read, Written: r.Written, Skipped: r.Skipped, Replayed: r.Replayed, Rejected: r.Rejected,
		InDoubt: r.InDoubt, Settled: r.Settled, Pages: r.Pages, Requests: r.Requests,
	}
	end := r.FinishedAt
	if end.IsZero() && r.State == store.RunRunning {
		end = s.clock.Now()
	}
	if !end.IsZero() && !r.StartedAt.IsZero() && end.After(r.StartedAt) {
		v.DurationMS = end.Sub(r.StartedAt).Milliseconds()
	}
	return v
}

func (s *Server) failureView(r store.Run) *FailureView {
	if r.FailureCode == "" {
		return nil
	}
	e := failure.Lookup(failure.Code(r.FailureCode))
	return &FailureView{
		RunID: r.ID, Code: r.FailureCode, Detail: r.FailureDetail,
		WhatHappened: e.WhatHappened, NextStep: e.NextStep, Owner: string(e.Owner), Retryable: e.Retryable,
		DocsURL: failure.DocsURL(s.p.DocsBase, failure.Code(r.FailureCode)),
	}
}

// ledgerIDs are the ids a sync's ledger entries live under: its own, and
// each partition's when its definition has partitions (partition.SyncID).
func ledgerIDs(sy store.Sync) []string {
	return partition.IDs(sy.ID, definitionPartitions(sy.Definition))
}

// definitionPartitions reads "partitions" from a definition JSON (0: none,
// or unreadable).
func definitionPartitions(def string) int {
	var d struct {
		Partitions int `json:"partitions"`
	}
	if !strings.Contains(def, `"partitions"`) || json.Unmarshal([]byte(def), &d) != nil {
		return 0
	}
	return d.Partitions
}

// definitionSchedule reads "schedule" from a definition JSON.
func definitionSchedule(def string) string {
	if !strings.Contains(def, `"schedule"`) {
		return ""
	}
	var d struct {
		Schedule string `json:"schedule"`
	}
	if json.Unmarshal([]byte(def), &d) != nil {
		return ""
	}
	return d.Schedule
}

func (s *Server) summary(st SyncStats, silence map[string]string, now time.Time, scheds map[string]cron.Schedule) SyncSummary {
	sy := st.Sync
	v := SyncSummary{
		ID: sy.ID, Workspace: sy.Workspace, State: string(sy.State), Running: st.Running,
		FailureStreak: st.FailureStreak, OperatorFailures: st.OperatorFailures, LastSuccessAt: timePtr(st.LastSuccessAt),
		Schedule: definitionSchedule(sy.Definition),
	}
	if sy.State == store.SyncPaused {
		v.PauseReason = sy.PauseReason
	}
	if st.LastRun.ID != 0 {
		rv := s.runView(st.LastRun)
		v.LastRun = &rv
	}
	// The dead-man judges a sync the breaker paused too (its trip alert may
	// have reached nobody); a person's pause is not silence.
	if sy.State == store.SyncActive || sy.State == store.SyncPaused && sy.PauseReason == "breaker" {
		v.Silence = silence[sy.ID]
	}
	configured := s.p.Configured == nil || s.p.Configured(sy.ID)
	if v.Schedule != "" && sy.State == store.SyncActive && configured {
		sched, ok := scheds[v.Schedule]
		if !ok {
			var err error
			if sched, err = config.ParseSchedule(v.Schedule); err != nil {
				sched = nil
			}
			scheds[v.Schedule] = sched
		}
		// An @every schedule counts from when a serve became the leader
		// (docs/config.md#syncs), which is not known here: now plus the
		// interval would be a time the run is not due at.
		if _, every := sched.(cron.ConstantDelaySchedule); sched != nil && !every {
			v.NextRunAt = timePtr(sched.Next(now))
		}
	}
	switch {
	case !configured:
		v.Health = HealthNotInConfig
	case sy.State == store.SyncPaused && sy.PauseReason == "breaker":
		v.Health = HealthPausedBreaker
	case sy.State == store.SyncPaused:
		v.Health = HealthPausedPerson
	case v.Silence != "":
		v.Health = HealthSilent
	case st.Failing(), st.LastRun.State == store.RunFailed:
		// The streaks count from the last resume or change; a sync resumed
		// and not run since still had its last run fail.
		v.Health = HealthFailing
	case !st.LastSuccessAt.IsZero():
		v.Health = HealthHealthy
	default:
		v.Health = HealthNeverRun
	}
	return v
}

// silence asks the dead-man report; a failure shows as unknown, not as an error page.
func (s *Server) silence(ctx context.Context) map[string]string {
	if s.p.Silence == nil {
		return nil
	}
	m, err := s.p.Silence(ctx)
	if err != nil {
		s.log.Warn("web: dead-man silence unavailable", "err", err)
		return nil
	}
	return m
}

// summaries is the overview's data.
func (s *Server) summaries(ctx context.Context) ([]SyncSummary, error) {
	stats, err := s.stats.SyncStats(ctx)
	if err != nil {
		return nil, err
	}
	// A principal sees only the syncs of its workspaces (access.go).
	stats = visible(principalFrom(ctx), stats, func(st SyncStats) string { return st.Sync.Workspace })
	sortStats(stats)
	sil := s.silence(ctx)
	now := s.clock.Now()
	scheds := map[string]cron.Schedule{}
	out := make([]SyncSummary, len(stats))
	for i := range stats {
		out[i] = s.summary(stats[i], sil, now, scheds)
	}
	return out, nil
}

// syncDetail is the sync page's data.
func (s *Server) syncDetail(ctx context.Context, id string) (SyncDetail, error) {
	sy, err := s.p.Store.GetSync(ctx, id)
	if err != nil {
		return SyncDetail{}, err
	}
	runs, err := s.p.Store.ListRuns(ctx, id, 50)
	if err != nil {
		return SyncDetail{}, fmt.Errorf("list runs: %w", err)
	}
	if runs, err = partition.SoFar(ctx, s.p.Store, runs, definitionPartitions(sy.Definition)); err != nil {
		return SyncDetail{}, fmt.Errorf("list partition runs: %w", err)
	}
	st := statsFromRuns(sy, runs)
	// summary keeps the silence it applies to (a breaker's pause too), as
	// the overview does.
	sil := s.silence(ctx)
	d := SyncDetail{
		SyncSummary: s.summary(st, sil, s.clock.Now(), map[string]cron.Schedule{}),
		ChangedAt:   sy.ChangedAt.UTC(),
		Runs:        make([]RunView, 0, len(runs)),
		Audit:       []AuditView{},
		Definition:  redactDefinition(sy.Definition),
	}
	for _, r := range runs {
		d.Runs = append(d.Runs, s.runView(r))
	}
	if st.LastFailure.ID != 0 && (sy.State == store.SyncPaused || st.Failing()) {
		d.LastError = s.failureView(st.LastFailure)
	}
	audit, err := s.p.Store.ListAudit(ctx, id, 20)
	if err != nil {
		return SyncDetail{}, fmt.Errorf("list audit: %w", err)
	}
	for _, a := range audit {
		d.Audit = append(d.Audit, auditView(a))
	}
	if sy.State == store.SyncPaused {
		d.Paused = &PauseView{Reason: sy.PauseReason, By: sy.PausedBy, Why: sy.PausedWhy}
		for _, a := range audit { // newest first: the pause that holds now
			if a.Action == "pause" {
				d.Paused.At = timePtr(a.At)
				break
			}
		}
	}
	cur, err := s.p.Store.GetCursor(ctx, id)
	if err != nil {
		return SyncDetail{}, fmt.Errorf("get cursor: %w", err)
	}
	d.Cursor = CursorView{Value: cur.Value, Fence: cur.Fence, RunID: cur.RunID, UpdatedAt: timePtr(cur.UpdatedAt)}
	if s.p.DescribeCursor != nil && !cur.UpdatedAt.IsZero() {
		d.Cursor.Where = s.p.DescribeCursor(id, cur.Value)
	}
	for _, f := range []struct {
		state store.LedgerState
		n     *int
	}{{store.LedgerRejected, &d.Ledger.Rejected}, {store.LedgerInDoubt, &d.Ledger.InDoubt}} {
		for _, lid := range ledgerIDs(sy) {
			es, err := ledger.List(ctx, s.p.Store, lid, f.state, ledgerCountCap)
			if err != nil {
				return SyncDetail{}, fmt.Errorf("ledger list: %w", err)
			}
			*f.n += len(es)
			if len(es) == ledgerCountCap {
				d.Ledger.Capped = true
			}
		}
	}
	switch l, err := s.p.Store.LeaseGet(ctx, id); {
	case err == nil:
		d.Lease = &LeaseView{Holder: l.Holder, Fence: l.Fence, RunID: l.RunID, ExpiresAt: l.ExpiresAt.UTC(),
			Live: s.clock.Now().Before(l.ExpiresAt)}
	case errors.Is(err, store.ErrNotFound):
	default:
		return SyncDetail{}, fmt.Errorf("get lease: %w", err)
	}
	if s.p.DeadLetters != nil {
		dl, err := s.p.DeadLetters(ctx, id)
		if err != nil {
			return SyncDetail{}, fmt.Errorf("list dead letters: %w", err)
		}
		d.DeadLetters = dl
	}
	return d, nil
}

func auditView(a store.AuditEntry) AuditView {
	return AuditView{ID: a.ID, At: a.At.UTC(), SyncID: a.SyncID, Action: a.Action, By: a.By, Why: a.Why}
}

// runDetail is the run page's data.
func (s *Server) runDetail(ctx context.Context, id int64) (RunDetail, error) {
	r, err := s.p.Store.GetRun(ctx, id)
	if err != nil {
		return RunDetail{}, err
	}
	d := RunDetail{Run: s.runView(r), Failure: s.failureView(r), Rejected: []LedgerView{}, InDoubt: []LedgerView{}, Pages: []RunPageView{}}
	pages, err := s.p.Store.ListRunPages(ctx, r.ID, 0)
	if err != nil {
		return RunDetail{}, fmt.Errorf("list run pages: %w", err)
	}
	d.PagesTotal = len(pages)
	for _, p := range pages[:min(len(pages), listLimit)] {
		d.Pages = append(d.Pages, RunPageView{Page: p.Page, Read: p.Read, Claimed: p.Claimed, Sent: p.Sent,
			Replayed: p.Replayed, Rejected: p.Rejected, InDoubt: p.InDoubt, Requests: p.Requests,
			CheckpointedAt: p.CheckpointedAt.UTC()})
	}
	if sy, err := s.p.Store.GetSync(ctx, partition.Parent(r.SyncID)); err == nil {
		d.Workspace = sy.Workspace
	}
	for _, f := range []struct {
		state store.LedgerState
		list  *[]LedgerView
		total *int
	}{{store.LedgerRejected, &d.Rejected, &d.RejectedTotal}, {store.LedgerInDoubt, &d.InDoubt, &d.InDoubtTotal}} {
		es, err := ledger.List(ctx, s.p.Store, r.SyncID, f.state, 0)
		if err != nil {
			return RunDetail{}, fmt.Errorf("ledger list: %w", err)
		}
		for _, e := range es {
			if e.RunID != r.ID {
				continue
			}
			*f.total++
			if len(*f.list) < listLimit {
				v := LedgerView{Key: e.Key, State: string(e.State), Message: e.Message,
					Attempts: e.Attempts, Fence: e.Fence, ClaimedAt: e.ClaimedAt.UTC()}
				v.Identity, _ = ledger.EntryIdentity(e)
				*f.list = append(*f.list, v)
			}
		}
	}
	return d, nil
}

// secretKey matches definition keys whose values must never be shown.
var secretKey = regexp.MustCompile(`(?i)(api_?key|secret|password|passwd|token|authorization|credential)`)

// dsnPassword matches a password in a key=value connection string.
var dsnPassword = regexp.MustCompile(`(?i)\b(password|passwd|pwd)\s*=\s*('[^']*'|\S+)`)

// redactDefinition returns the definition JSON with secrets removed once
// more (the stored definition is already redacted): values under
// secret-looking keys and passwords in URLs.
func redactDefinition(def string) json.RawMessage {
	if def == "" {
		return nil
	}
	var v any
	if err := json.Unmarshal([]byte(def), &v); err != nil {
		return nil
	}
	v = redactValue("", v)
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil
	}
	return b
}

func redactValue(key string, v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			t[k] = redactValue(k, x)
		}
		return t
	case []any:
		for i, x := range t {
			t[i] = redactValue(key, x)
		}
		return t
	case string:
		if key != "" && key != "headers" && secretKey.MatchString(key) && t != "" {
			return "[redacted]"
		}
		t = dsnPassword.ReplaceAllString(t, "$1=[redacted]")
		if strings.Contains(t, "://") || strings.Contains(t, "@") {
			if u, err := url.Parse(t); err == nil && u.User != nil {
				if _, has := u.User.Password(); has {
					u.User = url.UserPassword(u.User.Username(), "redacted")
					return u.String()
				}
			}
		}
		return t
	}
	return v
}
