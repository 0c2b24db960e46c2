package runner

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/mapping"
	"github.com/oncesync/oncesync/internal/store"
)

// Mirror makes a sync a mirror (docs/guide.md#write-modes): its runs read the
// whole source, and at the end of one that read it from the start, the
// records delivered earlier whose rows are gone are removed from the
// destination.
type Mirror struct {
	// MaxRemovals is how many removals one run may make for a sync of
	// total delivered records (max_removals).
	MaxRemovals func(total int) int
	// Bound is max_removals as written, for messages ("10%").
	Bound string
}

// slotID is a slot key's first 16 bytes: enough to tell a sync's slots
// apart, and a quarter of the memory of the hex key for a pass's set.
type slotID [16]byte

func slotIDOf(slot string) (id slotID, ok bool) {
	if len(slot) < 32 {
		return id, false
	}
	_, err := hex.Decode(id[:], []byte(slot[:32]))
	return id, err == nil
}

// mirrorSeen collects the slots a mirror run's full read of the source
// met, and the handles its rows hold; it is written by the prefetcher only
// and read once it stopped.
type mirrorSeen struct {
	full bool // the run read the source from its start
	// slots are the slots read, each with the handle (handleKey, 0 for
	// none) its row held when the pass read it last: a keyset pass reads a
	// row changed while it ran a second time (its cursor column moved
	// ahead of the read), and the first read's handle is the row's no more.
	slots map[slotID]uint64
	// handles count the slots read that hold each handle at the
	// destination (handleKey): a handle a row read holds is never removed,
	// whatever the ledger says of that row's delivery (still processing,
	// or not yet recorded).
	handles map[uint64]int32
	handle  func(*item) string
	seed    maphash.Seed
}

// newMirrorSeen starts the set of a pass that reads the source from its
// start when full.
func (r *run) newMirrorSeen(full bool) *mirrorSeen {
	return &mirrorSeen{full: full, slots: map[slotID]uint64{}, handles: map[uint64]int32{},
		handle: r.handleOf, seed: maphash.MakeSeed()}
}

// handleKey is what the set keeps of a handle: 8 bytes of a hash of it in
// lower case, as handles are compared, never 0 (no handle). Two handles
// that share it (one pass in 2^64 / rows^2) keep a record that should go:
// never the reverse.
func (m *mirrorSeen) handleKey(h string) uint64 {
	return max(maphash.String(m.seed, strings.ToLower(h)), 1)
}

// holds reports whether a row the pass read holds handle h (as the pass
// read it last).
func (m *mirrorSeen) holds(h string) bool {
	if m == nil {
		return false
	}
	return m.handles[m.handleKey(h)] > 0
}

// restart forgets the rows seen: the pass starts over from the source's
// start, so it reads the whole source after all.
func (m *mirrorSeen) restart() {
	if m == nil {
		return
	}
	m.full = true
	clear(m.slots)
	clear(m.handles)
}

func (m *mirrorSeen) add(its []item) {
	if m == nil || !m.full {
		return
	}
	for i := range its {
		if its[i].invalid != "" {
			// A row that could not be read has no known identity: it may
			// be any delivered record, so no removal is safe this pass.
			m.full = false
			return
		}
		var key uint64
		if h := m.handle(&its[i]); h != "" {
			key = m.handleKey(h)
		}
		id, ok := slotIDOf(its[i].slot)
		if !ok {
			if key != 0 {
				m.handles[key]++
			}
			continue
		}
		prev, again := m.slots[id]
		if again && prev == key {
			continue
		}
		if again && prev != 0 {
			// Read again with another handle: the first read's is the
			// row's no more. Held, its contact was settled and nothing
			// named it any longer (an independent check, 2026-12-07: a
			// row changed e-mail during the pass that read it, was then
			// deleted, and its first address stayed on the list).
			if m.handles[prev]--; m.handles[prev] <= 0 {
				delete(m.handles, prev)
			}
		}
		m.slots[id] = key
		if key != 0 {
			m.handles[key]++
		}
	}
}

// handleRef is the Ref a delivered record's slot keeps: for a mirror, the
// record's handle at the destination (how a later run removes it), else
// the destination's reference.
func (r *run) handleRef(it *item, ref string) string {
	h := r.handleOf(it)
	if h == "" {
		return ref
	}
	at := it.writeAt
	if at.IsZero() {
		// Delivered without a write of its own: read back and found there
		// (the destination holds it as of now).
		at = r.Clock.Now()
	}
	return ledger.HandleRefAt(h, it.id, r.onSharedClock(at))
}

