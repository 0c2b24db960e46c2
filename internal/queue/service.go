package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/breaker"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
)

// Sentinel errors.
var (
	// ErrUnknownSync: the sync id is not in the config.
	ErrUnknownSync = errors.New("no such sync in the config")
	// ErrRunPending refuses a resend while a run of the sync is queued,
	// retrying or running: River would merge the two jobs into that run.
	ErrRunPending = errors.New("a run of the sync is queued or running; send everything again once it has ended")
	// ErrPartitionedResend refuses a resend of a partitioned sync.
	ErrPartitionedResend = errors.New("a partitioned sync cannot be sent again whole from here; use oncesync run --resend")
	// errSyncPaused: the sync is paused; its job completes without a run.
	errSyncPaused = errors.New("sync is paused")
)

// LeaseInspector reports a sync's current lease (possibly expired) or
// store.ErrNotFound; lease-expiry recovery uses it. store.Store implements it
// for SQL leases; for Redis leases use LeaseInspectorFunc(manager.Get).
type LeaseInspector interface {
	LeaseGet(ctx context.Context, syncID string) (store.Lease, error)
}

// LeaseInspectorFunc adapts a function, such as redislease.Manager.Get, to
// LeaseInspector.
type LeaseInspectorFunc func(ctx context.Context, syncID string) (store.Lease, error)

// LeaseGet implements LeaseInspector.
func (f LeaseInspectorFunc) LeaseGet(ctx context.Context, syncID string) (store.Lease, error) {
	return f(ctx, syncID)
}

// schemaStore is a store that lives in a PostgreSQL schema (store/postgres).
type schemaStore interface {
	Schema() string
}

// Params configure a Service.
type Params struct {
	Config *config.Config
	Store  store.Store
	Leases lease.Manager
	// LeaseInspector defaults to Store (SQL leases). With Redis leases it
	// must read Redis (LeaseInspectorFunc(redisManager.Get)).
	LeaseInspector LeaseInspector
	// Breaker is evaluated after every failed run this process records,
	// whatever the path: runs worked by the queue, enqueue-time failures,
	// runs that could not be built, and runs closed by lease-expiry recovery
	// (docs/guide.md#guardrails). Nil means a breaker without alerts (it still pauses and
	// audits); serve and worker pass one whose alerts come from the config.
	Breaker *breaker.Breaker
	// Deadman, when set, is the dead-man check of docs/guide.md#telling-silence-from-outside: every process
	// can work its job, and the leader schedules it at minute 13 of every
	// hour.
	Deadman *deadman.Checker
	Logger  *slog.Logger
	Clock   clock.Clock
	// Workers is the number of runs this process works at once (default 4).
	Workers int
	// Scheduler makes this process eligible to lead: the leader enqueues the
	// syncs' schedules, the recovery sweep and the hourly ledger prune
	// (serve: true, worker: false).
	Scheduler bool
	// EnqueueOnly opens the queue to queue runs and nothing else (`oncesync
	// deadletter requeue`): no workers, no schedules, no barrier (Redis is
	// not opened), and Leases may be nil. Start refuses; Shutdown closes it.
	EnqueueOnly bool

	// QueueURL is where the queue lives (default Config.Store): a sqlite://
	// URL puts it beside that file, a postgres:// URL in that database.
	QueueURL string
	// QueueSchema is the PostgreSQL schema of River's tables. Empty means
	// the store's own schema when the store has one (store/postgres), so the
	// queue and the store share a schema (and can be dropped together).
	QueueSchema string
	// Registerer receives the service's metrics (runs, records, lease
	// losses, breaker trips, queue depth, destination calls); nil registers
	// nothing.
	Registerer prometheus.Registerer
	// HTTPClient is used by destinations (nil = their default); its
	// transport is wrapped to time and count their calls.
	HTTPClient *http.Client
	// Sleep is how destinations wait between in-run retries (nil = a
	// timer); tests shrink the waits with it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Accounts share destination accounts' request budgets (App.Accounts;
	// nil: each run paces itself).
	Accounts destination.AccountPacer
	// RetryBackoff is the wait before a run's second attempt; it doubles
	// for every later one, ±10 % jitter (default BackoffBase, 60 s; docs/guide.md#running-on-a-schedule-serve-and-worker).
	RetryBackoff time.Duration
	// FetchPollInterval is how often workers poll for due jobs (River's
	// default, 1 s, when zero). On PostgreSQL new jobs are also announced
	// by LISTEN/NOTIFY; a retry whose backoff is due is only seen by a poll.
	FetchPollInterval time.Duration
	// RecoveryInterval overrides RecoveryInterval (tests).
	RecoveryInterval time.Duration
	// DrainDeadline overrides DrainDeadline (tests).
	DrainDeadline time.Duration
	// Redis holds the checkpoint barriers of partitioned syncs (docs/guide.md#the-checkpoint-barrier).
	// Nil means a client of Config.Redis, opened when a sync of the config
	// has partitions > 1 (and closed by Shutdown).
	Redis redis.Scripter
	// RedisKeys is the key space of the barriers (the zero Space is
	// Config.RedisKeys).
	RedisKeys rediskey.Space
	// BarrierMetrics, if set, counts the barrier's outcomes.
	BarrierMetrics *barrier.Metrics

	// Heartbeats, when set, tells each sync's heartbeat_url how its runs
	// end (docs/guide.md#telling-silence-from-outside, runEnded); nil sends none. The caller closes it after
	// Shutdown.
	Heartbeats *deadman.Heartbeats

	// riverTime, in tests, is River's wall clock (river.TestConfig.Time):
	// a clock stepped there steps the queue's schedules as a step of the
	// machine's clock would, without touching the machine's.
	riverTime rivertype.TimeGenerator
	// clockWatch, in tests, is how often the wall clock is compared with
	// the monotonic one (default clockWatchEvery).
	clockWatch time.Duration
}

