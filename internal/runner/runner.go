// Package runner is the run loop of docs/guide.md#what-a-run-does: read a page at the saved cursor,
// build every record's delivery key, ask the ledger, claim, write, mark, and
// only then move the cursor with a fenced write. A run killed anywhere leaves
// the cursor at the start of its page; the next run rebuilds the same keys and
// the ledger answers for what already went out.
package runner

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/trace"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
)

// Sync is what the runner needs of a sync's definition.
type Sync struct {
	ID        string
	Workspace string
	PageSize  int
	// Identity is the source's primary-key column ("" = positional keys).
	Identity string
	// SourceTimeout bounds one read of the source (a page, the rows read
	// again by identity); 0 means no limit. A read it cuts fails the run
	// with source_unavailable (readWithin).
	SourceTimeout time.Duration
	Mapping       mapping.Spec
	// Reads says what the source reads and where its cursor points (the
	// definition's config.Sync.SourceReadJSON); part of payloadPrint.
	Reads string
	// Retention is how long delivery records are kept (docs/guide.md#the-ledger-and-its-retention): an
	// in-doubt page older than that is not settled automatically.
	Retention time.Duration
	// AllowRewriteAfterRetention lets an in-doubt page older than Retention
	// be settled (read back or sent again) all the same.
	AllowRewriteAfterRetention bool
	// Mirror, when set, makes the sync a mirror (write_mode mirror); its
	// destination must implement destination.Remover.
	Mirror *Mirror
	// Skip is the reason the destination's write mode leaves a record as
	// the destination has it (destination.SkipExists under create,
	// SkipNotFound under update; "" otherwise): a slot that holds the
	// record's skipped hash for it is unchanged (run.unchanged).
	Skip string
	// DestinationPayload are the destination settings that shape every
	// record beyond its mapped values (config.DestinationPayload: Brevo's
	// list_ids). Under settings other than the sync's payload base they are
	// part of each record's hash and of payloadPrint, so a change of them
	// sends every record again (docs/guide.md#changing-a-sync).
	DestinationPayload string
	// DestinationAddress says which account records go to
	// (config.DestinationAddress: the type, a digest of endpoint and key).
	// Another than the sync's first is part of each record's hash like
	// DestinationPayload: what the ledger says was delivered went to the
	// first account (docs/guide.md#changing-a-sync).
	DestinationAddress string
	// Account is destination.account: the user's name of the account
	// records go to. Set, the address the sync first reached under that
	// name stands for DestinationAddress (accountAddress), so a new key of
	// the same account sends nothing again.
	Account string
	// Layout says how the sync's slots are named and where they are kept
	// (its identity column and partition count; "" to keep no epochs): a
	// change of it starts a new epoch (layoutEpoch).
	Layout string
}

// Store is what a run needs of the store: its run rows and pages, the
// fenced cursor and checkpoint, and the ledger.
type Store interface {
	store.Runs
	store.Cursors
	store.Ledger
}

