// Package store is oncesync's durable state: syncs, runs, cursors (fenced),
// the delivery ledger, SQL leases and the audit log. Implementations live in
// driver packages (store/sqlite; store/postgres later) and all pass the shared
// suite in store/storetest.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Sentinel errors returned (wrapped) by every implementation.
var (
	// ErrNotFound: no such sync, run or lease.
	ErrNotFound = errors.New("not found")
	// ErrFenced: the write carried a fence lower than the sync's registered
	// fence: a newer run owns the sync and this write is refused.
	ErrFenced = errors.New("write refused: a newer run holds the sync (stale fence)")
	// ErrStateChanged: SetSyncState with From found the sync in another
	// state (another process or a person changed it first) and changed
	// nothing.
	ErrStateChanged = errors.New("sync state changed meanwhile")
	// ErrLeaseHeld: another live run holds the lease.
	ErrLeaseHeld = errors.New("lease held by another run")
	// ErrLeaseLost: the lease is no longer this token's (expired and taken, or released).
	ErrLeaseLost = errors.New("lease lost")
	// ErrUnavailable: the store cannot be reached (wrapped around the driver error).
	ErrUnavailable = errors.New("store unavailable")
	// ErrDiskFull: the store's disk (or its quota) is full; always wrapped
	// together with ErrUnavailable, so it is retried like any outage, but a
	// person is told what to free (its Advice, which failure.Wrap adds to
	// the detail).
	ErrDiskFull error = diskFull{}
)

// SchemaNewerError: the store's schema carries a migration this binary does
// not know, so it belongs to a newer oncesync and is refused. Its Advice
// (which failure.Wrap adds to the detail) says to upgrade.
type SchemaNewerError struct{ Version, Known int }

func (e *SchemaNewerError) Error() string {
	return fmt.Sprintf("database schema version %d is newer than this oncesync (knows %d): upgrade oncesync", e.Version, e.Known)
}

func (e *SchemaNewerError) Advice() string {
	return fmt.Sprintf("the store was written by a newer oncesync (schema version %d, this one knows up to %d): "+
		"run that version or a later one, never an older one, on this store; do not restore an older backup of the store "+
		"to suit this binary either, as records delivered since would be written again (docs/guide.md#upgrading-oncesync)", e.Version, e.Known)
}

type diskFull struct{}

func (diskFull) Error() string { return "the store's disk is full" }

func (diskFull) Advice() string {
	return "the store's disk is full; free space where the store keeps its files, then run the sync again"
}

// WithAdvice wraps err, a store or Redis failure a person can act on, with
// advice: what is wrong and what to do, in words safe to show (no secrets,
// no personal data). failure.Wrap adds it to the detail a person reads;
// errors.Is and errors.As still see err.
func WithAdvice(err error, advice string) error { return &advised{err: err, advice: advice} }

type advised struct {
	err    error
	advice string
}

func (a *advised) Error() string  { return a.err.Error() }
func (a *advised) Unwrap() error  { return a.err }
func (a *advised) Advice() string { return a.advice }

// InsertRunDetached is st.InsertRun(p) not cut by ctx's cancellation (up
// to 10 s): a statement cancelled on the wire may still commit, and a run
// recorded running that its caller was told failed would stay so with
// nobody to finish it. Callers check ctx first, so that a stopped process
// starts no run.
func InsertRunDetached(ctx context.Context, st interface {
	InsertRun(context.Context, InsertRunParams) (Run, error)
}, p InsertRunParams) (Run, error) {
	ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	return st.InsertRun(ictx, p)
}

// SyncState is whether a sync runs on schedule.
type SyncState string

const (
	SyncActive SyncState = "active"
	SyncPaused SyncState = "paused"
)

// Sync is a sync's stored row. Definition is the sync's config as JSON with
// secrets removed.
type Sync struct {
	ID          string
	Workspace   string
	Definition  string
	State       SyncState
	PauseReason string // "breaker" or "person" when paused
	PausedBy    string
	PausedWhy   string
	ChangedAt   time.Time // last publish, enable or resume (docs/guide.md#what-a-run-does)
	CreatedAt   time.Time
}