// readSharedClock reads, for a mirror, how far the store's shared clock is
// from the run's (store.SharedClock), for onSharedClock. An error keeps
// the last reading: the store statement that follows meets the same
// store and fails the page with it.
func (r *run) readSharedClock(ctx context.Context) {
	sc, ok := r.Store.(store.SharedClock)
	if !ok || r.remover == nil {
		return
	}
	if off, err := sc.ClockOffset(ctx); err == nil {
		r.sharedOff.Store(int64(off))
	}
}

// onSharedClock is t, a time on the run's clock, on the store's shared
// clock (the zero time stays zero). A mirror's slot reference keeps when
// its write was claimed, and runs on other machines order two writes to
// one contact by it (goneSlots): on each writer's own clock, a machine
// behind by more than the writes are apart ordered them the wrong way, and
// the contact's newer holder was taken for the stale one.
func (r *run) onSharedClock(t time.Time) time.Time {
	if t.IsZero() {
		return t
	}
	return t.Add(time.Duration(r.sharedOff.Load()))
}

// handleOf is a mirror's record's handle at the destination; "" when the
// sync is no mirror or the record has none. Without a handle the record
// cannot be removed later; its delivery is not worth failing for that.
func (r *run) handleOf(it *item) string {
	if r.remover == nil {
		return ""
	}
	return r.handleAt(it)
}

// claimResult is the Result of it's claim: a mirror's names the handle the
// write goes to, so that a later run can remove what it may have written
// should the row change or go before its outcome is known (leftInFlight).
func (r *run) claimResult(it *item) string {
	if it.refusedBefore {
		// Listed as refused until its answer is recorded (ledger.ListRefused).
		return ledger.RetryClaimResult(it.slot, it.id)
	}
	if h := r.handleOf(it); h != "" {
		return ledger.ClaimResultTo(it.slot, h, it.id)
	}
	if k := r.handleKey(it); k != "" {
		// Another sync's names its handle's key only (handle.go).
		return ledger.ClaimResultKeyed(it.slot, k)
	}
	return ledger.ClaimResult(it.slot)
}

// acceptedMark is it's entry once the destination accepted it under the
// process ref; a mirror's names the handle, as its claim does (another
// sync's its handle's key), and a
// refused record's (sent again) its refusal's form.
func (r *run) acceptedMark(it *item, ref string) store.LedgerFinish {
	m := store.LedgerFinish{Key: it.Key, State: store.LedgerAccepted, Result: ledger.AcceptedResult(it.slot, ref)}
	if h := r.handleOf(it); h != "" {
		m.Message = ledger.AcceptedTo(h, it.id)
	} else if it.refusedBefore {
		// Listed as refused until the process's outcome is recorded.
		m.Message = ledger.RetryAcceptedMessage(it.slot, it.id)
	} else if k := r.handleKey(it); k != "" {
		m.Message = ledger.AcceptedKeyed(k)
	}
	return m
}

// movedMark is the entry that keeps the handle a mirror's slot leaves
// behind when its delivery under ref goes to another handle (a row whose
// e-mail changed: upserted under the new one, the old contact is the
// sync's no more), so that a mirror run removes it (docs/guide.md#write-modes).
func (r *run) movedMark(it *item, ref string) (store.LedgerFinish, bool) {
	if r.remover == nil || it.prevRef == "" {
		return store.LedgerFinish{}, false
	}
	old, id, at, ok := ledger.RefHandleAt(it.prevRef)
	if !ok {
		return store.LedgerFinish{}, false
	}
	if h, _, ok := ledger.RefHandle(ref); ok && strings.EqualFold(h, old) {
		return store.LedgerFinish{}, false
	}
	return store.LedgerFinish{Key: ledger.Moved(r.Sync.ID, it.slot, it.gen), State: store.LedgerComplete,
		Result: ledger.SlotState{Gen: it.gen, Ref: ledger.MovedRefAt(old, id, at)}.Encode()}, true
}

// appendMovedFrom appends to marks, for a mirror, the entry that keeps the
// handle f (an earlier run's write of another value of it's row, in flight
// then) went to, when that write may have landed and it's value goes to
// another handle (its e-mail changed back, say): a mirror run removes that
// contact unless a row read holds it (docs/guide.md#write-modes).
func (r *run) appendMovedFrom(marks []store.LedgerFinish, it *item, f store.LedgerEntry) []store.LedgerFinish {
	h, id, ok := ledger.EntryHandle(f)
	if !ok || strings.EqualFold(h, r.handleOf(it)) {
		return marks
	}
	return append(marks, movedFromMark(r.Sync.ID, f, h, id, it.gen, r.onSharedClock(f.ClaimedAt)))
}