// Params configure one run.
type Params struct {
	Store       Store
	Leases      lease.Manager
	Source      source.Source
	Destination destination.Destination
	Clock       clock.Clock
	Logger      *slog.Logger
	Sync        Sync
	// Secrets are the whole config's secret values (config.SecretValues):
	// hidden from the messages and failure details the run stores, which
	// a destination could echo from another part of the config (the
	// connectors hide their own).
	Secrets []string

	LeaseTTL time.Duration
	// LeaseRenew is the background renewal interval, on Clock (0 = renew
	// only before claims, writes and checkpoints).
	LeaseRenew time.Duration

	// Attempt is the queue attempt number (1 for a foreground run).
	Attempt int
	// ResetCursor starts from the beginning of the source.
	ResetCursor bool
	// Resend reads the source from its beginning and writes every record,
	// also those whose slot says the destination holds these values (it
	// lost them, or a person changed them there): each such record is a new
	// delivery of its slot, claimed and fenced as any other
	// (docs/guide.md#sending-everything-again).
	Resend bool
	// ResendBefore, with Resend, spares the records whose slot a run with
	// this id or a later one delivered: an earlier attempt of the same
	// resend wrote them again already, so a queued resend that is retried
	// or recovered resumes instead of starting over. Zero: this run's id.
	ResendBefore int64
	// AllowRemovals lets a mirror run remove more than its MaxRemovals.
	AllowRemovals bool
	// Drain, when closed, asks the run to stop at the next page boundary:
	// checkpoint, release the lease, end as interrupted.
	Drain <-chan struct{}
	// DrainDetail, if set, says why Drain was closed (a person paused the
	// sync): the detail the interrupted run is recorded with, in the same
	// write as its end ("" keeps the default).
	DrainDetail func() string
	// Progress, if set, is called after every checkpoint.
	Progress func(Progress)
	// Resumed, if set, is called for each earlier run this run found
	// still recorded as running (its process died, or lost its lease,
	// without finishing) and closed as interrupted: this run resumes its
	// work and settles what it left in flight.
	Resumed func(orphan store.Run)
	// Waiting, if set, is called when a read-back did not find records of
	// a write in doubt and the run waits until until (settings.in_doubt_grace
	// after the write) to read them again before it sends them: a person
	// watching `oncesync run` learns why nothing moves meanwhile.
	Waiting func(records int, until time.Time)
	// WaitingChanged, if set, is called when rows whose earlier values'
	// writes are in doubt changed since (or changed back), or a sync
	// without an identity found writes in doubt, and the run waits until
	// until (settings.in_doubt_grace after those writes) before it reads
	// those rows back or writes: a late landing of an earlier write then
	// comes first.
	WaitingChanged func(records int, until time.Time)
	// AfterFailure, if set, is called once a failed run is recorded (the
	// circuit breaker's evaluation point, docs/guide.md#guardrails).
	AfterFailure func(ctx context.Context, run store.Run)
	// StillProcessing, if set, is told how many records the run leaves
	// accepted at its end: their destination's process had not ended
	// within AcceptedWait (or the run stopped), they are in none of the
	// run's figures, and the next run asks about them.
	StillProcessing func(records int)
	// HeldBack, if set, is told how many records the run left for the
	// next run behind another row's write to the same contact that the
	// destination was still processing when the run stopped waiting (a
	// write now could land before it): they are in none of the run's
	// figures, and the next run sends them once it knows what became of
	// that write.
	HeldBack func(records int)
	// Sleep waits between tries to record the run's end while the store
	// does not answer (default clock.Sleep).
	Sleep func(ctx context.Context, d time.Duration) error
	// Filter, if set, keeps the records of this run's slice (a partition of
	// a partitioned sync, docs/guide.md#the-checkpoint-barrier): a record it refuses is skipped, neither
	// keyed nor written nor counted as read.
	Filter func(source.Record) bool
	// Slice, if set (N > 1), is the partition Filter keeps: a source that is
	// a source.Slicer reads only (a superset of) its rows
	// (docs/guide.md#which-rows-a-partition-reads); Filter still decides.
	Slice source.Slice
	// BeforeWrite, if set, runs before every claim of a page's records (the
	// checkpoint barrier of a partition, docs/guide.md#the-checkpoint-barrier). An error fails the run:
	// a *failure.Error with its code, any other error as store_unavailable.
	BeforeWrite func(ctx context.Context) error
	// AcceptedWait bounds how long the run waits for a destination's
	// process to settle records it accepted (default 2 min); what is still
	// processing then is asked about by the next run (docs/guide.md#the-ledger-and-its-retention).
	AcceptedWait time.Duration
	// PollInterval is the first pause between two questions about a
	// process (default 200 ms, doubling up to 5 s).
	PollInterval time.Duration
	// InDoubtGrace is how long after a write whose outcome is unknown the
	// run waits before it reads the destination back (CapVerify): a request
	// the client gave up on may still be in the server's hands and land
	// later; read back too early, it would be sent again
	// (docs/guide.md#the-ledger-and-its-retention). 0: no wait.
	InDoubtGrace time.Duration
	// Hooks are test seams; nil hooks are skipped.
	Hooks Hooks
}

// Hooks let tests stall a run at precise points.
type Hooks struct {
	// BeforeClaim runs after the ledger read, before the page's claim.
	BeforeClaim func(ctx context.Context, page int64)
	// AfterWrite runs after the destination call, before the ledger marks.
	AfterWrite func(ctx context.Context, page int64)
	// BeforeCursorSave runs after the lease was verified, before the cursor write.
	BeforeCursorSave func(ctx context.Context, page int64)
}

// Progress is reported after every checkpoint.
type Progress struct {
	RunID    int64
	Counters store.Counters
	Cursor   string
	Done     bool
}

// The run-level sentences of docs/guide.md#what-a-run-does.
const (
	SentenceAlreadyRunning = "Another run of this sync was already in progress"
	SentenceLeaseLost      = "The run lost its slot part-way through and stopped to avoid writing twice."
)

// Run executes one run of p.Sync and returns the finished run. The returned
// error is nil on success and a *failure.Error otherwise (already_running for
// a skipped run, interrupted for a drained one).
func Run(ctx context.Context, p Params) (store.Run, error) {
	r := &run{Params: p, payload: payloadPrint(p, "")}
	if r.Clock == nil {
		r.Clock = clock.Real{}
	}
	if r.Sleep == nil {
		r.Sleep = clock.Sleep
	}
	if r.Logger == nil {
		r.Logger = slog.New(slog.DiscardHandler)
	}
	if r.Attempt == 0 {
		r.Attempt = 1
	}
	if r.Sync.PageSize <= 0 {
		r.Sync.PageSize = 500
	}
	if rr, ok := p.Store.(store.RemoteReads); ok && rr.RemoteReads() {
		r.readsAhead, r.keysAhead, r.remoteStore = true, true, true
	}
	r.handler, _ = r.Destination.(destination.Remover)
	if r.Sync.Mirror != nil {
		if r.handler == nil {
			return store.Run{}, failure.New(failure.InvalidSyncDefinition, "this destination cannot remove records (write_mode mirror)")
		}
		r.remover = r.handler
	}
	return r.execute(ctx)
}

