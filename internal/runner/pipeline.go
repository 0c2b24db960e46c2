package runner

import (
	"context"
	"errors"
	"runtime/trace"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
)

// prepared is a page read from the source with its records mapped and
// hashed (steps 2 and 3 of docs/guide.md#what-a-run-does up to the ledger read), or the error that
// ended the reading.
type prepared struct {
	page  source.Page
	items []item
	read  int64 // records of the run's slice on the page
	dups  int64 // slots seen twice on the page (kept once, counted as replayed)
	again bool  // rows read again by identity (rejected on earlier runs)
	err   error // a *failure.Error
}

// prefetcher reads and keys the pages ahead of their delivery, one page at
// a time, in order; it holds at most one prepared page while the run
// delivers another, so memory stays bounded by the page size. The pages of
// rows read again by identity (docs/guide.md#the-ledger-and-its-retention, rejected records) come first; they
// leave the cursor where it is.
type prefetcher struct {
	out    chan prepared
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *run) startPrefetch(ctx context.Context, cursor string, again [][]source.Record) *prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	pf := &prefetcher{out: make(chan prepared), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pf.done)
		for _, recs := range again {
			page := source.Page{Cursor: cursor, Records: recs, Next: cursor}
			p := prepared{page: page, again: true}
			p.items, p.read, p.dups, p.err = r.keys(page)
			select {
			case pf.out <- p:
			case <-ctx.Done():
				return
			}
			if p.err != nil {
				return
			}
		}
		resumed := cursor != "" // the pass starts at a saved cursor
		for {
			var p prepared
			reg := trace.StartRegion(ctx, "prefetch.read")
			page, err := r.readPage(ctx, cursor)
			reg.End()
			if resumed && r.restartable(ctx, err) {
				// The source changed under the saved cursor (an export
				// replaced while a run was part-way): read it from its
				// start, which with an identity sends only what changed
				// (docs/recovery.md#source_changed_during_run).
				r.Logger.Warn("the source changed since the saved cursor was taken (a file rewritten or replaced while a run was part-way): reading it from its start; rows delivered with these values are not sent again",
					"sync", r.Sync.ID, "run", r.rec.ID)
				r.seen.restart()
				cursor, resumed = "", false
				continue
			}
			resumed = false
			if err != nil {
				p.err = sourceFailure(ctx, err)
			} else {
				if r.remover != nil && page.End {
					// A mirror reads the whole source every run: which rows
					// are gone is known only to a read from the start.
					page.Next = ""
				}
				p.page = page
				reg := trace.StartRegion(ctx, "prefetch.keys")
				p.items, p.read, p.dups, p.err = r.keys(page)
				reg.End()
				if p.err == nil {
					r.seen.add(p.items)
				}
			}
			reg = trace.StartRegion(ctx, "prefetch.wait.ledger")
			select {
			case pf.out <- p:
			case <-ctx.Done():
				reg.End()
				return
			}
			reg.End()
			if p.err != nil || page.End {
				return
			}
			cursor = page.Next
		}
	}()
	return pf
}

// restartable reports whether err, the first read at a saved cursor, lets
// the pass start over from the source's start instead of failing: the
// source changed under the cursor (source.ErrChanged), and rows are known
// by an identity, so the ledger skips those delivered with their values.
// A partition's slice starts over too: its run's coordinator pinned the
// source it reads now, and every write is checked against that pin
// (BeforeWrite), so a source that changes again during the run is still
// refused there. Positional keys keep the failure (without an identity a
// row's key is its place, and every row after a change would be new).
func (r *run) restartable(ctx context.Context, err error) bool {
	return ctx.Err() == nil && errors.Is(err, source.ErrChanged) && r.Sync.Identity != ""
}

// readNoticeAfter is how long a page read may go unanswered before the
// run says it is still waiting.
const readNoticeAfter = 30 * time.Second

