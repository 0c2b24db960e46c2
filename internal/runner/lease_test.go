package runner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/store"
)

// blockingDest is a destination whose every call blocks until its context
// ends, recording when (on the fake clock) each call started and ended and
// the attempt deadline it carried.
type blockingDest struct {
	clock   *clock.Fake
	entered chan context.Context

	mu    sync.Mutex
	calls []destCall
}

type destCall struct {
	started, ended time.Time
	deadline       time.Time
	hasDeadline    bool
}

func (d *blockingDest) Capability() destination.Capability { return destination.CapVerify }
func (d *blockingDest) Close() error                       { return nil }

func (d *blockingDest) Write(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	return nil, d.block(ctx)
}

func (d *blockingDest) Verify(ctx context.Context, recs []destination.Record, since time.Time) (map[string]string, error) {
	return nil, d.block(ctx)
}

func (d *blockingDest) block(ctx context.Context) error {
	c := destCall{started: d.clock.Now()}
	c.deadline, c.hasDeadline = destination.AttemptDeadline(ctx)
	d.mu.Lock()
	i := len(d.calls)
	d.calls = append(d.calls, c)
	d.mu.Unlock()
	d.entered <- ctx
	<-ctx.Done()
	d.mu.Lock()
	d.calls[i].ended = d.clock.Now()
	d.mu.Unlock()
	return failure.Wrap(failure.DestinationUnavailable, ctx.Err(), "the request was abandoned")
}

func (d *blockingDest) recorded() []destCall {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]destCall(nil), d.calls...)
}

// renewLeases is the SQL lease whose renewals, when hang is set, block
// until their context ends. Every renewal's context is sent on renewing.
type renewLeases struct {
	lease.Manager
	hang     bool
	refuse   error // when set, every renewal fails with it
	renewing chan context.Context
	renewed  chan error
	// checked, when set, is told of each fence check, which the
	// background renewer makes once it has noted its renewal's outcome.
	checked chan struct{}
}

func (m *renewLeases) CheckFence(ctx context.Context, g lease.Grant) error {
	if m.checked != nil {
		m.checked <- struct{}{}
	}
	return nil
}

func (m *renewLeases) Renew(ctx context.Context, g lease.Grant, ttl time.Duration) (lease.Grant, error) {
	m.renewing <- ctx
	if m.refuse != nil {
		m.renewed <- m.refuse
		return g, m.refuse
	}
	if m.hang {
		<-ctx.Done()
		m.renewed <- ctx.Err()
		return g, ctx.Err()
	}
	g, err := m.Manager.Renew(ctx, g, ttl)
	m.renewed <- err
	return g, err
}

// receive waits for a value on ch; the bound only turns a hang (the
// behaviour under test missing) into a failure.
func receive[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not happen", what)
		var zero T
		return zero
	}
}

func isDone(ctx context.Context) bool {
	select {
	case <-ctx.Done():
		return true
	default:
		return false
	}
}