// Service is a River client working runs of the config's syncs and, when it
// leads, enqueuing their schedules and the recovery sweep.
type Service struct {
	cfg       *config.Config
	st        store.Store
	leases    lease.Manager
	inspector LeaseInspector
	breaker   *breaker.Breaker
	deadman   *deadman.Checker
	log       *slog.Logger
	clock     clock.Clock
	scheduler bool
	published bool // Publish wrote the config's syncs
	workers   int
	build     app.Options
	recovery  time.Duration
	metrics   *metrics
	// destClients are HTTPClient instrumented per destination type.
	destClients map[string]*http.Client
	b           backend

	// Partitioned syncs (partition.go): barrier is nil without Redis.
	barrier     *barrier.Barrier
	keys        rediskey.Space
	deadLetters barrier.DeadLetters
	closeRedis  func() error

	// enqueueOnly: Params.EnqueueOnly.
	enqueueOnly bool

	drain     chan struct{}
	drainOnce sync.Once

	// heartbeats: Params.Heartbeats.
	heartbeats *deadman.Heartbeats

	// ticker is the leader's state across its schedules' ticks.
	ticker *ticker

	// riverTime and clockWatch: Params'; stopWatch stops the clock
	// watch (schedule.go).
	riverTime  rivertype.TimeGenerator
	clockWatch time.Duration
	stopWatch  func()

	// prints: each sync's fingerprint in cfg (drift.go).
	prints fingerprints
}

