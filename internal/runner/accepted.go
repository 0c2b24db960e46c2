package runner

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/store"
)

// Asynchronous outcomes (docs/guide.md#the-ledger-and-its-retention): a destination that answers "accepted,
// processing" (Brevo's bulk import, 202 with a process id) has not
// delivered yet. The run marks those keys accepted, hands them to the
// poller, which asks that process (and only it) what became of each record,
// and goes on with the next pages meanwhile. The cursor never moves past a
// page whose records are still accepted: a run that dies (or gives up
// waiting) leaves it at that page, and the next run reads the page again,
// finds the keys accepted and asks the same process.
//
// Polling pauses and the AcceptedWait bound are real waits on the wall
// clock (the run's injected clock tells lease and record times).

// Defaults of Params.
const (
	DefaultAcceptedWait = 2 * time.Minute
	DefaultPollInterval = 200 * time.Millisecond
	maxPollInterval     = 5 * time.Second
	// minPollInterval bounds how soon a process is first asked about once
	// the run has seen how long its processes take (poller.firstWait).
	minPollInterval = 10 * time.Millisecond
	// maxImportTries is how often records whose process failed whole are
	// sent within one run before they are left for the next one.
	maxImportTries = 3
	// maxOpenBatches bounds the accepted batches a run holds in memory; the
	// write stage waits for room beyond it.
	maxOpenBatches = 32
)

// acceptedBatch is records of one page the destination accepted under one
// process.
type acceptedBatch struct {
	page  int64
	ref   string
	items []*item
	tries int // sends of these records that ended accepted, in this run
	polls int // questions asked about it so far
	// requests is the HTTP requests those questions made, counted in the
	// page's figure once the batch is settled.
	requests int64

	since time.Time     // when it was handed to the poller
	next  time.Time     // when it is polled next
	every time.Duration // the pause before the poll after next
}

// loadOutstanding reads what earlier runs left in flight (pending claims,
// accepted imports) by the slot each names, so that a row whose value has
// changed since is not taken as up to date while an older value of it may
// still land (docs/guide.md#what-a-run-does).
func (r *run) loadOutstanding(ctx context.Context) error {
	var err error
	r.outstanding, err = outstanding(ctx, r.Store, r.Sync.ID, r.lease.Fence())
	return err
}

// outstanding is syncID's entries in flight (pending, accepted) under a
// fence below fence, by the tag of the slot each names: what loadOutstanding
// keeps for a run, and what a dry run (fence: any) counts as settling.
func outstanding(ctx context.Context, st store.Ledger, syncID string, fence int64) (map[string][]store.LedgerEntry, error) {
	out := map[string][]store.LedgerEntry{}
	for _, state := range []store.LedgerState{store.LedgerPending, store.LedgerAccepted} {
		es, err := st.LedgerList(ctx, syncID, state, 0)
		if err != nil {
			return nil, storeFailure(ctx, err, "list the ledger's entries in flight")
		}
		for _, e := range es {
			if e.Fence >= fence {
				continue
			}
			if tag, _, ok := ledger.EntryTag(e.Result); ok {
				out[tag] = append(out[tag], e)
			}
		}
	}
	return out, nil
}

// hasOutstanding reports whether an earlier run left an entry of slot in
// flight.
func (r *run) hasOutstanding(slot string) bool {
	if len(r.outstanding) == 0 {
		return false
	}
	_, ok := r.outstanding[ledger.SlotTag(slot)]
	return ok
}

// takeOutstanding returns the entries an earlier run left in flight for
// slot under keys other than key (key's own entry is read with the page),
// once: they are settled with this page.
func (r *run) takeOutstanding(slot, key string) []store.LedgerEntry {
	tag := ledger.SlotTag(slot)
	es, ok := r.outstanding[tag]
	if !ok {
		return nil
	}
	delete(r.outstanding, tag)
	var out []store.LedgerEntry
	for _, e := range es {
		if e.Key != key {
			out = append(out, e)
		}
	}
	return out
}