// TestLeaseTime: a write never outlives its lease (docs/guide.md#the-store-and-the-leases). The run's
// destination calls carry the lease's local expiry less the margin as their
// attempt deadline, renewals are bounded by a timeout on the run's clock, and
// at that deadline, with no renewal through, the run's work (the write in
// flight with it) is cancelled at once, on the run's clock: no sleeps, a
// fake clock.
func TestLeaseTime(t *testing.T) {
	t.Parallel()
	const ttl = 30 * time.Second
	margin := lease.AttemptMargin(ttl) // 6 s

	type bundle struct {
		tb     *testBundle
		dest   *blockingDest
		leases *renewLeases
		t0     time.Time
		done   chan struct{}
		run    store.Run
		err    error
	}
	start := func(t *testing.T, renewEvery time.Duration, hang bool) *bundle {
		tb := setup(t, 500, destination.CapVerify)
		b := &bundle{tb: tb, t0: tb.clock.Now(), done: make(chan struct{})}
		b.dest = &blockingDest{clock: tb.clock, entered: make(chan context.Context, 10)}
		b.leases = &renewLeases{Manager: &lease.SQL{Store: tb.store}, hang: hang,
			renewing: make(chan context.Context, 10), renewed: make(chan error, 10)}
		p := tb.params(t, "id")
		p.Destination, p.Leases, p.LeaseTTL, p.LeaseRenew = b.dest, b.leases, ttl, renewEvery
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(func() { cancel(); <-b.done }) // a run the behaviour under test failed to stop
		go func() {
			defer close(b.done)
			b.run, b.err = Run(ctx, p)
		}()
		return b
	}
	// ended waits for the run and checks it stopped as lease_lost with one
	// destination call, abandoned at the attempt deadline, and none started
	// after it.
	ended := func(t *testing.T, b *bundle) {
		t.Helper()
		receive(t, b.done, "the run's end")
		if failure.CodeOf(b.err) != failure.LeaseLost || b.run.State != store.RunFailed {
			t.Fatalf("run ended %v (%+v), want lease_lost", b.err, b.run)
		}
		deadline := b.t0.Add(ttl - margin)
		calls := b.dest.recorded()
		if len(calls) != 1 {
			t.Fatalf("%d destination calls, want 1 (none after the deadline): %+v", len(calls), calls)
		}
		for _, c := range calls {
			if !c.started.Before(deadline) || c.ended.After(deadline) {
				t.Errorf("destination call %+v outside [%s, %s)", c, b.t0, deadline)
			}
		}
	}

	t.Run("a blocked write ends at the local expiry less the margin", func(t *testing.T) {
		t.Parallel()
		b := start(t, 0, false)
		ctx := receive(t, b.dest.entered, "the first write")
		c := b.dest.recorded()[0]
		if want := b.t0.Add(ttl - margin); !c.hasDeadline || !c.deadline.Equal(want) {
			t.Fatalf("write's attempt deadline %s (set %v), want the local expiry less %s: %s", c.deadline, c.hasDeadline, margin, want)
		}
		b.tb.clock.Advance(ttl - margin - time.Millisecond)
		if isDone(ctx) {
			t.Fatal("the write was cancelled before its deadline")
		}
		b.tb.clock.Advance(time.Millisecond)
		if !isDone(ctx) {
			t.Fatal("the write's context is still live at the local expiry less the margin; no renewal succeeded")
		}
		ended(t, b)
	})

	t.Run("renewals that hang time out and the work stops at the deadline", func(t *testing.T) {
		t.Parallel()
		const every = 10 * time.Second
		b := start(t, every, true)
		write := receive(t, b.dest.entered, "the first write")

		b.tb.clock.Advance(every)
		r1 := receive(t, b.leases.renewing, "the first renewal")
		if d, ok := r1.Deadline(); !ok || d.After(b.t0.Add(ttl)) {
			t.Fatalf("renewal deadline %s (set %v), want one before the lease's local expiry %s", d, ok, b.t0.Add(ttl))
		}
		b.tb.clock.Advance(every) // the first renewal times out; the next one starts
		if !isDone(r1) {
			t.Fatal("a hung renewal outlived its timeout")
		}
		receive(t, b.leases.renewed, "the first renewal's end")
		r2 := receive(t, b.leases.renewing, "the second renewal")
		if isDone(write) {
			t.Fatal("the write was cancelled while the lease still had time")
		}

		b.tb.clock.Advance(ttl - margin - 2*every) // the attempt deadline
		if !isDone(write) || !isDone(r2) {
			t.Fatalf("at the deadline: write done %v, renewal done %v; want both cancelled at once", isDone(write), isDone(r2))
		}
		ended(t, b)
	})

	t.Run("a renewal moves the deadline on", func(t *testing.T) {
		t.Parallel()
		const every = 10 * time.Second
		b := start(t, every, false)
		write := receive(t, b.dest.entered, "the first write")
		b.tb.clock.Advance(every)
		receive(t, b.leases.renewing, "the renewal")
		if err := receive(t, b.leases.renewed, "the renewal's end"); err != nil {
			t.Fatal(err)
		}
		// The renewal is recorded after Renew returned: wait for the
		// deadline the write reads to move (no clock moves meanwhile).
		want := b.t0.Add(every + ttl - margin)
		for end := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
			if d, _ := destination.AttemptDeadline(write); d.Equal(want) {
				break
			}
			if time.Now().After(end) {
				d, _ := destination.AttemptDeadline(write)
				t.Fatalf("attempt deadline after the renewal %s, want %s", d, want)
			}
		}
		b.tb.clock.Advance(ttl - margin - every) // the first deadline, now past
		if isDone(write) {
			t.Fatal("the write was cancelled at the deadline its renewal had moved on")
		}
	})
}