// movedFromMark is the moved entry of the handle f's write went to (a
// slot's entry, so its generation is at least 1); claimed is f's claim
// time on the store's shared clock (onSharedClock).
func movedFromMark(syncID string, f store.LedgerEntry, handle, identity string, gen int64, claimed time.Time) store.LedgerFinish {
	return store.LedgerFinish{Key: ledger.MovedFrom(syncID, f.Key), State: store.LedgerComplete,
		Result: ledger.SlotState{Gen: gen, Ref: ledger.MovedRefAt(handle, identity, claimed)}.Encode()}
}

// settledMark is the entry of a moved handle g once it is removed or held
// by another row, and of a gone row's slot whose handle another row holds.
func settledMark(g gone) store.LedgerFinish {
	return store.LedgerFinish{Key: g.slot, State: store.LedgerComplete, Result: ledger.SlotState{Gen: g.gen, Ref: ledger.SettledRef(g.identity)}.Encode()}
}

// gone is one slot whose row a mirror run no longer read, or a handle a
// slot left behind (moved).
type gone struct {
	slot     string
	gen      int64
	handle   string
	identity string
	moved    bool
	at       time.Time // when its write to handle was claimed, if known
}

// goneSlots lists the sync's delivered slots (with a handle) that seen
// does not hold and the handles slots left behind (moved), and how many
// delivered slots the sync has in all. A handle that a slot seen holds now
// is left out: its record belongs to that row (an e-mail that moved to
// another row, or two rows that swapped theirs); held are the entries left
// out so. A moved handle held so is kept, and judged again by every run
// until one removes it: settled, nothing named the contact any more once
// the row that held it moved off it or had its write refused before the
// ledger recorded that row's delivery there (an independent check,
// 2026-12-07: an old address left on the list). A gone row's slot is
// settled, not left saying the destination holds its values: the other
// row has written over them, so the row is written again should it come
// back.
//
// moves, for a dry run, are the handles that the rows read will be written
// under where a run would change them (slot key to new handle): the old
// handle is then left behind as a run's delivery would leave it (moved),
// and the new one is the live one.
//
// total, the sync's delivered records that max_removals is a share of,
// counts the delivered slots seen holds and the gone rows' slots with a
// handle: not the slots without one that seen does not hold, which may be
// the rows read under an earlier identity (their slots had other keys),
// so that an identity changed twice does not double the bound.
//
// unhandled counts the delivered slots seen does not hold that have no
// handle to remove them by: delivered before the sync became a mirror (or
// by a destination that named no handle), they cannot be removed; or
// delivered under an earlier identity, whose rows may still be there.
//
// inFlight, for a dry run, are the handles writes in flight went to that a
// run would keep as moved first (leftInFlight).
//
// stale are the slots read whose delivered state is at a handle that
// another slot's write was claimed to later: a held entry's (a moved row's
// earlier write, a gone row's), or another slot read delivered there too.
// Writes to one handle are sent one after another, so the destination holds
// the one claimed last; a slot's delivery learned late (an earlier run's
// import found delivered) can be the older. Their states lose their hash,
// so the next run writes their values again.
func goneSlots(ctx context.Context, st store.Ledger, syncID string, seen *mirrorSeen, moves map[string]string, inFlight []gone) (out, held []gone, stale []store.LedgerFinish, total, unhandled int, err error) {
	es, err := st.LedgerList(ctx, syncID, store.LedgerComplete, 0)
	if err != nil {
		return nil, nil, nil, 0, 0, err
	}
	live := map[string]struct{}{} // handles of the slots read, lower-cased
	type holder struct {
		key string
		s   ledger.SlotState
		at  time.Time
	}
	holders := map[string][]holder{} // the slots read delivered at each handle, lower-cased
	cands := inFlight
	for _, e := range es {
		s, ok := ledger.DecodeSlot(e, true)
		if !ok {
			continue
		}
		if _, removed := ledger.RefRemoved(s.Ref); removed || ledger.RefSettled(s.Ref) {
			continue
		}
		if h, id, at, ok := ledger.RefMovedAt(s.Ref); ok {
			cands = append(cands, gone{slot: e.Key, gen: s.Gen, handle: h, identity: id, moved: true, at: at})
			continue
		}
		sid, isSlot := slotIDOf(e.Key)
		_, read := seen.slots[sid]
		read = read && isSlot
		if read {
			total++
		}
		h, id, at, ok := ledger.RefHandleAt(s.Ref)
		if !ok {
			if isSlot && !read {
				unhandled++
			}
			continue
		}
		if isSlot {
			if read {
				if nh, ok := moves[e.Key]; ok && !strings.EqualFold(nh, h) {
					live[strings.ToLower(nh)] = struct{}{}
					cands = append(cands, gone{slot: e.Key, gen: s.Gen, handle: h, identity: id, moved: true})
					continue
				}
				lh := strings.ToLower(h)
				live[lh] = struct{}{}
				holders[lh] = append(holders[lh], holder{e.Key, s, at})
				continue
			}
		}
		cands = append(cands, gone{slot: e.Key, gen: s.Gen, handle: h, identity: id, at: at})
	}
	restale := map[string]bool{}
	staleBefore := func(lh string, at time.Time) {
		for _, hd := range holders[lh] {
			if hd.at.Before(at) && hd.s.Hash != ([ledger.SlotHashLen]byte{}) && !restale[hd.key] {
				restale[hd.key] = true
				stale = append(stale, store.LedgerFinish{Key: hd.key, State: store.LedgerComplete,
					Result: ledger.SlotState{Gen: hd.s.Gen, Ref: hd.s.Ref}.Encode()})
			}
		}
	}
	for lh, hs := range holders {
		if len(hs) > 1 { // every holder but the one claimed last
			latest := hs[0].at
			for _, hd := range hs[1:] {
				if hd.at.After(latest) {
					latest = hd.at
				}
			}
			staleBefore(lh, latest)
		}
	}
	for _, g := range cands {
		if _, ok := live[strings.ToLower(g.handle)]; ok || seen.holds(g.handle) {
			held = append(held, g)
			staleBefore(strings.ToLower(g.handle), g.at)
			continue
		}
		out = append(out, g)
		if !g.moved {
			total++ // a delivered record whose row is gone
		}
	}
	return out, held, stale, total, unhandled, nil
}