// New validates p, opens the queue (applying River's migrations) and builds
// the River client. Start starts it.
func New(ctx context.Context, p Params) (*Service, error) {
	if p.Config == nil || p.Store == nil || (p.Leases == nil && !p.EnqueueOnly) {
		return nil, errors.New("queue: Config, Store and Leases are required")
	}
	if p.EnqueueOnly {
		p.Scheduler = false
	}
	s := &Service{
		cfg: p.Config, st: p.Store, leases: p.Leases, inspector: p.LeaseInspector, breaker: p.Breaker, deadman: p.Deadman,
		log: p.Logger, clock: p.Clock, scheduler: p.Scheduler, workers: p.Workers,
		recovery: p.RecoveryInterval,
		drain:    make(chan struct{}),
		ticker:   newTicker(),
	}
	s.heartbeats = p.Heartbeats
	s.riverTime, s.clockWatch = p.riverTime, p.clockWatch
	if s.inspector == nil {
		s.inspector = p.Store
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	if s.breaker == nil {
		s.breaker = breaker.New(breaker.Params{Store: s.st, Logger: s.log})
	}
	s.build = app.Options{Clock: s.clock, HTTPClient: p.HTTPClient, Sleep: p.Sleep, Accounts: p.Accounts}
	if s.workers <= 0 {
		s.workers = 4
	}
	if s.recovery <= 0 {
		s.recovery = RecoveryInterval
	}
	if p.EnqueueOnly {
		s.enqueueOnly = true
		s.closeRedis = func() error { return nil }
	} else if err := s.openBarrier(ctx, p); err != nil {
		return nil, err
	}
	drainDeadline := p.DrainDeadline
	if drainDeadline <= 0 {
		drainDeadline = DrainDeadline
	}
	var err error
	workspaces := map[string]string{}
	for _, sc := range p.Config.Syncs {
		workspaces[sc.ID] = sc.Workspace
	}
	if s.metrics, err = newMetrics(p.Registerer, workspaces); err != nil {
		return nil, err
	}
	// Call latency is wall-clock time whatever the service's clock.
	dm, err := app.NewDestinationMetrics(app.DestinationMetricsParams{Registerer: p.Registerer, Clock: clock.Real{}})
	if err != nil {
		return nil, err
	}
	s.destClients = map[string]*http.Client{}
	for i := range s.cfg.Syncs {
		typ := s.cfg.Syncs[i].Destination.Type
		if _, ok := s.destClients[typ]; !ok {
			s.destClients[typ] = dm.Client(p.HTTPClient, typ)
		}
	}

	workers := river.NewWorkers()
	river.AddWorker(workers, &runSyncWorker{s: s})
	river.AddWorker(workers, &recoverWorker{s: s})
	river.AddWorker(workers, &runPartitionedWorker{s: s})
	river.AddWorker(workers, &runPartitionWorker{s: s})
	river.AddWorker(workers, &pruneWorker{s: s})
	river.AddWorker(workers, &catchUpWorker{s: s})
	if p.Deadman != nil {
		deadman.Register(workers, p.Deadman)
	}
	rc := &river.Config{
		Logger:                 riverLogger(s.log),
		MaxAttempts:            MaxAttempts,
		RetryPolicy:            retryPolicy{clock: s.clock, base: p.RetryBackoff, rnd: rand.Float64},
		FetchPollInterval:      p.FetchPollInterval,
		JobTimeout:             -1, // a run lasts as long as its source; drains and leases bound it
		RescueStuckJobsAfter:   RescueStuckJobsAfter,
		SoftStopTimeout:        drainDeadline,
		LeaderElectionDisabled: !s.scheduler,
		Middleware:             []rivertype.Middleware{&insertRecorder{s: s}},
	}
	rc.Test.Time = p.riverTime
	if !s.enqueueOnly { // an insert-only River client has neither
		// MaxWorkers is per queue: QueueV2's rare jobs (a resend, the
		// catch-up) run beside the runs of --workers, as many at once, so
		// that one long resend holds up neither another sync's resend nor
		// the catch-up of lost ticks.
		rc.Queues = map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: s.workers}, QueueV2: {MaxWorkers: s.workers},
			QueueControl: {MaxWorkers: ControlWorkers}}
		rc.Workers = workers
	}
	if p.FetchPollInterval > 0 && p.FetchPollInterval < river.FetchCooldownDefault {
		rc.FetchCooldown = p.FetchPollInterval // River wants cooldown <= poll
	}
	if s.scheduler {
		if rc.PeriodicJobs, err = s.periodicJobs(); err != nil {
			return nil, err
		}
	}
	queueURL := p.QueueURL
	if queueURL == "" {
		queueURL = s.cfg.Store
	}
	if isPostgresURL(queueURL) {
		rc.Schema = p.QueueSchema
		if ss, ok := p.Store.(schemaStore); ok && rc.Schema == "" {
			rc.Schema = ss.Schema()
		}
	}
	if s.b, err = openBackend(ctx, s.cfg, queueURL, rc); err != nil {
		_ = s.closeRedis()
		return nil, failure.Wrap(failure.StoreUnavailable, err, "open the job queue")
	}
	if p.Registerer != nil {
		if err := p.Registerer.Register(newQueueDepth(s.b.countByState, s.drain, s.log)); err != nil {
			_ = s.b.close()
			return nil, err
		}
		if ar, ok := p.Store.(store.ActivityReader); ok {
			configured := make(map[string]bool, len(s.cfg.Syncs))
			for i := range s.cfg.Syncs {
				configured[s.cfg.Syncs[i].ID] = true
			}
			if err := p.Registerer.Register(newSyncStates(ar.SyncActivity, configured, s.drain, s.log)); err != nil {
				_ = s.b.close()
				return nil, err
			}
		}
	}
	return s, nil
}