type run struct {
	Params
	// sharedOff is the store's shared clock less the run's (nanoseconds;
	// store.SharedClock, 0 without one): a time embedded in a value other
	// processes read (a mirror's slot reference) is written on that clock
	// (onSharedClock). Refreshed before each page's claim.
	sharedOff   atomic.Int64
	rec         store.Run
	lease       *lease.Held // the sync's lease, from Hold on
	inDoubtLeft int64       // in-doubt records left for a person (CapNone)
	// repeated counts the records whose identity an earlier page of this
	// run delivered with other values (ledger stage only).
	repeated int64
	// outstanding are the entries earlier runs left in flight, by slot tag
	// (ledger.SlotTag; loadOutstanding); read and emptied by the ledger
	// stage only.
	outstanding map[string][]store.LedgerEntry
	// refusals are the sync's rejected entries when the run began, by slot
	// tag (loadRefusals): a delivery of the slot under another key (its
	// row changed since) supersedes them (supersededRefusals). Every stage
	// that records a delivery reads it, under refusalsMu.
	refusalsMu sync.Mutex
	refusals   map[string][]store.LedgerEntry
	// remover is the destination's, for a mirror sync (nil otherwise).
	remover destination.Remover
	// handler names records at the destination (its Remover, in any write
	// mode): two slots' writes to one handle are never in flight at once.
	handler destination.Remover
	// heldBack counts the records left for the next run behind a write to
	// their handle that may still land (holdBack, awaitEarlier).
	heldBack int64
	// earlierTo are the writes in flight earlier runs left, by the key of
	// the handle they name (indexEarlierWrites); refsDone what the run learned of
	// their processes (processDone).
	earlierTo map[string][]earlierWrite
	refsDone  map[string]bool
	// seen are the slots a mirror run's full read met (nil otherwise).
	seen *mirrorSeen
	// payload is payloadPrint of the run's Params and salt, saved with each
	// cursor.
	payload string
	// salt is "dest:" and Sync.DestinationPayload when they differ from the
	// sync's payload base, and " at:" and Sync.DestinationAddress when it
	// differs from the sync's first, else "" (setSalt): mixed into every
	// record hash.
	salt string
	// epoch is the layout epoch the salt was made with (layoutEpoch), read
	// at the start; a new one is recorded by recordEpoch before the run's
	// first ledger write, so that a run that fails before writing (an
	// identity column misspelt) leaves no epoch behind: it did, and the
	// next run under the right layout started yet another and sent every
	// record again (an independent check, 2026-12-06).
	epoch     int
	epochOnce sync.Once
	epochErr  error
	// sourceKey is the source id the sync's keys are made with: its
	// source's id at its first run, kept beside its payload base, so that
	// moving what it reads (a file's path, the server in dsn, a table for
	// a query) leaves its slots where they are (sourceID).
	sourceKey string
	// freeSince is when the previous holder's lease ended, on the wall
	// clock: the grant's time less lease.Held.FreeFor (the grant's time
	// when unknown). A write never outlives its lease, so every request of
	// an earlier holder was sent, and abandoned, before it (verifyInDoubt).
	freeSince time.Time
	// readsAhead is set when the store's reads are round trips
	// (store.RemoteReads); keysAhead then says whether the ledger stage
	// reads a page's first-delivery keys beside its slots: while most
	// slots of the last page were new (readKeysAhead).
	readsAhead, keysAhead bool
	// remoteStore: the store is a server (PostgreSQL), which may answer
	// again seconds after it stopped (a restart, a failover); an embedded
	// one that failed (a full disk) does not (finish).
	remoteStore bool
	// inFlightByPosition is how many entries earlier runs left in flight on
	// a sync without an identity when this run began: rows move between
	// positions, so a write of one of them may concern a row this run
	// writes under another slot. The run's first claim waits out the grace
	// (ledgerStage).
	inFlightByPosition int
}