// quarantinedLeases grants nothing: the lease store lost its data.
type quarantinedLeases struct{ lease.Manager }

func (quarantinedLeases) Acquire(ctx context.Context, p lease.AcquireParams) (lease.Grant, error) {
	now := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	return lease.Grant{}, &lease.QuarantineError{SyncID: p.SyncID, NoticedAt: now, Until: now.Add(30 * time.Second)}
}

// TestQuarantinedLeaseIsRetried: a run refused a lease because the lease
// store lost its data fails as store_unavailable, retryable, saying until
// when; it is not skipped (a skipped run is never retried) and writes
// nothing.
func TestQuarantinedLeaseIsRetried(t *testing.T) {
	t.Parallel()
	tb := setup(t, 10, destination.CapVerify)
	p := tb.params(t, "")
	p.Leases = quarantinedLeases{Manager: p.Leases}
	r, err := Run(context.Background(), p)
	if failure.CodeOf(err) != failure.StoreUnavailable || !failure.Retryable(err) || r.State != store.RunFailed {
		t.Fatalf("got %v (%+v), want a retryable store_unavailable failure", err, r)
	}
	if !errors.Is(err, lease.ErrQuarantined) || !strings.Contains(r.FailureDetail, "2026-11-30T10:00:30Z") {
		t.Fatalf("detail %q (err %v), want the quarantine and its end", r.FailureDetail, err)
	}
	if calls, _, _ := tb.dest.stats(); calls != 0 {
		t.Fatal("a run without a lease wrote")
	}
}

// unreachableLeases cannot be asked: its Redis does not answer.
type unreachableLeases struct{ lease.Manager }

func (unreachableLeases) Acquire(context.Context, lease.AcquireParams) (lease.Grant, error) {
	return lease.Grant{}, fmt.Errorf("redis lease acquire of sync %q: %w: dial tcp 127.0.0.1:6379: i/o timeout", "s1", store.ErrUnavailable)
}

// TestUnreachableLeaseStoreLetsTheJobGo: a run whose lease store could not
// be asked fails store_unavailable marked ErrLeaseNotTaken (the queue hands
// such a job to another process at once), its words unchanged; a
// quarantine, which every process would meet, is not so marked.
func TestUnreachableLeaseStoreLetsTheJobGo(t *testing.T) {
	t.Parallel()
	tb := setup(t, 10, destination.CapVerify)
	p := tb.params(t, "")
	p.Leases = unreachableLeases{Manager: p.Leases}
	r, err := Run(context.Background(), p)
	if failure.CodeOf(err) != failure.StoreUnavailable || !failure.Retryable(err) || r.State != store.RunFailed {
		t.Fatalf("got %v (%+v), want a retryable store_unavailable failure", err, r)
	}
	if !errors.Is(err, ErrLeaseNotTaken) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("err %v is not marked ErrLeaseNotTaken", err)
	}
	if strings.Contains(r.FailureDetail+err.Error(), ErrLeaseNotTaken.Error()) || !strings.Contains(err.Error(), "i/o timeout") {
		t.Fatalf("detail %q, error %q: the mark changed the words", r.FailureDetail, err)
	}
	if calls, _, _ := tb.dest.stats(); calls != 0 {
		t.Fatal("a run without a lease wrote")
	}
	p.Leases = quarantinedLeases{Manager: p.Leases}
	if _, err := Run(context.Background(), p); errors.Is(err, ErrLeaseNotTaken) {
		t.Fatalf("a quarantine is marked ErrLeaseNotTaken: %v", err)
	}
}

