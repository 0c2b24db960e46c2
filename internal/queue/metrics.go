package queue

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
)

// Record outcomes, the values of oncesync_records_total's outcome label
// (store.Counters).
const (
	RecordsRead     = "read"
	RecordsWritten  = "written"
	RecordsReplayed = "replayed"
	RecordsRejected = "rejected"
	RecordsInDoubt  = "in_doubt"
	RecordsSettled  = "settled"
	RecordsSkipped  = "skipped"
)

// QueueDepthStates are the River job states oncesync_queue_depth reports.
var QueueDepthStates = []rivertype.JobState{
	rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable, rivertype.JobStateRunning,
}

// queueDepthTimeout bounds the query of one scrape.
const queueDepthTimeout = 2 * time.Second

// metrics are the queue's Prometheus metrics. Counters count what this
// process did; oncesync_queue_depth is the shared queue's, the same figure
// from every process.
type metrics struct {
	// syncs gives a sync id (or a partition's) its labels: the sync's id and
	// workspace, so one sync can be alerted on.
	syncs func(id string) (sync, workspace string)

	runs          *prometheus.CounterVec // by outcome (run state), sync, workspace
	enqueued      *prometheus.CounterVec // by reason
	recovered     prometheus.Counter
	rescued       *prometheus.CounterVec // by kind (kindLabel)
	tripped       prometheus.Counter
	records       *prometheus.CounterVec // by outcome (RecordsRead...), sync, workspace
	ledgerReplays prometheus.Counter
	leaseLosses   prometheus.Counter
	inDoubt       prometheus.Counter
	pruned        prometheus.Counter
	prunedAt      prometheus.Gauge
}

// Job kinds as oncesync_jobs_rescued_total's kind label.
const (
	RescuedRun         = "run"
	RescuedCoordinator = "coordinator"
	RescuedPartition   = "partition"
)

// kindLabel is the kind label of a job kind.
func kindLabel(kind string) string {
	switch kind {
	case KindRunPartitioned:
		return RescuedCoordinator
	case KindRunPartition:
		return RescuedPartition
	}
	return RescuedRun
}

// syncLabels are the labels every per-sync family carries after its own.
var syncLabels = []string{"sync", "workspace"}

