package runner

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"runtime/trace"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
)

// item is one record of a page on its way through the run: the mapped
// record (its Key is the delivery key, known once the slot's state is), the
// slot it writes and what its key is built from.
type item struct {
	destination.Record
	slot   string
	hash   [32]byte
	id     string // identity; "" for a positional slot
	cursor string // the page's cursor (positional keys)
	pos    int    // the position on the page (positional keys)
	gen    int64  // the delivery's generation of the slot (docs/guide.md#what-a-run-does)
	// ownInDoubt: the item's own key is pending under an older fence (a
	// dead run's claim), not only an earlier value's entry (release).
	ownInDoubt bool
	// release are entries an earlier run left for this slot under other
	// keys (a value since changed in the source): this item's delivery, or
	// its verified presence, settles them, and they are released with it.
	release []string
	// afterDelivery are earlier imports' entries of another value of this
	// row that the destination reported delivered: until this row's
	// delivery is recorded in its slot they are the only record that the
	// destination holds that value, so they are released with that
	// delivery only. Released at once, a refusal of this value left the
	// slot at the value before: the row back to the import's value was
	// written twice, back to the one before it was not written at all (an
	// independent check, klaviyo35).
	afterDelivery []string
	// refusedBefore: the destination refused this very value on an earlier
	// write (its key is rejected in the ledger).
	refusedBefore bool
	// absent: the ledger stage read its key and found no entry
	// (store.LedgerClaimParams.Absent); slotAbsent: the same of its slot
	// (store.LedgerFinish.Absent of its first delivered state).
	absent, slotAbsent bool
	// asDelivered: the record's values are its slot's last delivered
	// state; it is sent only because an earlier write of another value of
	// the row is outstanding, and not if that write applied nothing.
	asDelivered bool
	// slotRef is the slot's last delivery's reference, with asDelivered.
	slotRef string
	// invalid, when set, is why the record could not be read or mapped:
	// it is rejected without a write (its slot is its position).
	invalid string
	// prevRef is the Ref of the slot's last delivered state, for a mirror
	// (whose Ref holds the record's handle at the destination).
	prevRef string
	// writeAt is when the write that delivers this value was claimed (the
	// store's clock; zero when not known): kept with a mirror's handle.
	writeAt time.Time
	// handle is the record's handle at the destination (handleAt), once
	// known; handleKnown says it was asked.
	handle      string
	handleKnown bool
	handleKey   string // ledger.HandleKey of handle, once asked (handleKey)
	// settling is how the run settled a write of it in doubt that it sends
	// again (ledger.SettledResent, ledger.SettledIdempotent): recorded with
	// the mark of its outcome.
	settling string
}

// claimed is a page through the ledger stage: the records to write, claimed
// under the run's fence, and the page's counters so far.
type claimed struct {
	pageNo    int64
	next      string // the cursor after the page
	read      int64  // records of the run's slice on the page
	again     bool   // rows read again by identity: refused before, maybe refused again
	send      []*item
	handles   []string // the destination handles send writes to (writer.writingTo)
	claimedAt time.Time
	delta     store.Counters // the page's ledger-stage counters (Read, Replayed, InDoubt, Settled, Written, Rejected of settled entries)
	ledgerCum store.Counters // the run's ledger-stage counters up to this page, inclusive
}