// awaitAccepted asks the destination about its, accepted under ref by an
// earlier run, until the process is done (at most AcceptedWait). It returns
// one result per item; an item the answer leaves out counts as not sent.
func (r *run) awaitAccepted(ctx context.Context, ref string, its []*item) ([]destination.Result, error) {
	async, ok := r.Destination.(destination.Async)
	if !ok {
		// Another type of destination than the one that accepted them
		// (docs/guide.md#changing-a-sync): it knows nothing of the
		// process, and the records are settled as writes in doubt.
		return nil, failure.Wrap(failure.DestinationUnavailable, destination.ErrUnknownRef,
			"the ledger holds records accepted for processing by another destination than this one")
	}
	deadline := time.Now().Add(r.acceptedWait())
	every := r.pollInterval()
	for {
		res, done, err := async.Outcomes(r.destCtx(ctx), ref, records(its))
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, cancelled(ctx)
		case err != nil:
			return nil, destinationFailure(err)
		case done:
			return res, nil
		}
		if !time.Now().Before(deadline) {
			return nil, failure.New(failure.DestinationUnavailable, fmt.Sprintf(
				"the destination's process %s was still running after %s", ref, r.acceptedWait()))
		}
		if err := clock.Sleep(ctx, every); err != nil {
			return nil, cancelled(ctx)
		}
		every = min(2*every, maxPollInterval)
	}
}

func (r *run) acceptedWait() time.Duration {
	if r.AcceptedWait > 0 {
		return r.AcceptedWait
	}
	return DefaultAcceptedWait
}

func (r *run) pollInterval() time.Duration {
	if r.PollInterval > 0 {
		return r.PollInterval
	}
	return DefaultPollInterval
}

// resolution is what became of one accepted batch: the marks, the
// counters, and the records sent again that were accepted again. stuck
// means the batch was given up within this run (still processing past
// AcceptedWait, or sent again without an answer): its records stay in the
// ledger as they are, and the cursor stays before its page, so the next
// run reads the page again and asks.
type resolution struct {
	page    int64
	finish  []store.LedgerFinish
	delta   store.Counters
	batches []acceptedBatch
	stuck   bool
}

// poller asks the destination about the run's accepted batches in the
// background and hands each outcome to the checkpointer, which records it
// and moves the cursor once no earlier page waits.
type poller struct {
	r  *run
	cp *checkpointer

	mu      sync.Mutex
	batches []*acceptedBatch
	open    int           // batches handed over and not yet resolved or given up
	first   time.Duration // how soon a new batch is first asked about (firstWait)
	wake    chan struct{} // signalled when batches arrive or closing starts
	room    chan struct{} // closed and replaced when open shrinks
	closing bool
	give    time.Time // with closing: when to give up waiting
	// left counts the records of batches given up while their process ran
	// (the next run asks about them).
	left int
	// unasked is the error of the last question the destination did not
	// answer (Brevo's spent budget of process reads), nil once one is.
	unasked error

	stop chan struct{}
	done chan struct{}
}

