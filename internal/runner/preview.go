package runner

import (
	"cmp"
	"context"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
)

// A dry run (`oncesync run --dry-run`, docs/guide.md#commands) reads what
// the next run would read, from the saved cursor to the end of the source,
// and sorts each record by what the run would do with it, from the slots'
// last delivered states: nothing is claimed, nothing is written, no lease
// is taken.

// PreviewStore is what a dry run reads of the store.
type PreviewStore interface {
	store.Cursors
	store.Ledger
}

// PreviewParams describe a dry run.
type PreviewParams struct {
	Store  PreviewStore
	Source source.Source
	Sync   Sync
	// ResetCursor previews a run from the start of the source.
	ResetCursor bool
	// Resend previews a Params.Resend run: every record delivered before
	// is an update.
	Resend bool
	// Sample is how many records of each action Preview names (default 10).
	Sample int
	// Progress, if set, is called after each page with the records read.
	Progress func(read int64)
	// Judge, if set, tells which records to send the destination would
	// reject without a write (counted as Rejected, not as creates or
	// updates).
	Judge destination.Judge
	// Filter and Slice are a partition's, as in Params: the preview of a
	// partitioned sync is its partitions' previews, each read against the
	// partition's own cursor and ledger (Sync.ID is the partition's).
	Filter func(source.Record) bool
	Slice  source.Slice
	// Remover, for a mirror sync, is the destination's: a record whose
	// handle there would change (a new e-mail) leaves its old one to
	// remove, which Removals count (Moved of them).
	Remover destination.Remover
}

// Preview is what a run would do.
type Preview struct {
	From string // the cursor the run would start at ("" = the start)
	// Changed: the saved cursor was read for another payload (payloadPrint),
	// so the run would read from the start.
	Changed   bool
	Read      int64 // records read (of the run's slice)
	Creates   int64 // never delivered by this sync
	Updates   int64 // delivered before, with other values
	Unchanged int64 // delivered with exactly these values: nothing to send
	// Settling are records an earlier run sent with these values whose
	// outcome is not known yet (an import the destination is still
	// processing, a write in doubt): a run learns what became of them
	// before it sends anything, and sends only what did not land.
	Settling int64
	// Duplicates are records whose identity appears again later in the
	// source: only the last one is sent, as a run does.
	Duplicates int64
	// Invalid are records the source could not read or the mapping not
	// map: a run rejects them without a write.
	Invalid int64
	// Rejected are records to send that the destination would reject
	// before sending them (PreviewParams.Judge), such as an address that
	// cannot be valid. RejectedSample names some, each with the reason.
	Rejected       int64
	RejectedSample []string
	// CreateSample, UpdateSample and SettlingSample name some of them
	// (identity, or "record N of the page at ..." without one).
	CreateSample, UpdateSample, SettlingSample []string
	// Removals are, for a mirror sync read from the start, the records
	// delivered earlier whose rows are gone: a run would remove them
	// (docs/guide.md#write-modes), unless they are more than
	// RemovalsAllowed (max_removals of the sync's Delivered records).
	// RemovalSample names some by identity, so that a person can tell a
	// cleanup from a truncated source before allowing it
	// (docs/recovery.md#mirror_removals_refused).
	Removals, RemovalsAllowed, Delivered int64
	RemovalSample                        []string
	// Moved are the removals that are the old handles of rows read (a row
	// whose e-mail changed: written under the new one, its old contact
	// removed), not rows gone.
	Moved int64
	// Unremovable are delivered records whose rows are gone that no run
	// can remove: delivered before the sync became a mirror, their slots
	// hold no handle.
	Unremovable int64
}

// Add counts q's records into p, as one run of p's and q's slices would
// (a partitioned sync's partitions, docs/guide.md#commands): p starts
// where q starts when p starts at the source's start, and names up to
// sample records of each action.
func (p *Preview) Add(q Preview, sample int) {
	if p.From == "" {
		p.From = q.From
	}
	p.Changed = p.Changed || q.Changed
	p.Read += q.Read
	p.Creates += q.Creates
	p.Updates += q.Updates
	p.Unchanged += q.Unchanged
	p.Settling += q.Settling
	p.Duplicates += q.Duplicates
	p.Invalid += q.Invalid
	p.Rejected += q.Rejected
	p.Removals += q.Removals
	p.RemovalsAllowed += q.RemovalsAllowed
	p.Delivered += q.Delivered
	p.Moved += q.Moved
	p.Unremovable += q.Unremovable
	more := func(to, from []string) []string {
		return append(to, from[:min(len(from), max(sample-len(to), 0))]...)
	}
	p.RejectedSample = more(p.RejectedSample, q.RejectedSample)
	p.CreateSample = more(p.CreateSample, q.CreateSample)
	p.UpdateSample = more(p.UpdateSample, q.UpdateSample)
	p.SettlingSample = more(p.SettlingSample, q.SettlingSample)
	p.RemovalSample = more(p.RemovalSample, q.RemovalSample)
}

