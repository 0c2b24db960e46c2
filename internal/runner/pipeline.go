package runner

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
)

// prepared is a page read from the source with its records mapped and
// keyed (steps 2 and 3 of SPEC §2 up to the ledger read), or the error that
// ended the reading.
type prepared struct {
	page source.Page
	recs []destination.Record
	read int64 // records of the run's slice on the page
	dups int64 // keys seen twice on the page (kept once, counted as replayed)
	err  error // a *failure.Error
}

// prefetcher reads and keys the pages ahead of their delivery, one page at
// a time, in order; it holds at most one prepared page while the run
// delivers another, so memory stays bounded by the page size.
type prefetcher struct {
	out    chan prepared
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *run) startPrefetch(ctx context.Context, cursor string) *prefetcher {
	ctx, cancel := context.WithCancel(ctx)
	pf := &prefetcher{out: make(chan prepared), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(pf.done)
		for {
			var p prepared
			page, err := r.Source.ReadPage(ctx, cursor, r.Sync.PageSize)
			if err != nil {
				p.err = sourceFailure(ctx, err)
			} else {
				p.page = page
				p.recs, p.read, p.dups, p.err = r.keys(page)
			}
			select {
			case pf.out <- p:
			case <-ctx.Done():
				return
			}
			if p.err != nil || page.End {
				return
			}
			cursor = page.Next
		}
	}()
	return pf
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
// dropped after a failure): until then the ledger does not answer with its
// outcomes, so the ledger stage waits (waitIdle) before it reads a key of a
// page in flight.
type writer struct {
	in   chan claimed
	done chan struct{}
	cp   *checkpointer

	mu     sync.Mutex
	handed int64                         // pages handed over
	marked int64                         // pages whose marks are recorded (or dropped after a failure)
	keys   map[int64]map[string]struct{} // the keys of the pages in flight, by page
	notify chan struct{}                 // closed when marked grows
	cum    store.Counters                // write-stage counters of the pages written
	err    error                         // the first failure; later pages are dropped
}

func (r *run) startWriter(ctx context.Context, cp *checkpointer) *writer {
	w := &writer{in: make(chan claimed, 1), done: make(chan struct{}), cp: cp,
		keys: map[int64]map[string]struct{}{}, notify: make(chan struct{})}
	cp.w = w
	go func() {
		defer close(w.done)
		for c := range w.in {
			if w.failed() != nil || cp.failed() != nil {
				// Nothing more is written after a failure. A dropped page's
				// claims stay pending under this run's fence: the next run
				// finds them in doubt and settles them (SPEC §4).
				w.markDone(c.pageNo)
				continue
			}
			delta, finish, err := r.writeStage(ctx, c)
			if err == nil && ctx.Err() != nil {
				// Cancelled once the write was out: like a worker that died
				// there, the page's claims stay pending, settled by the next
				// run.
				err, finish = cancelled(ctx), nil
			}
			w.mu.Lock()
			w.cum.Add(delta)
			if err != nil {
				w.err = err
			}
			run := r.rec // ID, sync, fence, start: fixed while pages run
			run.Counters = c.ledgerCum
			run.Counters.Add(w.cum)
			run.Pages = c.pageNo
			w.mu.Unlock()
			if err != nil && finish == nil {
				w.markDone(c.pageNo)
				continue
			}
			cp.submit(checkpointJob{page: c.pageNo, next: c.next, finish: finish, save: err == nil, run: run, row: store.RunPage{
				RunID:    r.rec.ID,
				Page:     c.pageNo,
				Read:     c.delta.Read,
				Claimed:  int64(len(c.send)),
				Sent:     delta.Written,
				Replayed: c.delta.Replayed,
				Rejected: delta.Rejected,
				InDoubt:  c.delta.InDoubt,
				Requests: delta.Requests,
			}})
		}
	}()
	return w
}

// submit hands a claimed page over; it waits while the previous page is
// being written.
func (w *writer) submit(c claimed) {
	keys := make(map[string]struct{}, len(c.send))
	for _, rc := range c.send {
		keys[rc.Key] = struct{}{}
	}
	w.mu.Lock()
	w.handed++
	w.keys[c.pageNo] = keys
	w.mu.Unlock()
	w.in <- c
}

// markDone records that page's marks are recorded or dropped: it is no
// longer in flight.
func (w *writer) markDone(page int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.keys, page)
	w.marked++
	close(w.notify)
	w.notify = make(chan struct{})
}

// writing reports whether key belongs to a page in flight.
func (w *writer) writing(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, keys := range w.keys {
		if _, ok := keys[key]; ok {
			return true
		}
	}
	return false
}