// readPage reads the page at cursor: of the run's slice only when the
// source can read one (source.Slicer), else of the whole source. A read
// that goes unanswered for readNoticeAfter is told once, and one that goes
// unanswered for the sync's source timeout fails the run (readWithin).
func (r *run) readPage(ctx context.Context, cursor string) (page source.Page, err error) {
	notice := clock.AfterFunc(r.Clock, readNoticeAfter, func() {
		r.Logger.Warn("the source has not answered a page read yet; still waiting",
			"sync", r.Sync.ID, "run", r.rec.ID, "source", r.Source.ID(), "waited", readNoticeAfter.String(),
			"gives_up_after", timeoutWords(r.Sync.SourceTimeout), "likely", source.ReadHint)
	})
	defer notice.Stop()
	err = r.readWithin(ctx, "read a page", func(ctx context.Context) (err error) {
		if sl, ok := r.Source.(source.Slicer); ok && r.Slice.N > 1 {
			page, err = sl.ReadSlice(ctx, r.Slice, cursor, r.Sync.PageSize)
		} else {
			page, err = r.Source.ReadPage(ctx, cursor, r.Sync.PageSize)
		}
		return err
	})
	return page, err
}

// timeoutWords is a source timeout as the run's messages show it.
func timeoutWords(d time.Duration) string {
	if d <= 0 {
		return "never (source.timeout: 0s)"
	}
	return d.String()
}

// readWithin runs read, one read of the source named by what, under the
// sync's source timeout on the run's clock (source.ReadWithin).
func (r *run) readWithin(ctx context.Context, what string, read func(context.Context) error) error {
	return source.ReadWithin(ctx, r.Clock, r.Sync.SourceTimeout, r.Source.ID(), what, read)
}

// stop ends the reading and waits for it: the source is not read after the
// run's loop returned.
func (pf *prefetcher) stop() {
	pf.cancel()
	<-pf.done
}

// writer is the write stage: it writes the claimed pages in order, one at
// a time, and hands each written page's marks and checkpoint to the
// checkpointer, so the next page's write does not wait for them. Its queue
// holds one claimed page, and the run's goroutine blocks handing over the
// next, so at most two claimed pages wait for it: a claim that waits for
// the store's write connection does not hold the writes up.
//
// A page is in flight from its hand-over until its marks are recorded (or
// dropped after a failure) and the records the destination accepted for
// later are settled: until then the ledger does not answer with its
// outcomes, so the ledger stage waits (waitResolved) before it reads a slot
// of a page in flight. It also waits before it claims a record whose
// destination handle (its e-mail, say) a page in flight writes to under
// another slot: two writes to one contact in flight at once may land in
// either order (Brevo's imports end out of order), and the one read last
// must land last.
type writer struct {
	in   chan claimed
	done chan struct{}
	cp   *checkpointer

	mu       sync.Mutex
	handed   int64              // pages handed over
	marked   int64              // pages whose marks are recorded (or dropped after a failure)
	slots    map[int64][]string // the slots of the pages in flight, by page
	inFlight map[string]int     // how many pages in flight hold each slot
	handles  map[int64][]string // the destination handles of the pages in flight, by page
	toHandle map[string]int     // how many pages in flight write to each handle
	// held are the handles of pages given up with writes still processing
	// (resolution.stuck): another slot's write to one of them waits for
	// the next run, which learns first what became of those.
	held   map[string]bool
	notify chan struct{}  // closed when marked grows or a page leaves slots
	cum    store.Counters // write-stage counters of the pages written
	err    error          // the first failure; later pages are dropped
}