// newMetrics registers the queue's metrics with reg (nil: none). syncs maps
// the configured syncs' ids to their workspaces; their series exist from
// the start. A sync id not in it (removed from the config) is labelled
// with workspace "".
func newMetrics(reg prometheus.Registerer, syncs map[string]string) (*metrics, error) {
	m := &metrics{
		syncs: func(id string) (string, string) {
			id = partition.Parent(id)
			return id, syncs[id]
		},
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncesync_runs_total",
			Help: "Runs finished by this process, by outcome (succeeded, failed, interrupted, skipped), sync and workspace (a partitioned sync's coordinated run and each partition's run count).",
		}, append([]string{"outcome"}, syncLabels...)),
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncesync_jobs_enqueued_total",
			Help: "Run jobs inserted into the queue by this process, by reason (schedule, manual, recovery).",
		}, []string{"reason"}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oncesync_runs_recovered_total",
			Help: "Runs found running with an expired lease and resumed by lease-expiry recovery.",
		}),
		rescued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncesync_jobs_rescued_total",
			Help: "Jobs found running without a live worker (no live heartbeat or run lease, or their run's lease expired) and made available again by lease-expiry recovery, by kind (run, coordinator, partition).",
		}, []string{"kind"}),
		tripped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oncesync_breaker_trips_total",
			Help: "Syncs paused by the circuit breaker after an evaluation by this process.",
		}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncesync_records_total",
			Help: "Records of the runs this process finished, by outcome: read from the source, written by a destination call, " +
				"replayed from the ledger (no call), rejected by the destination, in_doubt (found in doubt), " +
				"settled (in-doubt records the destination confirmed, no write), skipped (left as the destination had them by write_mode create or update); by sync and workspace.",
		}, append([]string{"outcome"}, syncLabels...)),
		ledgerReplays: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oncesync_ledger_replays_total",
			Help: "Records found complete in the ledger and skipped without a destination call (a resumed page), in runs this process finished.",
		}),
		leaseLosses: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oncesync_lease_losses_total",
			Help: "Runs this process ended because the sync's lease was lost (failure code lease_lost).",
		}),
		inDoubt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oncesync_in_doubt_records_total",
			Help: "In-doubt records (a write whose outcome was unknown) found by runs this process finished, settled or left to a person.",
		}),
		pruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oncesync_ledger_pruned_total",
			Help: "Ledger entries removed by the ledger prune jobs this process worked (entries older than the retention).",
		}),
		prunedAt: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "oncesync_ledger_prune_last_success_timestamp_seconds",
			Help: "When a ledger prune worked by this process last finished without error (Unix seconds; 0 = not yet).",
		}),
	}
	// Every series exists from the start, at 0, so that rates and alerts
	// work before the first event.
	for id, ws := range syncs {
		for _, o := range []store.RunState{store.RunSucceeded, store.RunFailed, store.RunInterrupted, store.RunSkipped} {
			m.runs.WithLabelValues(string(o), id, ws)
		}
		for _, o := range []string{RecordsRead, RecordsWritten, RecordsReplayed, RecordsRejected, RecordsInDoubt, RecordsSettled, RecordsSkipped} {
			m.records.WithLabelValues(o, id, ws)
		}
	}
	for _, k := range []string{RescuedRun, RescuedCoordinator, RescuedPartition} {
		m.rescued.WithLabelValues(k)
	}
	for _, r := range []string{ReasonSchedule, ReasonManual, ReasonRecovery} {
		m.enqueued.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.runs, m.enqueued, m.recovered, m.rescued, m.tripped, m.records, m.ledgerReplays, m.leaseLosses, m.inDoubt, m.pruned, m.prunedAt} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// runFinished counts a run runner.Run returned: its outcome (a run never
// recorded, ID 0, counts as failed), its records and a lost lease.
func (m *metrics) runFinished(syncID string, run store.Run, runErr error) {
	outcome := string(run.State)
	if run.ID == 0 {
		outcome = string(store.RunFailed)
	}
	id, ws := m.syncs(syncID)
	m.runs.WithLabelValues(outcome, id, ws).Inc()
	for o, n := range map[string]int64{
		RecordsRead: run.Read, RecordsWritten: run.Written, RecordsReplayed: run.Replayed,
		RecordsRejected: run.Rejected, RecordsInDoubt: run.InDoubt, RecordsSettled: run.Settled, RecordsSkipped: run.Skipped,
	} {
		if n > 0 {
			m.records.WithLabelValues(o, id, ws).Add(float64(n))
		}
	}
	if run.Replayed > 0 {
		m.ledgerReplays.Add(float64(run.Replayed))
	}
	if run.InDoubt > 0 {
		m.inDoubt.Add(float64(run.InDoubt))
	}
	if failure.CodeOf(runErr) == failure.LeaseLost || run.FailureCode == string(failure.LeaseLost) {
		m.leaseLosses.Inc()
	}
}

// runEnded counts a run recorded without runFinished (a coordinated run,
// a run that failed before it started).
func (m *metrics) runEnded(syncID string, state store.RunState) {
	id, ws := m.syncs(syncID)
	m.runs.WithLabelValues(string(state), id, ws).Inc()
}

// queueDepth is oncesync_queue_depth{state}: the jobs of the shared queue in
// QueueDepthStates, one GROUP BY query per scrape. A scrape during an outage
// of the queue's database, or once the service is shutting down, reports no
// series rather than failing the whole scrape.
type queueDepth struct {
	desc  *prometheus.Desc
	count func(ctx context.Context) (map[rivertype.JobState]int, error)
	done  <-chan struct{} // closed at Shutdown
	log   *slog.Logger
}

