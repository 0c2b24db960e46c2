package runner

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
)

// claimed is a page through the ledger stage: the records to write, claimed
// under the run's fence, and the page's counters so far.
type claimed struct {
	pageNo    int64
	next      string // the cursor after the page
	read      int64  // records of the run's slice on the page
	send      []destination.Record
	claimedAt time.Time
	delta     store.Counters // the page's ledger-stage counters (Read, Replayed, InDoubt, Settled)
	ledgerCum store.Counters // the run's ledger-stage counters up to this page, inclusive
}

// ledgerStage runs step 3 of SPEC §2 for one prepared page: one ledger read
// for every key, in-doubt settlement, and the fenced claim of what is to be
// written. w is the write stage, which may still be writing the previous
// page: a key of that page seen again here (the same identity on two
// adjacent pages) or an in-doubt entry makes this stage wait until it is
// done, so the ledger answers with that page's outcome.
func (r *run) ledgerStage(ctx context.Context, pageNo int64, p prepared, w *writer, cp *checkpointer) (claimed, error) {
	c := claimed{pageNo: pageNo, next: p.page.Next, read: p.read}
	c.delta.Read = p.read
	c.delta.Replayed = p.dups
	recs := p.recs

	keys := make([]string, 0, len(recs))
	overlap := false
	for _, rc := range recs {
		keys = append(keys, rc.Key)
		overlap = overlap || w.writing(rc.Key)
	}
	if overlap {
		if err := w.waitIdle(ctx); err != nil {
			return c, err
		}
	}
	entries, err := r.Store.LedgerGet(ctx, r.Sync.ID, keys)
	if err != nil {
		return c, storeFailure(ctx, err, "read the ledger")
	}
	var (
		inDoubt []destination.Record
		touch   []string
		since   time.Time
		now     = r.Clock.Now()
	)
	for _, rc := range recs {
		e, ok := entries[rc.Key]
		switch {
		case !ok || e.State == store.LedgerRejected:
			c.send = append(c.send, rc)
		case e.State == store.LedgerComplete:
			c.delta.Replayed++
			if r.Sync.Retention > 0 && now.Sub(e.SeenAt) > r.Sync.Retention/4 {
				touch = append(touch, rc.Key)
			}
		case e.State == store.LedgerInDoubt:
			// Left for a person on an earlier run; never resent automatically.
		case e.State == store.LedgerPending && e.Fence < r.grant.Fence:
			inDoubt = append(inDoubt, rc)
			if since.IsZero() || e.ClaimedAt.Before(since) {
				since = e.ClaimedAt
			}
		default: // pending under our own fence: an earlier try of this page in this run
			c.send = append(c.send, rc)
		}
	}
	if len(touch) > 0 {
		if err := r.Store.LedgerTouch(ctx, r.Sync.ID, touch); err != nil {
			return c, storeFailure(ctx, err, "refresh ledger entries")
		}
	}

	// SPEC §4: settle in-doubt entries by the destination's capability, with
	// no write of this run in flight.
	if len(inDoubt) > 0 {
		if err := w.waitIdle(ctx); err != nil {
			return c, err
		}
		c.delta.InDoubt += int64(len(inDoubt))
		resend, settled, err := r.settle(ctx, inDoubt, since)
		if err != nil {
			return c, err
		}
		c.delta.Settled += settled
		c.send = append(c.send, resend...)
	}
	if len(c.send) == 0 {
		return c, nil
	}

	// Claim before any destination call, fenced.
	if err := r.ensureLease(ctx); err != nil {
		return c, err
	}
	if r.Hooks.BeforeClaim != nil {
		r.Hooks.BeforeClaim(ctx, pageNo)
	}
	// The stages after this one run alongside it; once one of them has
	// failed (a lost lease, a refused fence) nothing more is claimed.
	if err := w.failed(); err != nil {
		return c, err
	}
	if err := cp.failed(); err != nil {
		return c, err
	}
	if r.BeforeWrite != nil {
		// A partition's barrier check (SPEC §11) vouches for the page that
		// is written next: with no page of this run in flight behind it, at
		// most the page being written when the barrier's store (Redis) goes
		// away is written after, as in the sequential loop.
		if err := w.waitIdle(ctx); err != nil {
			return c, err
		}
	}
	if err := r.beforeWrite(ctx); err != nil {
		return c, err
	}
	c.claimedAt = r.Clock.Now()
	if err := r.Store.LedgerClaim(ctx, store.LedgerClaimParams{
		SyncID: r.Sync.ID, Fence: r.grant.Fence, RunID: r.rec.ID, Keys: recordKeys(c.send),
	}); err != nil {
		return c, storeFailure(ctx, err, "claim the page's records")
	}
	r.Logger.Debug("page claimed", "sync", r.Sync.ID, "run", r.rec.ID, "page", pageNo, "claimed", len(c.send))
	return c, nil
}

