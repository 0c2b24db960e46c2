package alert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncesync/oncesync/internal/clock"
)

// Outcomes, the values of oncesync_alerts_total's outcome label: what became
// of each alert at each sink.
const (
	// OutcomeDelivered: the sink took the alert.
	OutcomeDelivered = "delivered"
	// OutcomeFailed: the sink gave up on it (its retries ran out, it refused
	// it for good, or the process stopped before it went out).
	OutcomeFailed = "failed"
	// OutcomeDropped: the sink's queue was full; it was never tried.
	OutcomeDropped = "dropped"
)

// Retry defaults.
const (
	DefaultAttempts       = 5
	DefaultInitialBackoff = time.Second
	DefaultMaxBackoff     = time.Minute
	DefaultAttemptTimeout = 30 * time.Second
	DefaultQueueSize      = 256
)

// RetryPolicy says how a Dispatcher retries a failed delivery.
type RetryPolicy struct {
	// Attempts is the number of deliveries tried per alert and sink,
	// including the first (default 5).
	Attempts int
	// InitialBackoff is the wait after the first failure (default 1s); each
	// further wait doubles, up to MaxBackoff (default 1m).
	InitialBackoff time.Duration
	MaxBackoff     time.Duration
	// AttemptTimeout bounds one delivery attempt (default 30s).
	AttemptTimeout time.Duration
	// Sleep waits d or until ctx is done, returning ctx's error then. nil
	// uses a timer; tests inject one that returns at once.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Backoff returns the wait after the attempt-th failed attempt (1-based).
func (p RetryPolicy) Backoff(attempt int) time.Duration {
	d := p.InitialBackoff
	for i := 1; i < attempt && d < p.MaxBackoff; i++ {
		d *= 2
	}
	return min(d, p.MaxBackoff)
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.Attempts <= 0 {
		p.Attempts = DefaultAttempts
	}
	if p.InitialBackoff <= 0 {
		p.InitialBackoff = DefaultInitialBackoff
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = DefaultMaxBackoff
	}
	if p.MaxBackoff < p.InitialBackoff {
		p.MaxBackoff = p.InitialBackoff
	}
	if p.AttemptTimeout <= 0 {
		p.AttemptTimeout = DefaultAttemptTimeout
	}
	if p.Sleep == nil {
		p.Sleep = sleep
	}
	return p
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// DispatcherParams configures a Dispatcher.
type DispatcherParams struct {
	// Sinks receive every alert.
	Sinks []Sink
	// Logger receives delivery failures (slog.Default() when nil).
	Logger *slog.Logger
	// Clock stamps alerts without an At (wall clock when nil).
	Clock clock.Clock
	// Retry is the retry policy; zero fields take the defaults.
	Retry RetryPolicy
	// QueueSize bounds the alerts waiting per sink (default 256); when a
	// sink's queue is full the alert is dropped for that sink and logged.
	QueueSize int
}

// Dispatcher fans alerts out to its sinks. Every sink has its own queue and
// goroutine, so Notify never waits for a sink and a slow or failing sink
// delays no other one.
type Dispatcher struct {
	logger  *slog.Logger
	clock   clock.Clock
	retry   RetryPolicy
	workers []*worker
	// outcomes counts oncesync_alerts_total{sink,outcome}: the one figure
	// that says from outside that alerts are being lost (Collector).
	outcomes *prometheus.CounterVec

	ctx    context.Context // canceled when Close gives up
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu     sync.RWMutex
	closed bool
}

type worker struct {
	sink  Sink
	queue chan queued
}

// queued is an alert waiting for a sink, with the Delivery it reports to.
type queued struct {
	a Alert
	d *Delivery
}

// NewDispatcher starts one goroutine per sink; Close stops them.
func NewDispatcher(p DispatcherParams) *Dispatcher {
	d := &Dispatcher{logger: p.Logger, clock: p.Clock, retry: p.Retry.withDefaults()}
	if d.logger == nil {
		d.logger = slog.Default()
	}
	if d.clock == nil {
		d.clock = clock.Real{}
	}
	size := p.QueueSize
	if size <= 0 {
		size = DefaultQueueSize
	}
	d.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "oncesync_alerts_total",
		Help: "Alerts this process handed to each alert sink, by sink (log, webhook, email, sentry) and outcome: " +
			"delivered, failed (retries ran out, refused, or abandoned at shutdown), dropped (the sink's queue was full).",
	}, []string{"sink", "outcome"})
	d.ctx, d.cancel = context.WithCancelCause(context.Background())
	for _, s := range p.Sinks {
		for _, o := range []string{OutcomeDelivered, OutcomeFailed, OutcomeDropped} {
			d.outcomes.WithLabelValues(s.Name(), o) // every series from the start, at 0
		}
		w := &worker{sink: s, queue: make(chan queued, size)}
		d.workers = append(d.workers, w)
		d.wg.Add(1)
		go d.run(w)
	}
	return d
}