func newQueueDepth(count func(ctx context.Context) (map[rivertype.JobState]int, error), done <-chan struct{}, log *slog.Logger) *queueDepth {
	return &queueDepth{
		desc: prometheus.NewDesc("oncesync_queue_depth",
			"Jobs in the queue (shared by every process on it), by River job state: available (due), scheduled (due later), retryable (waiting for a retry), running.",
			[]string{"state"}, nil),
		count: count, done: done, log: log,
	}
}

// Describe implements prometheus.Collector.
func (q *queueDepth) Describe(ch chan<- *prometheus.Desc) { ch <- q.desc }

// Collect implements prometheus.Collector.
func (q *queueDepth) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-q.done:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), queueDepthTimeout)
	defer cancel()
	counts, err := q.count(ctx)
	if err != nil {
		q.log.Warn("queue depth not reported: the queue's database did not answer", "err", err)
		return
	}
	for _, s := range QueueDepthStates {
		ch <- prometheus.MustNewConstMetric(q.desc, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
}

// syncStates are the figures of every configured sync that a rule outside
// oncesync needs to tell a silent or paused sync without oncesync's own
// dead-man check (docs/guide.md#telling-silence-from-outside), read from the
// store at each scrape (the same figures from every process):
//
//	oncesync_sync_last_success_timestamp_seconds{sync,workspace}
//	oncesync_sync_paused{sync,workspace,by}
//
// A scrape while the store does not answer, or once the service is
// shutting down, reports no series rather than failing the whole scrape.
type syncStates struct {
	lastSuccess, paused *prometheus.Desc
	read                func(ctx context.Context) ([]store.Activity, error)
	configured          map[string]bool
	done                <-chan struct{}
	log                 *slog.Logger
}

// Pause causes as oncesync_sync_paused's by label.
var pausedBy = []string{"breaker", "person"}

func newSyncStates(read func(ctx context.Context) ([]store.Activity, error), configured map[string]bool, done <-chan struct{}, log *slog.Logger) *syncStates {
	return &syncStates{
		lastSuccess: prometheus.NewDesc("oncesync_sync_last_success_timestamp_seconds",
			"When the sync's latest successful run finished (Unix seconds; 0 = never), from the store: alert on time() minus it.",
			syncLabels, nil),
		paused: prometheus.NewDesc("oncesync_sync_paused",
			"1 when the sync is paused by the circuit breaker (by=breaker) or by a person (by=person), else 0, from the store.",
			append(append([]string(nil), syncLabels...), "by"), nil),
		read: read, configured: configured, done: done, log: log,
	}
}

// Describe implements prometheus.Collector.
func (c *syncStates) Describe(ch chan<- *prometheus.Desc) { ch <- c.lastSuccess; ch <- c.paused }

// Collect implements prometheus.Collector.
func (c *syncStates) Collect(ch chan<- prometheus.Metric) {
	select {
	case <-c.done:
		return
	default:
	}
	ctx, cancel := context.WithTimeout(context.Background(), queueDepthTimeout)
	defer cancel()
	acts, err := c.read(ctx)
	if err != nil {
		c.log.Warn("sync states not reported: the store did not answer", "err", err)
		return
	}
	for _, a := range acts {
		if !c.configured[a.SyncID] {
			continue // a partition's own sync, or one no longer in the config
		}
		last := 0.0
		if !a.LastSuccessAt.IsZero() {
			last = float64(a.LastSuccessAt.UnixNano()) / 1e9
		}
		ch <- prometheus.MustNewConstMetric(c.lastSuccess, prometheus.GaugeValue, last, a.SyncID, a.Workspace)
		for _, by := range pausedBy {
			v := 0.0
			if a.State == store.SyncPaused && a.PauseReason == by {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, v, a.SyncID, a.Workspace, by)
		}
	}
}
