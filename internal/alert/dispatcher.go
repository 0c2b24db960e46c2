package alert

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
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

	ctx    context.Context // canceled when Close gives up
	cancel context.CancelCauseFunc
	wg     sync.WaitGroup

	mu     sync.RWMutex
	closed bool
}

type worker struct {
	sink  Sink
	queue chan Alert
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
	d.ctx, d.cancel = context.WithCancelCause(context.Background())
	for _, s := range p.Sinks {
		w := &worker{sink: s, queue: make(chan Alert, size)}
		d.workers = append(d.workers, w)
		d.wg.Add(1)
		go d.run(w)
	}
	return d
}

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
	if a.ID == "" {
		a.ID = NewID()
	}
	if a.At.IsZero() {
		a.At = d.clock.Now()
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.closed {
		return a, ErrClosed
	}
	for _, w := range d.workers {
		select {
		case w.queue <- a:
		default:
			d.logger.LogAttrs(ctx, slog.LevelError, "alert dropped: sink queue full",
				slog.String("sink", w.sink.Name()), slog.String("alert_id", a.ID), slog.String("kind", a.Kind))
		}
	}
	return a, nil
}

func (d *Dispatcher) run(w *worker) {
	defer d.wg.Done()
	for a := range w.queue {
		d.deliver(w.sink, a)
	}
}

// deliver sends a to s, retrying per the policy, and logs a final failure.
func (d *Dispatcher) deliver(s Sink, a Alert) {
	var err error
	attempt := 0
	for attempt < d.retry.Attempts {
		attempt++
		actx, cancel := context.WithTimeout(d.ctx, d.retry.AttemptTimeout)
		err = s.Send(actx, a)
		cancel()
		if err == nil {
			return
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