// ledgerStage runs step 3 of docs/guide.md#what-a-run-does for one prepared page: the slots' last
// delivered states, one ledger read for the keys of the records that
// changed, the settling of what earlier runs left in doubt or accepted, and
// the fenced claim of what is to be written. w is the write stage, which
// may still be writing or waiting on earlier pages: a slot of such a page
// seen again here (the same identity on two pages) makes this stage wait
// until that page's outcomes are recorded, so the ledger answers with them.
func (r *run) ledgerStage(ctx context.Context, pageNo int64, p prepared, w *writer, cp *checkpointer) (claimed, error) {
	c := claimed{pageNo: pageNo, next: p.page.Next, read: p.read, again: p.again}
	c.delta.Read = p.read
	c.delta.Replayed = p.dups
	items := p.items
	if len(items) == 0 {
		return c, nil
	}

	var invalidMarks []store.LedgerFinish
	if n := countInvalid(items); n > 0 {
		// Records the source could not read, or the mapping not map, are
		// rejected by their position, never sent (docs/guide.md#the-ledger-and-its-retention).
		valid := make([]item, 0, len(items)-n)
		for i := range items {
			if it := &items[i]; it.invalid != "" {
				invalidMarks = append(invalidMarks, store.LedgerFinish{Key: it.Key, State: store.LedgerRejected,
					Message: r.hideSecrets(destination.RedactRecord(it.invalid, it.Data)), Result: ledger.RejectedResult(it.slot, "")})
				c.delta.Rejected++
				continue
			}
			valid = append(valid, items[i])
		}
		items = valid
		if err := r.mark(ctx, invalidMarks); err != nil {
			return c, err
		}
		if len(items) == 0 {
			return c, nil
		}
	}
	slots := make([]string, len(items))
	overlap := false
	for i := range items {
		slots[i] = items[i].slot
		overlap = overlap || w.writing(items[i].slot)
	}
	if overlap {
		reg := trace.StartRegion(ctx, "ledger.wait.resolved")
		err := w.waitResolved(ctx)
		reg.End()
		if err != nil {
			return c, err
		}
	}
	var ahead *readAhead
	if r.readsAhead && r.keysAhead {
		ahead = r.readKeysAhead(ctx, items)
	}
	reg := trace.StartRegion(ctx, "ledger.get.slots")
	states, err := r.Store.LedgerGet(ctx, r.Sync.ID, slots)
	reg.End()
	if err != nil {
		ahead.wait()
		return c, storeFailure(ctx, err, "read the ledger")
	}
	r.keysAhead = 2*(len(items)-len(states)) >= len(items)
	var (
		changed []*item
		// superseded are refusals of values rows no longer hold, whose
		// rows hold their delivered values again: not a person's to look at.
		superseded []store.LedgerFinish
		// removedUntil is settings.in_doubt_grace past the latest removal
		// of a row back on this page (removedBack of them), which the
		// page's writes wait for.
		removedUntil time.Time
		removedBack  int
	)
	for i := range items {
		it := &items[i]
		e, found := states[it.slot]
		it.slotAbsent = !found
		st, ok := ledger.DecodeSlot(e, found)
		if _, gone := ledger.RefRemoved(st.Ref); ok && gone {
			// Removed a moment ago and back in the source: a removal
			// the destination took to apply later could land after
			// this row's write.
			if u, ok := r.graceUntil(e.CompletedAt); ok {
				removedBack++
				if u.After(removedUntil) {
					removedUntil = u
				}
			}
		}
		if ok && !r.resends(e) && r.unchanged(st, it.hash) {
			if !r.hasOutstanding(it.slot) {
				c.delta.Replayed++ // unchanged since its last delivery: nothing to send
				for _, k := range r.supersededRefusals(it) {
					superseded = append(superseded, store.LedgerFinish{Key: k, State: store.LedgerReleased})
				}
				continue
			}
			it.asDelivered, it.slotRef = true, st.Ref
		}
		it.gen = 1
		if ok {
			if found && e.RunID == r.rec.ID && r.Sync.Identity != "" {
				r.repeated++ // delivered by an earlier page of this run
			}
			it.gen = st.Gen + 1
			it.Redelivery = true
			if r.remover != nil {
				it.prevRef = st.Ref // the handle its last delivery went to
			}
		}
		if ahead != nil && it.gen == 1 {
			it.Key = ahead.keys[i] // made by readKeysAhead
		} else {
			it.Key = r.deliveryKey(it)
		}
		changed = append(changed, it)
	}
	entries, aheadErr := ahead.wait()
	if len(changed) == 0 {
		if len(superseded) > 0 {
			return c, r.mark(ctx, superseded)
		}
		return c, nil
	}
	if aheadErr != nil {
		return c, storeFailure(ctx, aheadErr, "read the ledger")
	}

	keys := make([]string, 0, len(changed))
	for _, it := range changed {
		if ahead == nil || it.gen != 1 {
			keys = append(keys, it.Key) // not read ahead: a slot delivered before
		}
	}
	if len(keys) > 0 {
		reg = trace.StartRegion(ctx, "ledger.get.keys")
		got, err := r.Store.LedgerGet(ctx, r.Sync.ID, keys)
		reg.End()
		if err != nil {
			return c, storeFailure(ctx, err, "read the ledger")
		}
		if entries == nil {
			entries = got
		} else {
			maps.Copy(entries, got)
		}
	}
	var (
		marks    = superseded
		inDoubt  []*item
		accepted = map[string][]*item{} // ref -> items accepted by an earlier run, in this run's key
		since    time.Time
		now      = r.Clock.Now()
		unknown  = map[string]bool{} // earlier refs the destination does not know
	)
	// Earlier runs' imports of other values of these rows: learn what
	// became of each, asking each process once for all the rows it
	// carried (once a row was 500 process reads a page).
	foreigns := make([][]store.LedgerEntry, len(changed))
	byRef := map[string][]*item{}
	var refs []string
	for i, it := range changed {
		foreigns[i] = r.takeOutstanding(it.slot, it.Key)
		for _, f := range foreigns[i] {
			if f.State == store.LedgerAccepted {
				ref := ledger.AcceptedRef(f)
				if _, ok := byRef[ref]; !ok {
					refs = append(refs, ref)
				}
				byRef[ref] = append(byRef[ref], withKey(it, f.Key))
			}
		}
	}
	earlier := map[string]destination.Result{} // by the earlier entry's key
	for _, ref := range refs {
		res, err := r.awaitAccepted(ctx, ref, byRef[ref])
		switch {
		case errors.Is(err, destination.ErrUnknownRef):
			unknown[ref] = true
		case err != nil:
			return c, err
		}
		for _, x := range res {
			earlier[x.Key] = x
		}
	}
	for i, it := range changed {
		e, found := entries[it.Key]
		key := it.Key
		var learned *destination.Result // an earlier import delivered this very value
		var learnedAt time.Time         // when that import's records were claimed
		moved := false                  // an earlier import delivered another value
		// settleWith leaves the earlier entry key (claimed at) to be settled
		// with this row, which is read back first, as a write in doubt.
		settleWith := func(key string, at time.Time) {
			it.release = append(it.release, key)
			if since.IsZero() || at.Before(since) {
				since = at
			}
		}
		// unsure: what the earlier entry f wrote is not known.
		unsure := func(f store.LedgerEntry) {
			marks = r.appendMovedFrom(marks, it, f)
			settleWith(f.Key, f.ClaimedAt)
		}
		// both: imports of this value (key, claimed at) and of another
		// were delivered, and which landed last is unknown (imports end
		// out of order): the row is read back rather than sent again or
		// taken for delivered (an independent check, klaviyo35: a
		// duplicate write).
		both := func(key string, at time.Time) {
			settleWith(key, at)
			learned = nil
		}
		for _, f := range foreigns[i] {
			switch f.State {
			case store.LedgerAccepted:
				// An earlier run's import of another value of this row:
				// what became of it is judged before this value is.
				ref := ledger.AcceptedRef(f)
				if unknown[ref] {
					// Its process is not known there (another account's):
					// what it wrote is in doubt, settled with this value.
					unsure(f)
					continue
				}
				if res, ok := earlier[f.Key]; ok && res.Outcome == destination.Delivered {
					if g, same := r.valueGen(it, f.Key); same && !moved {
						// That import carried this very value, under a
						// generation the slot does not know yet (the run
						// that sent it had just learned of an earlier
						// value's delivery): it is delivered.
						it.gen, it.Key = g, f.Key
						learned, learnedAt = &res, f.ClaimedAt
						it.writeAt = f.ClaimedAt
					} else if same {
						both(f.Key, f.ClaimedAt) // released with the row's settling
						continue
					} else {
						// The destination holds that other value now.
						moved = true
						marks = r.appendMovedFrom(marks, it, f)
						if learned != nil {
							both(it.Key, learnedAt) // it.Key is that import's
						}
						// Send this value (or, after both, read it back).
						it.gen++
						it.Redelivery = true
						it.Key = r.deliveryKey(it)
						found = false
						it.afterDelivery = append(it.afterDelivery, f.Key)
						continue
					}
					found = false
				} else if it.asDelivered {
					// Asked with this value, not the one that import
					// carried, the destination answers for this value:
					// "not sent" does not say the import applied nothing
					// of the row (a cancelled Klaviyo job that wrote the
					// profile proves it only to the whole job, or to the
					// values it sent). The destination may hold the other
					// value: read back before the row is taken for back to
					// what it holds.
					unsure(f)
					continue
				}
				marks = append(marks, store.LedgerFinish{Key: f.Key, State: store.LedgerReleased})
			default: // pending under an older fence: it may have landed
				unsure(f)
			}
		}
		if learned != nil && len(it.release) == 0 {
			marks = r.appendDelivered(marks, it, *learned, &c.delta)
			continue
		}
		if it.asDelivered && !moved && len(it.release) == 0 && !found {
			// The other value's import applied nothing of this row (it
			// failed, a job was cancelled before it, the row was refused):
			// the destination holds the value the row is back to.
			c.delta.Replayed++
			for _, k := range r.supersededRefusals(it) {
				marks = append(marks, store.LedgerFinish{Key: k, State: store.LedgerReleased})
			}
			continue
		}
		it.refusedBefore = found && e.State == store.LedgerRejected
		it.absent = !found && it.Key == key
		switch {
		case found && e.State == store.LedgerComplete:
			// A ledger from before slots: this very value was delivered.
			// Record it as the slot's state, so that a later change and
			// change back is seen (docs/guide.md#what-a-run-does).
			marks = r.appendDeliveredMarks(marks, it, legacyRef(e.Result), "")
			c.delta.Replayed++
		case found && e.State == store.LedgerAccepted:
			ref := ledger.AcceptedRef(e)
			accepted[ref] = append(accepted[ref], it)
			it.writeAt = e.ClaimedAt
		case found && e.State == store.LedgerRejected && e.RunID == r.rec.ID && e.Fence == r.lease.Fence():
			// This very value was refused earlier in this run: read again
			// by identity, then by the cursor's lookback. Once is enough.
			c.delta.Replayed++
		case found && e.State == store.LedgerInDoubt:
			// Left for a person on an earlier run; never resent automatically.
		case found && leftInDoubt(e, r.lease.Fence()):
			if err := r.checkReplayable(e, now); err != nil {
				return c, err
			}
			it.ownInDoubt = true
			it.writeAt = e.ClaimedAt // what a read-back finds landed was claimed then
			inDoubt = append(inDoubt, it)
			if since.IsZero() || e.ClaimedAt.Before(since) {
				since = e.ClaimedAt
			}
		case len(it.release) > 0:
			inDoubt = append(inDoubt, it)
		default: // absent, rejected, or pending under this run's fence
			c.send = append(c.send, it)
		}
	}

	// Imports an earlier run left accepted (docs/guide.md#the-ledger-and-its-retention): ask their processes.
	for ref, its := range accepted {
		res, err := r.awaitAccepted(ctx, ref, its)
		if errors.Is(err, destination.ErrUnknownRef) {
			// The destination does not know the process (another
			// account's, the api key having changed): what became of its
			// records is unknown, so they are settled as writes in doubt,
			// read back before any is sent again. The accepted entry is
			// released first, so that a resend can claim its key.
			for _, it := range its {
				marks = append(marks, store.LedgerFinish{Key: it.Key, State: store.LedgerReleased})
				it.ownInDoubt = true
				inDoubt = append(inDoubt, it)
				if e := entries[it.Key]; since.IsZero() || e.ClaimedAt.Before(since) {
					since = e.ClaimedAt
				}
			}
			continue
		}
		if err != nil {
			return c, err
		}
		byKey := make(map[string]destination.Result, len(res))
		for _, x := range res {
			byKey[x.Key] = x
		}
		for _, it := range its {
			x := byKey[it.Key]
			switch x.Outcome {
			case destination.Delivered:
				marks = r.appendDelivered(marks, it, x, &c.delta)
			case destination.Rejected:
				marks = r.appendRejected(marks, it, x.Message)
				c.delta.Rejected++
			default: // the process failed: nothing of it applied
				marks = append(marks, store.LedgerFinish{Key: it.Key, State: store.LedgerReleased})
				c.send = append(c.send, it)
			}
		}
	}

	// docs/guide.md#the-ledger-and-its-retention: settle in-doubt entries by the destination's capability, with
	// no write of this run in flight.
	if len(inDoubt) > 0 {
		if err := w.waitIdle(ctx); err != nil {
			return c, err
		}
		c.delta.InDoubt += int64(len(inDoubt))
		resend, settled, fin, err := r.settle(ctx, inDoubt, since)
		if err != nil {
			return c, err
		}
		marks = append(marks, fin...)
		c.delta.Settled += settled
		c.send = append(c.send, resend...)
	}
	if len(marks) > 0 {
		if err := r.mark(ctx, marks); err != nil {
			return c, err
		}
	}
	if len(c.send) == 0 {
		return c, nil
	}

	if r.earlierTo != nil {
		send, err := r.awaitEarlier(ctx, c.send)
		if err != nil {
			return c, err
		}
		if c.send = send; len(c.send) == 0 {
			return c, nil
		}
	}
	if c.handles = r.handlesOf(c.send); w.writingTo(c.handles) {
		// Another slot's write to one of these contacts is in flight (two
		// rows that swapped e-mails while the pass read them): this page's
		// write goes after it has landed, so the value read last is what
		// the destination keeps.
		reg := trace.StartRegion(ctx, "ledger.wait.handles")
		err := w.waitResolved(ctx)
		reg.End()
		if err != nil {
			return c, err
		}
	}
	if c.send, c.handles = r.holdBack(w, c.send, c.handles); len(c.send) == 0 {
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
		// A partition's barrier check (docs/guide.md#the-checkpoint-barrier) vouches for the page that
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
	if removedBack > 0 {
		if err := r.waitUntil(ctx, removedBack, removedUntil, "rows removed from the destination a moment ago are back in the source; writing them once settings.in_doubt_grace has passed since the removal, which the destination may apply later"); err != nil {
			return c, err
		}
	}
	if n := r.inFlightByPosition; n > 0 {
		// A positional slot is a place in the source: a row that moved
		// (rows inserted or deleted above it) is written under another
		// slot than the earlier write in doubt that concerns it, which
		// nothing here matches with it; that write, held by the server,
		// could land after this one.
		r.inFlightByPosition = 0
		if err := r.waitGrace(ctx, n, "writes an earlier run left in doubt on a sync without an identity may still land; writing once settings.in_doubt_grace has passed since them"); err != nil {
			return c, err
		}
	}
	r.readSharedClock(ctx)
	c.claimedAt = r.Clock.Now()
	for _, it := range c.send {
		it.writeAt = c.claimedAt
	}
	claimKeys := make([]string, len(c.send))
	results := make([]string, len(c.send))
	absent := true
	for i, it := range c.send {
		claimKeys[i], results[i] = it.Key, r.claimResult(it)
		absent = absent && it.absent
	}
	if err := r.recordEpoch(ctx); err != nil {
		return c, err
	}
	reg = trace.StartRegion(ctx, "ledger.claim")
	err = r.Store.LedgerClaim(ctx, store.LedgerClaimParams{
		SyncID: r.Sync.ID, Fence: r.lease.Fence(), RunID: r.rec.ID, Keys: claimKeys, Results: results, Absent: absent,
	})
	reg.End()
	if err != nil {
		return c, storeFailure(ctx, err, "claim the page's records")
	}
	r.Logger.Debug("page claimed", "sync", r.Sync.ID, "run", r.rec.ID, "page", pageNo, "claimed", len(c.send))
	return c, nil
}

// readAhead is a ledger read of a page's first-delivery keys (generation
// 1) made beside the read of its slots, on a store whose reads are round
// trips: a page of new records then costs one round trip of reads, not two
// (docs/PERFORMANCE.md#reads-ahead-on-postgresql). A record whose slot
// turns out to be delivered already has another key, read after.
type readAhead struct {
	keys    []string // the items' generation-1 delivery keys, in their order
	done    chan struct{}
	entries map[string]store.LedgerEntry
	err     error
}

// readKeysAhead starts the read of items' generation-1 delivery keys. Both
// reads start after any page that shares a slot with this one was resolved
// (ledgerStage's overlap wait), so reading the keys beside the slots, not
// after them, sees the same ledger.
func (r *run) readKeysAhead(ctx context.Context, items []item) *readAhead {
	keys := make([]string, len(items))
	for i := range items {
		cp := items[i]
		cp.gen = 1
		keys[i] = r.deliveryKey(&cp)
	}
	a := &readAhead{keys: keys, done: make(chan struct{})}
	go func() {
		defer close(a.done)
		reg := trace.StartRegion(ctx, "ledger.get.ahead")
		a.entries, a.err = r.Store.LedgerGet(ctx, r.Sync.ID, keys)
		reg.End()
	}()
	return a
}

// wait returns the read's entries once it is done (nil, nil for a nil
// readAhead: nothing was read ahead).
func (a *readAhead) wait() (map[string]store.LedgerEntry, error) {
	if a == nil {
		return nil, nil
	}
	<-a.done
	return a.entries, a.err
}

// withKey is a copy of it under key (an earlier run's delivery of its slot).
func withKey(it *item, key string) *item {
	cp := *it
	cp.Key = key
	cp.release = nil
	return &cp
}

// unchanged reports whether the slot state st says the record of hash h
// needs no write: its last delivery sent these values, or the sync's
// write mode skipped these values and would skip them again. A record
// create or update skipped is sent once the sync upserts.
func (r *run) unchanged(st ledger.SlotState, h [32]byte) bool {
	if st.Hash == ledger.ShortHash(h) {
		return true
	}
	return r.Sync.Skip != "" && st.Hash == ledger.ShortHash(ledger.SkippedHash(h, r.Sync.Skip))
}

// legacyRef is the destination reference of a complete entry written
// before slots existed (its Result was the reference itself).
func legacyRef(result string) string { return result }

// maxGenAhead bounds how far past it.gen valueGen looks for a key's
// generation.
const maxGenAhead = 16

// valueGen reports whether key is the delivery key of it's very value (its
// hash) under some generation up to maxGenAhead past its own, and which:
// a key holds no value in clear, so the generations are tried.
func (r *run) valueGen(it *item, key string) (int64, bool) {
	cp := *it
	for g := int64(1); g <= it.gen+maxGenAhead; g++ {
		cp.gen = g
		if r.deliveryKey(&cp) == key {
			return g, true
		}
	}
	return 0, false
}

// deliveryKey is it's delivery key for its generation.
func (r *run) deliveryKey(it *item) string {
	if it.id != "" || r.Sync.Identity != "" {
		return ledger.IdentityGen(r.Sync.ID, r.sourceID(), it.id, it.hash, it.gen)
	}
	return ledger.PositionalGen(r.Sync.ID, r.sourceID(), it.cursor, it.pos, it.hash, it.gen)
}

// appendDeliveredMarks appends to out the marks that record it as delivered
// with ref: its slot's new last delivered state, and its claim and the
// earlier runs' entries it settles released.
//
// skipped is the reason the write mode left the record as the destination
// had it ("" when written): the slot then keeps the record's skipped hash,
// which only a run under a write mode that skips it so takes for
// unchanged (run.unchanged).
func (r *run) appendDeliveredMarks(out []store.LedgerFinish, it *item, ref, skipped string) []store.LedgerFinish {
	ref = r.handleRef(it, ref)
	h := it.hash
	if skipped != "" {
		h = ledger.SkippedHash(h, skipped)
	}
	out = append(out,
		store.LedgerFinish{Key: it.slot, State: store.LedgerComplete, Result: ledger.SlotState{Gen: it.gen, Hash: ledger.ShortHash(h), Ref: ref}.Encode(),
			Absent: it.slotAbsent},
		store.LedgerFinish{Key: it.Key, State: store.LedgerReleased})
	if m, ok := r.movedMark(it, ref); ok {
		out = append(out, m)
	}
	for _, k := range it.release {
		out = append(out, store.LedgerFinish{Key: k, State: store.LedgerReleased})
	}
	for _, k := range it.afterDelivery {
		out = append(out, store.LedgerFinish{Key: k, State: store.LedgerReleased})
	}
	for _, k := range r.supersededRefusals(it) {
		out = append(out, store.LedgerFinish{Key: k, State: store.LedgerReleased})
	}
	return out
}

// appendDelivered is appendDeliveredMarks for the delivery res reports,
// counted in c: written, or skipped by the sync's write mode.
func (r *run) appendDelivered(out []store.LedgerFinish, it *item, res destination.Result, c *store.Counters) []store.LedgerFinish {
	if res.Skipped != "" {
		c.Skipped++
	} else {
		c.Written++
	}
	return r.appendDeliveredMarks(out, it, res.Ref, res.Skipped)
}

// appendRejected appends the marks of a refusal. The destination's message is stored
// without e-mail addresses and without the record's own values: a server
// echoes what it was sent (names, phone numbers), and the message is shown
// on the pages and in the API. Only refusals pay for it.
//
// The entries an earlier run left in doubt for the row under other keys
// (it.release) are released with it: the row is listed as refused and read
// again until it is delivered, and left in doubt they would be settled, and
// the row sent again, on every run (a refused row's earlier claim).
func (r *run) appendRejected(out []store.LedgerFinish, it *item, message string) []store.LedgerFinish {
	out = append(out, store.LedgerFinish{Key: it.Key, State: store.LedgerRejected, Message: r.hideSecrets(destination.RedactRecord(message, it.Data)), Result: ledger.RejectedResult(it.slot, it.id)})
	for _, k := range it.release {
		out = append(out, store.LedgerFinish{Key: k, State: store.LedgerReleased})
	}
	// The refusals of values the row no longer holds are this one's
	// now: a person is shown the refusal of what the row holds.
	for _, k := range r.supersededRefusals(it) {
		out = append(out, store.LedgerFinish{Key: k, State: store.LedgerReleased})
	}
	return out
}

// checkReplayable refuses to settle an in-doubt entry older than the
// ledger's retention (docs/guide.md#the-ledger-and-its-retention): the destination's own records of it (an
// import's report, an idempotency key) may be gone, so a read-back or a
// resend could write twice.
func (r *run) checkReplayable(e store.LedgerEntry, now time.Time) error {
	if r.Sync.Retention <= 0 || r.Sync.AllowRewriteAfterRetention || now.Sub(e.ClaimedAt) <= r.Sync.Retention {
		return nil
	}
	return failure.New(failure.CursorOlderThanLedger, fmt.Sprintf(
		"a page left in doubt on %s is older than the ledger retention of %s",
		e.ClaimedAt.UTC().Format(time.RFC3339), r.Sync.Retention))
}

// writeStage runs step 4 of docs/guide.md#what-a-run-does for a claimed page, the write, and
// returns the page's write-stage counters (Written, Rejected, Requests),
// its batched marks (step 5), which the checkpointer records, and the
// records the destination accepted for processing later, by process (
// docs/guide.md#the-ledger-and-its-retention). marks is nil when nothing was written; when the write failed it
// holds only the releases of records whose request never left (the others
// stay pending, in doubt for the next run). A page whose every record was
// refused returns its marks and a destination_rejected_records failure.
func (r *run) writeStage(ctx context.Context, c claimed, s *sending, pl *poller) (store.Counters, []store.LedgerFinish, []acceptedBatch, error) {
	var delta store.Counters
	if len(c.send) == 0 {
		return delta, nil, nil, nil // a page whose every key is complete sends nothing
	}
	if !s.sent {
		return delta, nil, nil, s.err // the lease was not ours: nothing was sent
	}
	out, requests, err := s.out, s.requests, s.err
	delta.Requests = requests
	if err == nil && pl.immediate() {
		reg := trace.StartRegion(ctx, "write.settlenow")
		var n atomic.Int64
		out = r.settleNow(destination.WithRequestCount(ctx, &n), pl, out)
		delta.Requests += n.Load()
		reg.End()
	}
	marks, batches, od := r.outcomes(c.pageNo, out)
	delta.Add(od)
	rejected := od.Rejected
	if err != nil {
		if ctx.Err() != nil {
			return delta, nil, nil, cancelled(ctx)
		}
		// Only what provably never left is released; what was settled
		// before the failure is recorded too.
		return delta, marks, nil, destinationFailure(err)
	}
	if r.Hooks.AfterWrite != nil {
		r.Hooks.AfterWrite(ctx, c.pageNo)
	}
	if len(out) != len(c.send) {
		return delta, nil, nil, failure.New(failure.Internal, fmt.Sprintf("the destination answered for %d of %d records", len(out), len(c.send)))
	}
	// A page refused whole says the mapping is wrong; rows read again
	// because they were refused before say nothing of it when refused again,
	// nor does a value refused before, read again by the pass (a customer
	// without an e-mail alone on an incremental page would otherwise fail
	// every run, and the breaker pause the sync).
	if rejected > 0 && rejected == c.read && !c.again && refusedAnew(out) {
		return delta, marks, nil, failure.New(failure.DestinationRejectedRecords,
			fmt.Sprintf("the destination refused all %d records of page %d", rejected, c.pageNo))
	}
	return delta, marks, batches, nil
}

// refusedAnew reports whether the destination refused a record of out whose
// value it had not refused before.
func refusedAnew(out []outcome) bool {
	for _, o := range out {
		if o.res.Outcome == destination.Rejected && !o.it.refusedBefore {
			return true
		}
	}
	return false
}

// outcome is one written record and what the destination said of it.
type outcome struct {
	it  *item
	res destination.Result
	// doubted: a write of it this run lost its answer, so it was in doubt
	// until read back (readBack: found landed there) or sent again.
	doubted, readBack bool
}

// outcomes turns a write's answers into marks: delivered records become
// their slots' state, refused ones rejected, those accepted for processing
// later accepted (and batched by process for the poller), those never sent
// released. Its counters: Written, Rejected, and InDoubt and Settled for
// the records whose answer was lost and read back within the run
// (docs/guide.md#the-ledger-and-its-retention counts every in-doubt
// resolution, in this run or the next).
func (r *run) outcomes(page int64, out []outcome) (marks []store.LedgerFinish, batches []acceptedBatch, delta store.Counters) {
	byRef := map[string]int{}
	marks = make([]store.LedgerFinish, 0, 2*len(out)) // a delivered record's two marks
	for _, o := range out {
		if o.doubted {
			delta.InDoubt++
		}
		from := len(marks)
		switch o.res.Outcome {
		case destination.Delivered:
			marks = r.appendDeliveredMarks(marks, o.it, o.res.Ref, o.res.Skipped)
			switch {
			case o.readBack:
				delta.Settled++
			case o.res.Skipped != "":
				delta.Skipped++
			default:
				delta.Written++
			}
		case destination.Rejected:
			marks = r.appendRejected(marks, o.it, o.res.Message)
			delta.Rejected++
		case destination.Accepted:
			marks = append(marks, r.acceptedMark(o.it, o.res.Ref))
			i, ok := byRef[o.res.Ref]
			if !ok {
				i = len(batches)
				byRef[o.res.Ref] = i
				batches = append(batches, acceptedBatch{page: page, ref: o.res.Ref})
			}
			batches[i].items = append(batches[i].items, o.it)
		case destination.NotSent:
			marks = append(marks, store.LedgerFinish{Key: o.it.Key, State: store.LedgerReleased})
			continue // not settled: in doubt still, or never sent
		}
		switch {
		case o.doubted && o.readBack:
			withSettlement(marks[from:], o.it, ledger.SettledLanded)
		case o.doubted:
			withSettlement(marks[from:], o.it, ledger.SettledResent)
		case o.it.settling != "":
			withSettlement(marks[from:], o.it, o.it.settling)
		}
	}
	return marks, batches, delta
}

// withSettlement records, on the mark of it's delivery key among marks, how
// its write in doubt was settled (docs/guide.md#the-ledger-and-its-retention:
// every settlement is listed with the record's identity).
func withSettlement(marks []store.LedgerFinish, it *item, how string) {
	for i := range marks {
		if marks[i].Key == it.Key {
			marks[i].Settled = ledger.Settlement(it.id, how)
			return
		}
	}
}

// mark records outcomes (step 5 of docs/guide.md#what-a-run-does), fenced like the claims.
func (r *run) mark(ctx context.Context, finish []store.LedgerFinish) error {
	if err := r.recordEpoch(ctx); err != nil {
		return err
	}
	if err := r.Store.LedgerFinish(ctx, store.LedgerFinishParams{
		SyncID: r.Sync.ID, Fence: r.lease.Fence(), RunID: r.rec.ID, Entries: finish,
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

// waitChanged waits, when some of its are rows whose earlier values'
// writes are in doubt (release: the row changed since, or changed back),
// until settings.in_doubt_grace has passed since those writes (the earlier
// holder's lease ended), so that such a write, held by the destination and
// applied late, lands before the rows are read back or their values sent:
// neither the read-back of the current values nor a write under another
// key tells about it. Errors are the context's or the lease's.
func (r *run) waitChanged(ctx context.Context, its []*item) error {
	n := 0
	for _, it := range its {
		if len(it.release) > 0 {
			n++
		}
	}
	if n == 0 {
		return nil
	}
	return r.waitGrace(ctx, n, "rows whose earlier writes are in doubt changed since; judging them once settings.in_doubt_grace has passed since those writes")
}

// waitGrace waits until settings.in_doubt_grace has passed since the
// earlier holder's writes (its lease's end), for n records of writes in
// doubt that may still land, saying why; at once when it has.
func (r *run) waitGrace(ctx context.Context, n int, why string) error {
	return r.waitUntil(ctx, n, r.freeSince.Add(r.InDoubtGrace), why)
}

// graceUntil is when settings.in_doubt_grace has passed since at, on the
// wall clock; false when it has already. at is the store's clock (a claim,
// a removal); the wait is on the wall clock, as the destination's.
func (r *run) graceUntil(at time.Time) (time.Time, bool) {
	left := at.Add(r.InDoubtGrace).Sub(r.Clock.Now())
	return time.Now().Add(left), left > 0
}

// waitUntil waits until until (on the wall clock, as the destination's
// is), for n records whose earlier requests may still be applied, saying
// why; at once when it has passed.
func (r *run) waitUntil(ctx context.Context, n int, until time.Time, why string) error {
	if !time.Now().Before(until) {
		return nil
	}
	r.Logger.Info(why, "sync", r.Sync.ID, "run", r.rec.ID, "records", n, "wait", time.Until(until).Round(time.Millisecond))
	if r.WaitingChanged != nil {
		r.WaitingChanged(n, until)
	}
	// The lease is kept by its background renewal meanwhile.
	if err := clock.Sleep(ctx, time.Until(until)); err != nil {
		return cancelled(ctx)
	}
	return r.renew(ctx)
}

// verifyInDoubt reads recs back from the destination (Verify, with since)
// and returns the landed ones. A server may hold a request after its client
// gave up (a slow handler, a queue in front of it) and apply it later: a
// record not found at once may still land, and sending it again would
// write it twice. So the records a read-back started before InDoubtGrace
// had passed since sent (the latest moment a write in doubt may have been
// sent) did not find are read back again once it has; what landed at once
// costs no wait. The wait is on the wall
// clock, as the server's is; a request held past the grace is the residual
// risk (docs/RELIABILITY.md#not-covered-yet). Errors are Verify's, or the
// lease's while waiting.
func (r *run) verifyInDoubt(ctx context.Context, recs []destination.Record, since, sent time.Time) (map[string]string, error) {
	until := sent.Add(r.InDoubtGrace)
	early := time.Now().Before(until)
	found, err := r.Destination.Verify(r.destCtx(ctx), recs, since)
	if err != nil || !early {
		return found, err
	}
	var missing []destination.Record
	for _, rc := range recs {
		if _, ok := found[rc.Key]; !ok {
			missing = append(missing, rc)
		}
	}
	if len(missing) == 0 {
		return found, nil
	}
	r.Logger.Info("records of a write in doubt are not at the destination yet; reading them again once settings.in_doubt_grace has passed since the write",
		"sync", r.Sync.ID, "run", r.rec.ID, "missing", len(missing), "wait", time.Until(until).Round(time.Millisecond))
	if r.Waiting != nil {
		r.Waiting(len(missing), until)
	}
	// The lease is kept by its background renewal meanwhile, as while an
	// accepted process is polled (awaitAccepted).
	if err := clock.Sleep(ctx, time.Until(until)); err != nil {
		return nil, cancelled(ctx)
	}
	// A full lease for the read-back and the resend that may follow it.
	if err := r.renew(ctx); err != nil {
		return nil, err
	}
	late, err := r.Destination.Verify(r.destCtx(ctx), missing, since)
	if err != nil {
		return nil, err
	}
	for k, ref := range late {
		found[k] = ref
	}
	return found, nil
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

// write sends its and counts the requests it made (every HTTP request of
// the destination's, read-backs included). When the destination cannot tell
// whether a write landed (a lost answer, a 502) and it can be asked
// (CapVerify), the run reads it back at once: what landed is delivered
// without writing again; what did not, and what the failed call never sent
// (NotSent: on the single path, the records after the one whose answer was
// lost), is sent again. It returns an outcome for every record the
// destination answered for (those found landed included); records without
// one are in doubt. Once it returns without an error, every record has an
// outcome other than NotSent: a record not sent must not let the cursor
// pass it.
func (r *run) write(ctx context.Context, its []*item, claimedAt time.Time) ([]outcome, int64, error) {
	var requests atomic.Int64
	out, err := r.writeCounted(destination.WithRequestCount(ctx, &requests), its, claimedAt)
	return out, requests.Load(), err
}

// writeCounted is write; its ctx counts the requests.
func (r *run) writeCounted(ctx context.Context, its []*item, claimedAt time.Time) ([]outcome, error) {
	byKey := make(map[string]*item, len(its))
	for _, it := range its {
		byKey[it.Key] = it
	}
	var out []outcome
	doubted := map[string]bool{} // records whose answer was lost, read back
	// flag marks the outcomes of doubted records, for the run's counters.
	flag := func(out []outcome) []outcome {
		for i := range out {
			out[i].doubted = doubted[out[i].it.Key]
		}
		return out
	}
	collect := func(results []destination.Result) {
		for _, res := range results {
			if it, ok := byKey[res.Key]; ok {
				out = append(out, outcome{it: it, res: res})
			}
		}
	}
	recs := records(its)
	results, err := r.Destination.Write(r.destCtx(ctx), recs)
	for fruitless := 0; err != nil && fruitless < maxOutcomeChecks && ctx.Err() == nil &&
		r.Destination.Capability() == destination.CapVerify && failure.CodeOf(err) == failure.DestinationUnavailable; {
		// What was answered (refused, delivered) is settled; what was
		// never sent is sent again below; the rest is read back.
		answered := make(map[string]bool, len(results))
		var (
			rest    []destination.Record
			notSent []outcome
		)
		for _, res := range results {
			answered[res.Key] = true
			it, ok := byKey[res.Key]
			switch {
			case !ok:
			case res.Outcome == destination.NotSent:
				rest = append(rest, it.Record)
				notSent = append(notSent, outcome{it: it, res: res})
			default:
				out = append(out, outcome{it: it, res: res})
			}
		}
		var unknown []destination.Record
		for _, rc := range recs {
			if !answered[rc.Key] {
				unknown = append(unknown, rc)
			}
		}
		if len(unknown) == 0 {
			// Nothing lost, only not sent: the destination's own retries
			// are spent; the page fails, and what was not sent is released.
			return flag(append(out, notSent...)), err
		}
		for _, rc := range unknown {
			doubted[rc.Key] = true
		}
		found, verr := r.verifyInDoubt(ctx, unknown, claimedAt, time.Now())
		if verr != nil {
			return flag(out), verr
		}
		landedN := 0
		for _, rc := range unknown {
			if ref, ok := found[rc.Key]; ok {
				out = append(out, outcome{it: byKey[rc.Key], res: destination.Result{Key: rc.Key, Outcome: destination.Delivered, Ref: ref}, readBack: true})
				landedN++
			} else {
				rest = append(rest, rc)
			}
		}
		r.Logger.Info("write outcome was unknown; read the destination back",
			"sync", r.Sync.ID, "run", r.rec.ID, "landed", landedN, "resend", len(rest))
		if len(rest) == 0 {
			return flag(out), nil
		}
		if landedN > 0 || len(rest) < len(recs) {
			fruitless = 0
		} else {
			fruitless++
		}
		if err := r.ensureLease(ctx); err != nil {
			return flag(out), err
		}
		recs = rest
		results, err = r.Destination.Write(r.destCtx(ctx), recs)
	}
	collect(results)
	if err == nil {
		for _, o := range out {
			if o.res.Outcome == destination.NotSent {
				return flag(out), failure.New(failure.DestinationUnavailable,
					"the destination left records unsent without saying why")
			}
		}
	}
	return flag(out), err
}

// records is its as the destination takes them.
func records(its []*item) []destination.Record {
	out := make([]destination.Record, len(its))
	for i, it := range its {
		out[i] = it.Record
	}
	return out
}

// recordPlace names record i of a page for a person: its line in the file
// where the source has lines (the rows a file source could not read are
// named so too), else its place on the page.
func recordPlace(rec source.Record, i int) string {
	if rec.Line > 0 {
		return "line " + strconv.FormatInt(rec.Line, 10)
	}
	return "record " + strconv.Itoa(i+1) + " of the page"
}

// keys maps every record of the run's slice (see Params.Filter), hashes it
// and names its slot (docs/guide.md#what-a-run-does); read is the number of records in the
// slice. A slot seen twice on one page (the same row twice) is kept once,
// with its last version.
func (r *run) keys(page source.Page) (out []item, read, dups int64, err error) {
	out = make([]item, 0, len(page.Records))
	seen := make(map[string]int, len(page.Records))
	var (
		invalid  int   // records of the page that could not be read or mapped
		firstBad error // the first of them, a *failure.Error
	)
	reject := func(i int, ferr *failure.Error) {
		invalid++
		if firstBad == nil {
			firstBad = ferr
		}
		it := item{cursor: page.Cursor, pos: i, invalid: ferr.Detail}
		it.hash = sha256.Sum256([]byte(ferr.Detail))
		it.slot = ledger.PositionSlot(r.Sync.ID, r.sourceID(), page.Cursor, i)
		it.Key = ledger.Positional(r.Sync.ID, r.sourceID(), page.Cursor, i, it.hash)
		out = append(out, it)
	}
	for i, rec := range page.Records {
		// A record without a readable identity goes to one partition
		// (partition.Filter), so it is rejected once.
		if r.Filter != nil && !r.Filter(rec) {
			continue
		}
		read++
		if rec.Invalid != "" {
			reject(i, failure.New(failure.SourceQueryInvalid, rec.Invalid))
			continue
		}
		data, err := r.Sync.Mapping.Apply(rec)
		if err != nil {
			reject(i, failure.Wrap(failure.InvalidSyncDefinition, err, "%s: %s", recordPlace(rec, i), err.Error()))
			continue
		}
		it := item{Record: destination.Record{Data: data}, cursor: page.Cursor, pos: i}
		if it.hash, err = ledger.RecordHash(data); err != nil {
			reject(i, failure.Wrap(failure.SourceQueryInvalid, err, "%s cannot be encoded", recordPlace(rec, i)))
			continue
		}
		if r.salt != "" {
			it.hash = ledger.SaltedHash(it.hash, r.salt)
		}
		if r.Sync.Identity != "" {
			if it.id, err = mapping.Identity(rec, r.Sync.Identity); err == nil && strings.TrimSpace(it.id) == "" {
				// An empty CSV cell (or JSON string): several such rows
				// were taken for one record, the last, and the others were
				// never sent (an independent check, 2026-12-06).
				err = &mapping.MissingColumnError{Column: r.Sync.Identity, Identity: true, Null: true}
			}
			if err != nil {
				reject(i, failure.Wrap(failure.InvalidSyncDefinition, err, "%s: %s", recordPlace(rec, i), err.Error()))
				continue
			}
			it.slot = ledger.Slot(r.Sync.ID, r.sourceID(), it.id)
		} else {
			it.slot = ledger.PositionSlot(r.Sync.ID, r.sourceID(), page.Cursor, i)
		}
		if j, dup := seen[it.slot]; dup {
			dups++
			out[j] = it
			continue
		}
		seen[it.slot] = len(out)
		out = append(out, it)
	}
	if invalid > 0 && int64(invalid) == read {
		// Not one record of the page could be read or mapped: the source's
		// format or the mapping is wrong, not a record.
		return nil, 0, 0, firstBad
	}
	return out, read, dups, nil
}

// settle resolves in-doubt records (docs/guide.md#the-ledger-and-its-retention). It returns those to (re)send,
// how many were settled without a write, and the marks of those settled.
func (r *run) settle(ctx context.Context, its []*item, since time.Time) (resend []*item, settled int64, marks []store.LedgerFinish, _ error) {
	switch r.Destination.Capability() {
	case destination.CapIdempotent:
		for _, it := range its {
			it.settling = ledger.SettledIdempotent
			if len(it.release) > 0 {
				it.settling = ledger.SettledChanged
			}
		}
		// A changed row's value goes under another key, which the
		// destination does not match with the earlier write in doubt.
		if err := r.waitChanged(ctx, its); err != nil {
			return nil, 0, nil, err
		}
		return its, 0, nil, nil // resent with the same idempotency key, or a changed row's new one
	case destination.CapVerify:
		// A read-back of a changed row finds its current values, and a
		// row changed back finds them at once, before an earlier value's
		// write held by the server lands over them.
		if err := r.waitChanged(ctx, its); err != nil {
			return nil, 0, nil, err
		}
		for _, it := range its {
			// An import of the other value may still be queued at the
			// destination (a read-back lets it end first).
			it.EarlierInDoubt = len(it.release) > 0
			// A row back to the values the destination held: untouched
			// since the write in doubt, they are still there (a listing
			// of what changed since does not show it).
			it.HeldBefore = it.asDelivered
		}
		// The writes in doubt are an earlier holder's, all sent before its
		// lease ended (docs/RELIABILITY.md#resume-after-a-kill).
		landed, err := r.verifyInDoubt(ctx, records(its), since, r.freeSince)
		if err != nil {
			if ctx.Err() != nil {
				return nil, 0, nil, cancelled(ctx)
			}
			return nil, 0, nil, destinationFailure(err)
		}
		for _, it := range its {
			if ref, ok := landed[it.Key]; ok {
				if ref == destination.RefUnchanged {
					ref = it.slotRef
				}
				from := len(marks)
				marks = r.appendDeliveredMarks(marks, it, ref, "")
				withSettlement(marks[from:], it, ledger.SettledLanded)
				settled++
			} else {
				it.settling = ledger.SettledResent
				resend = append(resend, it)
			}
		}
		return resend, settled, marks, nil
	default:
		for _, it := range its {
			// The entries in doubt are this record's own (a pending claim
			// of its key) or an earlier value's (release): a person
			// decides about each.
			keys := slices.Clone(it.release)
			if it.ownInDoubt {
				keys = append(keys, it.Key)
			}
			for _, k := range keys {
				marks = append(marks, store.LedgerFinish{Key: k, State: store.LedgerInDoubt, Result: ledger.InDoubtResult(it.slot, it.id)})
			}
		}
		r.inDoubtLeft += int64(len(its))
		return nil, 0, marks, nil
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
	// A source that already said what happened (a *failure.Error from its
	// HTTP client) keeps its words once: its Error() repeats the cause
	// after them ("Shopify refused the access token (HTTP 401): HTTP 401").
	words := err.Error()
	var fe *failure.Error
	if errors.As(err, &fe) && fe.Detail != "" {
		words = fe.Detail
	}
	switch {
	case ctx.Err() != nil:
		return cancelled(ctx)
	case errors.Is(err, source.ErrChanged):
		return failure.Wrap(failure.SourceChangedDuringRun, err, "the source no longer matches the saved cursor: %s", words)
	case errors.Is(err, source.ErrAuth):
		return failure.Wrap(failure.SourceAuth, err, "%s", words)
	case errors.Is(err, source.ErrInvalid), errors.Is(err, source.ErrBadCursor):
		return failure.Wrap(failure.SourceQueryInvalid, err, "%s", words)
	default:
		return failure.Wrap(failure.SourceUnavailable, err, "%s", words)
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
	if c := context.Cause(ctx); errors.Is(c, lease.ErrLost) {
		return failure.Wrap(failure.LeaseLost, c, SentenceLeaseLost)
	}
	return failure.Wrap(failure.Interrupted, ctx.Err(), "the run was stopped mid-page; its records are settled by the next run")
}

// countInvalid is how many of its could not be read or mapped.
func countInvalid(its []item) int {
	n := 0
	for i := range its {
		if its[i].invalid != "" {
			n++
		}
	}
	return n
}

// resends says whether a Resend run writes the record whose slot entry is
// e again although its values did not change: unless a run from
// ResendBefore on (this run by default) delivered it already
// (docs/guide.md#sending-everything-again).
func (r *run) resends(e store.LedgerEntry) bool {
	if !r.Resend {
		return false
	}
	before := r.ResendBefore
	if before <= 0 {
		before = r.rec.ID
	}
	return e.RunID < before
}