// PutSyncParams publishes a sync definition. A changed Definition (or a new
// sync) moves ChangedAt to now; an identical one changes nothing.
type PutSyncParams struct {
	ID         string
	Workspace  string
	Definition string
	// By names who published it, for the "publish" audit entry (the
	// process: "oncesync serve on HOST pid N").
	By string
}

// PutSyncsResult counts what PutSyncs did with each definition.
type PutSyncsResult struct {
	Created       int // new syncs (ChangedAt now, audited "publish")
	Changed       int // a changed Definition (ChangedAt now, audited "publish")
	WorkspaceOnly int // only the Workspace changed: saved, neither moved nor audited
	Unchanged     int // identical: nothing written
}

// SetSyncStateParams pauses or resumes a sync; always audited.
type SetSyncStateParams struct {
	ID     string
	State  SyncState
	Reason string // "breaker" | "person" (pause only)
	By     string // who
	Why    string // why
	// From, when set, makes the change conditional: a sync in another
	// state is left as it is (no audit entry) and the call returns an
	// error wrapping ErrStateChanged. The breaker pauses only an active
	// sync, so of several evaluations at once one trips it.
	From SyncState
}

// RunState is a run's state (docs/guide.md#what-a-run-does).
type RunState string

const (
	RunQueued      RunState = "queued"
	RunRunning     RunState = "running"
	RunSucceeded   RunState = "succeeded"
	RunFailed      RunState = "failed"
	RunInterrupted RunState = "interrupted"
	RunSkipped     RunState = "skipped"
)

// NewestRan is the newest of runs (newest first) that is not skipped: a
// skipped run (a run by hand while another holds the sync) says nothing of
// the sync, and shown as its last run it hid the run in progress. With only
// skipped runs, the newest; ok is false for none.
func NewestRan(runs []Run) (_ Run, ok bool) {
	for _, r := range runs {
		if r.State != RunSkipped {
			return r, true
		}
	}
	if len(runs) > 0 {
		return runs[0], true
	}
	return Run{}, false
}

// Finished reports whether s is a final state.
func (s RunState) Finished() bool {
	return s == RunSucceeded || s == RunFailed || s == RunSkipped
}

// Counters are a run's record figures.
type Counters struct {
	Read     int64 // records read from the source
	Written  int64 // records delivered by a destination call in this run
	Replayed int64 // records found complete in the ledger (no call)
	Rejected int64 // records refused by the destination
	InDoubt  int64 // in-doubt records found (settled or left to a person)
	Settled  int64 // in-doubt records settled without a write (verify said landed)
	Pages    int64 // pages checkpointed
	Requests int64 // destination requests made
	// Skipped are records the sync's write_mode left as the destination
	// had them (create: it exists; update: it does not); not in Written.
	Skipped int64
}

// Add adds d to c, field by field.
func (c *Counters) Add(d Counters) {
	c.Read += d.Read
	c.Written += d.Written
	c.Replayed += d.Replayed
	c.Rejected += d.Rejected
	c.InDoubt += d.InDoubt
	c.Settled += d.Settled
	c.Pages += d.Pages
	c.Requests += d.Requests
	c.Skipped += d.Skipped
}

// Run is one execution of a sync.
type Run struct {
	ID            int64
	SyncID        string
	State         RunState
	Attempt       int
	Fence         int64
	StartedAt     time.Time
	FinishedAt    time.Time // zero while not finished
	FailureCode   string
	FailureDetail string // safe to show: no secrets, no personal data
	Counters
}

// InsertRunParams creates a run.
type InsertRunParams struct {
	SyncID      string
	State       RunState
	Attempt     int
	FailureCode string // for runs recorded as failed at once (enqueue-time failures)
	Detail      string
}