// removeGone removes from the destination the records whose rows the
// run's full read of the source no longer met (docs/guide.md#write-modes).
// Each removal is claimed under the run's fence before the call and
// recorded after it; a removal a dead run left pending is claimed and sent
// again (removals are idempotent). It returns how many were removed.
//
// unhandled are the delivered records whose rows are gone that have no
// handle to remove them by (goneSlots).
func (r *run) removeGone(ctx context.Context, seen *mirrorSeen) (removed removals, unhandled int64, err error) {
	if r.remover == nil || seen == nil || !seen.full {
		return removals{}, 0, nil
	}
	if err := r.leftInFlight(ctx, seen); err != nil {
		return removals{}, 0, err
	}
	gs, held, stale, total, nh, err := goneSlots(ctx, r.Store, r.Sync.ID, seen, nil, nil)
	if err != nil {
		return removals{}, 0, storeFailure(ctx, err, "list the delivered records")
	}
	unhandled = int64(nh)
	if unhandled > 0 {
		r.Logger.Warn("mirror: delivered records the run did not read cannot be removed: delivered before the sync became a mirror (the ledger kept no handle to remove them by; remove those whose rows are gone at the destination by hand) or under an earlier source.identity (docs/guide.md#write-modes)",
			"sync", r.Sync.ID, "run", r.rec.ID, "records", unhandled)
	}
	if len(held) > 0 || len(stale) > 0 {
		if err := r.ensureLease(ctx); err != nil {
			return removals{}, unhandled, err
		}
		// A removal of a held handle that an earlier run asked for and
		// never recorded (its answer lost) is in doubt; it is not asked
		// for again, as the row that holds the handle now was sent after
		// it (or its write is in flight): released, counted, listed.
		prior, err := r.removalEntries(ctx, held)
		if err != nil {
			return removals{}, unhandled, err
		}
		fin := make([]store.LedgerFinish, 0, len(held)+len(stale))
		if len(stale) > 0 {
			// Written again by the next run (see goneSlots).
			fin = append(fin, stale...)
			r.Logger.Info("mirror: rows whose contact another row's write reached after theirs are written again by the next run",
				"sync", r.Sync.ID, "run", r.rec.ID, "records", len(stale))
		}
		for _, g := range held {
			if !g.moved {
				fin = append(fin, settledMark(g))
			}
			if k := g.removalKey(r.Sync.ID); leftInDoubt(prior[k], r.lease.Fence()) {
				r.rec.InDoubt++
				r.rec.Settled++
				fin = append(fin, store.LedgerFinish{Key: k, State: store.LedgerReleased,
					Settled: ledger.Settlement(g.identity, ledger.SettledRemovalHeld)})
			}
		}
		if len(fin) > 0 {
			if err := r.recordEpoch(ctx); err != nil {
				return removals{}, unhandled, err
			}
			if err := r.Store.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: r.Sync.ID, Fence: r.lease.Fence(), RunID: r.rec.ID, Entries: fin}); err != nil {
				return removals{}, unhandled, storeFailure(ctx, err, "record the handles other rows hold")
			}
		}
	}
	if gs, err = r.stillThere(ctx, gs); err != nil {
		return removals{}, unhandled, err
	}
	if len(gs) == 0 {
		return removals{}, unhandled, nil
	}
	if allowed := r.Sync.Mirror.MaxRemovals(total); len(gs) > allowed && !r.AllowRemovals {
		return removals{}, unhandled, failure.New(failure.MirrorRemovalsRefused, removalsRefused(gs, total, r.Sync.Mirror.Bound, allowed))
	}
	prior, err := r.removalEntries(ctx, gs)
	if err != nil {
		return removals{}, unhandled, err
	}
	if qr, ok := r.remover.(destination.QueuedRemover); ok {
		gs = r.deferQueued(gs, prior, qr.RemovalGrace())
	}
	// A handle's entries go in one batch, next to each other, so that
	// removeBatch sends its removal once.
	slices.SortStableFunc(gs, func(a, b gone) int { return strings.Compare(strings.ToLower(a.handle), strings.ToLower(b.handle)) })
	for rest := gs; len(rest) > 0; {
		n := min(len(rest), r.Sync.PageSize)
		for n < len(rest) && strings.EqualFold(rest[n].handle, rest[n-1].handle) {
			n++
		}
		batch := rest[:n]
		rest = rest[n:]
		done, err := r.removeBatch(ctx, batch, prior)
		removed.gone += done.gone
		removed.moved += done.moved
		if err != nil {
			return removed, unhandled, err
		}
	}
	r.Logger.Info("mirror removed records whose source rows are gone", "sync", r.Sync.ID, "run", r.rec.ID, "removed", removed.gone, "old_contacts_removed", removed.moved)
	return removed, unhandled, nil
}