// Collector returns oncesync_alerts_total{sink,outcome}, for the caller's
// registry: an alerting rule on its failed and dropped series tells that
// alerts stop reaching people even when every sink is down.
func (d *Dispatcher) Collector() prometheus.Collector { return d.outcomes }

// Sinks returns the names of the dispatcher's sinks, in order.
func (d *Dispatcher) Sinks() []string {
	names := make([]string, len(d.workers))
	for i, w := range d.workers {
		names[i] = w.sink.Name()
	}
	return names
}

// Notify queues a for every sink and returns at once; it never waits for a
// sink. It fills a.ID (NewID) and a.At (the clock) when they are empty and
// returns the alert as queued. After Close it returns ErrClosed.
//
// ctx only carries request-scoped values for logging: delivery outlives it,
// since an alert must not be lost because the run that raised it ended.
func (d *Dispatcher) Notify(ctx context.Context, a Alert) (Alert, error) {
	a, _, err := d.Send(ctx, a)
	return a, err
}

// Send is Notify that also returns the alert's Delivery, which tells when
// every sink delivered it or gave up: a caller that must know somebody was
// told (the dead-man check's one alert per incident) waits on it.
func (d *Dispatcher) Send(ctx context.Context, a Alert) (Alert, *Delivery, error) {
	if a.ID == "" {
		a.ID = NewID()
	}
	if a.At.IsZero() {
		a.At = d.clock.Now()
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return a, nil, ErrClosed
	}
	dl := newDelivery(d.workers)
	for _, w := range d.workers {
		select {
		case w.queue <- queued{a: a, d: dl}:
		default:
			d.logger.LogAttrs(ctx, slog.LevelError, "alert dropped: sink queue full",
				slog.String("sink", w.sink.Name()), slog.String("alert_id", a.ID), slog.String("kind", a.Kind))
			d.outcomes.WithLabelValues(w.sink.Name(), OutcomeDropped).Inc()
			dl.report(w.sink, false)
		}
	}
	return a, dl, nil
}

func (d *Dispatcher) run(w *worker) {
	defer d.wg.Done()
	for q := range w.queue {
		ok := d.deliver(w.sink, q.a)
		outcome := OutcomeFailed
		if ok {
			outcome = OutcomeDelivered
		}
		d.outcomes.WithLabelValues(w.sink.Name(), outcome).Inc()
		q.d.report(w.sink, ok)
	}
}

// deliver sends a to s, retrying per the policy, logs a final failure and
// reports whether a was delivered.
func (d *Dispatcher) deliver(s Sink, a Alert) bool {
	var err error
	attempt := 0
	for attempt < d.retry.Attempts {
		attempt++
		actx, cancel := context.WithTimeout(d.ctx, d.retry.AttemptTimeout)
		err = s.Send(actx, a)
		cancel()
		if err == nil {
			return true
		}
		if errors.Is(err, ErrPermanent) || d.ctx.Err() != nil || attempt == d.retry.Attempts {
			break
		}
		d.logger.LogAttrs(d.ctx, slog.LevelWarn, "alert delivery failed; will retry",
			slog.String("sink", s.Name()), slog.String("alert_id", a.ID), slog.String("kind", a.Kind),
			slog.Int("attempt", attempt), slog.String("error", err.Error()))
		if d.retry.Sleep(d.ctx, d.retry.Backoff(attempt)) != nil {
			break
		}
	}
	reason := "alert delivery failed"
	if d.ctx.Err() != nil {
		reason = "alert delivery abandoned at shutdown"
	}
	d.logger.LogAttrs(context.Background(), slog.LevelError, reason,
		slog.String("sink", s.Name()), slog.String("alert_id", a.ID), slog.String("kind", a.Kind),
		slog.String("severity", string(a.Severity)), slog.String("workspace", a.Workspace),
		slog.String("sync", a.SyncID), slog.Int("attempts", attempt), slog.String("error", err.Error()))
	return false
}