// Cursor is a sync's saved page cursor.
type Cursor struct {
	SyncID string
	Value  string // "" = start of source
	// Payload fingerprints what the records read up to Value became at the
	// destination (the runner's payloadPrint); "" for a cursor saved before
	// it was kept.
	Payload   string
	Fence     int64
	RunID     int64
	UpdatedAt time.Time // zero if never saved
}

// SaveCursorParams is a fenced cursor write.
type SaveCursorParams struct {
	SyncID  string
	Value   string
	Payload string // Cursor.Payload
	Fence   int64
	RunID   int64
}

// CheckpointParams is one page's checkpoint (docs/guide.md#what-a-run-does step 6): the fenced
// cursor write, the run's progress and the page's timeline row.
type CheckpointParams struct {
	Cursor SaveCursorParams
	// Run is saved as UpdateRun saves it; Run.ID must exist.
	Run Run
	// Page is the page's timeline row (as RecordRunPage); nil = none.
	Page *RunPage
	// MorePages are other pages' timeline rows recorded (replaced) in the
	// same transaction: earlier pages whose figures changed since their own
	// checkpoint (records a destination accepted, settled later).
	MorePages []RunPage
	// Lease, when set, renews the sync's SQL lease in the same transaction,
	// exactly as LeaseRenew(ctx, Cursor.SyncID, Lease.Token, Lease.TTL) would:
	// on ErrLeaseLost (released, taken, expired, superseded fence) nothing
	// of the checkpoint is written.
	Lease *CheckpointLease
	// Finish, when non-nil, records the page's outcomes first in the same
	// transaction, exactly as LedgerFinish(ctx, p.FinishParams()) would.
	Finish []LedgerFinish
}

// FinishParams is the LedgerFinish a checkpoint's Finish stands for: fenced
// by the cursor's fence, under its run.
func (p CheckpointParams) FinishParams() LedgerFinishParams {
	return LedgerFinishParams{SyncID: p.Cursor.SyncID, Fence: p.Cursor.Fence, RunID: p.Cursor.RunID, Entries: p.Finish}
}

// CheckpointLease is the lease a checkpoint renews.
type CheckpointLease struct {
	Token string
	TTL   time.Duration
}

// LedgerState is a delivery's state (docs/guide.md#the-ledger-and-its-retention).
type LedgerState string

const (
	LedgerPending  LedgerState = "pending"
	LedgerComplete LedgerState = "complete"
	LedgerRejected LedgerState = "rejected"
	LedgerInDoubt  LedgerState = "in_doubt"
	// LedgerAccepted: the destination took the delivery for processing later
	// (an asynchronous import; Result names the process). Claims leave it
	// alone, like complete: the process is asked, never written again.
	LedgerAccepted LedgerState = "accepted"
	// LedgerReleased is a finish state only: it removes the key's entry
	// (a claim whose request never left, or one a slot's delivery settled).
	// A released key reads as absent; a complete key is left as it is.
	LedgerReleased LedgerState = "released"
)

// LedgerEntry is one delivery. Keys are hex SHA-256 and hold no personal data.
//
// Result is opaque to the store: the runner keeps in it what it needs to
// read the entry back (a slot's last delivered state for complete entries,
// the destination's reference, the slot a claim writes; runner/entry.go).
type LedgerEntry struct {
	Key         string
	State       LedgerState
	Fence       int64
	RunID       int64
	Result      string // opaque to the store (see above)
	Message     string // the destination's rejection message (rejected); a mirror's accepted entry's handle
	Attempts    int
	ClaimedAt   time.Time
	CompletedAt time.Time // zero unless complete
	SeenAt      time.Time // last time a run confirmed it (retention counts from here)
}

// LedgerClaimParams claims keys as pending under Fence, before any destination
// call. A key is claimed when it is absent, rejected, or pending under a fence
// <= Fence; complete, accepted and in_doubt keys are left alone. The whole
// claim is refused with ErrFenced when Fence is below the sync's registered
// fence.
type LedgerClaimParams struct {
	SyncID string
	Fence  int64
	RunID  int64
	Keys   []string
	// Results, when set, has one entry per key (same order): the Result the
	// claimed entry holds while pending (the runner records there the slot
	// the delivery writes).
	Results []string
	// Absent says the caller read every key as absent (LedgerGet) just
	// before: a store may then insert the keys without looking for them
	// first. A key present after all (an earlier holder's write landed in
	// between) is claimed as it would be without Absent.
	Absent bool
}

