package cli

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/breaker"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
)

// withStore loads the config and opens its store for a read/admin command.
func withStore(ctx context.Context, env Env, path string, fn func(store.Store) error) error {
	return withConfigStore(ctx, env, path, func(_ *config.Config, st store.Store) error { return fn(st) })
}

// withConfigStore is withLoadedStore for the commands that never reach a
// source or destination: unset ${ENV} variables are allowed (readOnlyEnv).
func withConfigStore(ctx context.Context, env Env, path string, fn func(*config.Config, store.Store) error) error {
	load := func() (*config.Config, error) {
		return loadConfig(Env{LookupEnv: readOnlyEnv(env.LookupEnv), scrub: env.scrub}, path)
	}
	return withLoadedStore(ctx, env, load, fn)
}

// withLoadedStore loads the config with load and opens its store.
func withLoadedStore(ctx context.Context, env Env, load func() (*config.Config, error), fn func(*config.Config, store.Store) error) error {
	cfg, err := load()
	if err != nil {
		return err
	}
	if err := unsetInStore(cfg); err != nil {
		return err
	}
	noticeNewStore(env, cfg)
	st, err := app.OpenStore(ctx, cfg, clock.Real{})
	if err != nil {
		return failed(env, err)
	}
	defer st.Close()
	if err := fn(cfg, st); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			return err
		}
		// A store read or write that failed after the store opened is a
		// failure (exit 1 and the docs/guide.md#commands last line), not
		// a bad flag: Main answers a plain error with exit 2.
		return failed(env, commandFailure(err))
	}
	return nil
}

// commandFailure is err with a catalog code: its own, store_unavailable
// for a store that cannot be used now, else internal_error. The detail is
// the error's text, which names the step and the store's answer.
func commandFailure(err error) error {
	var fe *failure.Error
	if errors.As(err, &fe) {
		return err
	}
	code := failure.Internal
	if errors.Is(err, store.ErrUnavailable) {
		code = failure.StoreUnavailable
	}
	return failure.Wrap(code, err, "%s", err.Error())
}

// unsetPlaceholder stands for an unset ${ENV} variable in the commands
// that read the store and never reach a source or destination (status,
// runs, records, pause, resume, deadletter list): a person on an operations
// machine reads a sync without its API keys.
const unsetPlaceholder = config.UnsetPlaceholder