func (r *run) execute(ctx context.Context) (store.Run, error) {
	if ctx.Err() != nil {
		return store.Run{}, cancelled(ctx)
	}
	var err error
	r.rec, err = store.InsertRunDetached(ctx, r.Store, store.InsertRunParams{SyncID: r.Sync.ID, State: store.RunRunning, Attempt: r.Attempt})
	if err != nil {
		return store.Run{}, failure.Wrap(failure.StoreUnavailable, err, "record the run")
	}
	log := r.Logger.With("sync", r.Sync.ID, "run", r.rec.ID)

	r.lease, err = lease.Hold(ctx, lease.HoldParams{Manager: r.Leases, SyncID: r.Sync.ID, RunID: r.rec.ID,
		TTL: r.LeaseTTL, RenewEvery: r.LeaseRenew, Clock: r.Clock})
	if errors.Is(err, lease.ErrHeld) {
		// Logged like every other run's end, so that a run recorded but
		// never started is still in the logs (chaos pauses, 2026-12-05).
		log.Info("run skipped: another run holds the sync's lease", "state", store.RunSkipped, "code", failure.AlreadyRunning)
		ferr := failure.New(failure.AlreadyRunning, SentenceAlreadyRunning)
		return r.finish(ctx, store.RunSkipped, ferr), ferr
	}
	if err != nil && ctx.Err() != nil {
		ferr := cancelled(ctx)
		log.Info("run ended before it started: it was stopped", "state", store.RunInterrupted, "code", failure.CodeOf(ferr))
		return r.finish(ctx, store.RunInterrupted, ferr), ferr
	}
	if err != nil {
		ferr := failure.OutOfFiles(acquireFailure(err))
		log.Warn("run ended before it started: the lease could not be taken", "state", store.RunFailed, "code", failure.CodeOf(ferr), "err", ferr)
		return r.finish(ctx, store.RunFailed, ferr), ferr
	}
	r.rec.Fence = r.lease.Fence()
	r.freeSince = time.Now().Add(-r.lease.FreeFor())
	// The work is cancelled once the lease's time is up (docs/guide.md#the-store-and-the-leases), from
	// here on: the expiry counts from the moment the lease was asked for.
	workCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stopKeeping := r.lease.Keep(workCtx, cancel)
	log = log.With("fence", r.lease.Fence())
	log.Info("run started")
	r.closeOrphans(workCtx, log)

	state, runErr := r.loop(workCtx)
	stopKeeping()
	if c := context.Cause(workCtx); errors.Is(c, lease.ErrLost) {
		// Its lease's time ran out: lost, even if the loop ended well.
		runErr, state = failure.Wrap(failure.LeaseLost, c, SentenceLeaseLost), store.RunFailed
	} else if runErr == nil {
		if runErr = r.stillOwned(ctx); runErr != nil {
			state = store.RunFailed
		}
	} else if rf := r.lease.RenewFailure(); rf != nil && errors.Is(runErr, destination.ErrNoLeaseTime) {
		// A call stopped short of the lease's end because renewals were
		// refused (an ACL changed under the process, a store down): its
		// code was what it waited for (a 429's wait "longer than the run's
		// lease has left"), which sent a person to the destination.
		runErr, state = failure.Wrap(failure.LeaseLost, errors.Join(rf, runErr),
			"%s Its lease could not be renewed", SentenceLeaseLost), store.RunFailed
	}
	if failure.CodeOf(runErr) == failure.Interrupted && ctx.Err() == nil && context.Cause(workCtx) == nil && !r.drainRequested() {
		// Nobody stopped the run (no signal, no pause, no lost lease): a
		// store call ran out of its own time (a checkpoint's grace), which
		// read as "stopped" and sent a person to look for who stopped it
		// (an independent check, 2026-12-06, with Redis and the store
		// stalled).
		runErr = r.unanswered(runErr)
		state = store.RunFailed
	}
	// A file or socket the process could not open is the process's limit,
	// whichever step met it (docs/recovery.md#too_many_open_files).
	runErr = failure.OutOfFiles(runErr)
	if failure.CodeOf(runErr) == failure.Interrupted {
		state = store.RunInterrupted
		if r.DrainDetail != nil && r.drainRequested() {
			if d := r.DrainDetail(); d != "" {
				runErr = failure.New(failure.Interrupted, d)
			}
		}
	}
	// The end is recorded before the lease goes: released first, a sweep
	// or the sync's next run found the lease free and the run still
	// running, and closed it "interrupted" as its worker recorded success.
	fin := r.finish(ctx, state, runErr)
	// Release with a context that survives the caller's cancellation: a drained
	// or failed run frees the sync for an immediate rerun.
	relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	if err := r.lease.Release(relCtx); err != nil {
		log.Warn("lease release failed; it expires by itself", "err", err)
	}
	relCancel()
	if runErr != nil {
		log.Warn("run ended", "state", state, "code", failure.CodeOf(runErr), "err", runErr)
	} else {
		log.Info("run succeeded", "read", fin.Read, "written", fin.Written, "replayed", fin.Replayed)
	}
	return fin, runErr
}

// stillOwned is the lease_lost failure of a run that finished its work
// but lost its lease meanwhile, which a last renewal finds gone (another
// run took it over, and the recovery sweep or that run marked this one
// interrupted). Its store
// writes were fenced, so it wrote nothing after the loss; recorded
// succeeded, it wrote over that mark a run whose work others had resumed
// (an independent check, 2026-12-07: a worker frozen past its lease while
// it waited on an import woke, found nothing left to write, and recorded
// "succeeded, written 0" after two later runs had done its work). A
// renewal that fails otherwise (the lease store unreachable) leaves the
// success as it is: the work is done.
func (r *run) stillOwned(ctx context.Context) error {
	if err := r.lease.Renew(ctx); errors.Is(err, lease.ErrLost) {
		return failure.Wrap(failure.LeaseLost, err, "%s It had finished its work when it found out; a later run resumes from the saved cursor.", SentenceLeaseLost)
	}
	return nil
}