// LedgerFinishParams records outcomes, fenced like a claim.
type LedgerFinishParams struct {
	SyncID  string
	Fence   int64
	RunID   int64
	Entries []LedgerFinish
}

// LedgerFinish is one outcome: complete, accepted, rejected (Message),
// in_doubt, or released (the entry is removed).
type LedgerFinish struct {
	Key     string
	State   LedgerState
	Result  string
	Message string
	// Settled, when set, records in the same transaction how the write in
	// doubt this mark resolves was settled (LedgerSettled lists it).
	Settled *Settlement
	// Absent says the caller read Key as absent (a slot's first delivery):
	// a store may insert the entry without looking for the key first. An
	// entry present after all is recorded as it would be without Absent.
	Absent bool
}

// Settlement is how a write in doubt was settled
// (docs/guide.md#the-ledger-and-its-retention): opaque to the store, like
// Result. The runner writes the record's identity there, encoded as text.
type Settlement struct {
	Identity string
	How      string
}

// SettledEntry is a recorded Settlement: the key of the mark that carried
// it, the run that settled it and when (by the store's clock). A key
// settled again keeps its latest.
type SettledEntry struct {
	Key      string
	Identity string
	How      string
	RunID    int64
	At       time.Time
}

// Lease is a sync's SQL lease (embedded mode; Redis leases live in package lease).
type Lease struct {
	SyncID    string
	Token     string
	Fence     int64
	Holder    string // who holds it: host, boot and pid namespace, pid (no secrets)
	RunID     int64
	ExpiresAt time.Time
	// FreeFor, on a grant, is how long the lease had been free when it was
	// granted: the time since the previous holder's lease expired (in
	// Redis, or was released), by the lease store's clock. Zero when
	// unknown (no previous lease on record, a release in the SQL store) or
	// taken over from a holder known dead: every request of an earlier
	// holder was abandoned by then, so a run settling their writes in doubt
	// counts its grace from then (docs/RELIABILITY.md#resume-after-a-kill).
	FreeFor time.Duration
}

// LeaseAcquireParams grants the lease to Token when it is free or expired, or
// when its current token equals TakeOver (a holder known to be dead). A grant
// increments the sync's fence and registers it (same transaction).
type LeaseAcquireParams struct {
	SyncID   string
	Token    string
	Holder   string
	RunID    int64
	TTL      time.Duration
	TakeOver string
}

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	ID     int64
	At     time.Time
	SyncID string
	Action string // pause, resume, publish, circuit_breaker_tripped, settle, ...
	By     string
	Why    string
}

// RunPage is one checkpointed page of a run: the page's own figures (deltas,
// not running totals), recorded once its cursor was saved. The page's cursor
// is deliberately absent: it may hold source data.
type RunPage struct {
	RunID          int64
	Page           int64 // 1-based, in checkpoint order
	Read           int64 // records of the page (the run's slice)
	Claimed        int64 // records claimed in the ledger before the write
	Sent           int64 // records delivered by a destination call
	Replayed       int64 // records found complete in the ledger (no call)
	Rejected       int64 // records refused by the destination
	InDoubt        int64 // in-doubt records found
	Requests       int64 // destination requests made for the page
	CheckpointedAt time.Time
}

// The store's roles. Each consumer takes the smallest it needs (the runner
// runs, cursors and the ledger; the SQL lease the leases; the breaker syncs,
// runs and the audit log); Store is all of them.