func (r *run) startPoller(ctx context.Context, cp *checkpointer) *poller {
	pl := &poller{r: r, cp: cp, wake: make(chan struct{}, 1), room: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	cp.pl = pl
	go pl.loop(ctx)
	return pl
}

// add hands batches over (from the checkpointer, once their accepted marks
// are recorded). reserved batches were counted open already (reserve).
func (pl *poller) add(bs []acceptedBatch, reserved bool) {
	if len(bs) == 0 {
		return
	}
	now := time.Now()
	pl.mu.Lock()
	first := pl.firstWait()
	for i := range bs {
		b := bs[i]
		b.since, b.next, b.every = now, now.Add(first), max(first/2, minPollInterval)
		pl.batches = append(pl.batches, &b)
		if !reserved {
			pl.open++
		}
	}
	pl.mu.Unlock()
	pl.signal()
}

// reserve counts n batches open before they are handed over: records sent
// again and accepted again, which the checkpointer hands over once their
// marks are recorded. Until then the poller must not take itself for done.
func (pl *poller) reserve(n int) {
	pl.mu.Lock()
	pl.open += n
	pl.mu.Unlock()
}

// firstWait is how long after its hand-over a process is first asked
// about. It starts at PollInterval and follows what the processes of this
// run take: halved each time a process was done at its first question,
// half as long again each time it was not (learn). A destination's
// processes of one run take about as long as each other (Brevo: seconds; a
// fake: nothing), so most are asked about once or twice, which spares the
// account's rate limit, and records stay accepted (held in memory and in
// the ledger) no longer than needed. The caller holds mu.
func (pl *poller) firstWait() time.Duration {
	if pl.first <= 0 {
		pl.first = pl.r.pollInterval()
	}
	return pl.first
}

// immediate reports whether this run's processes have been ending at once
// (firstWait at its least): the write stage then asks about a page's
// processes itself, right after the write, and records the page with its
// outcomes, as a synchronous destination's; an accepted mark and a later
// settling would only cost two more ledger writes per record.
func (pl *poller) immediate() bool {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.first > 0 && pl.first <= minPollInterval
}

// settleNow asks once about the processes of out's accepted records and
// puts their outcomes in place of Accepted when a process is done with
// nothing to send again; the rest stays accepted, for the poller.
func (r *run) settleNow(ctx context.Context, pl *poller, out []outcome) []outcome {
	async, ok := r.Destination.(destination.Async)
	if !ok {
		return out
	}
	byRef := map[string][]int{}
	var refs []string
	for i, o := range out {
		if o.res.Outcome == destination.Accepted {
			if _, seen := byRef[o.res.Ref]; !seen {
				refs = append(refs, o.res.Ref)
			}
			byRef[o.res.Ref] = append(byRef[o.res.Ref], i)
		}
	}
	for _, ref := range refs {
		idx := byRef[ref]
		its := make([]*item, len(idx))
		for j, i := range idx {
			its[j] = out[i].it
		}
		res, done, err := async.Outcomes(r.destCtx(ctx), ref, records(its))
		if err != nil || !done {
			pl.mu.Lock()
			pl.learn(false)
			pl.mu.Unlock()
			return out // the poller asks again
		}
		byKey := make(map[string]destination.Result, len(res))
		settled := true
		for _, x := range res {
			byKey[x.Key] = x
			if x.Outcome != destination.Delivered && x.Outcome != destination.Rejected {
				settled = false // a failed process: the poller sends it again
			}
		}
		if !settled || len(res) != len(idx) {
			continue
		}
		for _, i := range idx {
			out[i].res = byKey[out[i].it.Key]
		}
	}
	return out
}

// learn adjusts firstWait after a batch ended: done tells whether it was at
// its first question. The caller holds mu.
func (pl *poller) learn(doneAtFirst bool) {
	f := pl.firstWait()
	if doneAtFirst {
		f /= 2
	} else {
		f += f / 2
	}
	pl.first = min(max(f, minPollInterval), maxPollInterval)
}

func (pl *poller) signal() {
	select {
	case pl.wake <- struct{}{}:
	default:
	}
}

// waitRoom waits until fewer than maxOpenBatches batches are open, so the
// records held in memory stay bounded while a destination processes
// slowly.
func (pl *poller) waitRoom(ctx context.Context) error {
	for {
		pl.mu.Lock()
		open, ch := pl.open, pl.room
		pl.mu.Unlock()
		if open < maxOpenBatches {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return cancelled(ctx)
		case <-pl.done:
			return nil
		}
	}
}

func (pl *poller) shrink(n int) {
	pl.mu.Lock()
	pl.open -= n
	close(pl.room)
	pl.room = make(chan struct{})
	pl.mu.Unlock()
}

func (pl *poller) loop(ctx context.Context) {
	defer close(pl.done)
	for {
		pl.mu.Lock()
		closing, give, open := pl.closing, pl.give, pl.open
		var due *acceptedBatch
		var idx int
		var next time.Time
		for i, b := range pl.batches {
			if due == nil || b.next.Before(due.next) {
				due, idx = b, i
			}
		}
		if due != nil {
			next = due.next
		}
		pl.mu.Unlock()
		if closing && (open == 0 || !time.Now().Before(give) || pl.r.drainRequested()) {
			return // a drain leaves what is still processing to the next run
		}
		if pl.cp.failed() != nil || ctx.Err() != nil {
			return
		}
		if due == nil || time.Now().Before(next) {
			wait := time.Second
			if due != nil {
				wait = max(next.Sub(time.Now()), time.Millisecond)
			}
			if closing {
				wait = min(wait, max(give.Sub(time.Now()), time.Millisecond))
			}
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-pl.wake:
			case <-pl.stop:
				t.Stop()
				return
			case <-ctx.Done():
				t.Stop()
				return
			}
			t.Stop()
			continue
		}
		res, ok := pl.poll(ctx, due)
		if !ok {
			continue // polled again later
		}
		pl.mu.Lock()
		pl.batches = append(pl.batches[:idx], pl.batches[idx+1:]...)
		if !res.stuck {
			pl.learn(due.polls == 1)
		} else {
			pl.left += len(due.items)
		}
		pl.mu.Unlock()
		pl.reserve(len(res.batches))
		pl.cp.submit(checkpointJob{page: res.page, resolved: res})
		pl.shrink(1)
	}
}