// unsetInStore refuses a store URL that holds an unset variable's
// placeholder (readOnlyEnv): every one of those commands opens the store,
// and a placeholder password would read as a wrong one ("refused the store
// URL's user or password") where the cause is the unset variable. Redis is
// left alone: most of them never reach it.
func unsetInStore(cfg *config.Config) error {
	for _, f := range []struct{ key, val string }{{"store", cfg.Store}} {
		_, rest, ok := strings.Cut(f.val, unsetPlaceholder+"-")
		if !ok {
			continue
		}
		name := rest
		if i := strings.IndexFunc(rest, func(r rune) bool {
			return !(r == '_' || r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
		}); i >= 0 {
			name = rest[:i]
		}
		return exit(ExitUsage, fmt.Errorf("%s: %s: environment variable %s is not set (this command may leave a source's or destination's variables unset, not the store's)", cfg.Path, f.key, name))
	}
	return nil
}

// readOnlyEnv is lookup, with every unset variable set to unsetPlaceholder
// and its name: two unset variables do not read as one value (two API
// tokens from two unset variables are not "the same token").
func readOnlyEnv(lookup func(string) (string, bool)) func(string) (string, bool) {
	return func(k string) (string, bool) {
		if lookup != nil {
			if v, ok := lookup(k); ok {
				return v, true
			}
		}
		return unsetPlaceholder + "-" + k, true
	}
}

// discardAlerts is the notifier of a read-only dead-man evaluation.
type discardAlerts struct{}

func (discardAlerts) Notify(_ context.Context, a alert.Alert) (alert.Alert, error) { return a, nil }

// printDeadman prints the sync's dead-man verdict (docs/guide.md#telling-silence-from-outside), read-only.
func printDeadman(ctx context.Context, w io.Writer, cfg *config.Config, st store.Store, id string) {
	rdb, err := app.Redis(ctx, cfg)
	if err != nil {
		fmt.Fprintf(w, "dead-man:   unknown (%v)\n", err)
		return
	}
	if rdb != nil {
		defer rdb.Close()
	}
	checker, err := app.Deadman(app.DeadmanParams{Config: cfg, Store: st, Notifier: discardAlerts{}, Redis: rdb})
	if err != nil {
		fmt.Fprintf(w, "dead-man:   unknown (%v)\n", err)
		return
	}
	rep, err := checker.Evaluate(ctx)
	if err != nil {
		fmt.Fprintf(w, "dead-man:   unknown (%v)\n", err)
		return
	}
	if lc, err := checker.LastCheck(ctx); err == nil {
		fmt.Fprintf(w, "dead-man:   last check %s\n", lc)
	}
	v, ok := rep.Find(deadman.ScopeSync, id)
	switch {
	case !ok:
		fmt.Fprintln(w, "dead-man:   not checked (paused by a person, or not in this config)")
	case v.Status == deadman.StatusSilent:
		alerted := "not alerted yet (the next dead-man check will)"
		if v.Marker != nil {
			alerted = "alerted at " + v.Marker.RaisedAt.UTC().Format(time.RFC3339)
		}
		fmt.Fprintf(w, "dead-man:   SILENT (%s) since %s, window %s; %s\n", v.Kind, v.SilentSince.UTC().Format(time.RFC3339), v.Window, alerted)
	default:
		fmt.Fprintf(w, "dead-man:   %s (window %s)\n", v.Status, v.Window)
	}
}

// breakerThreshold is the sync's breaker_failures (the deployment's for a
// sync not in the config).
func breakerThreshold(cfg *config.Config, id string) int {
	if sc, ok := cfg.Sync(id); ok {
		return sc.EffectiveBreakerFailures(cfg.Settings)
	}
	return cfg.Settings.BreakerFailures
}

// streakLine is the failure streak as `status` shows it: the count the
// breaker compares with breaker_failures, and the operator's failures it
// leaves out.
func streakLine(k breaker.Streak, threshold int) string {
	more := ""
	if !k.Ended {
		more = "+"
	}
	line := fmt.Sprintf("%d%s of %d (failures that are the sync's to fix, since its last success or change)", k.Failures, more, threshold)
	if k.Operator > 0 {
		line += fmt.Sprintf("; %d%s more the operator owns, not counted", k.Operator, more)
	}
	return line
}

// hintRE finds the commands of a catalog hint that take a sync id.
var hintRE = regexp.MustCompile("`oncesync (status|runs|run|resume|pause|records)(?: --config FILE)? SYNC")

// concreteHint fills the config file and the sync id into the commands of a
// catalog hint, so it can be pasted as it is.
func concreteHint(hint, configPath, id string) string {
	if configPath == "" {
		configPath = "FILE"
	}
	return hintRE.ReplaceAllString(hint, "`oncesync $1 --config "+strings.ReplaceAll(configPath, "$", "$$")+" "+strings.ReplaceAll(id, "$", "$$"))
}

// getSync is the store's record of sync id. An id the store has never
// seen is a usage error that says whether the config has it (not run yet)
// or not (a typo: the config's ids are listed).
func getSync(ctx context.Context, cfg *config.Config, st store.Store, id string) (store.Sync, error) {
	s, err := st.GetSync(ctx, id)
	if !errors.Is(err, store.ErrNotFound) {
		return s, err
	}
	if _, err := syncOf(cfg, id); err != nil {
		return s, err
	}
	return s, exit(ExitUsage, fmt.Errorf("sync %q has not run on this store yet; start it with `oncesync run --config %s %s`", id, cfg.Path, id))
}

// printOverview is `status` without a sync id: one line per sync of the
// config, and of the store (a sync removed from the config keeps its runs).
func printOverview(ctx context.Context, w io.Writer, cfg *config.Config, st store.Store) error {
	stored, err := st.ListSyncs(ctx)
	if err != nil {
		return err
	}
	byID := map[string]store.Sync{}
	for _, s := range stored {
		byID[s.ID] = s
	}
	var ids []string
	for _, sc := range cfg.Syncs {
		ids = append(ids, sc.ID)
	}
	for _, s := range stored {
		if _, ok := cfg.Sync(s.ID); !ok && partition.Parent(s.ID) == s.ID { // partitions show under their sync
			ids = append(ids, s.ID)
		}
	}
	if len(ids) == 0 {
		fmt.Fprintf(w, "no syncs in %s or its store\n", cfg.Path)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SYNC\tWORKSPACE\tSTATE\tLAST RUN\tFINISHED\tCODE")
	for _, id := range ids {
		s, known := byID[id]
		ws, state := s.Workspace, string(s.State)
		if sc, ok := cfg.Sync(id); ok {
			ws = sc.Workspace
		} else {
			state += " (not in the config)"
		}
		if !known {
			fmt.Fprintf(tw, "%s\t%s\tnever run\t-\t-\t\n", id, ws)
			continue
		}
		runs, err := st.ListRuns(ctx, id, 20)
		if err != nil {
			return err
		}
		last, at, code := "-", "-", ""
		if r, ok := store.NewestRan(runs); ok {
			last = fmt.Sprintf("%d %s", r.ID, r.State)
			if !r.FinishedAt.IsZero() {
				at = r.FinishedAt.UTC().Format(time.RFC3339)
			}
			code = r.FailureCode
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", id, ws, state, last, at, code)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "details: `oncesync status --config %s SYNC`\n", cfg.Path)
	return nil
}

// leaseLine describes a lease row, saying when it no longer protects a run.
func leaseLine(l store.Lease, now time.Time) string {
	line := fmt.Sprintf("fence %d, run %d (%s), until %s", l.Fence, l.RunID, l.Holder, l.ExpiresAt.UTC().Format(time.RFC3339))
	switch {
	case lease.DeadHere(l.Holder, lease.ThisProcess()):
		return line + "; its process is no longer running: the next run takes the sync over at once and settles what it left in flight"
	case !l.ExpiresAt.After(now):
		return line + "; expired: no run holds the sync"
	}
	return line
}

// printLease prints the sync's lease from where the deployment keeps it:
// the store, or Redis when `redis` is set (docs/config.md). Nothing when
// the sync is free. It returns the lease and whether one was read, for
// printRunning; known is false when it could not be read.
func printLease(ctx context.Context, w io.Writer, cfg *config.Config, st store.Store, id string, now time.Time) (l store.Lease, held, known bool) {
	if cfg.Redis == "" {
		l, err := st.LeaseGet(ctx, id)
		if err == nil {
			fmt.Fprintf(w, "lease:      %s\n", leaseLine(l, now))
		}
		return l, err == nil, err == nil || errors.Is(err, store.ErrNotFound)
	}
	rdb, err := app.Redis(ctx, cfg)
	if err != nil {
		fmt.Fprintf(w, "lease:      unknown (%v)\n", err)
		return store.Lease{}, false, false
	}
	defer rdb.Close()
	// TTL zero: a read reports a loss of Redis's data without starting the
	// quarantine itself (a read-only command changes nothing).
	l, err = redislease.New(redislease.Params{Client: rdb, Store: st, Keys: cfg.RedisKeys()}).Get(ctx, id)
	var qe *lease.QuarantineError
	switch {
	case err == nil:
		fmt.Fprintf(w, "lease:      %s\n", leaseLine(l, now))
		return l, true, true
	case errors.As(err, &qe):
		fmt.Fprintf(w, "lease:      none granted: %v\n", qe)
	case errors.Is(err, store.ErrNotFound):
		return store.Lease{}, false, true
	default:
		fmt.Fprintf(w, "lease:      unknown (%v)\n", err)
	}
	return store.Lease{}, false, false
}

// printRunning says that the sync's newest run is recorded running and,
// when no live process holds the sync's lease for it past one lease TTL,
// that its worker is gone and who closes it: without this line a run
// whose worker died while no serve led (the recovery sweep runs on the
// leader) showed only as "running" in the overview, for as long as no
// serve came back (docs/guide.md#running-on-a-schedule-serve-and-worker).
func printRunning(w io.Writer, cfg *config.Config, id string, runs []store.Run, l store.Lease, held, known bool, now time.Time) {
	r, ok := store.NewestRan(runs)
	if !ok || r.State != store.RunRunning {
		return
	}
	line := fmt.Sprintf("running:    run %d since %s", r.ID, r.StartedAt.UTC().Format(time.RFC3339))
	sc, ok := cfg.Sync(id)
	partitioned := ok && sc.Partitions > 1 // its partitions hold the leases
	live := held && l.RunID == r.ID && l.ExpiresAt.After(now) && !lease.DeadHere(l.Holder, lease.ThisProcess())
	if known && !partitioned && !live && now.Sub(r.StartedAt) > cfg.Settings.LeaseTTL {
		line += "; no live process holds the sync's lease for it: its worker stopped without recording the end. " +
			"The recovery sweep of the leading serve (every 10 s) marks it interrupted and queues it again; if it stays like this, " +
			"no serve is running: start one. The next run resumes from the cursor"
	}
	fmt.Fprintln(w, line)
}

// nextRunLine says when the schedule starts the sync next, as the sync page
// does (an @every schedule counts from when a serve became the leader,
// unknown here).
func nextRunLine(schedule string, state store.SyncState, now time.Time) string {
	switch {
	case state == store.SyncPaused:
		return "none while paused (resume starts the schedule again)"
	case schedule == "":
		return "none scheduled (no schedule: oncesync run, \"Run now\" or the API start it)"
	}
	sched, err := config.ParseSchedule(schedule)
	if err != nil {
		return fmt.Sprintf("unknown (schedule %q: %v)", schedule, err)
	}
	if d, every := sched.(cron.ConstantDelaySchedule); every {
		return fmt.Sprintf("every %s (schedule %q), counted from when a running oncesync serve became the leader", d.Delay, schedule)
	}
	return fmt.Sprintf("%s (schedule %q), if an oncesync serve is running; a failed run's retry can come sooner",
		sched.Next(now).UTC().Format(time.RFC3339), schedule)
}

// printAccepted says how many of the sync's records a destination accepted
// for processing and no run has settled yet: records a run left accepted
// when it stopped waiting for them are in none of its figures (`runs`), and
// were in no line of `status` either (docs/guide.md#brevo-bulk-imports-accepted-then-delivered-or-rejected).
func printAccepted(ctx context.Context, w io.Writer, st store.Store, id string) error {
	es, err := st.LedgerList(ctx, id, store.LedgerAccepted, 0)
	if err != nil || len(es) == 0 {
		return err
	}
	oldest := es[0].ClaimedAt
	for _, e := range es {
		if e.ClaimedAt.Before(oldest) {
			oldest = e.ClaimedAt
		}
	}
	fmt.Fprintf(w, "accepted:   %d record(s) accepted by the destination for processing and not settled yet (the oldest sent at %s): "+
		"a running run settles them as their processes end; otherwise the next run that reads their rows asks the destination what became of them "+
		"(a row no longer in the source keeps its entry)\n",
		len(es), oldest.UTC().Format(time.RFC3339))
	return nil
}

func newStatusCmd(env Env) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "status --config FILE [SYNC]",
		Short: "Show a sync's state, last error with next step and owner, dead-man state, lease and cursor",
		Long: `Without SYNC, one line per sync: its state, its last run and that run's failure code.
With SYNC, the sync in detail: state, next run by the schedule, last success, failure streak, the last error with its
next step and owner, the lease (and whether its holder is still alive), the cursor and the
dead-man verdict.`,
		Example: `  oncesync status --config oncesync.yaml
  oncesync status --config oncesync.yaml contacts-to-brevo`,
		Args: argsNamed("SYNC", 0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withConfigStore(cmd.Context(), env, path, func(cfg *config.Config, st store.Store) error {
				if len(args) == 0 {
					return printOverview(cmd.Context(), env.Stdout, cfg, st)
				}
				if err := printStatus(cmd.Context(), env.Stdout, cfg, st, args[0], env.clock().Now()); err != nil {
					return err
				}
				printDeadman(cmd.Context(), env.Stdout, cfg, st, args[0])
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "oncesync.yaml", "config file")
	return cmd
}

func printStatus(ctx context.Context, w io.Writer, cfg *config.Config, st store.Store, id string, now time.Time) error {
	s, err := getSync(ctx, cfg, st, id)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "sync:       %s (workspace %s)\n", s.ID, s.Workspace)
	state := string(s.State)
	if s.State == store.SyncPaused {
		state += fmt.Sprintf(" (%s, by %s: %s)", s.PauseReason, s.PausedBy, s.PausedWhy)
	}
	if _, ok := cfg.Sync(id); !ok {
		// Nothing schedules it, and the dead-man check leaves it alone.
		state += " (not in the config: nothing runs it)"
	}
	fmt.Fprintf(w, "state:      %s\n", state)
	fmt.Fprintf(w, "changed at: %s\n", s.ChangedAt.UTC().Format(time.RFC3339))
	if sc, ok := cfg.Sync(id); ok {
		fmt.Fprintf(w, "next run:   %s\n", nextRunLine(sc.Schedule, s.State, now))
	}
	runs, err := st.ListRuns(ctx, id, 50)
	if err != nil {
		return err
	}
	var lastOK, lastRun *store.Run
	for i := range runs {
		r := &runs[i]
		if lastRun == nil && r.State.Finished() || lastRun == nil && r.State == store.RunInterrupted {
			lastRun = r
		}
		if r.State == store.RunSucceeded && lastOK == nil {
			lastOK = r
		}
	}
	if lastOK != nil {
		fmt.Fprintf(w, "last success: run %d at %s\n", lastOK.ID, lastOK.FinishedAt.UTC().Format(time.RFC3339))
	} else {
		fmt.Fprintln(w, "last success: never")
	}
	// The breaker's own streak (docs/guide.md#guardrails), so this line and the pause agree.
	_, k, err := breaker.Read(ctx, st, id, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "failure streak: %s\n", streakLine(k, breakerThreshold(cfg, id)))
	if lastRun != nil && lastRun.FailureCode != "" && lastRun.State == store.RunFailed {
		e := failure.Lookup(failure.Code(lastRun.FailureCode))
		fmt.Fprintf(w, "last error: run %d: %s: %s\n  next: %s\n  owner: %s\n", lastRun.ID, e.Code, lastRun.FailureDetail,
			concreteHint(e.NextStep, cfg.Path, id), e.Owner)
	}
	l, held, known := printLease(ctx, w, cfg, st, id, now)
	printRunning(w, cfg, id, runs, l, held, known, now)
	if err := printAccepted(ctx, w, st, id); err != nil {
		return err
	}
	if c, err := st.GetCursor(ctx, id); err == nil && !c.UpdatedAt.IsZero() {
		pos := "start of source (next run reads everything; the ledger skips what was delivered)"
		if c.Value != "" {
			pos = "mid-source"
			if where := cfg.DescribeCursor(id, c.Value); where != "" {
				pos = where
			}
		}
		fmt.Fprintf(w, "cursor:     %s, saved at %s by run %d (fence %d)\n", pos, c.UpdatedAt.UTC().Format(time.RFC3339), c.RunID, c.Fence)
	}
	return nil
}

func newRunsCmd(env Env) *cobra.Command {
	var (
		path  string
		limit int
		state string
	)
	cmd := &cobra.Command{
		Use:   "runs --config FILE SYNC",
		Short: "List a sync's recent runs with their figures and failure codes",
		// A succeeded run showing IN DOUBT 93 read as 93 records still open
		// (an independent check, 2026-12-07).
		Long: `List a sync's recent runs, newest first, with their figures and failure codes.

IN DOUBT counts the writes in doubt a run found (an earlier run's, whose answer was lost). A run that
succeeded resolved every one of them: settled as landed, or sent again under the same key. A run that
failed records_in_doubt left them to a person. ` + "`oncesync records --config FILE SYNC --settled`" + ` lists how
each was resolved, ` + "`--in-doubt`" + ` those still open.`,
		Example: `  oncesync runs --config oncesync.yaml contacts-to-brevo --limit 20
  oncesync runs --config oncesync.yaml contacts-to-brevo --state failed`,
		Args: argsNamed("SYNC", 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			want := store.RunState(state)
			switch want {
			case "", store.RunSucceeded, store.RunFailed, store.RunInterrupted, store.RunSkipped, store.RunRunning:
			default:
				return exit(ExitUsage, fmt.Errorf("--state %q: want succeeded, failed, interrupted, skipped or running", state))
			}
			return withConfigStore(cmd.Context(), env, path, func(cfg *config.Config, st store.Store) error {
				if _, err := getSync(cmd.Context(), cfg, st, args[0]); err != nil {
					return err
				}
				scan := limit
				if want != "" {
					// A frequent schedule's failures scroll past the last 20
					// runs within minutes (an independent check, 2026-12-07).
					scan = runsScanned
				}
				runs, err := st.ListRuns(cmd.Context(), args[0], scan)
				if err != nil {
					return err
				}
				if want != "" {
					runs = runsIn(runs, want, limit)
				}
				if sc, ok := cfg.Sync(args[0]); ok && sc.Partitions > 1 {
					if runs, err = partition.SoFar(cmd.Context(), st, runs, sc.Partitions); err != nil {
						return err
					}
				}
				tw := tabwriter.NewWriter(env.Stdout, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "RUN\tSTATE\tSTARTED\tDURATION\tREAD\tWRITTEN\tREPLAYED\tREJECTED\tIN DOUBT\tCODE")
				for _, r := range runs {
					dur := "-"
					if !r.FinishedAt.IsZero() {
						dur = r.FinishedAt.Sub(r.StartedAt).Round(time.Millisecond).String()
					}
					fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", r.ID, r.State, r.StartedAt.UTC().Format(time.RFC3339),
						dur, r.Read, r.Written, r.Replayed, r.Rejected, r.InDoubt, r.FailureCode)
				}
				return tw.Flush()
			})
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "oncesync.yaml", "config file")
	cmd.Flags().IntVar(&limit, "limit", 20, "how many runs to show")
	cmd.Flags().StringVar(&state, "state", "", "only runs in this state: succeeded, failed, interrupted, skipped or running (among the last 10000)")
	return cmd
}

// runsScanned bounds the runs `runs --state` reads to find limit of them.
const runsScanned = 10000

// runsIn is the first limit of runs (0: all) in state want.
func runsIn(runs []store.Run, want store.RunState, limit int) []store.Run {
	var out []store.Run
	for _, r := range runs {
		if r.State == want {
			out = append(out, r)
			if limit > 0 && len(out) == limit {
				break
			}
		}
	}
	return out
}

type pauseFlags struct {
	path, by, reason string
}

func newPauseCmd(env Env) *cobra.Command {
	return newStateCmd(env, store.SyncPaused, "pause", "Pause a sync: no run starts until it is resumed (audited)", "campaign over")
}

func newResumeCmd(env Env) *cobra.Command {
	return newStateCmd(env, store.SyncActive, "resume", "Resume a paused sync and re-arm its circuit breaker (audited)", "fixed the mapping")
}

// pausedBy names who paused s: the circuit breaker, or the person recorded.
func pausedBy(s store.Sync) string {
	if s.PauseReason == "breaker" {
		return "the circuit breaker"
	}
	return cmp.Or(s.PausedBy, "a person")
}

// newStateCmd is pause or resume; reason is its help example's --reason.
func newStateCmd(env Env, to store.SyncState, verb, short, reason string) *cobra.Command {
	var f pauseFlags
	cmd := &cobra.Command{
		Use:     verb + " --config FILE SYNC --by NAME --reason TEXT",
		Short:   short,
		Example: fmt.Sprintf(`  oncesync %s --config oncesync.yaml contacts-to-brevo --by ada --reason %q`, verb, reason),
		Args:    argsNamed("SYNC", 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.by == "" || f.reason == "" {
				return exit(ExitUsage, fmt.Errorf("%s needs --by NAME and --reason TEXT: they go into the audit log", verb))
			}
			return withConfigStore(cmd.Context(), env, f.path, func(cfg *config.Config, st store.Store) error {
				// A sync of the config that never ran can be paused before
				// its first run (a cron line about to start it): publish it,
				// as serve and the dead-man check do, rather than tell the
				// person to run what they mean to stop.
				_, err := st.GetSync(cmd.Context(), args[0])
				sc, ok := cfg.Sync(args[0])
				if errors.Is(err, store.ErrNotFound) && ok && to == store.SyncPaused {
					if err := publishNew(cmd.Context(), []config.Sync{*sc}, st, app.Publisher(cfg.Path)); err != nil {
						return err
					}
				}
				cur, err := getSync(cmd.Context(), cfg, st, args[0])
				if err != nil {
					return err
				}
				// As the API refuses them (409): resuming an active sync
				// restarted its dead-man window and hid a silence for a
				// whole window (an independent check, 2026-12-06), and a
				// person's pause over the breaker's ends the dead-man's
				// watch of it.
				switch {
				case to == store.SyncActive && cur.State != store.SyncPaused:
					return exit(ExitFailed, fmt.Errorf("sync %s is not paused (it is %s): there is nothing to resume, and it is left as it is", cur.ID, cur.State))
				case to == store.SyncPaused && cur.State == store.SyncPaused:
					return exit(ExitFailed, fmt.Errorf("sync %s is already paused (by %s): it is left as it is", cur.ID, pausedBy(cur)))
				}
				p := store.SetSyncStateParams{ID: args[0], State: to, By: f.by, Why: f.reason}
				if to == store.SyncPaused {
					p.Reason = "person"
				}
				s, err := st.SetSyncState(cmd.Context(), p)
				if err != nil {
					return err
				}
				fmt.Fprintf(env.Stdout, "sync %s is now %s (by %s: %s)\n", s.ID, s.State, f.by, f.reason)
				if to == store.SyncPaused {
					// docs/guide.md#running-on-a-schedule-serve-and-worker: what a pause does to a run in flight.
					fmt.Fprintln(env.Stdout, "a run of it that serve or a worker is working stops at its next page boundary, within a few seconds; a foreground oncesync run goes on to its end (stop it with Ctrl-C)")
				}
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&f.path, "config", "c", "oncesync.yaml", "config file")
	cmd.Flags().StringVar(&f.by, "by", "", "who is doing this (required; audited)")
	cmd.Flags().StringVar(&f.reason, "reason", "", "why (required; audited)")
	return cmd
}

// noticeNewStore tells, on stderr, that cfg's SQLite store file does not
// exist yet, before a command creates it: a typo in its path (./oncesyn.db)
// made a new, empty store in which every sync started from nothing, and the
// next run wrote every record again, without a word (an independent check,
// 2026-12-06). A first run is told the same, which is true.
func noticeNewStore(env Env, cfg *config.Config) {
	if path, isNew := app.NewSQLiteStore(cfg); isNew && env.Stderr != nil {
		fmt.Fprintf(env.Stderr, "notice: %s does not exist yet: a new, empty store is created there, in which every sync starts from nothing (its records are sent as new). If you meant an existing store, check `store:` in %s.\n",
			path, cfg.Path)
	}
}