// buildOptions are the pipeline options of sc: its destination's calls go
// through the client instrumented for its type.
func (s *Service) buildOptions(sc *config.Sync) app.Options {
	o := s.build
	if c, ok := s.destClients[sc.Destination.Type]; ok {
		o.HTTPClient = c
	}
	return o
}

// periodicJobs are one job per scheduled sync (cron, standard parser), the
// recovery sweep, the ledger prune and the dead-man check. River runs them
// on the leader only.
func (s *Service) periodicJobs() ([]*river.PeriodicJob, error) {
	jobs := []*river.PeriodicJob{
		// One sweep per period, not one at a time: a sweep whose worker
		// died stays "running" until River's 24 h rescue, and must not keep
		// every later sweep out (it is the rescue of every other job). A
		// completed sweep does not count: after the wall clock stepped back,
		// the periods it replays were swept already.
		river.NewPeriodicJob(river.PeriodicInterval(s.recovery),
			func() (river.JobArgs, *river.InsertOpts) {
				return RecoverArgs{}, &river.InsertOpts{Queue: QueueControl, MaxAttempts: 1,
					UniqueOpts: river.UniqueOpts{ByArgs: true, ByPeriod: max(s.recovery, time.Second),
						ByState: RecoverArgs{}.InsertOpts().UniqueOpts.ByState}}
			},
			&river.PeriodicJobOpts{RunOnStart: true}),
	}
	if s.deadman != nil {
		jobs = append(jobs, deadman.PeriodicJob(QueueControl))
	}
	prune, err := prunePeriodicJob()
	if err != nil {
		return nil, err
	}
	jobs = append(jobs, prune, s.catchUpPeriodicJob())
	for i := range s.cfg.Syncs {
		sc := &s.cfg.Syncs[i]
		if sc.Schedule == "" {
			continue
		}
		sched, err := config.ParseSchedule(sc.Schedule)
		if err != nil {
			return nil, failure.Wrap(failure.InvalidSyncDefinition, err, "sync %s: invalid schedule", sc.ID)
		}
		jobs = append(jobs, river.NewPeriodicJob(sched, s.scheduledRun(sc), nil))
	}
	return jobs, nil
}

// openBarrier sets up the checkpoint barrier of partitioned syncs.
func (s *Service) openBarrier(ctx context.Context, p Params) error {
	s.keys = p.RedisKeys
	if s.keys == (rediskey.Space{}) && p.Config != nil {
		s.keys = p.Config.RedisKeys()
	}
	s.closeRedis = func() error { return nil }
	if dl, ok := p.Store.(barrier.DeadLetters); ok {
		s.deadLetters = dl
	}
	client := p.Redis
	if client == nil {
		partitioned := false
		for i := range s.cfg.Syncs {
			partitioned = partitioned || s.cfg.Syncs[i].Partitions > 1
		}
		if !partitioned || s.cfg.Redis == "" {
			return nil // a partitioned sync without Redis fails its runs, saying so
		}
		c, err := app.Redis(ctx, s.cfg)
		if err != nil {
			return fmt.Errorf("checkpoint barrier: %w", err)
		}
		client, s.closeRedis = c, c.Close
	}
	s.barrier = barrier.New(barrier.Params{Client: client, Metrics: p.BarrierMetrics, Logger: s.log, Clock: s.clock})
	return nil
}