// writeStage runs step 4 of SPEC §2 for a claimed page, the write, and
// returns the page's write-stage counters (Written, Rejected, Requests) and
// its batched marks (step 5), which the checkpointer records: nil when
// nothing was written, or when the write failed (the page's claims stay
// pending, in doubt for the next run). A page whose every record was
// refused returns its marks and a destination_rejected_records failure.
func (r *run) writeStage(ctx context.Context, c claimed) (store.Counters, []store.LedgerFinish, error) {
	var delta store.Counters
	if len(c.send) == 0 {
		return delta, nil, nil // a page whose every key is complete sends nothing
	}
	// No write without a lease known to be ours right now.
	if err := r.ensureLease(ctx); err != nil {
		return delta, nil, err
	}
	results, landed, requests, err := r.write(ctx, c.send, c.claimedAt)
	delta.Requests = requests
	if err != nil {
		if ctx.Err() != nil {
			return delta, nil, cancelled(ctx)
		}
		return delta, nil, destinationFailure(err)
	}
	if r.Hooks.AfterWrite != nil {
		r.Hooks.AfterWrite(ctx, c.pageNo)
	}
	finish := make([]store.LedgerFinish, 0, len(results)+len(landed))
	finish = append(finish, landed...)
	var rejected int64
	for _, res := range results {
		switch res.Outcome {
		case destination.Rejected:
			rejected++
			finish = append(finish, store.LedgerFinish{Key: res.Key, State: store.LedgerRejected, Message: res.Message})
		default:
			finish = append(finish, store.LedgerFinish{Key: res.Key, State: store.LedgerComplete, Result: res.Ref})
		}
	}
	if len(results)+len(landed) != len(c.send) {
		return delta, nil, failure.New(failure.Internal, fmt.Sprintf("the destination answered for %d of %d records", len(results), len(c.send)))
	}
	delta.Written = int64(len(c.send)) - rejected
	delta.Rejected = rejected
	if rejected > 0 && rejected == c.read {
		return delta, finish, failure.New(failure.DestinationRejectedRecords,
			fmt.Sprintf("the destination refused all %d records of page %d", rejected, c.pageNo))
	}
	return delta, finish, nil
}

// mark records a written page's outcomes (step 5 of SPEC §2), fenced like
// its claim.
func (r *run) mark(ctx context.Context, finish []store.LedgerFinish) error {
	if err := r.Store.LedgerFinish(ctx, store.LedgerFinishParams{
		SyncID: r.Sync.ID, Fence: r.grant.Fence, RunID: r.rec.ID, Entries: finish,
	}); err != nil {
		return storeFailure(ctx, err, "mark delivered records")
	}
	return nil
}

// beforeWrite runs Params.BeforeWrite and maps its error.
func (r *run) beforeWrite(ctx context.Context) error {
	if r.BeforeWrite == nil {
		return nil
	}
	err := r.BeforeWrite(ctx)
	var fe *failure.Error
	switch {
	case err == nil:
		return nil
	case errors.As(err, &fe):
		return err
	case ctx.Err() != nil:
		return cancelled(ctx)
	default:
		return failure.Wrap(failure.StoreUnavailable, err, "could not check the source snapshot before writing")
	}
}

