package queue

import (
	"context"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
)

// The ledger's retention (docs/guide.md#the-ledger-and-its-retention): the leader queues a prune every hour,
// any process works it, and it removes what Store.LedgerPrune removes (the
// entries not seen since the retention) so that the ledger stays bounded,
// the runs' page rows older than the same cut (Store.PruneRunPages), of
// which every run writes one per page, and the runs themselves that ended
// before it beyond each sync's newest (Store.PruneRuns), of which every tick
// of a schedule writes one.

// KindPruneLedger is the ledger prune job.
const KindPruneLedger = "oncesync_ledger_prune"

// PruneSchedule is the prune's cron schedule: every hour at minute 43, away
// from the dead-man check's minute 13. A fixed minute, unlike an interval
// counted from the leader's start, still prunes when leaders come and go
// more often than hourly.
const PruneSchedule = "43 * * * *"

// PruneTimeout bounds one prune (the store deletes in short windows, so a
// long one blocks nobody; the queue's default is no timeout at all).
const PruneTimeout = 30 * time.Minute

// PruneLedgerArgs is one prune of the ledger.
type PruneLedgerArgs struct{}

// Kind implements river.JobArgs.
func (PruneLedgerArgs) Kind() string { return KindPruneLedger }

// InsertOpts implements river.JobArgsWithInsertOpts: at most one prune per
// hour (a leader elected mid-hour, which prunes at once, adds no second
// one), retried twice when the store is down.
func (PruneLedgerArgs) InsertOpts() river.InsertOpts {
	return river.InsertOpts{
		Queue:       QueueControl,
		MaxAttempts: 3,
		UniqueOpts: river.UniqueOpts{
			ByPeriod: time.Hour,
			ByState: []rivertype.JobState{
				rivertype.JobStateAvailable, rivertype.JobStateCompleted, rivertype.JobStatePending,
				rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled,
			},
		},
	}
}

// prunePeriodicJob is the prune's periodic job. It also runs when a leader
// starts: a deployment restarted within every hour's minute 43 would
// otherwise never prune.
func prunePeriodicJob() (*river.PeriodicJob, error) {
	sched, err := config.ParseSchedule(PruneSchedule)
	if err != nil {
		return nil, err
	}
	return river.NewPeriodicJob(sched,
		func() (river.JobArgs, *river.InsertOpts) { return PruneLedgerArgs{}, nil },
		&river.PeriodicJobOpts{ID: KindPruneLedger, RunOnStart: true}), nil
}

type pruneWorker struct {
	river.WorkerDefaults[PruneLedgerArgs]
	s *Service
}

// Work implements river.Worker: one PruneLedger.
func (w *pruneWorker) Work(ctx context.Context, _ *river.Job[PruneLedgerArgs]) error {
	_, err := w.s.PruneLedger(ctx)
	return err
}

// Timeout implements river.Worker.
func (w *pruneWorker) Timeout(*river.Job[PruneLedgerArgs]) time.Duration { return PruneTimeout }

// Pruned says what one prune did.
type Pruned struct {
	// Retention is the one applied (LedgerRetention).
	Retention time.Duration
	// Before is the cut: entries not seen since then were removed.
	Before time.Time
	// Entries is how many were removed.
	Entries int64
	// RunPages is how many run page rows were removed.
	RunPages int64
	// Runs is how many runs were removed.
	Runs int64
	// Shorter are the syncs whose own retention is shorter than Retention:
	// their entries are kept for Retention.
	Shorter []string
}

// LedgerRetention is the retention a prune applies: the longest of the
// deployment's ledger_retention and every sync's override. Store.LedgerPrune
// makes one pass over the entries of every sync, with one cut; a sync with a
// shorter retention keeps its entries longer than it asked (they cost disk
// only), where a shorter cut would remove entries another sync still needs.
// A retention of zero (a config that was not validated) is the default.
func LedgerRetention(cfg *config.Config) time.Duration {
	longest := cfg.Settings.LedgerRetention
	if longest <= 0 {
		longest = config.Defaults().LedgerRetention
	}
	for i := range cfg.Syncs {
		longest = max(longest, cfg.Syncs[i].EffectiveLedgerRetention(cfg.Settings))
	}
	return longest
}

// PruneLedger removes the ledger entries not seen within LedgerRetention
// (docs/guide.md#the-ledger-and-its-retention) and then the run page rows and the runs older than the same cut, logs
// how many (counts: never keys) and counts the entries in
// oncesync_ledger_pruned_total. Errors carry store_unavailable.
func (s *Service) PruneLedger(ctx context.Context) (Pruned, error) {
	p := Pruned{Retention: LedgerRetention(s.cfg)}
	p.Before = s.clock.Now().Add(-p.Retention)
	for i := range s.cfg.Syncs {
		if sc := &s.cfg.Syncs[i]; sc.EffectiveLedgerRetention(s.cfg.Settings) < p.Retention {
			p.Shorter = append(p.Shorter, sc.ID)
		}
	}
	n, err := s.st.LedgerPrune(ctx, p.Before)
	p.Entries = n
	s.metrics.pruned.Add(float64(n)) // a prune cut short removed these all the same
	if err != nil {
		return p, failure.Wrap(failure.StoreUnavailable, err, "prune the ledger (%d entries removed before the error)", n)
	}
	// The run pages come after the ledger: their prune failing (a store
	// gone) leaves the ledger's done and counted.
	if p.RunPages, err = s.st.PruneRunPages(ctx, p.Before); err != nil {
		return p, failure.Wrap(failure.StoreUnavailable, err, "prune the run pages (%d rows removed before the error)", p.RunPages)
	}
	if p.Runs, err = s.st.PruneRuns(ctx, p.Before); err != nil {
		return p, failure.Wrap(failure.StoreUnavailable, err, "prune the runs (%d removed before the error)", p.Runs)
	}
	s.metrics.prunedAt.Set(float64(s.clock.Now().Unix()))
	attrs := []any{"entries", n, "run_pages", p.RunPages, "runs", p.Runs, "retention", p.Retention, "before", p.Before}
	if len(p.Shorter) > 0 {
		// Said on every prune: the shorter retention is not honoured.
		attrs = append(attrs, "kept_longer", len(p.Shorter),
			"note", "syncs with a shorter ledger_retention keep their entries for the longest retention in use: the prune is one pass over every sync")
	}
	s.log.Info("ledger pruned", attrs...)
	return p, nil
}