// Syncs are the sync definitions and their states.
type Syncs interface {
	PutSync(ctx context.Context, p PutSyncParams) (Sync, error)
	// PutSyncs publishes many definitions in one transaction, each exactly
	// as PutSync would, and writes nothing for the identical ones (a start
	// with an unchanged config). Ids must be non-empty and unique; one
	// publisher publishes a batch, so By is the same in every params (a
	// store may audit them all with the first's).
	PutSyncs(ctx context.Context, ps []PutSyncParams) (PutSyncsResult, error)
	// ListPausedSyncs returns the ids of the paused syncs in id order: one
	// query for the scheduler's whole tick.
	ListPausedSyncs(ctx context.Context) ([]string, error)
	GetSync(ctx context.Context, id string) (Sync, error)
	ListSyncs(ctx context.Context) ([]Sync, error)
	SetSyncState(ctx context.Context, p SetSyncStateParams) (Sync, error)
}

// Runs are the runs and their checkpointed pages.
type Runs interface {
	InsertRun(ctx context.Context, p InsertRunParams) (Run, error)
	// UpdateRun saves the run's state, fence, counters and failure fields.
	UpdateRun(ctx context.Context, r Run) error
	// CloseRun saves r as UpdateRun does only if the stored run is still
	// running, and reports whether it did. A run found dead (by a recovery
	// sweep, or by the sync's next run) is closed with it: its own worker
	// may have recorded its end between that read and this write, and that
	// record stands (false, no error). ErrNotFound when no run has r.ID.
	CloseRun(ctx context.Context, r Run) (bool, error)
	GetRun(ctx context.Context, id int64) (Run, error)
	// ListRuns returns a sync's runs, newest first.
	ListRuns(ctx context.Context, syncID string, limit int) ([]Run, error)
	// ListRunsByState returns the runs of every sync in state, oldest first
	// (lease-expiry recovery lists the running ones); limit <= 0 returns all.
	ListRunsByState(ctx context.Context, state RunState, limit int) ([]Run, error)

	// RecordRunPage saves one checkpointed page of a run. Recording the same
	// (RunID, Page) again replaces it. A zero CheckpointedAt is stamped now.
	RecordRunPage(ctx context.Context, p RunPage) error
	// ListRunPages returns a run's pages, oldest first; limit <= 0 returns all.
	ListRunPages(ctx context.Context, runID int64, limit int) ([]RunPage, error)
	// PruneRunPages deletes the page rows checkpointed before before and
	// returns how many. It walks the runs that have pages, oldest first,
	// deleting each one's rows older than the cut, and stops at the first
	// run left with a younger page: a run that is still going delays the
	// later runs' pruning by at most its own length. The runs themselves
	// (their totals) are kept.
	PruneRunPages(ctx context.Context, before time.Time) (int64, error)
	// PruneRuns deletes the runs that ended before before (any state but
	// queued and running; an interrupted run's end is its start when it has
	// none), with their page rows, and returns how many runs. It keeps each
	// sync's KeepRunsPerSync newest runs and its latest succeeded run (the
	// dead-man's last success) whatever their age, so that a sync on a short
	// schedule does not add a row every tick forever
	// (docs/guide.md#the-ledger-and-its-retention).
	PruneRuns(ctx context.Context, before time.Time) (int64, error)
}

// Cursors are the fenced cursors and the checkpoint that saves one with a
// page's outcomes.
type Cursors interface {
	// GetCursor returns the saved cursor, or a zero Cursor (Value "") if none.
	GetCursor(ctx context.Context, syncID string) (Cursor, error)
	// SaveCursor writes the cursor if p.Fence >= the sync's registered fence,
	// else ErrFenced.
	SaveCursor(ctx context.Context, p SaveCursorParams) error
	// Checkpoint renews the lease when p.Lease is set (as LeaseRenew),
	// records p.Finish when set (as LedgerFinish), then writes p.Cursor
	// (fenced, as SaveCursor), p.Run (as UpdateRun), p.Page and p.MorePages
	// (as RecordRunPage) in ONE transaction: all of it or, on any error
	// (ErrLeaseLost, ErrFenced, ErrNotFound, invalid input), none of it (nor
	// the renewal, nor the outcomes).
	Checkpoint(ctx context.Context, p CheckpointParams) error
	// RaiseFence registers fence as the sync's fence if it is higher than the
	// registered one; ErrFenced if a higher one is already registered.
	RaiseFence(ctx context.Context, syncID string, fence int64) error
	// PayloadBase returns the sync's payload base (docs/guide.md#changing-a-sync):
	// the destination settings that shape every record beyond its mapped
	// values, as first recorded for the sync, recording print as the base
	// when none is.
	PayloadBase(ctx context.Context, syncID, print string) (string, error)
	// GetPayloadBase returns the sync's payload base and whether one is
	// recorded, recording nothing.
	GetPayloadBase(ctx context.Context, syncID string) (string, bool, error)
}