// Delivery is how one alert fares at the sinks of a Dispatcher (Send).
type Delivery struct {
	done chan struct{}

	mu        sync.Mutex
	pending   int
	sinks     []string
	people    int // sinks other than the log: a webhook, e-mail, Sentry
	delivered []string
	failed    []string
	toldOne   bool // a sink other than the log delivered it
}

func newDelivery(ws []*worker) *Delivery {
	dl := &Delivery{done: make(chan struct{}), pending: len(ws)}
	for _, w := range ws {
		dl.sinks = append(dl.sinks, w.sink.Name())
		if !isLog(w.sink) {
			dl.people++
		}
	}
	if dl.pending == 0 {
		close(dl.done)
	}
	return dl
}

func isLog(s Sink) bool {
	_, ok := s.(*LogSink)
	return ok
}

func (dl *Delivery) report(s Sink, ok bool) {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if ok {
		dl.delivered = append(dl.delivered, s.Name())
		dl.toldOne = dl.toldOne || !isLog(s)
	} else {
		dl.failed = append(dl.failed, s.Name())
	}
	if dl.pending--; dl.pending == 0 {
		close(dl.done)
	}
}

// Wait returns when every sink has delivered the alert or given up on it
// (nil), or when ctx ends first (ctx's error).
func (dl *Delivery) Wait(ctx context.Context) error {
	select {
	case <-dl.done:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// Told reports whether the alert reached somebody: a sink other than the
// log delivered it, or the log is the only sink there is (a deployment
// without alerts configured reads its log). A sink still trying does not
// count.
func (dl *Delivery) Told() bool {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	if dl.people == 0 {
		return len(dl.delivered) > 0
	}
	return dl.toldOne
}

// Pending names the sinks still trying to deliver the alert.
func (dl *Delivery) Pending() []string {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	var out []string
	for _, n := range dl.sinks {
		if !slices.Contains(dl.delivered, n) && !slices.Contains(dl.failed, n) {
			out = append(out, n)
		}
	}
	return out
}

// Failed names the sinks that gave up on the alert so far.
func (dl *Delivery) Failed() []string {
	dl.mu.Lock()
	defer dl.mu.Unlock()
	return append([]string(nil), dl.failed...)
}

// Close stops accepting alerts and waits until every queued alert has been
// delivered or has failed. When ctx ends first, in-flight deliveries and
// backoff waits are canceled (their alerts are logged as abandoned) and
// Close returns ctx's error. Sinks with a Close(ctx) error method (Sentry)
// are closed last.
func (d *Dispatcher) Close(ctx context.Context) error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	for _, w := range d.workers {
		close(w.queue)
	}
	d.mu.Unlock()

	done := make(chan struct{})
	go func() { d.wg.Wait(); close(done) }()
	var err error
	select {
	case <-done:
	case <-ctx.Done():
		err = fmt.Errorf("alert: close: undelivered alerts abandoned: %w", context.Cause(ctx))
		d.cancel(err)
		<-done
	}
	d.cancel(ErrClosed)
	for _, w := range d.workers {
		if c, ok := w.sink.(interface{ Close(context.Context) error }); ok {
			if cerr := c.Close(ctx); cerr != nil {
				err = errors.Join(err, fmt.Errorf("alert: close %s sink: %w", w.sink.Name(), cerr))
			}
		}
	}
	return err
}