// leftInFlight settles the writes earlier runs left in flight (a claim
// whose answer was lost, an import still accepted) to rows this pass did
// not read: the row is gone, and its write may have landed under its handle,
// which no delivered slot names (a new row, or one whose e-mail had
// changed). Each becomes a moved handle that goneSlots lists for removal,
// unless a row read holds it. An import still processing is asked about
// first, so that nothing it writes after the removal is left behind; one
// still running past the wait is left for the next run.
func (r *run) leftInFlight(ctx context.Context, seen *mirrorSeen) error {
	r.readSharedClock(ctx)
	if len(r.outstanding) == 0 {
		return nil
	}
	left := unread(r.outstanding, seen)
	if len(left) == 0 {
		return nil
	}
	// A row the pass missed (a keyset read whose cursor column moved
	// behind it) is not gone: its entries are left for the run that reads
	// it (stillThere).
	rows := make([]gone, len(left))
	for i, f := range left {
		rows[i] = gone{identity: f.identity}
	}
	rows, err := r.stillThere(ctx, rows)
	if err != nil {
		return err
	}
	goneIDs := make(map[string]bool, len(rows))
	for _, g := range rows {
		goneIDs[g.identity] = true
	}
	var (
		fin     []store.LedgerFinish
		waiting = map[string]bool{} // processes that had not ended
		young   int                 // writes in doubt the destination may still apply
		now     = r.Clock.Now()
	)
	for _, f := range left {
		e := f.entry
		if !goneIDs[f.identity] {
			continue
		}
		if e.State == store.LedgerPending && now.Sub(e.ClaimedAt) < r.inFlightWait() {
			// Its answer was lost: the destination may hold the write
			// and apply it later (a queued import, a request held), and
			// a removal before that would leave its contact behind. A
			// later run removes it.
			young++
			continue
		}
		if e.State == store.LedgerAccepted {
			ref := ledger.AcceptedRef(e)
			if _, asked := waiting[ref]; !asked {
				_, err := r.awaitAccepted(ctx, ref, nil)
				switch {
				case err == nil, errors.Is(err, destination.ErrUnknownRef):
					waiting[ref] = false // ended, or never to be known: it may have landed
				case ctx.Err() != nil:
					return cancelled(ctx)
				default:
					waiting[ref] = true
					r.Logger.Warn("mirror: an import an earlier run left to rows that are gone has not ended; its contacts are removed by a later run",
						"sync", r.Sync.ID, "run", r.rec.ID, "process", ref, "error", err)
				}
			}
			if waiting[ref] {
				continue
			}
		}
		fin = append(fin, movedFromMark(r.Sync.ID, e, f.handle, f.identity, 1, r.onSharedClock(e.ClaimedAt)), store.LedgerFinish{Key: e.Key, State: store.LedgerReleased})
	}
	if young > 0 {
		r.Logger.Info("mirror: writes in doubt to rows that are gone may still be applied by the destination; what they wrote is removed by a run once they are older than settings.in_doubt_grace (for imports, the accepted wait)",
			"sync", r.Sync.ID, "run", r.rec.ID, "records", young, "wait", r.inFlightWait())
	}
	if len(fin) == 0 {
		return nil
	}
	if err := r.ensureLease(ctx); err != nil {
		return err
	}
	return r.mark(ctx, fin)
}