// closeOrphans marks as interrupted the sync's other runs still recorded as
// running: this run holds the lease, so their workers are gone (killed, or
// stopped without a word). Their work resumes here, from the saved cursor.
func (r *run) closeOrphans(ctx context.Context, log *slog.Logger) {
	runs, err := r.Store.ListRuns(ctx, r.Sync.ID, 20)
	if err != nil {
		log.Warn("could not list earlier runs", "err", err)
		return
	}
	for _, o := range runs {
		if o.ID == r.rec.ID || o.State != store.RunRunning {
			continue
		}
		o.State = store.RunInterrupted
		o.FailureCode = string(failure.Interrupted)
		o.FailureDetail = fmt.Sprintf("its process stopped (or could not record the run's end: a full disk, a store gone) without finishing; run %d resumed its work", r.rec.ID)
		if closed, err := r.Store.CloseRun(ctx, o); err != nil {
			log.Warn("could not close an orphaned run", "orphan", o.ID, "err", err)
			continue
		} else if !closed {
			continue // it recorded its own end meanwhile
		}
		log.Info("closed orphaned run", "orphan", o.ID)
		if r.Resumed != nil {
			r.Resumed(o)
		}
	}
}

// finish stores the final state; it uses a context that outlives ctx so that a
// cancelled run is still recorded.
func (r *run) finish(ctx context.Context, state store.RunState, err error) store.Run {
	if r.repeated > 0 {
		r.Logger.Warn("records repeated an identity that an earlier page of this run delivered with other values: the one read last is what the destination holds. A row changed while the run read it (on a keyset source it moves to a later page) needs nothing; if the source holds several rows with one identity, every run writes the earlier ones again: give each identity one row in the source (docs/guide.md#an-identity-in-the-source-twice)",
			"sync", r.Sync.ID, "run", r.rec.ID, "identity", r.Sync.Identity, "records", r.repeated)
	}
	r.rec.State = state
	r.rec.FinishedAt = r.Clock.Now()
	if err != nil {
		r.rec.FailureCode = string(failure.CodeOf(err))
		r.rec.FailureDetail = r.hideSecrets(failure.Detail(err))
	}
	update := func() error {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		return r.Store.UpdateRun(sctx, r.rec)
	}
	uerr := update()
	// A store that stopped answering (the run's own failure, often) may be
	// back in seconds: a restart, a failover. Unrecorded, the run reads as
	// running until the next one closes it as interrupted, "its process
	// stopped", while this process knew how and why it ended. A run being
	// stopped (ctx done) does not wait: its drain has a deadline; nor does
	// one on an embedded store (remoteStore).
	for _, wait := range finishRetries {
		if uerr == nil || !r.remoteStore || ctx.Err() != nil || r.Sleep(ctx, wait) != nil {
			break
		}
		uerr = update()
	}
	if uerr != nil {
		r.Logger.Error("could not record the run's end", "sync", r.Sync.ID, "run", r.rec.ID, "err", uerr)
		return r.rec
	}
	if state == store.RunFailed && r.AfterFailure != nil {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		r.AfterFailure(sctx, r.rec)
	}
	return r.rec
}

// finishRetries are the waits between tries to record a run's end (about
// a minute in all).
var finishRetries = []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 15 * time.Second, 15 * time.Second}

// hideSecrets is s without the config's secret values.
func (r *run) hideSecrets(s string) string {
	if len(r.Secrets) == 0 {
		return s
	}
	return apiclient.HideSecrets(s, r.Secrets)
}

func (r *run) drainRequested() bool {
	if r.Drain == nil {
		return false
	}
	select {
	case <-r.Drain:
		return true
	default:
		return false
	}
}