func (r *run) startWriter(ctx context.Context, cp *checkpointer, pl *poller) *writer {
	w := &writer{in: make(chan claimed, 1), done: make(chan struct{}), cp: cp,
		slots: map[int64][]string{}, inFlight: map[string]int{},
		handles: map[int64][]string{}, toHandle: map[string]int{}, notify: make(chan struct{})}
	cp.w = w
	depth := 1
	if p, ok := r.Destination.(destination.Pipelined); ok && p.PagesInFlight() > 1 {
		depth = p.PagesInFlight()
	}
	// A page holds a turn from before its write until its outcomes are
	// handed to the checkpointer (or it is dropped): with depth 1 the next
	// page is sent only then, as one loop would; with more, the next
	// page's write overlaps this one's answer and settling.
	turns := make(chan struct{}, depth)
	queue := make(chan *sending, depth)
	go func() {
		defer close(queue)
		for c := range w.in {
			reg := trace.StartRegion(ctx, "write.wait.turn")
			turns <- struct{}{}
			reg.End()
			s := &sending{c: c, done: make(chan struct{})}
			switch {
			case w.failed() != nil || cp.failed() != nil:
				// Nothing more is written after a failure. A dropped page
				// was never sent: its claims are released (if the fence
				// still allows; else they stay pending, and the next run
				// finds nothing of them landed).
				s.drop = true
			case r.drainRequested():
				// A drain finishes the page on the wire; pages the ledger
				// stage claimed ahead of it are released unsent, so a
				// stop takes one page's write, not three
				// (docs/guide.md#stopping-a-run). The run is then
				// interrupted, also when the ledger stage had already
				// handed over the source's last page: a run whose pages
				// were dropped did not succeed.
				s.drop = true
				w.mu.Lock()
				if w.err == nil {
					w.err = failure.New(failure.Interrupted, "")
				}
				w.mu.Unlock()
			default:
				if err := pl.waitRoom(ctx); err != nil {
					w.mu.Lock()
					w.err = err
					w.mu.Unlock()
					s.drop = true
				}
			}
			if s.drop || len(c.send) == 0 {
				close(s.done)
				queue <- s
				continue
			}
			// No write without a lease known to be ours right now.
			if err := r.ensureLease(ctx); err != nil {
				s.err = err
				close(s.done)
				queue <- s
				continue
			}
			s.sent = true
			queue <- s
			go func() {
				defer close(s.done)
				reg := trace.StartRegion(ctx, "write.call")
				s.out, s.requests, s.err = r.write(ctx, c.send, c.claimedAt)
				reg.End()
			}()
		}
	}()
	go func() {
		defer close(w.done)
		for s := range queue {
			w.settle(ctx, r, s, pl)
			<-turns
		}
	}()
	return w
}

// sending is a page handed from the writer's sending goroutine to its
// settling one, in page order.
type sending struct {
	c        claimed
	drop     bool          // never sent: released (see drop)
	sent     bool          // its write was started
	done     chan struct{} // closed when the write returned (or was never started)
	out      []outcome
	requests int64
	err      error
}

// settle waits for s's write and hands its outcomes to the checkpointer.
func (w *writer) settle(ctx context.Context, r *run, s *sending, pl *poller) {
	c := s.c
	if s.drop {
		w.drop(c)
		return
	}
	reg := trace.StartRegion(ctx, "settle.wait.write")
	<-s.done
	reg.End()
	earlier := w.failed() // a page written while an earlier one failed records its marks, not its cursor
	delta, finish, batches, err := r.writeStage(ctx, c, s, pl)
	if err == nil && ctx.Err() != nil {
		// Cancelled once the write was out: like a worker that died
		// there, the page's claims stay pending, settled by the next
		// run.
		err, finish, batches = cancelled(ctx), nil, nil
	}
	w.mu.Lock()
	w.cum.Add(delta)
	if err != nil && w.err == nil {
		w.err = err
	}
	run := r.rec // ID, sync, fence, start: fixed while pages run
	run.Counters = c.ledgerCum
	run.Counters.Add(w.cum)
	run.Pages = c.pageNo
	w.mu.Unlock()
	if err != nil && finish == nil {
		w.markDone(c.pageNo)
		w.resolvedDone(c.pageNo)
		return
	}
	reg = trace.StartRegion(ctx, "settle.wait.checkpointer")
	defer reg.End()
	w.cp.submit(checkpointJob{page: c.pageNo, next: c.next, finish: finish, save: err == nil && earlier == nil, run: run,
		accepted: batches, row: store.RunPage{
			RunID:    r.rec.ID,
			Page:     c.pageNo,
			Read:     c.delta.Read,
			Claimed:  int64(len(c.send)),
			Sent:     delta.Written + delta.Settled + delta.Skipped + c.delta.Written + c.delta.Skipped, // a record read back after a lost answer was sent by this page's call; one the write mode skipped too
			Replayed: c.delta.Replayed,
			Rejected: delta.Rejected + c.delta.Rejected,
			InDoubt:  c.delta.InDoubt + delta.InDoubt,
			Requests: delta.Requests + c.delta.Requests,
		}})
}

