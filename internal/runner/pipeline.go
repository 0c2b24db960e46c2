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
// a time, marks their outcomes and hands each page to the checkpointer. The
// run's goroutine hands it page N+1 (claimed while page N was being written)
// only once page N is done, so at most one claimed page waits for it.
type writer struct {
	in   chan claimed
	done chan struct{}

	mu       sync.Mutex
	handed   int64               // pages handed over
	finished int64               // pages written (or dropped after a failure)
	keys     map[string]struct{} // the keys of the last page handed over
	notify   chan struct{}       // closed when finished grows
	cum      store.Counters      // write-stage counters of the pages written
	err      error               // the first failure; later pages are dropped
}

func (r *run) startWriter(ctx context.Context, cp *checkpointer) *writer {
	w := &writer{in: make(chan claimed), done: make(chan struct{}), notify: make(chan struct{})}
	go func() {
		defer close(w.done)
		for c := range w.in {
			if w.failed() == nil {
				delta, err := r.writeStage(ctx, c)
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
				if err == nil {
					cp.submit(checkpointJob{page: c.pageNo, next: c.next, run: run, row: store.RunPage{
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
			}
			// A dropped page's claims stay pending under this run's fence:
			// the next run finds them in doubt and settles them (SPEC §4).
			w.mu.Lock()
			w.finished++
			close(w.notify)
			w.notify = make(chan struct{})
			w.mu.Unlock()
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
	w.keys = keys
	w.mu.Unlock()
	w.in <- c
}

// writing reports whether key belongs to a page handed over and not yet
// written and marked.
func (w *writer) writing(key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.finished >= w.handed {
		return false
	}
	_, ok := w.keys[key]
	return ok
}

// waitIdle waits until every page handed over is written and marked (or
// dropped after a failure, whose error it returns).
func (w *writer) waitIdle(ctx context.Context) error {
	for {
		w.mu.Lock()
		idle, ch, err := w.finished >= w.handed, w.notify, w.err
		w.mu.Unlock()
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

// checkpointJob is step 6 of SPEC §2 for one delivered page.
type checkpointJob struct {
	page int64
	next string    // the cursor after the page
	run  store.Run // the run as of the page's end (Pages = page)
	row  store.RunPage
}

// checkpointGrace bounds one checkpoint once handed over. A checkpoint is
// not cut short by the run's cancellation: its page is delivered and marked,
// and saving its cursor spares the next run a replay.
const checkpointGrace = 5 * time.Second

// checkpointer saves the delivered pages' cursors in order, one at a time,
// while the run delivers the next page.
type checkpointer struct {
	jobs chan checkpointJob
	done chan struct{}

	mu   sync.Mutex
	err  error // the first failure; later jobs are dropped
	last int64 // the last page checkpointed
}

func (r *run) startCheckpointer(ctx context.Context) *checkpointer {
	cp := &checkpointer{jobs: make(chan checkpointJob), done: make(chan struct{})}
	go func() {
		defer close(cp.done)
		for job := range cp.jobs {
			if cp.failed() != nil {
				continue
			}
			jctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), checkpointGrace)
			err := r.checkpoint(jctx, job)
			cancel()
			cp.mu.Lock()
			if err != nil {
				cp.err = err
			} else {
				cp.last = job.page
			}
			cp.mu.Unlock()
		}
	}()
	return cp
}

// submit hands a page's checkpoint over; it waits while the previous one is
// still being saved, so at most one is outstanding.
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