// Publish writes every sync of the config to the store, once: serve calls
// it before its web UI answers, so that a configured sync's page is there
// from the first request. Start calls it when it was not.
func (s *Service) Publish(ctx context.Context) error {
	if s.published {
		return nil
	}
	// One transaction for every definition: one each took minutes with
	// 10,000 syncs (docs/PERFORMANCE.md#scheduling-at-scale).
	defs := make([]store.PutSyncParams, len(s.cfg.Syncs))
	for i := range s.cfg.Syncs {
		sc := &s.cfg.Syncs[i]
		def, err := sc.DefinitionJSON()
		if err != nil {
			return failure.Wrap(failure.InvalidSyncDefinition, err, "encode the definition of sync %s", sc.ID)
		}
		defs[i] = store.PutSyncParams{ID: sc.ID, Workspace: sc.Workspace, Definition: def, By: app.Publisher(s.cfg.Path)}
	}
	if !s.scheduler {
		var err error
		if defs, err = s.keepPublished(ctx, defs); err != nil {
			return err
		}
	}
	if _, err := s.st.PutSyncs(ctx, defs); err != nil {
		return failure.Wrap(failure.StoreUnavailable, err, "publish the syncs")
	}
	s.published = true
	return nil
}

// Start publishes every sync of the config to the store (Publish) and
// starts working jobs. It returns once the client runs; Shutdown stops it.
func (s *Service) Start(ctx context.Context) error {
	if s.enqueueOnly {
		return errors.New("queue: an EnqueueOnly service works no jobs")
	}
	if err := s.Publish(ctx); err != nil {
		return err
	}
	// The client's lifetime is Shutdown's business, not the caller's context.
	if err := s.b.start(context.WithoutCancel(ctx)); err != nil {
		return failure.Wrap(failure.StoreUnavailable, err, "start the job queue")
	}
	if s.scheduler {
		s.startValidation(ctx) // done long before a leader's first tick, usually
		s.startClockWatch(ctx)
	}
	return nil
}

// Shutdown is SIGTERM (docs/guide.md#running-on-a-schedule-serve-and-worker): stop fetching jobs, ask every in-flight run
// to drain (finish its page, checkpoint, release its lease, end interrupted;
// its job is made available again at once for any worker), cancel the runs
// still going when the shared drain deadline passes, and return when every
// run has returned or ctx ends (callers give it ExitDeadline). The queue's
// database is closed when everything stopped in time.
func (s *Service) Shutdown(ctx context.Context) error {
	s.drainOnce.Do(func() { close(s.drain) })
	s.stopValidation(ctx)
	s.stopClockWatch()
	if err := s.b.stop(ctx); err != nil {
		return fmt.Errorf("queue shutdown: %w", err)
	}
	return errors.Join(s.b.close(), s.closeRedis())
}

// Where names the queue's database (no secrets) for start-up lines.
func (s *Service) Where() string { return s.b.where() }

// Enqueued is the outcome of Enqueue.
type Enqueued struct {
	JobID int64
	// Duplicate: a run of the sync was already queued, retrying or running.
	Duplicate bool
}