// drop gives up a claimed page that was never sent: its claims are
// released with a marks-only job.
func (w *writer) drop(c claimed) {
	if len(c.send) == 0 {
		w.markDone(c.pageNo)
		w.resolvedDone(c.pageNo)
		return
	}
	rel := make([]store.LedgerFinish, len(c.send))
	for i, it := range c.send {
		rel[i] = store.LedgerFinish{Key: it.Key, State: store.LedgerReleased}
	}
	w.cp.submit(checkpointJob{page: c.pageNo, finish: rel})
}

// submit hands a claimed page over; it waits while the previous page is
// being written.
func (w *writer) submit(c claimed) {
	slots := make([]string, len(c.send))
	w.mu.Lock()
	for i, it := range c.send {
		slots[i] = it.slot
		w.inFlight[it.slot]++
	}
	for _, h := range c.handles {
		w.toHandle[h]++
	}
	if len(c.handles) > 0 {
		w.handles[c.pageNo] = c.handles
	}
	w.handed++
	w.slots[c.pageNo] = slots
	w.mu.Unlock()
	w.in <- c
}

// markDone records that page's marks are recorded or dropped.
func (w *writer) markDone(page int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.marked++
	w.wakeLocked()
}

// resolvedDone records that page is settled: its marks recorded and its
// accepted records' outcomes known (or given up within this run). It is no
// longer in flight.
func (w *writer) resolvedDone(page int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, slot := range w.slots[page] {
		if w.inFlight[slot]--; w.inFlight[slot] <= 0 {
			delete(w.inFlight, slot)
		}
	}
	delete(w.slots, page)
	for _, h := range w.handles[page] {
		if w.toHandle[h]--; w.toHandle[h] <= 0 {
			delete(w.toHandle, h)
		}
	}
	delete(w.handles, page)
	w.wakeLocked()
}

func (w *writer) wakeLocked() {
	close(w.notify)
	w.notify = make(chan struct{})
}

// writing reports whether slot belongs to a page in flight.
func (w *writer) writing(slot string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inFlight[slot] > 0
}

// giveUp records that page was given up with writes still processing: its
// handles stay held for the rest of the run. They are in flight until the
// page is resolved, so a page that writes to one waits for that first
// (writingTo) and is then held back (holding).
func (w *writer) giveUp(page int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range w.handles[page] {
		if w.held == nil {
			w.held = map[string]bool{}
		}
		w.held[h] = true
	}
}

// holding reports whether a page given up this run wrote to one of handles.
func (w *writer) holding(handles []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return anyKey(w.held, handles)
}

// writingTo reports whether a page in flight writes to one of handles.
func (w *writer) writingTo(handles []string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return anyKey(w.toHandle, handles) // a handle leaves toHandle at its last page's resolution
}