// poll asks about b once. ok is false when the process is still running
// and b is rescheduled.
func (pl *poller) poll(ctx context.Context, b *acceptedBatch) (_ *resolution, ok bool) {
	r := pl.r
	out := &resolution{page: b.page}
	async, isAsync := r.Destination.(destination.Async)
	if !isAsync {
		out.stuck = true
		return out, true
	}
	b.polls++
	var n atomic.Int64
	res, done, err := async.Outcomes(destination.WithRequestCount(r.destCtx(ctx), &n), b.ref, records(b.items))
	b.requests += n.Load()
	out.delta.Requests = b.requests
	now := time.Now()
	if ctx.Err() == nil {
		pl.mu.Lock()
		pl.unasked = err
		pl.mu.Unlock()
	}
	if err != nil || !done {
		if now.Sub(b.since) >= r.acceptedWait() || ctx.Err() != nil {
			if err != nil && ctx.Err() == nil {
				r.Logger.Warn("the destination could not be asked about accepted records; the next run asks again",
					"sync", r.Sync.ID, "run", r.rec.ID, "page", b.page, "records", len(b.items), "process", b.ref,
					"code", failure.CodeOf(err), "error", failure.Detail(err))
			} else {
				r.Logger.Warn("the destination was still processing accepted records; the next run asks again",
					"sync", r.Sync.ID, "run", r.rec.ID, "page", b.page, "records", len(b.items), "process", b.ref)
			}
			out.stuck = true
			return out, true
		}
		b.next = now.Add(b.every)
		b.every = min(2*b.every, maxPollInterval)
		return nil, false
	}
	byKey := make(map[string]destination.Result, len(res))
	for _, x := range res {
		byKey[x.Key] = x
	}
	var again []*item
	for _, it := range b.items {
		x := byKey[it.Key]
		switch x.Outcome {
		case destination.Delivered:
			out.finish = r.appendDeliveredMarks(out.finish, it, x.Ref, "")
			out.delta.Written++
		case destination.Rejected:
			out.finish = r.appendRejected(out.finish, it, x.Message)
			out.delta.Rejected++
		default: // the process failed whole (or left the record out)
			again = append(again, it)
		}
	}
	if len(again) > 0 {
		pl.sendAgain(ctx, b, again, out)
	}
	r.Logger.Debug("accepted records settled", "sync", r.Sync.ID, "run", r.rec.ID, "page", b.page,
		"delivered", out.delta.Written, "rejected", out.delta.Rejected, "sent again", len(again))
	return out, true
}