// maxOutcomeChecks bounds how many read-backs in a row that find nothing
// landed one page's write may take within one run (a destination that is
// down, or loses answers to writes it did not apply). A read-back that finds
// records landed does not count: the page made progress, and what is left
// to resend is smaller, so the loop still ends (after at most one read-back
// per record plus maxOutcomeChecks). On the single path every record is its
// own request, so a page of 200 meets several lost answers when 2 % of them
// are cut; counting those read-backs failed the run on pages that were
// getting through (chaos destination-faults, 2026-11-30).
const maxOutcomeChecks = 3

// write sends recs and counts its requests. When the destination cannot tell whether a write landed
// (a lost answer, a 502) and it can be asked (CapVerify), the run reads it
// back at once: what landed is marked complete without writing again, the
// rest is resent. It returns the results of the last write and the records
// found landed.
func (r *run) write(ctx context.Context, recs []destination.Record, claimedAt time.Time) (_ []destination.Result, _ []store.LedgerFinish, requests int64, _ error) {
	var landed []store.LedgerFinish
	results, err := r.Destination.Write(r.destCtx(ctx), recs)
	requests++
	for fruitless := 0; err != nil && fruitless < maxOutcomeChecks && ctx.Err() == nil &&
		r.Destination.Capability() == destination.CapVerify && failure.CodeOf(err) == failure.DestinationUnavailable; {
		found, verr := r.Destination.Verify(r.destCtx(ctx), recs, claimedAt)
		if verr != nil {
			return nil, nil, requests, verr
		}
		var rest []destination.Record
		for _, rc := range recs {
			if ref, ok := found[rc.Key]; ok {
				landed = append(landed, store.LedgerFinish{Key: rc.Key, State: store.LedgerComplete, Result: ref})
			} else {
				rest = append(rest, rc)
			}
		}
		r.Logger.Info("write outcome was unknown; read the destination back",
			"sync", r.Sync.ID, "run", r.rec.ID, "landed", len(recs)-len(rest), "resend", len(rest))
		if len(rest) == 0 {
			return nil, landed, requests, nil
		}
		if len(rest) < len(recs) {
			fruitless = 0
		} else {
			fruitless++
		}
		if err := r.ensureLease(ctx); err != nil {
			return nil, nil, requests, err
		}
		recs = rest
		results, err = r.Destination.Write(r.destCtx(ctx), recs)
		requests++
	}
	return results, landed, requests, err
}

// keys maps every record of the run's slice (see Params.Filter) and builds
// its delivery key (SPEC §3); read is the number of records in the slice. A
// key seen twice on one page (the same row twice) is kept once.
func (r *run) keys(page source.Page) (out []destination.Record, read, dups int64, err error) {
	out = make([]destination.Record, 0, len(page.Records))
	seen := make(map[string]struct{}, len(page.Records))
	for i, rec := range page.Records {
		if r.Filter != nil && !r.Filter(rec) {
			continue
		}
		read++
		data, err := r.Sync.Mapping.Apply(rec)
		if err != nil {
			return nil, 0, 0, failure.Wrap(failure.InvalidSyncDefinition, err, "%s", err.Error())
		}
		rh, err := ledger.RecordHash(data)
		if err != nil {
			return nil, 0, 0, failure.Wrap(failure.SourceQueryInvalid, err, "record %d of the page cannot be encoded", i)
		}
		var key string
		if r.Sync.Identity != "" {
			id, err := mapping.Identity(rec, r.Sync.Identity)
			if err != nil {
				return nil, 0, 0, failure.Wrap(failure.InvalidSyncDefinition, err, "%s", err.Error())
			}
			key = ledger.Identity(r.Sync.ID, r.Source.ID(), id, rh)
		} else {
			key = ledger.Positional(r.Sync.ID, r.Source.ID(), page.Cursor, i, rh)
		}
		if _, dup := seen[key]; dup {
			dups++
			continue
		}
		seen[key] = struct{}{}
		out = append(out, destination.Record{Key: key, Data: data})
	}
	return out, read, dups, nil
}

