package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os/user"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/breaker"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/store"
)

func newDeadLetterCmd(env Env, rf *rootFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deadletter",
		Short: "List and re-queue work parked after checkpoint mismatches",
		Long: `Work that kept meeting another snapshot at the checkpoint barrier is parked
in the store's dead-letter list after 3 retries, with the reason, both tokens and both
snapshots. A person decides: fix the cause, then re-queue it (docs/guide.md, "Dead letters
and re-queueing").`,
		Example: `  oncesync deadletter list --config oncesync.yaml
  oncesync deadletter requeue --config oncesync.yaml 12`,
	}
	cmd.AddCommand(newDeadLetterListCmd(env), newDeadLetterRequeueCmd(env, rf))
	return asGroup(cmd)
}

func deadLetterStore(st store.Store) (barrier.DeadLetters, error) {
	dl, ok := st.(barrier.DeadLetters)
	if !ok {
		return nil, exit(ExitFailed, fmt.Errorf("the store %T keeps no dead letters", st))
	}
	return dl, nil
}

func newDeadLetterListCmd(env Env) *cobra.Command {
	var (
		path string
		p    barrier.ListDeadLettersParams
	)
	cmd := &cobra.Command{
		Use:   "list --config FILE [--sync SYNC] [--all]",
		Short: "List parked dead letters, newest first",
		Example: `  oncesync deadletter list --config oncesync.yaml
  oncesync deadletter list --config oncesync.yaml --sync contacts-to-brevo --all`,
		Args: argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withConfigStore(cmd.Context(), env, path, func(cfg *config.Config, st store.Store) error {
				dl, err := deadLetterStore(st)
				if err != nil {
					return err
				}
				// A typo'd --sync would list "no dead letters" and pass for a
				// sync with none; a sync the store knows (removed from the
				// config since) keeps its entries.
				if id := p.SyncID; id != "" {
					if _, ok := cfg.Sync(id); !ok {
						if _, err := st.GetSync(cmd.Context(), id); errors.Is(err, store.ErrNotFound) {
							_, err := syncOf(cfg, id)
							return err
						}
					}
				}
				ds, err := dl.ListDeadLetters(cmd.Context(), p)
				if err != nil {
					return exit(ExitFailed, err)
				}
				printDeadLetters(env.Stdout, ds)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "oncesync.yaml", "config file")
	cmd.Flags().StringVar(&p.SyncID, "sync", "", "only this sync's entries")
	cmd.Flags().BoolVar(&p.IncludeRequeued, "all", false, "include entries already re-queued")
	cmd.Flags().IntVar(&p.Limit, "limit", 100, "at most this many entries (0: all)")
	return cmd
}

func printDeadLetters(w io.Writer, ds []barrier.DeadLetter) {
	if len(ds) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPARKED\tSYNC\tRUN\tPART\tREASON\tATTEMPTS\tTOKEN\tSNAPSHOT\tHOLDER\tHOLDER SNAPSHOT\tKEY\tREQUEUED")
	for _, d := range ds {
		requeued := "-"
		if d.Requeued() {
			requeued = d.RequeuedAt.UTC().Format(time.RFC3339) + " by " + orDash(d.RequeuedBy)
		}
		run, part := "-", "-"
		if d.RunID != 0 {
			run = strconv.FormatInt(d.RunID, 10)
		}
		if d.Partition != 0 {
			part = strconv.Itoa(d.Partition)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n",
			d.ID, d.CreatedAt.UTC().Format(time.RFC3339), orDash(d.SyncID), run, part, d.Reason, d.Attempts,
			d.Token, d.Snapshot, orDash(d.HolderToken), orDash(d.HolderSnapshot), d.Key, requeued)
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newDeadLetterRequeueCmd(env Env, rf *rootFlags) *cobra.Command {
	var (
		path     string
		by       string
		markOnly bool
	)
	cmd := &cobra.Command{
		Use:   "requeue --config FILE ID...",
		Short: "Queue a new run for dead letters and mark them re-queued",
		Long: `Re-queue dead letters by ID (from "oncesync deadletter list"). Each entry is marked
re-queued with who did it and when, and stays in the list (--all) as the record.

An entry of a partitioned sync is redone by a new run of the whole sync, queued on
the config's queue (River in the store: <store>.queue beside a SQLite store, the
store's schema on PostgreSQL) like "Run now" on the sync page: the parked run's
source snapshot is stale, so its partitions cannot simply run again. A serve or
worker process on the same store works the run; until one runs, it waits in the
queue. If a run of the sync is already queued or working, that run is the one that
redoes the work and nothing else is queued. The run is queued before the entry is
marked: an entry whose sync is paused (resume it first), is not in this config, or
whose run cannot be queued stays parked and the command exits 1.

An entry of a named barrier ("oncesync checkpoint check --wait") names no sync:
it is only marked; re-run the command that waited on the barrier.

--no-enqueue marks entries without queueing anything (the sync left the config, or
you redid the work yourself).

Each re-queued entry prints one line:
  requeued ID: key=... sync=... run=... partition=... reason=... token=... snapshot=...; <what was queued>`,
		Example: `  oncesync deadletter requeue --config oncesync.yaml 12
  oncesync deadletter requeue --config oncesync.yaml --by alice 12 13
  oncesync deadletter requeue --config oncesync.yaml --no-enqueue 14`,
		Args: argsNamed("ID", 1, -1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := make([]int64, len(args))
			for i, a := range args {
				id, err := strconv.ParseInt(a, 10, 64)
				if err != nil || id <= 0 {
					return exit(ExitUsage, fmt.Errorf("dead letter id %q is not a positive number", a))
				}
				ids[i] = id
			}
			if by == "" {
				by = currentUser()
			}
			return withConfigStore(cmd.Context(), env, path, func(cfg *config.Config, st store.Store) error {
				dl, err := deadLetterStore(st)
				if err != nil {
					return err
				}
				q := &requeueQueue{cfg: cfg, st: st, log: rf.logger(env.Stderr)}
				defer q.close(cmd.Context())
				return requeueDeadLetters(cmd.Context(), env.Stdout, queue.RequeueParams{
					DeadLetters: dl, Store: st, Enqueue: q.enqueue, By: by, MarkOnly: markOnly,
				}, ids)
			})
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "oncesync.yaml", "config file")
	cmd.Flags().StringVar(&by, "by", "", "who re-queues (recorded); default: the OS user")
	cmd.Flags().BoolVar(&markOnly, "no-enqueue", false, "only mark the entries re-queued; queue no run")
	return cmd
}

// requeueDeadLetters re-queues ids with p (ID set per entry), printing one
// line per entry re-queued; the errors of the others are joined.
func requeueDeadLetters(ctx context.Context, w io.Writer, p queue.RequeueParams, ids []int64) error {
	var errs []error
	for _, id := range ids {
		p.ID = id
		r, err := queue.RequeueDeadLetter(ctx, p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		d := r.DeadLetter
		fmt.Fprintf(w, "requeued %d: key=%s sync=%s run=%d partition=%d reason=%s token=%s snapshot=%s; %s\n",
			d.ID, d.Key, orDash(d.SyncID), d.RunID, d.Partition, d.Reason, d.Token, d.Snapshot, requeuedWhat(r, p.MarkOnly))
	}
	if len(errs) > 0 {
		return exit(ExitFailed, errors.Join(errs...))
	}
	return nil
}

// requeuedWhat says what re-queueing one entry queued.
func requeuedWhat(r queue.Requeued, markOnly bool) string {
	switch {
	case r.Working != 0:
		return fmt.Sprintf("run %d of %s, started since, is working; it redoes the work", r.Working, r.DeadLetter.SyncID)
	case r.Queued && r.Run.Duplicate:
		return fmt.Sprintf("a run of %s is already queued or working (job %d); it redoes the work", r.DeadLetter.SyncID, r.Run.JobID)
	case r.Queued:
		return fmt.Sprintf("a new run of %s is queued (job %d); a serve or worker on this store works it", r.DeadLetter.SyncID, r.Run.JobID)
	case markOnly:
		return "marked only (--no-enqueue): no run queued"
	default:
		return "nothing to queue: a named barrier, re-run the command that waited on it"
	}
}

// requeueQueue opens the config's queue on the first run to queue (an
// entry of a named barrier needs none), enqueue-only: no workers, no Redis.
type requeueQueue struct {
	cfg    *config.Config
	st     store.Store
	log    *slog.Logger
	svc    *queue.Service
	alerts *alert.Dispatcher
}

func (q *requeueQueue) enqueue(ctx context.Context, syncID, reason string) (queue.Enqueued, error) {
	if q.svc == nil {
		// A run that cannot be queued is recorded as failed (docs/guide.md#running-on-a-schedule-serve-and-worker) and
		// the breaker evaluated, with the config's alerts, as `oncesync run`
		// does.
		alerts, err := alert.FromConfig(q.cfg.Alerts, q.log, clock.Real{})
		if err != nil {
			return queue.Enqueued{}, failure.Wrap(failure.InvalidSyncDefinition, err, "set up the alert sinks")
		}
		svc, err := queue.New(ctx, queue.Params{
			Config: q.cfg, Store: q.st, EnqueueOnly: true, Logger: q.log,
			Breaker: breaker.New(breaker.Params{Store: q.st, Notifier: alerts, Logger: q.log, Link: app.SyncLink(q.cfg)}),
		})
		if err != nil {
			q.closeAlerts(ctx, alerts)
			return queue.Enqueued{}, err
		}
		q.svc, q.alerts = svc, alerts
	}
	return q.svc.Enqueue(ctx, syncID, reason)
}

func (q *requeueQueue) close(ctx context.Context) {
	if q.svc == nil {
		return
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = q.svc.Shutdown(sctx)
	q.closeAlerts(sctx, q.alerts)
}

// closeAlerts gives queued alerts a moment to go out.
func (q *requeueQueue) closeAlerts(ctx context.Context, a *alert.Dispatcher) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	_ = a.Close(cctx)
}

func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}
