package runner

import (
	"context"
	"strconv"

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
	// Sample is how many records of each action Preview names (default 10).
	Sample int
	// Progress, if set, is called after each page with the records read.
	Progress func(read int64)
}

// Preview is what a run would do.
type Preview struct {
	From      string // the cursor the run would start at ("" = the start)
	Read      int64  // records read (of the run's slice)
	Creates   int64  // never delivered by this sync
	Updates   int64  // delivered before, with other values
	Unchanged int64  // delivered with exactly these values: nothing to send
	// Duplicates are records whose identity appears again later in the
	// source: only the last one is sent, as a run does.
	Duplicates int64
	// Invalid are records the source could not read or the mapping not
	// map: a run rejects them without a write.
	Invalid int64
	// CreateSample and UpdateSample name some of them (identity, or
	// "record N of the page at ..." without one).
	CreateSample, UpdateSample []string
	// Removals are, for a mirror sync read from the start, the records
	// delivered earlier whose rows are gone: a run would remove them
	// (docs/guide.md#write-modes), unless they are more than
	// RemovalsAllowed (max_removals of the sync's Delivered records).
	Removals, RemovalsAllowed, Delivered int64
}

// RunPreview computes p's preview.
func RunPreview(ctx context.Context, p PreviewParams) (Preview, error) {
	if p.Sample <= 0 {
		p.Sample = 10
	}
	if p.Sync.PageSize <= 0 {
		p.Sync.PageSize = 500
	}
	r := &run{Params: Params{Source: p.Source, Sync: p.Sync}}
	var out Preview
	if !p.ResetCursor {
		cur, err := p.Store.GetCursor(ctx, p.Sync.ID)
		if err != nil {
			return out, failure.Wrap(failure.StoreUnavailable, err, "load the cursor")
		}
		out.From = cur.Value
	}
	cursor := out.From
	var seen *mirrorSeen
	if p.Sync.Mirror != nil {
		seen = &mirrorSeen{full: cursor == "", slots: map[slotID]struct{}{}}
	}
	for {
		page, err := p.Source.ReadPage(ctx, cursor, p.Sync.PageSize)
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
			for i := range items {
				it := &items[i]
				if it.invalid != "" {
					out.Invalid++
					continue
				}
				e, found := states[it.slot]
				st, ok := ledger.DecodeSlot(e, found)
				_, removed := ledger.RefRemoved(st.Ref)
				switch {
				case !ok || removed:
					out.Creates++
					out.CreateSample = sample(out.CreateSample, p.Sample, it)
				case st.Hash == ledger.ShortHash(it.hash):
					out.Unchanged++
				default:
					out.Updates++
					out.UpdateSample = sample(out.UpdateSample, p.Sample, it)
				}
			}
		}
		if p.Progress != nil {
			p.Progress(out.Read)
		}
		if page.End {
			if seen != nil && seen.full {
				gs, total, err := goneSlots(ctx, p.Store, p.Sync.ID, seen.slots)
				if err != nil {
					return out, storeFailure(ctx, err, "list the delivered records")
				}
				out.Removals, out.Delivered = int64(len(gs)), int64(total)
				out.RemovalsAllowed = int64(p.Sync.Mirror.MaxRemovals(total))
			}
			return out, nil
		}
		cursor = page.Next
	}
}

func sample(s []string, n int, it *item) []string {
	if len(s) >= n {
		return s
	}
	if it.id != "" {
		return append(s, it.id)
	}
	return append(s, "record "+strconv.Itoa(it.pos+1)+" of its page")
}