// inFlightWait is how long after its claim a write whose answer was lost
// may still be applied by the destination: settings.in_doubt_grace, and for
// a destination that accepts writes for processing (an import queued
// behind others) the wait for an accepted outcome, whichever is longer.
func (r *run) inFlightWait() time.Duration {
	w := r.InDoubtGrace
	if _, ok := r.Destination.(destination.Async); ok {
		w = max(w, r.acceptedWait())
	}
	return w
}

// inFlightTo is an entry in flight (a mirror's claim or accepted import)
// with the handle it writes to and its row's identity (ledger.EntryHandle).
type inFlightTo struct {
	entry            store.LedgerEntry
	handle, identity string
}

// unread are the entries of inFlight (by slot tag) that name a handle, of
// slots a pass did not read.
func unread(inFlight map[string][]store.LedgerEntry, seen *mirrorSeen) []inFlightTo {
	byTag := map[string][]inFlightTo{}
	for tag, es := range inFlight {
		for _, e := range es {
			if h, id, ok := ledger.EntryHandle(e); ok {
				byTag[tag] = append(byTag[tag], inFlightTo{entry: e, handle: h, identity: id})
			}
		}
	}
	if len(byTag) == 0 {
		return nil
	}
	for id := range seen.slots {
		delete(byTag, hex.EncodeToString(id[:ledger.SlotTagLen/2]))
	}
	var out []inFlightTo
	for _, fs := range byTag {
		out = append(out, fs...)
	}
	return out
}

// inFlightGone is what leftInFlight would keep of inFlight as moved
// handles, for a dry run.
func inFlightGone(syncID string, inFlight map[string][]store.LedgerEntry, seen *mirrorSeen) []gone {
	var out []gone
	for _, f := range unread(inFlight, seen) {
		out = append(out, gone{slot: ledger.MovedFrom(syncID, f.entry.Key), gen: 1, handle: f.handle, identity: f.identity, moved: true})
	}
	return out
}

// stillThereBatch is how many identities one read of stillThere asks for.
const stillThereBatch = 1000

// stillThere drops from gs the rows the source still holds. A keyset source
// (PostgreSQL, MySQL) read from its start misses a row whose cursor column
// moved behind the read while the run read it (a transaction that stamped
// now() at its start and committed later, a writer with a slow clock): that
// row is not gone. Each row about to be removed is read again by identity,
// as a rejected row is, and kept if it is there; the next run, which reads
// the whole source again, sends its values (docs/guide.md#write-modes).
// A moved handle's row is read too: it is there by definition, but it may
// hold that handle again (changed back after the pass read it), and is then
// kept. A file is read whole in one pass, so it has nothing to read again.
func (r *run) stillThere(ctx context.Context, gs []gone) ([]gone, error) {
	if !r.canReadByIdentity() {
		return gs, nil
	}
	var ids []string
	asked := map[string]bool{}
	for _, g := range gs {
		if g.identity != "" && !asked[g.identity] {
			asked[g.identity] = true
			ids = append(ids, g.identity)
		}
	}
	there := map[string]bool{}
	holds := map[string]string{} // identity -> the handle its row holds now, lower-cased
	for rest := ids; len(rest) > 0; {
		n := min(len(rest), stillThereBatch)
		recs, err := r.readByIdentity(ctx, rest[:n])
		if err != nil {
			return nil, err
		}
		rest = rest[n:]
		for _, rec := range recs {
			id, err := mapping.Identity(rec, r.Sync.Identity)
			if err != nil {
				continue
			}
			there[id] = true
			if data, err := r.Sync.Mapping.Apply(rec); err == nil {
				if h := r.handleOf(&item{Record: destination.Record{Data: data}}); h != "" {
					holds[id] = strings.ToLower(h)
				}
			}
		}
	}
	if len(there) == 0 {
		return gs, nil
	}
	out := gs[:0:0]
	for _, g := range gs {
		if !g.moved && there[g.identity] {
			continue
		}
		if g.moved && holds[g.identity] != "" && holds[g.identity] == strings.ToLower(g.handle) {
			// The row changed back to the handle it left while the run
			// read it (an e-mail changed and changed back): the contact
			// is the row's again, and the next run writes its values
			// there. Removed now, it left the list for a run and was
			// written twice (an independent check, 2026-12-07).
			continue
		}
		out = append(out, g)
	}
	if r.Logger != nil { // a dry run's has none
		r.Logger.Info("mirror: rows the run did not meet are still in the source (their cursor column moved behind the read during the run): not removed; the next run sends their values",
			"sync", r.Sync.ID, "run", r.rec.ID, "records", len(gs)-len(out))
	}
	return out, nil
}