// loop runs pages until the end of the source.
func (r *run) loop(ctx context.Context) (store.RunState, error) {
	base, err := r.Store.PayloadBase(ctx, r.Sync.ID, r.Sync.DestinationPayload)
	if err != nil {
		return store.RunFailed, storeFailure(ctx, err, "load the sync's payload base")
	}
	if err := r.accountAddress(ctx); err != nil {
		return store.RunFailed, err
	}
	addr, err := r.Store.PayloadBase(ctx, addressBaseID(r.Sync.ID), r.Sync.DestinationAddress)
	if err != nil {
		return store.RunFailed, storeFailure(ctx, err, "load the sync's destination address")
	}
	epoch, err := r.layoutEpoch(ctx, r.Store, false)
	if err != nil {
		return store.RunFailed, storeFailure(ctx, err, "load the sync's layout epoch")
	}
	r.epoch = epoch
	r.setSaltEpoch(base, addr, epoch)
	if r.sourceKey, err = r.Store.PayloadBase(ctx, sourceBaseID(r.Sync.ID), r.Source.ID()); err != nil {
		return store.RunFailed, storeFailure(ctx, err, "load the sync's source key")
	}
	cur, err := r.Store.GetCursor(ctx, r.Sync.ID)
	if err != nil {
		return store.RunFailed, storeFailure(ctx, err, "load the cursor")
	}
	cursor, changed := startCursor(cur, r.payload, r.ResetCursor || r.Resend)
	if changed {
		r.Logger.Info("the mapping, the identity, the partitions, what the source reads, the destination's settings (lists, how empty values are written) or its account changed since the cursor was saved: reading the source from its start (records whose mapped values and destination settings did not change are not sent again)",
			"sync", r.Sync.ID, "run", r.rec.ID)
	}
	// A saved cursor older than the retention is fine (a monthly sync):
	// what a replay needs is checked record by record (checkReplayable).
	if err := r.loadOutstanding(ctx); err != nil {
		return store.RunFailed, err
	}
	r.indexEarlierWrites()
	if r.Sync.Identity == "" {
		for _, es := range r.outstanding {
			r.inFlightByPosition += len(es)
		}
	}
	refused, err := r.loadRefusals(ctx)
	if err != nil {
		return store.RunFailed, err
	}
	again, err := r.readAgain(ctx, refused)
	if err != nil {
		return store.RunFailed, err
	}
	if r.remover != nil {
		// Only a run that reads the source from its start can tell which
		// rows are gone; a run resumed mid-source leaves that to the next.
		r.seen = r.newMirrorSeen(cursor == "")
	}
	return r.pages(ctx, cursor, again)
}

// loadRefusals reads the sync's rejected entries (at most readAgainMax)
// into r.refusals, by slot tag, and returns them as listed.
func (r *run) loadRefusals(ctx context.Context) ([]store.LedgerEntry, error) {
	es, err := r.Store.LedgerList(ctx, r.Sync.ID, store.LedgerRejected, readAgainMax)
	if err != nil {
		return nil, storeFailure(ctx, err, "list the rejected records")
	}
	r.refusals = map[string][]store.LedgerEntry{}
	for _, e := range es {
		if tag, _, ok := ledger.EntryTag(e.Result); ok {
			r.refusals[tag] = append(r.refusals[tag], e)
		}
	}
	return es, nil
}

// supersededRefusals returns, once, the keys of the refusals of it's slot
// under other keys (values its row held before): it is delivered now with
// its current values, so those refusals are no longer a person's to look
// at (they stayed listed as rejected until the prune). A refusal of
// another identity that shares the slot's tag is left alone.
func (r *run) supersededRefusals(it *item) []string {
	r.refusalsMu.Lock()
	defer r.refusalsMu.Unlock()
	tag := ledger.SlotTag(it.slot)
	es, ok := r.refusals[tag]
	if !ok {
		return nil
	}
	var out []string
	var rest []store.LedgerEntry
	for _, e := range es {
		id, _ := ledger.EntryIdentity(e)
		switch {
		case e.Key == it.Key:
			// released as the delivery's own key
		case id == it.id:
			out = append(out, e.Key)
		default:
			rest = append(rest, e)
		}
	}
	if len(rest) == 0 {
		delete(r.refusals, tag)
	} else {
		r.refusals[tag] = rest
	}
	return out
}

// canReadByIdentity reports whether the run can read rows again by their
// identity: a keyset source (source.Refetcher) of a sync with an identity.
// A file is read whole every run and needs not.
func (r *run) canReadByIdentity() bool {
	_, ok := r.Source.(source.Refetcher)
	return ok && r.Sync.Identity != ""
}

// readByIdentity reads the rows whose identity is one of ids again, in one
// snapshot (canReadByIdentity must hold).
func (r *run) readByIdentity(ctx context.Context, ids []string) ([]source.Record, error) {
	var recs []source.Record
	err := r.readWithin(ctx, "read rows again by identity", func(ctx context.Context) (err error) {
		recs, err = r.Source.(source.Refetcher).ReadIdentities(ctx, r.Sync.Identity, ids)
		return err
	})
	if err != nil {
		return nil, sourceFailure(ctx, err)
	}
	return recs, nil
}

// readAgainMax bounds the rejected rows one run reads again by identity.
const readAgainMax = 10_000