// anyKey reports whether m holds one of keys.
func anyKey[V any](m map[string]V, keys []string) bool {
	if len(m) == 0 {
		return false
	}
	for _, k := range keys {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

// waitIdle waits until every page handed over is written and its marks
// recorded (accepted records may still be processed by the destination).
// It returns the first failure of the write stage or the checkpointer
// instead, if any.
func (w *writer) waitIdle(ctx context.Context) error {
	return w.wait(ctx, func() bool { return w.marked >= w.handed })
}

// waitResolved waits until no page is in flight: written, marked, and its
// accepted records settled.
func (w *writer) waitResolved(ctx context.Context) error {
	return w.wait(ctx, func() bool { return w.marked >= w.handed && len(w.slots) == 0 })
}

func (w *writer) wait(ctx context.Context, done func() bool) error {
	for {
		w.mu.Lock()
		ok, ch, err := done(), w.notify, w.err
		w.mu.Unlock()
		if err == nil {
			err = w.cp.failed()
		}
		switch {
		case err != nil:
			return err
		case ok:
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return cancelled(ctx)
		}
	}
}

// failed is the write stage's first failure so far, or nil.
func (w *writer) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// close waits for the page being written and returns the write-stage
// counters and the first failure.
func (w *writer) close() (store.Counters, error) {
	close(w.in)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cum, w.err
}

// checkpointJob is steps 5 and 6 of docs/guide.md#what-a-run-does for one written page, or the
// settling of records of a page the destination had accepted (resolved).
type checkpointJob struct {
	page     int64
	next     string               // the cursor after the page
	finish   []store.LedgerFinish // the page's marks; nil when it sent nothing
	save     bool                 // save the checkpoint after the marks (false: the page failed)
	run      store.Run            // the run as of the page's end (Pages = page)
	row      store.RunPage
	accepted []acceptedBatch // the page's records the destination is still processing
	resolved *resolution     // set on a settling job (and nothing else is)
	barrier  chan struct{}   // set on a barrier job (and nothing else is): closed when reached
}

// checkpointGrace bounds one checkpoint once handed over. A checkpoint is
// not cut short by the run's cancellation: its page is delivered (the write
// returned before the cancellation), and recording its outcomes and cursor
// spares the next run a read-back and a replay.
const checkpointGrace = 5 * time.Second

// checkpointer records the written pages' marks and saves their cursors, in
// order, one job at a time (marks and checkpoint in one transaction), while
// the run writes the next page. Its queue holds one job. The cursor moves
// only past pages whose every record is settled: a page whose records the
// destination is still processing (accepted) holds it back until the
// poller's settling job for it, so a run that dies leaves the cursor
// before it (docs/guide.md#the-ledger-and-its-retention).
type checkpointer struct {
	jobs chan checkpointJob
	done chan struct{}
	w    *writer // set by startWriter
	pl   *poller // set by startPoller

	// The loop's own state.
	saved string                  // the cursor saved last
	order []cursorAt              // checkpointed pages the cursor has not passed, in page order
	open  map[int64]int           // page -> its accepted batches not yet settled
	stuck map[int64]bool          // pages with a batch given up: the cursor stays before them
	rows  map[int64]store.RunPage // timeline rows of pages with open batches
	base  store.Run               // the run as of the last page checkpointed (without extra)
	// What settle took in since the last checkpoint, for the next one.
	carry        []store.LedgerFinish
	carried      []acceptedBatch // sent again and accepted again: to the poller once recorded
	carriedPages map[int64]bool

	mu    sync.Mutex
	err   error          // the first failure; later jobs are dropped
	last  int64          // the last page checkpointed
	extra store.Counters // counters of settled accepted records
}

type cursorAt struct {
	page int64
	next string
}

func (r *run) startCheckpointer(ctx context.Context, cursor string) *checkpointer {
	cp := &checkpointer{jobs: make(chan checkpointJob, 1), done: make(chan struct{}), saved: cursor,
		open: map[int64]int{}, stuck: map[int64]bool{}, rows: map[int64]store.RunPage{}, base: r.rec}
	go func() {
		defer close(cp.done)
		for {
			job, ok := cp.next(ctx, r)
			if !ok {
				cp.flush(ctx, r)
				return
			}
			switch {
			case job.resolved != nil:
				cp.settle(job.resolved)
				continue
			case job.barrier != nil:
				cp.flush(ctx, r)
				close(job.barrier)
				continue
			case !job.save || cp.failed() != nil:
				cp.flush(ctx, r)
			}
			if cp.failed() != nil {
				// No checkpoint after a failure; a written page's marks are
				// still recorded if the fence allows (see below).
				if job.finish != nil {
					jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointGrace)
					_ = r.mark(jctx, job.finish)
					cancel()
				}
				cp.w.markDone(job.page)
				cp.w.resolvedDone(job.page)
				continue
			}
			// A written page's marks and checkpoint are one transaction,
			// with what was settled of earlier pages' accepted records
			// since the last checkpoint; a page that failed (every record
			// refused) has only its marks.
			var err error
			switch {
			case job.save:
				cp.order = append(cp.order, cursorAt{job.page, job.next})
				if n := len(job.accepted); n > 0 {
					cp.open[job.page] = n
					cp.rows[job.page] = job.row
				}
				cp.base = job.run
				err = cp.commit(ctx, r, job.page, &job.row, job.finish, job.accepted)
			case job.finish != nil:
				err = r.mark(ctx, job.finish)
			}
			cp.w.markDone(job.page)
			if err != nil {
				delete(cp.open, job.page)
			}
			if cp.open[job.page] == 0 {
				cp.w.resolvedDone(job.page)
			}
			cp.mu.Lock()
			switch {
			case err != nil:
				cp.err = err
			case job.save:
				cp.last = job.page
			}
			cp.mu.Unlock()
		}
	}()
	return cp
}

// carryFor bounds how long settled records wait for the next page's
// checkpoint to ride along with before they get one of their own.
const carryFor = 50 * time.Millisecond

// next returns the next job; ok is false once the queue is closed and
// empty. While settled records are carried, it waits at most carryFor for
// a job and then records them alone.
func (cp *checkpointer) next(ctx context.Context, r *run) (checkpointJob, bool) {
	for len(cp.carriedPages) > 0 {
		t := time.NewTimer(carryFor)
		select {
		case job, ok := <-cp.jobs:
			t.Stop()
			return job, ok
		case <-t.C:
			cp.flush(ctx, r)
		}
	}
	job, ok := <-cp.jobs
	return job, ok
}

// advance returns the cursor to save now: the next cursor of the last page
// before which every page is settled, and how many of cp.order it passes.
func (cp *checkpointer) advance() (string, int) {
	cursor, n := cp.saved, 0
	for _, p := range cp.order {
		if cp.open[p.page] > 0 || cp.stuck[p.page] {
			break
		}
		cursor = p.next
		n++
	}
	return cursor, n
}

// settle takes in what became of an accepted batch. Its marks are carried
// to the next checkpoint (that of the next page, if one is queued: one
// transaction for both; else flush's own), with the cursor moved past its
// page if that page was the one holding it back.
func (cp *checkpointer) settle(res *resolution) {
	page := res.page
	cp.open[page] += len(res.batches) - 1
	if res.stuck {
		cp.stuck[page] = true
		cp.w.giveUp(page)
	}
	cp.carry = append(cp.carry, res.finish...)
	cp.carried = append(cp.carried, res.batches...)
	if cp.carriedPages == nil {
		cp.carriedPages = map[int64]bool{}
	}
	cp.carriedPages[page] = true
	cp.mu.Lock()
	cp.extra.Add(res.delta)
	cp.mu.Unlock()
	row := cp.rows[page]
	row.Sent += res.delta.Written
	row.Rejected += res.delta.Rejected
	row.Requests += res.delta.Requests
	cp.rows[page] = row
}

// flush records what settle carries, if anything, in a checkpoint of its
// own.
func (cp *checkpointer) flush(ctx context.Context, r *run) {
	if len(cp.carriedPages) == 0 {
		return
	}
	if cp.failed() != nil {
		if len(cp.carry) > 0 {
			jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointGrace)
			_ = r.mark(jctx, cp.carry)
			cancel()
		}
		if len(cp.carried) > 0 {
			cp.pl.shrink(len(cp.carried)) // reserved, never to be handed over
		}
		cp.released()
		return
	}
	if err := cp.commit(ctx, r, 0, nil, nil, nil); err != nil {
		cp.mu.Lock()
		cp.err = err
		cp.mu.Unlock()
	}
}