// deferQueued drops from gs the removals an earlier run claimed less than
// grace ago and left pending (sent, its answer never recorded): the
// destination may still hold that request in its queue
// (destination.QueuedRemover). A later run sends them once the grace has
// passed, or finds them done.
func (r *run) deferQueued(gs []gone, prior map[string]store.LedgerEntry, grace time.Duration) []gone {
	now := r.Clock.Now()
	out := gs[:0:0]
	waiting := 0
	for _, g := range gs {
		if e, ok := prior[g.removalKey(r.Sync.ID)]; ok && e.State == store.LedgerPending && e.RunID != r.rec.ID && now.Sub(e.ClaimedAt) < grace {
			waiting++
			continue
		}
		out = append(out, g)
	}
	if waiting > 0 {
		r.Logger.Info("removals an earlier run sent may still be queued at the destination; sent again once their grace has passed",
			"sync", r.Sync.ID, "run", r.rec.ID, "removals", waiting, "grace", grace)
	}
	return out
}

// removalKey is the key of g's removal (ledger.Removal).
func (g gone) removalKey(syncID string) string { return ledger.Removal(syncID, g.slot, g.gen) }

// removalEntries are the ledger's entries of gs's removals, by key: the
// removals earlier runs claimed (deferQueued, and those in doubt).
func (r *run) removalEntries(ctx context.Context, gs []gone) (map[string]store.LedgerEntry, error) {
	keys := make([]string, len(gs))
	for i, g := range gs {
		keys[i] = g.removalKey(r.Sync.ID)
	}
	es, err := r.Store.LedgerGet(ctx, r.Sync.ID, keys)
	if err != nil {
		return nil, storeFailure(ctx, err, "read the removals in flight")
	}
	return es, nil
}

// leftInDoubt reports whether e is a claim a run under a fence below fence
// left pending: its answer was lost, or that run stopped first (the zero
// entry of an absent key is not).
func leftInDoubt(e store.LedgerEntry, fence int64) bool {
	return e.State == store.LedgerPending && e.Fence < fence
}

// removals counts what a run removed: records whose rows are gone, and
// handles rows left behind (moved: an old e-mail, a write in flight's).
type removals struct{ gone, moved int64 }