// Enqueue queues a run of syncID now. An invalid definition is recorded as a
// failed run (docs/guide.md#running-on-a-schedule-serve-and-worker) and returned; so is a job that cannot be inserted.
func (s *Service) Enqueue(ctx context.Context, syncID, reason string) (Enqueued, error) {
	sc, ok := s.cfg.Sync(syncID)
	if !ok {
		return Enqueued{}, fmt.Errorf("%w: %q", ErrUnknownSync, syncID)
	}
	if err := s.checkDefinition(ctx, sc); err != nil {
		return Enqueued{}, err
	}
	if reason == ReasonManual && sc.Partitions > 1 {
		// A partitioned run's coordinator job ends once it queued the
		// partitions, so its uniqueness no longer says a run is going: a
		// person's "run now" answered "queued" and recorded a skipped run
		// (an independent check, 2026-12-06). Its partitions say it.
		jobs, err := s.b.jobsOf(ctx, KindRunPartition, sc.ID, 0, activeJobStates, 1)
		if err != nil {
			return Enqueued{}, failure.Wrap(failure.StoreUnavailable, err, "look for a run of sync %s in the queue", syncID)
		}
		if len(jobs) > 0 {
			return Enqueued{JobID: jobs[0].ID, Duplicate: true}, nil
		}
	}
	res, err := s.b.insert(ctx, s.runArgsFor(sc, reason), nil)
	if err != nil {
		ferr := failure.Wrap(failure.StoreUnavailable, err, "queue a run of sync %s", syncID)
		if re := (*recordedError)(nil); !errors.As(err, &re) {
			// It failed before River's insert middleware (which records).
			s.recordFailure(ctx, syncID, 0, ferr)
		}
		return Enqueued{}, ferr
	}
	if res.UniqueSkippedAsDuplicate && reason == ReasonManual && waiting(res.Job) {
		// A person asked for a run now, and the sync's queued run waits out
		// a retry's backoff (minutes after a failure) or its time: it is
		// that run, made due now (docs/guide.md#running-on-a-schedule-serve-and-worker).
		if err := s.b.retryNow(ctx, res.Job.ID); err != nil {
			return Enqueued{}, failure.Wrap(failure.StoreUnavailable, err, "make the queued run of sync %s due now", syncID)
		}
		return Enqueued{JobID: res.Job.ID}, nil
	}
	return Enqueued{JobID: res.Job.ID, Duplicate: res.UniqueSkippedAsDuplicate}, nil
}

// waiting reports whether j is a job due later: retryable (waiting out its
// backoff) or scheduled, not yet available or running.
func waiting(j *rivertype.JobRow) bool {
	return j != nil && (j.State == rivertype.JobStateRetryable || j.State == rivertype.JobStateScheduled) &&
		j.ScheduledAt.After(time.Now())
}

// EnqueueResend queues a run of syncID that writes every record again
// (docs/guide.md#sending-everything-again), unless a run of it is queued or
// running (ErrRunPending). Its job carries the id the next run will be at
// least, so a retried or recovered attempt resumes the resend instead of
// starting it over.
func (s *Service) EnqueueResend(ctx context.Context, syncID string) (Enqueued, error) {
	sc, ok := s.cfg.Sync(syncID)
	if !ok {
		return Enqueued{}, fmt.Errorf("%w: %q", ErrUnknownSync, syncID)
	}
	if sc.Partitions > 1 {
		return Enqueued{}, ErrPartitionedResend
	}
	if err := s.checkDefinition(ctx, sc); err != nil {
		return Enqueued{}, err
	}
	runs, err := s.st.ListRuns(ctx, syncID, 1)
	if err != nil {
		return Enqueued{}, failure.Wrap(failure.StoreUnavailable, err, "read the runs of sync %s", syncID)
	}
	before := int64(1)
	if len(runs) > 0 {
		before = runs[0].ID + 1
	}
	res, err := s.b.insert(ctx, RunSyncArgs{SyncID: sc.ID, Reason: ReasonManual, Resend: true, ResendBefore: before, Config: s.fingerprint(sc)}, nil)
	if err != nil {
		return Enqueued{}, failure.Wrap(failure.StoreUnavailable, err, "queue a resend of sync %s", syncID)
	}
	if res.UniqueSkippedAsDuplicate {
		return Enqueued{JobID: res.Job.ID, Duplicate: true}, ErrRunPending
	}
	return Enqueued{JobID: res.Job.ID}, nil
}

// checkDefinition builds sc (no I/O beyond the config) and records a failed
// run when its definition is invalid. Retryable build problems pass: the
// run's worker retries them.
func (s *Service) checkDefinition(ctx context.Context, sc *config.Sync) error {
	ferr := s.buildCheck(sc)
	if ferr == nil || failure.Retryable(ferr) {
		return nil
	}
	s.recordFailure(ctx, sc.ID, 0, ferr)
	return ferr
}