// settle resolves in-doubt records and returns those to (re)send and how
// many were settled without a write.
func (r *run) settle(ctx context.Context, recs []destination.Record, since time.Time) (_ []destination.Record, settled int64, _ error) {
	switch r.Destination.Capability() {
	case destination.CapIdempotent:
		return recs, 0, nil // resent with the same idempotency key
	case destination.CapVerify:
		landed, err := r.Destination.Verify(r.destCtx(ctx), recs, since)
		if err != nil {
			if ctx.Err() != nil {
				return nil, 0, cancelled(ctx)
			}
			return nil, 0, destinationFailure(err)
		}
		var fin []store.LedgerFinish
		var resend []destination.Record
		for _, rc := range recs {
			if ref, ok := landed[rc.Key]; ok {
				fin = append(fin, store.LedgerFinish{Key: rc.Key, State: store.LedgerComplete, Result: ref})
			} else {
				resend = append(resend, rc)
			}
		}
		if len(fin) > 0 {
			if err := r.Store.LedgerFinish(ctx, store.LedgerFinishParams{
				SyncID: r.Sync.ID, Fence: r.grant.Fence, RunID: r.rec.ID, Entries: fin,
			}); err != nil {
				return nil, 0, storeFailure(ctx, err, "settle in-doubt records")
			}
		}
		return resend, int64(len(fin)), nil
	default:
		fin := make([]store.LedgerFinish, 0, len(recs))
		for _, rc := range recs {
			fin = append(fin, store.LedgerFinish{Key: rc.Key, State: store.LedgerInDoubt})
		}
		if err := r.Store.LedgerFinish(ctx, store.LedgerFinishParams{
			SyncID: r.Sync.ID, Fence: r.grant.Fence, RunID: r.rec.ID, Entries: fin,
		}); err != nil {
			return nil, 0, storeFailure(ctx, err, "record in-doubt records")
		}
		r.inDoubtLeft += int64(len(recs))
		return nil, 0, nil
	}
}

func recordKeys(recs []destination.Record) []string {
	out := make([]string, len(recs))
	for i, rc := range recs {
		out[i] = rc.Key
	}
	return out
}

// storeFailure maps a store error: a refused fence means the lease was lost.
func storeFailure(ctx context.Context, err error, what string) error {
	if errors.Is(err, store.ErrFenced) {
		return failure.Wrap(failure.LeaseLost, err, SentenceLeaseLost)
	}
	if ctx.Err() != nil {
		return cancelled(ctx)
	}
	return failure.Wrap(failure.StoreUnavailable, err, "could not %s", what)
}

func sourceFailure(ctx context.Context, err error) error {
	switch {
	case ctx.Err() != nil:
		return cancelled(ctx)
	case errors.Is(err, source.ErrChanged):
		return failure.Wrap(failure.SourceChangedDuringRun, err, "the source no longer matches the saved cursor")
	case errors.Is(err, source.ErrInvalid), errors.Is(err, source.ErrBadCursor):
		return failure.Wrap(failure.SourceQueryInvalid, err, "%s", err.Error())
	default:
		return failure.Wrap(failure.SourceUnavailable, err, "%s", err.Error())
	}
}

func destinationFailure(err error) error {
	var fe *failure.Error
	if errors.As(err, &fe) {
		return err
	}
	return failure.Wrap(failure.DestinationUnavailable, err, "the destination call failed")
}

// cancelled explains a cancelled context: a lost lease or a hard stop.
func cancelled(ctx context.Context) error {
	if c := context.Cause(ctx); errors.Is(c, errLeaseLost) {
		return failure.Wrap(failure.LeaseLost, c, SentenceLeaseLost)
	}
	return failure.Wrap(failure.Interrupted, ctx.Err(), "the run was stopped mid-page; its records are settled by the next run")
}