// waitIdle waits until no page is in flight: every page handed over is
// written and its marks recorded. It returns the first failure of the write
// stage or the checkpointer instead, if any.
func (w *writer) waitIdle(ctx context.Context) error {
	for {
		w.mu.Lock()
		idle, ch, err := w.marked >= w.handed, w.notify, w.err
		w.mu.Unlock()
		if err == nil {
			err = w.cp.failed()
		}
		switch {
		case err != nil:
			return err
		case idle:
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

// checkpointJob is steps 5 and 6 of SPEC §2 for one written page.
type checkpointJob struct {
	page   int64
	next   string               // the cursor after the page
	finish []store.LedgerFinish // the page's marks; nil when it sent nothing
	save   bool                 // save the checkpoint after the marks (false: the page failed)
	run    store.Run            // the run as of the page's end (Pages = page)
	row    store.RunPage
}

// checkpointGrace bounds one checkpoint once handed over. A checkpoint is
// not cut short by the run's cancellation: its page is delivered (the write
// returned before the cancellation), and recording its outcomes and cursor
// spares the next run a read-back and a replay.
const checkpointGrace = 5 * time.Second

// checkpointer records the written pages' marks and saves their cursors, in
// order, one page at a time (marks and checkpoint in one transaction), while
// the run writes the next page. Its queue holds one page.
type checkpointer struct {
	jobs chan checkpointJob
	done chan struct{}
	w    *writer // set by startWriter

	mu   sync.Mutex
	err  error // the first failure; later jobs are dropped
	last int64 // the last page checkpointed
}

func (r *run) startCheckpointer(ctx context.Context) *checkpointer {
	cp := &checkpointer{jobs: make(chan checkpointJob, 1), done: make(chan struct{})}
	go func() {
		defer close(cp.done)
		for job := range cp.jobs {
			if cp.failed() != nil {
				// No checkpoint after a failure; a written page's marks are
				// still recorded if the fence allows (see below).
				if job.finish != nil {
					jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointGrace)
					_ = r.mark(jctx, job.finish)
					cancel()
				}
				cp.w.markDone(job.page)
				continue
			}
			// A written page's marks and checkpoint are one transaction; a
			// page that failed (every record refused) has only its marks.
			var err error
			switch {
			case job.save:
				jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointGrace)
				err = r.checkpoint(jctx, job)
				if err != nil && job.finish != nil {
					// The checkpoint failed (a lost lease, Redis gone), and
					// the marks went with it. They are fenced, not leased:
					// while no other worker has registered a newer fence
					// and the store answers, they are still ours to record,
					// and spare the next run a read-back of the page.
					_ = r.mark(jctx, job.finish)
				}
				cancel()
			case job.finish != nil:
				err = r.mark(ctx, job.finish)
			}
			cp.w.markDone(job.page)
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

// submit hands a page's marks and checkpoint over; it waits while the
// queue is full, so at most two are outstanding.
func (cp *checkpointer) submit(job checkpointJob) { cp.jobs <- job }

// failed is the first checkpoint failure so far, or nil.
func (cp *checkpointer) failed() error {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.err
}

// close waits for the outstanding checkpoint and returns the last page
// checkpointed and the first failure.
func (cp *checkpointer) close() (last int64, err error) {
	close(cp.jobs)
	<-cp.done
	cp.mu.Lock()
	defer cp.mu.Unlock()
	return cp.last, cp.err
}

// checkpoint renews and verifies the lease, then saves the page's cursor,
// the run's progress and the page's timeline row in one fenced transaction
// (with the renewal in it when the lease lives in the same store), and
// reports progress.
func (r *run) checkpoint(ctx context.Context, job checkpointJob) error {
	p := store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: r.Sync.ID, Value: job.next, Fence: r.grant.Fence, RunID: r.rec.ID},
		Run:    job.run,
		Page:   &job.row,
		Finish: job.finish,
	}
	// A lease kept in the store the run checkpoints to is renewed and
	// verified inside the checkpoint's transaction (one commit, not two);
	// any other (Redis) first.
	inStore := false
	if ls, ok := r.Leases.(lease.InStore); ok && ls.LeaseStore() == r.Store {
		inStore = true
		p.Lease = &store.CheckpointLease{Token: r.grant.Token, TTL: r.LeaseTTL}
	} else if err := r.renew(ctx); err != nil {
		return err
	}
	if r.Hooks.BeforeCursorSave != nil {
		r.Hooks.BeforeCursorSave(ctx, job.page)
	}
	asked := r.Clock.Now()
	job.row.CheckpointedAt = asked
	if err := r.Store.Checkpoint(ctx, p); err != nil {
		if errors.Is(err, store.ErrLeaseLost) {
			return failure.Wrap(failure.LeaseLost, err, SentenceLeaseLost)
		}
		if job.finish != nil {
			return storeFailure(ctx, err, "mark delivered records and save the cursor")
		}
		return storeFailure(ctx, err, "save the cursor")
	}
	if inStore {
		r.setExpiry(localExpiry(asked, r.LeaseTTL, time.Time{}))
	}
	r.Logger.Debug("page checkpointed", "sync", r.Sync.ID, "run", r.rec.ID, "page", job.page,
		"read", job.row.Read, "sent", job.row.Sent, "replayed", job.row.Replayed)
	r.reportRun(job.run, job.next, false)
	return nil
}