// commit saves one checkpoint: finish and the carried marks, the cursor as
// far as every page before it is settled, the run (as of its last page,
// with the settled records' counters), the page's row (page 0: none) and
// the carried pages' rows. On success the accepted batches (the page's and
// those sent again) go to the poller. Either way the carried pages are
// released to the ledger stage once nothing of theirs is open.
func (cp *checkpointer) commit(ctx context.Context, r *run, page int64, row *store.RunPage, finish []store.LedgerFinish, accepted []acceptedBatch) error {
	all := finish
	if len(cp.carry) > 0 {
		all = append(append(make([]store.LedgerFinish, 0, len(finish)+len(cp.carry)), finish...), cp.carry...)
	}
	var more []store.RunPage
	for p := range cp.carriedPages {
		if p != page {
			more = append(more, cp.rows[p])
		}
	}
	cursor, passed := cp.advance()
	run := cp.base
	cp.mu.Lock()
	run.Counters.Add(cp.extra)
	cp.mu.Unlock()
	jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointGrace)
	defer cancel()
	err := r.checkpoint(jctx, page, cursor, run, row, all, more)
	if err != nil && all != nil {
		// The checkpoint failed (a lost lease, Redis gone), and the marks
		// went with it. They are fenced, not leased: while no other worker
		// has registered a newer fence and the store answers, they are
		// still ours to record, and spare the next run a read-back.
		_ = r.mark(jctx, all)
	}
	if err == nil {
		cp.saved, cp.order = cursor, cp.order[passed:]
		cp.pl.add(accepted, false)
		cp.pl.add(cp.carried, true)
	} else if len(cp.carried) > 0 {
		cp.pl.shrink(len(cp.carried)) // reserved, never to be handed over
	}
	cp.released()
	return err
}