// shortDest's write blocks until its context ends, or until released: then
// it fails as a destination call that stopped short of the lease's end
// does (a 429's wait longer than the lease has left, nothing sent).
type shortDest struct {
	entered chan context.Context
	release chan struct{}
}

func (d *shortDest) Capability() destination.Capability { return destination.CapVerify }
func (d *shortDest) Close() error                       { return nil }

func (d *shortDest) Write(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	d.entered <- ctx
	select {
	case <-ctx.Done():
		return nil, failure.Wrap(failure.DestinationUnavailable, ctx.Err(), "the request was abandoned")
	case <-d.release:
		out := make([]destination.Result, len(recs))
		for i, r := range recs {
			out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent}
		}
		return out, failure.Wrap(failure.DestinationRateLimited, fmt.Errorf("%w (after %w)", destination.ErrNoLeaseTime, errors.New("HTTP 429")),
			"the test API's rate limit holds the next request for 25s, longer than the run's lease has left (14s)")
	}
}

func (d *shortDest) Verify(ctx context.Context, recs []destination.Record, since time.Time) (map[string]string, error) {
	return nil, errors.New("not called")
}

// TestRefusedRenewalsAreTheRunsCause: renewals the lease store refuses (an
// ACL changed under the process: Redis answers NOPERM) end the run
// lease_lost with the refusal's advice, whether the lease ran out under a
// write or a call stopped short of its end first. The second ended as
// destination_rate_limited, naming the 429 it waited for (tried on
// 2026-12-05: docs/guide.md#redis-in-production).
func TestRefusedRenewalsAreTheRunsCause(t *testing.T) {
	t.Parallel()
	const ttl, every = 30 * time.Second, 10 * time.Second
	const advice = "Redis's ACL refuses oncesync's user a command it needs"
	acl := store.WithAdvice(errors.New("NOPERM this user has no permissions to run the 'evalsha' command"), advice)
	for _, cut := range []bool{false, true} {
		t.Run(fmt.Sprintf("stopped short %v", cut), func(t *testing.T) {
			t.Parallel()
			tb := setup(t, 500, destination.CapVerify)
			t0 := tb.clock.Now()
			leases := &renewLeases{Manager: &lease.SQL{Store: tb.store}, refuse: acl,
				renewing: make(chan context.Context, 10), renewed: make(chan error, 10), checked: make(chan struct{}, 10)}
			dest := &shortDest{entered: make(chan context.Context, 10), release: make(chan struct{})}
			p := tb.params(t, "id")
			p.Destination, p.Leases, p.LeaseTTL, p.LeaseRenew = dest, leases, ttl, every
			done := make(chan struct{})
			var (
				run store.Run
				err error
			)
			go func() {
				defer close(done)
				run, err = Run(context.Background(), p)
			}()
			receive(t, dest.entered, "the first write")
			tb.clock.Advance(every)
			receive(t, leases.renewing, "the first renewal")
			receive(t, leases.renewed, "the first renewal's refusal")
			receive(t, leases.checked, "the fence check after it") // the refusal is noted
			if cut {
				// With 20 s of the lease left, more than a third of its
				// TTL: nothing before the run's end renews it again.
				close(dest.release)
			} else {
				tb.clock.Advance(t0.Add(ttl - lease.AttemptMargin(ttl)).Sub(tb.clock.Now()))
			}
			receive(t, done, "the run's end")
			d := failure.Detail(err)
			if failure.CodeOf(err) != failure.LeaseLost || run.State != store.RunFailed || !strings.Contains(d, advice) ||
				run.FailureCode != string(failure.LeaseLost) || !strings.Contains(run.FailureDetail, advice) {
				t.Fatalf("run ended %v (detail %q), recorded %s %q; want lease_lost saying %q", err, d, run.FailureCode, run.FailureDetail, advice)
			}
		})
	}
}

// apartLeases keeps the leases apart from the run's store, as Redis does:
// each checkpoint renews the lease first.
type apartLeases struct{ *renewLeases }