// Ledger is the delivery ledger.
type Ledger interface {
	// LedgerGet returns the entries of keys that exist, in one round trip.
	LedgerGet(ctx context.Context, syncID string, keys []string) (map[string]LedgerEntry, error)
	LedgerClaim(ctx context.Context, p LedgerClaimParams) error
	LedgerFinish(ctx context.Context, p LedgerFinishParams) error
	// LedgerTouch moves SeenAt of keys to now (a replay confirmed them).
	LedgerTouch(ctx context.Context, syncID string, keys []string) error
	// LedgerPrune deletes rejected and in_doubt entries not seen since
	// before, and settlements recorded before it. Complete entries (a slot's last delivered state, docs/guide.md#what-a-run-does: it
	// does not expire), pending and accepted ones are kept.
	LedgerPrune(ctx context.Context, before time.Time) (int64, error)
	// LedgerList returns a sync's entries in a state (rejected, in_doubt,
	// accepted, pending), newest first.
	LedgerList(ctx context.Context, syncID string, state LedgerState, limit int) ([]LedgerEntry, error)
	// LedgerSettled returns a sync's settlements (LedgerFinish.Settled),
	// newest first; limit <= 0 returns all. LedgerPrune deletes those
	// older than its before.
	LedgerSettled(ctx context.Context, syncID string, limit int) ([]SettledEntry, error)
}

// RemoteReads is implemented by a store whose every read is a round trip
// to a server (PostgreSQL): a run then overlaps a page's independent
// ledger reads instead of making them one after the other
// (docs/PERFORMANCE.md#reads-ahead-on-postgresql). An embedded store reads
// from memory and does not implement it.
type RemoteReads interface {
	RemoteReads() bool
}

// SharedClock is implemented by a store that keeps its times on a clock
// every process shares (PostgreSQL's server clock; docs/guide.md#the-store-and-the-leases):
// ClockOffset is that clock less this process's, from a reading at most
// half a minute old. A time a process writes inside a value (a mirror's
// slot reference keeps when its write was claimed) is moved onto it, so
// that processes on machines whose clocks disagree compare such times as
// the store compares its own. An embedded store (one machine) does not
// implement it.
type SharedClock interface {
	ClockOffset(ctx context.Context) (time.Duration, error)
}

// Leases are the SQL leases (one per sync).
type Leases interface {
	LeaseAcquire(ctx context.Context, p LeaseAcquireParams) (Lease, error)
	// LeaseRenew extends the lease if token still holds it, else ErrLeaseLost.
	LeaseRenew(ctx context.Context, syncID, token string, ttl time.Duration) (Lease, error)
	// LeaseRelease frees the lease if token holds it (no error if it does not).
	LeaseRelease(ctx context.Context, syncID, token string) error
	// LeaseGet returns the current lease row (possibly expired), or ErrNotFound.
	LeaseGet(ctx context.Context, syncID string) (Lease, error)
}

// Audit is the audit log.
type Audit interface {
	InsertAudit(ctx context.Context, e AuditEntry) error
	ListAudit(ctx context.Context, syncID string, limit int) ([]AuditEntry, error)
}

// Store is implemented by store/sqlite and store/postgres.
type Store interface {
	Syncs
	Runs
	Cursors
	Ledger
	Leases
	Audit
	Close() error
}