// released hands the carried pages with nothing open back to the ledger
// stage and empties the carry.
func (cp *checkpointer) released() {
	for p := range cp.carriedPages {
		if cp.open[p] == 0 {
			delete(cp.open, p)
			delete(cp.rows, p)
			cp.w.resolvedDone(p)
		}
	}
	cp.carry, cp.carried, cp.carriedPages = nil, nil, nil
}

// submit hands a job over; it waits while the queue is full.
func (cp *checkpointer) submit(job checkpointJob) { cp.jobs <- job }

// barrier waits until every job handed over so far is done (their accepted
// batches handed to the poller).
func (cp *checkpointer) barrier() {
	b := make(chan struct{})
	cp.submit(checkpointJob{barrier: b})
	<-b
}

// failed is the first checkpoint failure so far, or nil.
func (cp *checkpointer) failed() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.err
}

// close waits for the outstanding jobs and returns the last page
// checkpointed, the counters of settled accepted records and the first
// failure.
func (cp *checkpointer) close() (last int64, extra store.Counters, err error) {
	close(cp.jobs)
	<-cp.done
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.last, cp.extra, cp.err
}

// checkpoint renews and verifies the lease, then records finish and saves
// cursor, the run's progress and the page's timeline row in one fenced
// transaction (with the renewal in it when the lease lives in the same
// store), and reports progress.
func (r *run) checkpoint(ctx context.Context, page int64, cursor string, run store.Run, row *store.RunPage, finish []store.LedgerFinish, more []store.RunPage) error {
	p := store.CheckpointParams{
		Cursor:    store.SaveCursorParams{SyncID: r.Sync.ID, Value: cursor, Payload: r.payload, Fence: r.lease.Fence(), RunID: r.rec.ID},
		Run:       run,
		Page:      row,
		MorePages: more,
		Finish:    finish,
	}
	// A lease kept in the store the run checkpoints to is renewed and
	// verified inside the checkpoint's transaction (one commit, not two);
	// any other (Redis) first.
	inStore := false
	if ls := r.lease.Store(); ls != nil && any(ls) == any(r.Store) {
		inStore = true
		p.Lease = &store.CheckpointLease{Token: r.lease.Token(), TTL: r.LeaseTTL}
	} else {
		reg := trace.StartRegion(ctx, "checkpoint.renew")
		err := r.renew(ctx)
		reg.End()
		if err != nil {
			return err
		}
	}
	if r.Hooks.BeforeCursorSave != nil {
		r.Hooks.BeforeCursorSave(ctx, page)
	}
	asked := r.Clock.Now()
	if row != nil {
		row.CheckpointedAt = asked
	}
	if err := r.recordEpoch(ctx); err != nil {
		return err
	}
	reg := trace.StartRegion(ctx, "checkpoint.store")
	err := r.Store.Checkpoint(ctx, p)
	reg.End()
	if err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			return failure.Wrap(failure.LeaseLost, err, SentenceLeaseLost)
		}
		if finish != nil {
			return storeFailure(ctx, err, "mark delivered records and save the cursor")
		}
		return storeFailure(ctx, err, "save the cursor")
	}
	if inStore {
		r.lease.RenewedAt(asked)
	}
	if row != nil {
		r.Logger.Debug("page checkpointed", "sync", r.Sync.ID, "run", r.rec.ID, "page", page,
			"read", row.Read, "sent", row.Sent, "replayed", row.Replayed)
	}
	r.reportRun(run, cursor, false)
	return nil
}