// removeBatch claims and sends batch's removals; prior are their entries
// when the run's removals began (removalEntries).
func (r *run) removeBatch(ctx context.Context, batch []gone, prior map[string]store.LedgerEntry) (removals, error) {
	if err := r.ensureLease(ctx); err != nil {
		return removals{}, err
	}
	keys := make([]string, len(batch))
	results := make([]string, len(batch))
	rms := make([]destination.Removal, 0, len(batch))
	byKey := make(map[string]gone, len(batch))
	// One handle is removed once: a gone row's and a kept old address's
	// entries may name the same contact (removeGone puts them in one
	// batch); the others share the first's outcome. Sent twice, the
	// contact was taken off the list twice in a run (an independent check,
	// 2026-12-07).
	first := map[string]string{}  // lower-cased handle -> the key sent
	also := map[string][]string{} // key sent -> the other keys of its handle
	for i, g := range batch {
		keys[i] = g.removalKey(r.Sync.ID)
		results[i] = ledger.ClaimResult(g.slot)
		byKey[keys[i]] = g
		h := strings.ToLower(g.handle)
		if k, ok := first[h]; ok {
			also[k] = append(also[k], keys[i])
			continue
		}
		first[h] = keys[i]
		rms = append(rms, destination.Removal{Key: keys[i], Handle: g.handle})
	}
	fence := r.lease.Fence()
	// A removal an earlier run claimed and never recorded is in doubt: its
	// answer was lost, or that run stopped first. It is sent again (a
	// removal applies at most once), counted and listed as settled so.
	doubt := map[string]bool{}
	for _, k := range keys {
		if leftInDoubt(prior[k], fence) {
			doubt[k] = true
		}
	}
	r.rec.InDoubt += int64(len(doubt))
	if err := r.recordEpoch(ctx); err != nil {
		return removals{}, err
	}
	if err := r.Store.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: r.Sync.ID, Fence: fence, RunID: r.rec.ID, Keys: keys, Results: results}); err != nil {
		return removals{}, storeFailure(ctx, err, "claim the removals")
	}
	var requests atomic.Int64
	res, werr := r.remover.Remove(destination.WithRequestCount(r.destCtx(ctx), &requests), rms)
	r.rec.Requests += requests.Load()
	var (
		fin     []store.LedgerFinish
		removed removals
	)
	for _, x := range res {
		if _, ok := byKey[x.Key]; !ok {
			continue
		}
		// The contact's first entry counts it; the others share its outcome.
		for i, key := range append([]string{x.Key}, also[x.Key]...) {
			g, counted := byKey[key], i == 0
			switch x.Outcome {
			case destination.Delivered:
				if counted && g.moved {
					removed.moved++
				} else if counted {
					removed.gone++
				}
				done := store.LedgerFinish{Key: g.slot, State: store.LedgerComplete, Result: ledger.SlotState{Gen: g.gen, Ref: ledger.RemovedRef(g.identity)}.Encode()}
				if g.moved {
					done = settledMark(g) // the slot itself lives on
				}
				rel := store.LedgerFinish{Key: key, State: store.LedgerReleased}
				if doubt[key] {
					rel.Settled = ledger.Settlement(g.identity, ledger.SettledRemovedAgain)
				}
				fin = append(fin, done, rel)
			case destination.NotSent:
				fin = append(fin, store.LedgerFinish{Key: key, State: store.LedgerReleased})
			case destination.Rejected:
				if counted {
					r.rec.Rejected++
				}
				fin = append(fin, store.LedgerFinish{Key: key, State: store.LedgerRejected,
					Message: r.hideSecrets(destination.Redact(destination.RedactValues(x.Message, []string{g.handle, g.identity}))), Result: ledger.RejectedResult(g.slot, g.identity)})
			}
		}
	}
	if len(fin) > 0 {
		if err := r.recordEpoch(ctx); err != nil {
			return removed, err
		}
		if err := r.Store.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: r.Sync.ID, Fence: fence, RunID: r.rec.ID, Entries: fin}); err != nil {
			return removed, storeFailure(ctx, err, "record the removals")
		}
	}
	if werr != nil {
		return removed, werr
	}
	return removed, nil
}

// removalsRefused is the detail of a run that would remove more than
// max_removals: how many rows are gone from the source and how many of the
// removals are the old handles of rows still there (a changed e-mail
// leaves its old contact behind), which a truncated source does not cause.
func removalsRefused(gs []gone, total int, bound string, allowed int) string {
	moved := countMoved(gs)
	if moved == 0 {
		return fmt.Sprintf("%d of the sync's %d delivered records are gone from the source; max_removals %s allows %d",
			len(gs), total, bound, allowed)
	}
	return fmt.Sprintf("%d removals of the sync's %d delivered records: %d whose source rows are gone, %d old contacts of rows "+
		"whose handle at the destination changed (a new e-mail: the row is written under it, its old contact is removed); "+
		"max_removals %s allows %d", len(gs), total, len(gs)-moved, moved, bound, allowed)
}

func countMoved(gs []gone) int {
	n := 0
	for _, g := range gs {
		if g.moved {
			n++
		}
	}
	return n
}

// mirrorDetail is a mirror run's detail: what it removed, and how many rows
// gone it could not remove.
func mirrorDetail(removed removals, unhandled int64) string {
	var parts []string
	if removed.gone > 0 {
		parts = append(parts, fmt.Sprintf("removed %d record(s) whose source rows are gone", removed.gone))
	}
	if removed.moved > 0 {
		parts = append(parts, fmt.Sprintf("removed %d record(s) no row holds any more (a row's old e-mail, or what a write in doubt wrote)", removed.moved))
	}
	if unhandled > 0 {
		parts = append(parts, Unremovable(unhandled))
	}
	return "mirror: " + strings.Join(parts, "; ")
}

// Unremovable says that n delivered records whose rows are gone cannot be
// removed (goneSlots' unhandled): a run's detail and a dry run say it alike.
func Unremovable(n int64) string {
	return fmt.Sprintf("%d record(s) delivered earlier were not read and cannot be removed: delivered before the sync became a mirror "+
		"(the ledger kept no handle to remove them by: remove those whose rows are gone at the destination by hand) "+
		"or under an earlier source.identity (their rows may still be there, under the new identity)", n)
}