// RunPreview computes p's preview.
func RunPreview(ctx context.Context, p PreviewParams) (Preview, error) {
	if p.Sample <= 0 {
		p.Sample = 10
	}
	if p.Sync.PageSize <= 0 {
		p.Sync.PageSize = 500
	}
	r := &run{Params: Params{Source: p.Source, Sync: p.Sync, Filter: p.Filter, Slice: p.Slice}, remover: p.Remover}
	var out Preview
	// The base a first run would record, without recording it.
	base, found, err := p.Store.GetPayloadBase(ctx, p.Sync.ID)
	if err != nil {
		return out, failure.Wrap(failure.StoreUnavailable, err, "load the sync's payload base")
	}
	if !found {
		base = p.Sync.DestinationPayload
	}
	if r.Sync.DestinationAddress, err = p.accountAddress(ctx); err != nil {
		return out, failure.Wrap(failure.StoreUnavailable, err, "load the sync's destination account")
	}
	addr, found, err := p.Store.GetPayloadBase(ctx, addressBaseID(p.Sync.ID))
	if err != nil {
		return out, failure.Wrap(failure.StoreUnavailable, err, "load the sync's destination address")
	}
	if !found {
		addr = r.Sync.DestinationAddress
	}
	epoch, err := r.layoutEpoch(ctx, p.Store, false)
	if err != nil {
		return out, failure.Wrap(failure.StoreUnavailable, err, "load the sync's layout epoch")
	}
	r.setSaltEpoch(base, addr, epoch)
	if key, found, err := p.Store.GetPayloadBase(ctx, sourceBaseID(p.Sync.ID)); err != nil {
		return out, failure.Wrap(failure.StoreUnavailable, err, "load the sync's source key")
	} else if found {
		r.sourceKey = key
	}
	if !p.ResetCursor && !p.Resend {
		cur, err := p.Store.GetCursor(ctx, p.Sync.ID)
		if err != nil {
			return out, failure.Wrap(failure.StoreUnavailable, err, "load the cursor")
		}
		out.From, out.Changed = startCursor(cur, r.payload, false)
	}
	cursor := out.From
	// Slots an earlier run left a write or a removal of in flight (a run
	// killed on the wire): a run learns their outcome before anything else,
	// so an unchanged record of one is settling, not unchanged.
	inFlight, err := outstanding(ctx, p.Store, p.Sync.ID, math.MaxInt64)
	if err != nil {
		return out, err
	}
	var seen *mirrorSeen
	var moves map[string]string // slot key: the handle a run would write the row under
	if p.Sync.Mirror != nil {
		seen = r.newMirrorSeen(cursor == "")
		moves = map[string]string{}
	}
	for {
		page, err := r.readPage(ctx, cursor)
		if err != nil {
			return out, sourceFailure(ctx, err)
		}
		items, read, dups, err := r.keys(page)
		if err != nil {
			return out, err
		}
		out.Read += read
		out.Duplicates += dups
		seen.add(items)
		if len(items) > 0 {
			slots := make([]string, len(items))
			for i := range items {
				slots[i] = items[i].slot
			}
			states, err := p.Store.LedgerGet(ctx, p.Sync.ID, slots)
			if err != nil {
				return out, storeFailure(ctx, err, "read the ledger")
			}
			var changed []previewItem
			for i := range items {
				it := &items[i]
				if it.invalid != "" {
					out.Invalid++
					continue
				}
				e, found := states[it.slot]
				st, ok := ledger.DecodeSlot(e, found)
				if ok && !p.Resend && r.unchanged(st, it.hash) {
					if len(inFlight[ledger.SlotTag(it.slot)]) > 0 {
						out.Settling++
						out.SettlingSample = sample(out.SettlingSample, p.Sample, it)
					} else {
						out.Unchanged++
					}
					continue
				}
				_, removed := ledger.RefRemoved(st.Ref)
				it.gen = 1
				if ok {
					it.gen = st.Gen + 1
				}
				it.Key = r.deliveryKey(it)
				changed = append(changed, previewItem{it: it, create: !ok || removed})
			}
			if err := previewChanged(ctx, p, changed, &out, moves); err != nil {
				return out, err
			}
		}
		if p.Progress != nil {
			p.Progress(out.Read)
		}
		if page.End {
			if seen != nil && seen.full {
				gs, _, _, total, unhandled, err := goneSlots(ctx, p.Store, p.Sync.ID, seen, moves, inFlightGone(p.Sync.ID, inFlight, seen))
				if err != nil {
					return out, storeFailure(ctx, err, "list the delivered records")
				}
				if gs, err = r.stillThere(ctx, gs); err != nil {
					return out, err
				}
				// The run judges its removals once its pages are delivered:
				// the records it creates count in the sync's records then.
				total += int(out.Creates)
				out.Removals, out.Delivered, out.Moved = int64(len(gs)), int64(total), int64(countMoved(gs))
				out.Unremovable = int64(unhandled)
				out.RemovalsAllowed = int64(p.Sync.Mirror.MaxRemovals(total))
				out.RemovalSample = removalSample(gs, p.Sample)
			}
			return out, nil
		}
		cursor = page.Next
	}
}