// buildCheck builds sc and closes it: nil when it builds, else why not
// (with its catalog code; retryable or not).
func (s *Service) buildCheck(sc *config.Sync) error {
	built, err := app.Build(s.cfg, sc, s.buildOptions(sc))
	if err != nil {
		return buildFailure(err)
	}
	_ = built.Close()
	return nil
}

// buildFailure gives a build error its catalog code: from a validated config,
// a sync that does not build has an invalid definition.
func buildFailure(err error) error {
	// A file or socket the process could not open is no fault of the
	// definition: retried, and not counted against the sync.
	var fe *failure.Error
	if errors.As(err, &fe) {
		return failure.OutOfFiles(err)
	}
	return failure.OutOfFiles(failure.Wrap(failure.InvalidSyncDefinition, err, "the sync could not be assembled from its definition"))
}

// recordFailure stores a run that failed before it could start (enqueue
// time, or a worker that cannot build the sync) so that it counts (docs/guide.md#running-on-a-schedule-serve-and-worker,
// §8). A store that cannot record it is logged: the caller returns the
// original failure.
func (s *Service) recordFailure(ctx context.Context, syncID string, attempt int, err error) {
	err = failure.OutOfFiles(err)
	// The detail may quote a source's address: a secret in it (a password
	// that is also in a socket path) is hidden as serve's logs hide it.
	code, detail := failure.CodeOf(err), apiclient.HideSecrets(failure.Detail(err), s.cfg.SecretValues())
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	run, rerr := s.st.InsertRun(rctx, store.InsertRunParams{
		SyncID: syncID, State: store.RunFailed, Attempt: attempt, FailureCode: string(code), Detail: detail,
	})
	if rerr != nil {
		s.log.Error("could not record a failed run", "sync", syncID, "code", code, "err", rerr)
		return
	}
	s.metrics.runEnded(syncID, store.RunFailed)
	s.afterFailure(rctx, syncID)
	s.runEnded(rctx, run)
}

// afterFailure evaluates the circuit breaker of syncID (docs/guide.md#guardrails) after a
// failed run was recorded. The breaker reads the streak from stored runs, so
// evaluating it more often than needed is harmless; an evaluation that
// fails is logged (the failure that led here is the caller's to report),
// and the next recorded failure evaluates again.
func (s *Service) afterFailure(ctx context.Context, syncID string) {
	threshold := s.cfg.Settings.BreakerFailures
	if sc, ok := s.cfg.Sync(syncID); ok {
		threshold = sc.EffectiveBreakerFailures(s.cfg.Settings)
	}
	trip, err := s.breaker.AfterFailure(ctx, syncID, threshold)
	if err != nil {
		s.log.Error("circuit breaker evaluation failed", "sync", syncID, "err", err)
	}
	if trip != nil {
		s.metrics.tripped.Inc()
		s.log.Warn("circuit breaker tripped: the sync is paused until a person resumes it",
			"sync", syncID, "failures", trip.Failures, "last_code", trip.LastCode)
	}
}

// riverLogger is the process's logger for River, which is chatty at info
// (migrations, producer counts): its info lines show at debug only.
func riverLogger(log *slog.Logger) *slog.Logger {
	h := log.Handler()
	if h.Enabled(context.Background(), slog.LevelDebug) {
		return log.With("component", "river")
	}
	return slog.New(minLevel{Handler: h, min: slog.LevelWarn}).With("component", "river")
}

// minLevel drops records below min.
type minLevel struct {
	slog.Handler
	min slog.Level
}

func (m minLevel) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= m.min && m.Handler.Enabled(ctx, l)
}

func (m minLevel) WithAttrs(a []slog.Attr) slog.Handler {
	return minLevel{Handler: m.Handler.WithAttrs(a), min: m.min}
}

func (m minLevel) WithGroup(n string) slog.Handler {
	return minLevel{Handler: m.Handler.WithGroup(n), min: m.min}
}

// RiverUI returns River's own web UI over this service's queue, to be mounted
// at prefix behind the caller's authentication (docs/guide.md#commands: serve's UI). Call
// it after New; it stops with ctx.
func (s *Service) RiverUI(ctx context.Context, prefix string) (http.Handler, error) {
	return s.b.ui(ctx, s.log, prefix)
}