// readAgain reads again, by identity, the rows the destination rejected on
// earlier runs, when the source's cursor does not come back to them (a
// keyset source; a file is read whole every run): docs/guide.md#the-ledger-and-its-retention, rejected
// records are retried until they succeed. es are the sync's rejected
// entries (loadRefusals). It returns them in pages.
func (r *run) readAgain(ctx context.Context, es []store.LedgerEntry) ([][]source.Record, error) {
	if !r.canReadByIdentity() {
		return nil, nil
	}
	seen := make(map[string]bool, len(es))
	var ids []string
	for _, e := range es {
		if id, ok := ledger.EntryIdentity(e); ok && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	recs, err := r.readByIdentity(ctx, ids)
	if err != nil {
		return nil, err
	}
	var pages [][]source.Record
	for rest := recs; len(rest) > 0; {
		n := min(len(rest), r.Sync.PageSize)
		pages = append(pages, rest[:n])
		rest = rest[n:]
	}
	// Debug: while a record stays refused, every run of the sync reads it
	// again, and an info line would repeat on every tick (the run's figures
	// and `oncesync records` say what matters).
	r.Logger.Debug("reading rejected records again", "sync", r.Sync.ID, "run", r.rec.ID, "rejected", len(ids), "found", len(recs))
	return pages, nil
}

// pages runs the pages from cursor to the end of the source as a pipeline of
// four stages, so that the destination's time overlaps oncesync's own work:
//
//	prefetch:   read page N+3 and build its keys        (a goroutine)
//	ledger:     ledger read and fenced claim of N+1, N+2 (this goroutine)
//	write:      write page N                             (a goroutine)
//	checkpoint: renew, verify; mark N-1's outcomes and
//	            save its cursor in one transaction       (a goroutine)
//
// Each stage handles pages in order, one at a time; the prefetcher holds
// one page ahead, the writer's queue one claimed page and the checkpointer's
// one written page, so memory stays bounded by the page size. Pages N+1 and
// N+2 may be claimed before page N is written, and page N written before
// page N-1 is marked and its cursor saved: the same states as a kill
// between two steps of the sequential loop (the cursor still points at
// N-1's start; the keys of N-1 to N+2 are pending, in doubt, settled by
// docs/guide.md#the-ledger-and-its-retention, which reads back what landed). The cursor still only ever moves over
// pages whose every record is marked, in the same transaction, by a renewed
// lease and a fenced write, in page order. A key of a page not yet marked
// seen again on a later page, or an in-doubt entry, makes the ledger stage
// wait until every page handed over is marked.
//
// Each stage's steps and waits are runtime/trace regions named
// "stage.step" (ledger.claim, checkpoint.store, settle.wait.checkpointer,
// ...), so an execution trace of a run (oncesync-bench storecmp --profile)
// shows which stage a page's time goes to.
func (r *run) pages(ctx context.Context, cursor string, again [][]source.Record) (store.RunState, error) {
	pf := r.startPrefetch(ctx, cursor, again)
	defer pf.stop()
	cp := r.startCheckpointer(ctx, cursor)
	pl := r.startPoller(ctx, cp)
	w := r.startWriter(ctx, cp, pl)
	var ledgerCum store.Counters
	end := func(err error) (store.RunState, error) { return r.endPages(w, pl, cp, ledgerCum, err) }
	for pageNo := r.rec.Pages + 1; ; pageNo++ {
		if r.drainRequested() {
			return end(failure.New(failure.Interrupted, ""))
		}
		if err := w.failed(); err != nil {
			return end(err)
		}
		if err := cp.failed(); err != nil {
			return end(err)
		}
		var p prepared
		reg := trace.StartRegion(ctx, "ledger.wait.prefetch")
		select {
		case p = <-pf.out:
		case <-ctx.Done():
			reg.End()
			return end(cancelled(ctx))
		}
		reg.End()
		if p.err != nil {
			return end(p.err)
		}
		reg = trace.StartRegion(ctx, "ledger")
		var reads atomic.Int64 // read-backs of an earlier run's writes in doubt, questions about its imports
		c, err := r.ledgerStage(destination.WithRequestCount(ctx, &reads), pageNo, p, w, cp)
		c.delta.Requests += reads.Load()
		reg.End()
		ledgerCum.Add(c.delta)
		if err != nil {
			return end(err)
		}
		c.ledgerCum = ledgerCum
		reg = trace.StartRegion(ctx, "ledger.wait.writer")
		w.submit(c)
		reg.End()
		if p.page.End {
			if st, err := end(nil); err != nil {
				return st, err
			}
			pf.stop() // the prefetcher is done with r.seen
			if err := r.checkColumns(cursor); err != nil {
				return store.RunFailed, err // before a mirror removes every record
			}
			removed, unhandled, err := r.removeGone(ctx, r.seen)
			if removed != (removals{}) || unhandled > 0 {
				r.rec.FailureDetail = mirrorDetail(removed, unhandled)
			}
			if err != nil {
				return store.RunFailed, err
			}
			r.reportRun(r.rec, p.page.Next, true)
			if r.inDoubtLeft > 0 {
				return store.RunFailed, failure.New(failure.RecordsInDoubt, fmt.Sprintf(
					"%d record(s) may or may not have reached the destination and need a person to settle them", r.inDoubtLeft))
			}
			return store.RunSucceeded, nil
		}
	}
}

// checkColumns fails a run that read no record from the source's start
// when HeaderProblem finds one: an export written wrong would otherwise
// succeed with nothing, run after run, and its sync never look silent.
func (r *run) checkColumns(from string) error {
	if from != "" || r.rec.Read > 0 {
		return nil
	}
	_, err := HeaderProblem(r.Sync, r.Source)
	return err
}

// HeaderProblem checks s's mapping and identity against the columns of src,
// a source that read no record (source.Columner: a CSV's header); checked
// is false when src cannot tell them. A source without even a header is
// source_query_invalid, a missing column invalid_sync_definition.
func HeaderProblem(s Sync, src source.Source) (checked bool, err error) {
	c, ok := src.(source.Columner)
	if !ok || c.Columns() == nil {
		return false, nil
	}
	cols := c.Columns()
	if len(cols) == 0 {
		return true, failure.New(failure.SourceQueryInvalid, "the source is empty: no file to read, or a file without even a header line (a CSV export with no rows still needs its header)")
	}
	rec := source.Record{Fields: make(map[string]any, len(cols))}
	for _, col := range cols {
		rec.Fields[col] = ""
	}
	return true, CheckColumns(s, rec, "the source has no rows, and its header")
}

// CheckColumns maps rec as a run would and takes its identity: a column the
// mapping or the identity names and rec (what, in the failure's detail)
// lacks is invalid_sync_definition, the code a run gives each such record.
func CheckColumns(s Sync, rec source.Record, what string) error {
	if _, err := s.Mapping.Apply(rec); err != nil {
		return failure.Wrap(failure.InvalidSyncDefinition, err, "%s: %s", what, err.Error())
	}
	if s.Identity != "" {
		// A column that is there without a value is the record's to fix,
		// not the definition's (rec may be a header's columns, all empty).
		var mce *mapping.MissingColumnError
		if _, err := mapping.Identity(rec, s.Identity); err != nil && !(errors.As(err, &mce) && mce.Null) {
			return failure.Wrap(failure.InvalidSyncDefinition, err, "%s (identity): %s", what, err.Error())
		}
	}
	return nil
}

// endPages waits for the write stage and the checkpointer, sets the run's
// counters (Pages: the pages whose cursor was saved) and returns the run's
// error: err (the ledger stage's) first, else the write stage's, else the
// checkpointer's.
func (r *run) endPages(w *writer, pl *poller, cp *checkpointer, ledgerCum store.Counters, err error) (store.RunState, error) {
	written, werr := w.close()
	cp.barrier() // every page's accepted batches are with the poller
	// A run that reached the end of the source waits for what the
	// destination is still processing; any other leaves it to the next run.
	open, left := pl.close(err == nil && werr == nil && cp.failed() == nil)
	if left > 0 && r.StillProcessing != nil {
		r.StillProcessing(left)
	}
	if r.heldBack > 0 {
		r.Logger.Warn("records were left for the next run: an earlier write to the same contact (another row's) was still being processed by the destination when the run stopped waiting, and a write now could land before it",
			"sync", r.Sync.ID, "run", r.rec.ID, "records", r.heldBack)
		if r.HeldBack != nil {
			r.HeldBack(int(r.heldBack))
		}
	}
	if open > 0 {
		if err == nil && werr == nil && r.drainRequested() {
			// A pause or a stop cut the wait short: the run did not reach
			// its end (its accepted pages hold the cursor back), so it is
			// interrupted, not a success that wrote nothing.
			err = failure.New(failure.Interrupted, "")
		}
		if e := pl.lastUnasked(); e != nil {
			// Not that they still ran: the destination was not asked
			// (Brevo's spent budget of process reads).
			r.Logger.Warn("records accepted by the destination could not be asked about; the next run settles them",
				"sync", r.Sync.ID, "run", r.rec.ID, "batches", open, "code", failure.CodeOf(e), "error", failure.Detail(e))
		} else {
			r.Logger.Warn("records accepted by the destination are still being processed; the next run settles them",
				"sync", r.Sync.ID, "run", r.rec.ID, "batches", open)
		}
	}
	last, extra, cerr := cp.close()
	r.rec.Counters = ledgerCum
	r.rec.Counters.Add(written)
	r.rec.Counters.Add(extra)
	r.rec.Pages = last
	for _, e := range []error{werr, cerr} {
		if err == nil {
			err = e
		}
	}
	switch {
	case err == nil:
		return store.RunSucceeded, nil
	case failure.CodeOf(err) == failure.Interrupted:
		return store.RunInterrupted, err
	default:
		return store.RunFailed, err
	}
}

// reportRun calls Progress with run's counters. Progress is called by one
// goroutine at a time: the checkpointer's, then (once it stopped) the run's.
func (r *run) reportRun(run store.Run, cursor string, done bool) {
	if r.Progress != nil {
		r.Progress(Progress{RunID: run.ID, Counters: run.Counters, Cursor: cursor, Done: done})
	}
}