func (m apartLeases) Acquire(ctx context.Context, p lease.AcquireParams) (lease.Grant, error) {
	g, err := m.renewLeases.Acquire(ctx, p)
	g.Store = nil
	return g, err
}

// TestUnansweredRenewalIsLeaseLost: a lease store that stops answering
// (Redis stalled) makes the checkpoint's renewal run out of the
// checkpoint's own time. Nobody stopped the run, yet it ended
// "interrupted", "the run was stopped mid-page", which sends a person to
// look for who stopped it (an independent check, 2026-12-06). It is
// lease_lost, as the guide says a worker cut off from its lease store ends.
func TestUnansweredRenewalIsLeaseLost(t *testing.T) {
	t.Parallel()
	tb := setup(t, 500, destination.CapVerify)
	leases := &renewLeases{Manager: &lease.SQL{Store: tb.store}, hang: true,
		renewing: make(chan context.Context, 10), renewed: make(chan error, 10)}
	p := tb.params(t, "id")
	p.Leases, p.LeaseTTL, p.LeaseRenew = apartLeases{leases}, 30*time.Second, 0
	r, err := Run(context.Background(), p) // the checkpoint's grace, 5 s, passes
	if failure.CodeOf(err) != failure.LeaseLost || r.State != store.RunFailed || !strings.Contains(r.FailureDetail, "could not be renewed in time") {
		t.Fatalf("run %s, %v (detail %q); want lease_lost, its lease not renewed in time", r.State, err, r.FailureDetail)
	}
}

// endlessStore is a server store that does not record a run's end until
// a number of tries have failed (a PostgreSQL restarting when the run
// ended).
type endlessStore struct {
	Store
	mu       sync.Mutex
	failures int           // tries to record an end still to fail
	tries    map[int64]int // by run
	embedded bool          // not a server: RemoteReads false
}

func (s *endlessStore) RemoteReads() bool { return !s.embedded }

func (s *endlessStore) UpdateRun(ctx context.Context, run store.Run) error {
	if run.State != store.RunRunning {
		s.mu.Lock()
		s.tries[run.ID]++
		fail := s.failures > 0
		s.failures--
		s.mu.Unlock()
		if fail {
			return errors.New("connection refused")
		}
	}
	return s.Store.UpdateRun(ctx, run)
}

// TestRunEndRecordedOnceTheStoreAnswers: a run ended while its store did
// not answer stayed recorded as running, and the next run closed it as
// interrupted, "its process stopped": the run's own end (failed, why) was
// lost although its process knew it. On a server store it tries again,
// about a minute in all.
func TestRunEndRecordedOnceTheStoreAnswers(t *testing.T) {
	t.Parallel()
	tb := setup(t, 300, destination.CapVerify)
	st := &endlessStore{Store: tb.store, failures: 3, tries: map[int64]int{}}
	p := tb.params(t, "id")
	p.Store = st
	var waits []time.Duration
	p.Sleep = func(ctx context.Context, d time.Duration) error {
		waits = append(waits, d)
		return ctx.Err()
	}
	r, err := Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	got, gerr := tb.store.GetRun(context.Background(), r.ID)
	if gerr != nil || got.State != store.RunSucceeded || got.Written != 300 || got.FinishedAt.IsZero() {
		t.Fatalf("recorded run %+v, %v; want succeeded with its figures", got, gerr)
	}
	if st.tries[r.ID] != 4 || len(waits) != 3 {
		t.Errorf("%d tries, waits %v; want the end recorded at the fourth try, after three waits", st.tries[r.ID], waits)
	}

	st.failures = 100 // the store never comes back within the tries
	waits = nil
	r, _ = Run(context.Background(), p)
	if got, _ := tb.store.GetRun(context.Background(), r.ID); got.State != store.RunRunning {
		t.Errorf("run recorded %s without a store answering", got.State)
	}
	var total time.Duration
	for _, w := range waits {
		total += w
	}
	if total < 45*time.Second || total > 90*time.Second {
		t.Errorf("waited %v in all (%v); want about a minute", total, waits)
	}

	// An embedded store that failed (a full disk) does not come back in
	// seconds: `oncesync run` says so at once.
	st.embedded, st.failures, waits = true, 100, nil
	r, _ = Run(context.Background(), p)
	if st.tries[r.ID] != 1 || len(waits) != 0 {
		t.Errorf("embedded store: %d tries, waits %v; want one try", st.tries[r.ID], waits)
	}
}

