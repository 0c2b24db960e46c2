package runner

import (
	"context"
	"errors"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/store"
)

// Writes to one contact land in the order their rows were read. A
// destination that names its records by a handle (Brevo's and Klaviyo's
// e-mail, HubSpot's id_property: destination.Remover) may be written twice
// at one handle under two slots, as when two rows swap addresses while a
// pass reads them; its imports may end in either order, so:
//   - within a run, two slots' writes to one handle are never in flight at
//     once (writer.writingTo), and a handle whose write the run gave up
//     waiting for is written again only by the next run (holdBack);
//   - across runs (the entries of writes in flight name their handle: a
//     mirror's in clear, another sync's by its key), a record whose handle
//     an earlier run's write of another slot may still reach waits until
//     that write can no longer land (awaitEarlier);
//   - a mirror's slot keeps when its write was claimed, so a full pass can
//     tell which of two slots' deliveries to one handle came last
//     (goneSlots, mirror.go).

// handleAt is it's handle at a destination that names its records by one
// (destination.Remover, in any write mode); "" when it has none.
func (r *run) handleAt(it *item) string {
	if !it.handleKnown {
		it.handleKnown = true
		if r.handler != nil {
			if h, err := r.handler.Handle(it.Record); err == nil {
				it.handle = h
			}
		}
	}
	return it.handle
}

// holdBack drops from send the records whose handle a write given up this
// run went to (the destination was still processing it when the run
// stopped asking): written now, they could land before it. They are left
// for the next run, which learns first what became of that write; the
// cursor stays before them, behind the page given up. handles are send's
// (handlesOf); it returns the records kept and theirs.
func (r *run) holdBack(w *writer, send []*item, handles []string) ([]*item, []string) {
	if !w.holding(handles) {
		return send, handles
	}
	kept := send[:0]
	for _, it := range send {
		if h := r.handleAt(it); h != "" && w.holding([]string{h}) {
			r.heldBack++
			continue
		}
		kept = append(kept, it)
	}
	return kept, r.handlesOf(kept)
}

// handleKey is the key of it's handle in the ledger's entries
// (ledger.HandleKey); "" when it has none.
func (r *run) handleKey(it *item) string {
	if it.handleKey == "" {
		if h := r.handleAt(it); h != "" {
			it.handleKey = ledger.HandleKey(r.Sync.ID, h)
		}
	}
	return it.handleKey
}

// handlesOf lists the handles items write to; nil when the
// destination names its records by none.
func (r *run) handlesOf(items []*item) []string {
	if r.handler == nil {
		return nil
	}
	hs := make([]string, 0, len(items))
	for _, it := range items {
		if h := r.handleAt(it); h != "" {
			hs = append(hs, h)
		}
	}
	return hs
}

// earlierWrite is an earlier run's write in flight (pending or accepted)
// of the slot whose tag is tag, to a handle.
type earlierWrite struct {
	tag string
	e   store.LedgerEntry
}

// indexEarlierWrites keeps, by handle key, the writes in flight earlier
// runs left (loadOutstanding's) that name their handle.
func (r *run) indexEarlierWrites() {
	for tag, es := range r.outstanding {
		for _, e := range es {
			if k, ok := ledger.EntryHandleKey(r.Sync.ID, e); ok {
				if r.earlierTo == nil {
					r.earlierTo = map[string][]earlierWrite{}
				}
				r.earlierTo[k] = append(r.earlierTo[k], earlierWrite{tag, e})
			}
		}
	}
}

// awaitEarlier returns send without the records whose handle an earlier
// run's write of another slot may still reach, after waiting for those
// writes: an accepted import until its process is done (at most
// AcceptedWait), a write whose answer was lost until settings.in_doubt_grace
// has passed since its claim. A record whose earlier write is still
// processing then is left for the next run (heldBack). A write whose own
// slot this run has settled already (takeOutstanding) is not waited for.
func (r *run) awaitEarlier(ctx context.Context, send []*item) ([]*item, error) {
	if len(r.earlierTo) == 0 {
		return send, nil
	}
	kept := send[:0]
	for _, it := range send {
		h := r.handleKey(it)
		ws, ok := r.earlierTo[h]
		if !ok {
			kept = append(kept, it)
			continue
		}
		landed, err := r.awaitEarlierTo(ctx, ledger.SlotTag(it.slot), ws)
		if err != nil {
			return nil, err
		}
		if !landed {
			r.heldBack++
			continue
		}
		delete(r.earlierTo, h)
		kept = append(kept, it)
	}
	return kept, nil
}

// awaitEarlierTo waits for ws (see awaitEarlier); false when one of them
// may still land.
func (r *run) awaitEarlierTo(ctx context.Context, own string, ws []earlierWrite) (bool, error) {
	var until time.Time
	pending := 0
	for _, w := range ws {
		if _, open := r.outstanding[w.tag]; !open || w.tag == own {
			continue
		}
		if w.e.State != store.LedgerAccepted {
			if u, ok := r.graceUntil(w.e.ClaimedAt); ok {
				pending++
				if u.After(until) {
					until = u
				}
			}
			continue
		}
		done, err := r.processDone(ctx, ledger.AcceptedRef(w.e))
		if err != nil || !done {
			return false, err
		}
	}
	if pending > 0 {
		err := r.waitUntil(ctx, pending, until, "another row's write to the same contact, left in doubt by an earlier run, may still land; writing once settings.in_doubt_grace has passed since it")
		return err == nil, err
	}
	return true, nil
}

// processDone waits for process ref to end (awaitAccepted: at most
// AcceptedWait); false when it still runs then, or could not be asked. A
// process the destination does not know is done (nothing more of it will
// land that this run could learn of), as for leftInFlight. Answers are
// kept for the run.
func (r *run) processDone(ctx context.Context, ref string) (bool, error) {
	if done, ok := r.refsDone[ref]; ok {
		return done, nil
	}
	_, err := r.awaitAccepted(ctx, ref, nil)
	if err != nil && ctx.Err() != nil {
		return false, cancelled(ctx)
	}
	done := err == nil || errors.Is(err, destination.ErrUnknownRef)
	if r.refsDone == nil {
		r.refsDone = map[string]bool{}
	}
	r.refsDone[ref] = done
	return done, nil
}