// sendAgain writes records whose process failed once more (docs/guide.md#the-ledger-and-its-retention: they
// were not delivered). They are claimed again first (released, then
// claimed under this run's fence, before the write), so a write whose
// answer is lost leaves them in doubt for the next run, as any claim.
// Records accepted again become a new batch. After maxImportTries failed
// processes they are left rejected, and sent again by the next run (read
// again by identity on a keyset source).
func (pl *poller) sendAgain(ctx context.Context, b *acceptedBatch, again []*item, out *resolution) {
	r := pl.r
	if b.tries+1 >= maxImportTries {
		for _, it := range again {
			out.finish = r.appendRejected(out.finish, it,
				fmt.Sprintf("the destination's import process failed %d times; sent again on the next run", b.tries+1))
			out.delta.Rejected++
		}
		return
	}
	// Until this succeeds nothing was sent again: the records stay accepted
	// under the failed process, which the next run asks.
	claim := func() error {
		if err := r.ensureLease(ctx); err != nil {
			return err
		}
		rel := make([]store.LedgerFinish, len(again))
		keys := make([]string, len(again))
		results := make([]string, len(again))
		for i, it := range again {
			rel[i] = store.LedgerFinish{Key: it.Key, State: store.LedgerReleased}
			keys[i], results[i] = it.Key, r.claimResult(it)
		}
		if err := r.mark(ctx, rel); err != nil {
			return err
		}
		if err := r.recordEpoch(ctx); err != nil {
			return err
		}
		now := r.Clock.Now()
		for _, it := range again {
			it.writeAt = now
		}
		return r.Store.LedgerClaim(ctx, store.LedgerClaimParams{
			SyncID: r.Sync.ID, Fence: r.lease.Fence(), RunID: r.rec.ID, Keys: keys, Results: results})
	}
	if err := claim(); err != nil {
		out.stuck = true
		return
	}
	outcomes, requests, err := r.write(ctx, again, time.Now())
	out.delta.Requests += requests
	marks, batches, od := r.outcomes(b.page, outcomes)
	out.finish = append(out.finish, marks...)
	out.delta.Add(od)
	for i := range batches {
		batches[i].tries = b.tries + 1
	}
	out.batches = batches
	if err != nil || len(outcomes) < len(again) {
		// Records without an answer are pending under this run's fence:
		// in doubt for the next run, which reads the page again.
		out.stuck = true
	}
}

// lastUnasked is the error of the last question about an accepted batch
// the destination did not answer, if no later one was answered: why
// batches left open were not settled, when it is not that they still ran.
func (pl *poller) lastUnasked() error {
	pl.mu.Lock()
	defer pl.mu.Unlock()
	return pl.unasked
}

// close stops the poller. With wait, it first waits for the open batches,
// at most AcceptedWait; what is still open then stays accepted in the
// ledger (the cursor is left before it) for the next run. It returns how
// many batches were left open, and how many records those and the batches
// given up earlier hold (left accepted for the next run).
func (pl *poller) close(wait bool) (open, left int) {
	pl.mu.Lock()
	pl.closing = true
	pl.give = time.Now()
	if wait {
		pl.give = pl.give.Add(pl.r.acceptedWait())
	}
	pl.mu.Unlock()
	pl.signal()
	if !wait {
		close(pl.stop)
	}
	<-pl.done
	pl.mu.Lock()
	defer pl.mu.Unlock()
	left = pl.left
	for _, b := range pl.batches {
		left += len(b.items)
	}
	return pl.open, left
}