// previewItem is a record whose slot says it changed or was never
// delivered (create).
type previewItem struct {
	it     *item
	create bool
}

// previewChanged sorts the records whose slots say they changed (or were
// never delivered) by their delivery keys, as a run's ledger stage does
// (page.go): a value an earlier run sent and whose outcome is not known yet
// is settled, not sent; a value delivered under a ledger from before slots
// is recorded, not sent. Another value of the row still in flight is not
// looked for (a run learns its outcome first, then sends this one).
//
// moves (nil but for a mirror) gets the handle each record sent would be
// written under, by its slot.
func previewChanged(ctx context.Context, p PreviewParams, changed []previewItem, out *Preview, moves map[string]string) error {
	if len(changed) == 0 {
		return nil
	}
	keys := make([]string, len(changed))
	for i, c := range changed {
		keys[i] = c.it.Key
	}
	entries, err := p.Store.LedgerGet(ctx, p.Sync.ID, keys)
	if err != nil {
		return storeFailure(ctx, err, "read the ledger")
	}
	var send []previewItem
	for _, c := range changed {
		it := c.it
		e, found := entries[it.Key]
		switch {
		case found && e.State == store.LedgerComplete:
			out.Unchanged++
		case found && (e.State == store.LedgerAccepted || e.State == store.LedgerInDoubt || e.State == store.LedgerPending):
			out.Settling++
			out.SettlingSample = sample(out.SettlingSample, p.Sample, it)
		default:
			send = append(send, c)
		}
	}
	refused, err := judge(ctx, p.Judge, send)
	if err != nil {
		return err
	}
	for i, c := range send {
		if moves != nil && p.Remover != nil && refused[i] == "" {
			if h, err := p.Remover.Handle(c.it.Record); err == nil && h != "" {
				moves[c.it.slot] = h
			}
		}
		switch {
		case refused[i] != "":
			out.Rejected++
			if len(out.RejectedSample) < p.Sample {
				out.RejectedSample = append(out.RejectedSample, sampleName(c.it)+": "+refused[i])
			}
		case c.create:
			out.Creates++
			out.CreateSample = sample(out.CreateSample, p.Sample, c.it)
		default:
			out.Updates++
			out.UpdateSample = sample(out.UpdateSample, p.Sample, c.it)
		}
	}
	return nil
}

// judge asks j which of send it would reject; all "" without a judge.
func judge(ctx context.Context, j destination.Judge, send []previewItem) ([]string, error) {
	if j == nil || len(send) == 0 {
		return make([]string, len(send)), nil
	}
	recs := make([]destination.Record, len(send))
	for i, c := range send {
		recs[i] = c.it.Record
	}
	refused, err := j.Judge(ctx, recs)
	if err != nil {
		return nil, err
	}
	if len(refused) != len(send) {
		return nil, failure.New(failure.Internal, "the destination judged "+strconv.Itoa(len(refused))+" records of "+strconv.Itoa(len(send)))
	}
	return refused, nil
}

func sample(s []string, n int, it *item) []string {
	if len(s) >= n {
		return s
	}
	return append(s, sampleName(it))
}

// removalSample names the first n removals, by identity, shortest first so
// that numeric identities read in their order.
func removalSample(gs []gone, n int) []string {
	ids := make([]string, 0, len(gs))
	for _, g := range gs {
		ids = append(ids, g.identity)
	}
	slices.SortFunc(ids, func(a, b string) int {
		return cmp.Or(cmp.Compare(len(a), len(b)), strings.Compare(a, b))
	})
	// A row that left two handles (its e-mail changed, then it went) is
	// named once: twice read like a bug (an independent check, 2026-12-07).
	ids = slices.Compact(ids)
	return ids[:min(n, len(ids))]
}

// sampleName names it in a sample: its identity, or its place.
func sampleName(it *item) string {
	if it.id != "" {
		return it.id
	}
	return "record " + strconv.Itoa(it.pos+1) + " of its page"
}

// accountAddress is the address that stands for the sync's account, as a
// run finds it (run.accountAddress), without recording anything: the one
// first reached under the account's name, else under the account the vendor
// said this address reaches on an earlier run. A dry run asks no one: a key
// never used yet reads as another account.
func (p PreviewParams) accountAddress(ctx context.Context) (string, error) {
	if p.Sync.Account != "" {
		named, found, err := p.Store.GetPayloadBase(ctx, accountBaseID(p.Sync.ID, p.Sync.Account))
		if err != nil || found {
			return named, err
		}
	}
	vendor, found, err := p.Store.GetPayloadBase(ctx, vendorBaseID(p.Sync.ID, p.Sync.DestinationAddress))
	if err != nil || !found || vendor == noVendorAccount {
		return p.Sync.DestinationAddress, err
	}
	named, found, err := p.Store.GetPayloadBase(ctx, accountBaseID(p.Sync.ID, vendor))
	if err != nil || !found {
		return p.Sync.DestinationAddress, err
	}
	return named, nil
}