// takenLeases answers every renewal ErrLost once taken is set, as the
// lease store does once another run took the lease over.
type takenLeases struct {
	lease.Manager
	taken atomic.Bool
}

func (m *takenLeases) Renew(ctx context.Context, g lease.Grant, ttl time.Duration) (lease.Grant, error) {
	if m.taken.Load() {
		return g, fmt.Errorf("%w (taken by run 2)", lease.ErrLost)
	}
	return m.Manager.Renew(ctx, g, ttl)
}

// TestRunThatLostItsLeaseIsNotRecordedSucceeded: a worker frozen past its
// lease while its run waited on the destination woke, found nothing left to
// write, and ended its loop with success, while the recovery sweep had
// marked the run interrupted and two later runs had resumed its work.
// Recorded "succeeded" over that mark (an independent check, 2026-12-07),
// it read as the run that did the work. A last renewal finds the lease
// gone: it ends lease_lost, as the guide says.
func TestRunThatLostItsLeaseIsNotRecordedSucceeded(t *testing.T) {
	t.Parallel()
	tb := setup(t, 30, destination.CapVerify)
	leases := &takenLeases{Manager: &lease.SQL{Store: tb.store}}
	tb.dest.onWrite = func([]destination.Record) func() {
		return func() { leases.taken.Store(true) }
	}
	p := tb.params(t, "id")
	p.Leases = leases
	got, err := Run(context.Background(), p)
	if failure.CodeOf(err) != failure.LeaseLost || got.State != store.RunFailed || !strings.Contains(got.FailureDetail, "finished its work") {
		t.Fatalf("a run whose lease was taken after its last write: %v %+v, want failed lease_lost", err, got)
	}
	if _, recs, dups := tb.dest.stats(); recs != 30 || dups != 0 {
		t.Fatalf("destination: %d records, %d duplicates; want 30 once", recs, dups)
	}
	// Its lease kept, a run records its own success.
	leases.taken.Store(false)
	tb.dest.onWrite = nil
	p = tb.params(t, "id")
	p.Leases = leases
	if got, err := Run(context.Background(), p); err != nil || got.State != store.RunSucceeded || got.Replayed != 30 {
		t.Fatalf("the next run: %v %+v, want succeeded, 30 replayed", err, got)
	}
}

// releaseWatch is a lease manager that notes the run's recorded state when
// the lease is released.
type releaseWatch struct {
	lease.Manager
	st    store.Store
	runID int64
	at    []store.RunState // the run's state at each Release
}

func (w *releaseWatch) Acquire(ctx context.Context, p lease.AcquireParams) (lease.Grant, error) {
	w.runID = p.RunID
	return w.Manager.Acquire(ctx, p)
}

func (w *releaseWatch) Release(ctx context.Context, g lease.Grant) error {
	r, err := w.st.GetRun(ctx, w.runID)
	if err != nil {
		return err
	}
	w.at = append(w.at, r.State)
	return w.Manager.Release(ctx, g)
}

// A free lease says the run's end is recorded: released first, a recovery
// sweep (or the sync's next run) found the lease gone and the run still
// running, and closed it "interrupted" as its worker recorded success
// (queue's TestKilledCoordinatorAndPartitionRunAgain, CI 2026-12-07).
func TestLeaseIsReleasedAfterTheRunsEndIsRecorded(t *testing.T) {
	t.Parallel()
	tb := setup(t, 50, destination.CapVerify)
	p := tb.params(t, "id")
	w := &releaseWatch{Manager: p.Leases, st: tb.store}
	p.Leases = w
	r, err := Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != store.RunSucceeded {
		t.Fatalf("run: %+v", r)
	}
	if len(w.at) != 1 || w.at[0] != store.RunSucceeded {
		t.Fatalf("the run's recorded state at the lease's release: %v, want [succeeded]", w.at)
	}
}
