package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/breaker"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/progress"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/runner"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/store"
)

// Shutdown timings (docs/guide.md#running-on-a-schedule-serve-and-worker): the foreground run drains like serve and
// worker do, by the same deadlines.
const (
	drainDeadline = queue.DrainDeadline // in-flight work must checkpoint by then
	exitDeadline  = queue.ExitDeadline  // the process exits by then, whatever runs
	// heartbeatWait is how long a finished run's process waits for its
	// heartbeat (docs/guide.md#telling-silence-from-outside) before exiting: one attempt and a retry.
	heartbeatWait = 15 * time.Second
)

type runFlags struct {
	config      string
	resetCursor bool
	dryRun      bool
	// allowRemovals lets a mirror run remove more than max_removals.
	allowRemovals bool
	// resend writes every record again (runner.Params.Resend).
	resend bool
}

func newRunCmd(env Env, rf *rootFlags) *cobra.Command {
	var f runFlags
	cmd := &cobra.Command{
		Use:   "run --config FILE SYNC",
		Short: "Run one sync now, in the foreground",
		Long: `Run one sync now, in the foreground, and print a summary.

The run takes the sync's lease, reads the source page by page from the saved
cursor, and moves the cursor only after every record of a page is delivered or
rejected. Stop it at any time (Ctrl-C, SIGTERM, even kill -9): the next run
resumes from the last checkpoint and the ledger keeps records from being sent
twice. SIGTERM drains: the current page finishes and checkpoints within 15 s,
the lease is released, and the process exits by 25 s.

With heartbeat_url set on the sync, the run's end is told to it (a success to
the URL, a failure to URL/fail); the process waits up to 15 s for that request
and its outcome never changes the exit code.

Exit codes: 0 succeeded; 1 failed (the last line says why, what to do, and who
owns the fix); 2 bad flags or config; 3 skipped because another run of the sync
was in progress.

--dry-run reads what the run would read and says what it would do with each
record (create: never delivered by this sync; update: changed since its last
delivery; unchanged; settling: sent by an earlier run with an outcome not known
yet, which the run settles before sending anything; rejected: records the
destination would refuse before any write, such as an address that cannot be
valid), with a sample of identities, claiming nothing, writing nothing, taking
no lease and sending the destination no request (so a value that is not of its
Brevo attribute's type is refused by the run, not counted here).

--resend writes every record again, also those the destination already holds
with these values as far as the ledger knows: for a destination that lost
data (a list emptied, contacts deleted) or was edited by hand. It reads the
source from its start; each record is one more write (an update with the
same values where nothing was lost), ledgered and fenced like any other. An
interrupted --resend is finished by running it again. With --dry-run it says
what such a run would send.`,
		Example: `  oncesync run --config oncesync.yaml contacts-to-brevo
  oncesync run --config oncesync.yaml contacts-to-brevo --dry-run
  oncesync run --config oncesync.yaml contacts-to-brevo --reset-cursor
  oncesync run --config oncesync.yaml contacts-to-brevo --resend
  oncesync run --config oncesync.yaml crm-mirror --allow-removals`,
		Args: argsNamed("SYNC", 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if f.dryRun {
				return dryRun(cmd.Context(), env, f, args[0])
			}
			return runSync(cmd.Context(), env, rf, f, args[0])
		},
	}
	cmd.Flags().StringVarP(&f.config, "config", "c", "oncesync.yaml", "config file")
	cmd.Flags().BoolVar(&f.resetCursor, "reset-cursor", false, "start from the beginning of the source (the ledger still prevents duplicate writes)")
	cmd.Flags().BoolVar(&f.dryRun, "dry-run", false, "say what the run would do (creates, updates, unchanged), writing nothing")
	cmd.Flags().BoolVar(&f.allowRemovals, "allow-removals", false, "let a write_mode mirror run remove more records than max_removals (once)")
	cmd.Flags().BoolVar(&f.resend, "resend", false, "write every record again, also those the destination already holds (it lost data or was edited by hand); reads the source from its start")
	return cmd
}

// dryRun is `run --dry-run`: the store is read, nothing is claimed or
// written, no lease is taken and Redis is not reached. It reads the source,
// so the sync's variables must be set, as for a run.
func dryRun(ctx context.Context, env Env, f runFlags, syncID string) error {
	var scratch string
	defer func() {
		if scratch != "" {
			_ = os.RemoveAll(scratch)
		}
	}()
	load := func() (*config.Config, error) {
		cfg, err := loadSyncConfig(env, f.config, syncID)
		if err != nil {
			return nil, err
		}
		path, isNew := app.NewSQLiteStore(cfg)
		if !isNew {
			return cfg, nil
		}
		// docs/guide.md#commands: a dry run writes nothing, not even
		// the empty store file opening it would create (an independent
		// check, 2026-12-06): it reads an empty scratch store instead.
		if scratch, err = os.MkdirTemp("", "oncesync-dry-run-"); err != nil {
			return nil, failure.Wrap(failure.StoreUnavailable, err, "make a scratch store for the dry run")
		}
		db := filepath.Join(scratch, "dry-run.db")
		if err := os.WriteFile(db, nil, 0o600); err != nil { // an empty file is an empty SQLite database
			return nil, failure.Wrap(failure.StoreUnavailable, err, "make a scratch store for the dry run")
		}
		fmt.Fprintf(env.Stderr, "notice: %s does not exist yet: the dry run reads as if this sync had never run, and does not create it\n", path)
		c := *cfg
		c.Store = "sqlite://" + db
		return &c, nil
	}
	return withLoadedStore(ctx, env, load, func(cfg *config.Config, st store.Store) error {
		sc, err := syncOf(cfg, syncID)
		if err != nil {
			return err
		}
		env.hintConfig, env.hintSync = f.config, sc.ID
		bar := progress.New(env.Stdout, 0, sc.ID+" (dry run)", 2*time.Second)
		pv, err := previewSync(ctx, cfg, st, sc, previewOpts{reset: f.resetCursor, resend: f.resend}, func(n int64) { bar.Set(n, "") })
		bar.Finish()
		if err != nil {
			return failed(env, err)
		}
		from := previewFrom(cfg, sc.ID, pv)
		w := env.Stdout
		fmt.Fprintf(w, "dry run of sync %s from %s: nothing was claimed or written\n", sc.ID, from)
		fmt.Fprintf(w, "  read       %d\n", pv.Read)
		fmt.Fprintf(w, "  create     %d  never delivered by this sync%s\n", pv.Creates, sampleText(pv.CreateSample, pv.Creates))
		updated := "changed since their last delivery"
		if f.resend {
			updated = "delivered before: written again (--resend)"
		}
		fmt.Fprintf(w, "  update     %d  %s%s\n", pv.Updates, updated, sampleText(pv.UpdateSample, pv.Updates))
		fmt.Fprintf(w, "  unchanged  %d  delivered with these values: nothing to send\n", pv.Unchanged)
		switch sc.Destination.EffectiveWriteMode() {
		case config.WriteCreate:
			fmt.Fprintf(w, "  (write_mode create: of the records above, those the destination already holds are left as they are and counted as skipped; a dry run does not ask which)\n")
		case config.WriteUpdate:
			fmt.Fprintf(w, "  (write_mode update: of the records above, those the destination does not hold are not created and are counted as skipped; a dry run does not ask which)\n")
		}
		if pv.Settling > 0 {
			fmt.Fprintf(w, "  settling   %d  sent by an earlier run, outcome not known yet (an import still processing, a write in doubt): settled before anything is sent again%s\n",
				pv.Settling, sampleText(pv.SettlingSample, pv.Settling))
		}
		if pv.Duplicates > 0 {
			fmt.Fprintf(w, "  repeated   %d  identities that appear again later on their page: the last one counts\n", pv.Duplicates)
		}
		if pv.Rejected > 0 {
			fmt.Fprintf(w, "  rejected   %d  the destination would refuse them before any write (counted in REJECTED, tried again on every run)\n", pv.Rejected)
			for _, r := range pv.RejectedSample {
				fmt.Fprintf(w, "               %s\n", r)
			}
			if n := pv.Rejected - int64(len(pv.RejectedSample)); n > 0 {
				fmt.Fprintf(w, "               ... and %d more\n", n)
			}
		}
		if pv.Invalid > 0 {
			fmt.Fprintf(w, "  unreadable %d  records the source could not read or the mapping not map: rejected, not sent (`oncesync records --rejected` after the run names them)\n", pv.Invalid)
		}
		if sc.Destination.EffectiveWriteMode() == config.WriteMirror {
			fmt.Fprintf(w, "  remove     %s\n", removalText(pv, f.allowRemovals))
		}
		return nil
	})
}

// previewOpts are the run flags a dry run previews.
type previewOpts struct{ reset, resend bool }

// previewSync is the dry run of `run --dry-run` and of the sync page's
// Preview.
func previewSync(ctx context.Context, cfg *config.Config, st store.Store, sc *config.Sync, o previewOpts, progress func(int64)) (runner.Preview, error) {
	built, err := app.Build(cfg, sc, app.Options{Clock: clock.Real{}})
	if err != nil {
		return runner.Preview{}, err
	}
	defer built.Close()
	judge, _ := built.Destination.(destination.Judge)
	params := runner.PreviewParams{Store: st, Source: built.Source, Sync: built.Sync,
		ResetCursor: o.reset, Resend: o.resend, Progress: progress, Judge: judge, Sample: previewSample}
	if built.Sync.Mirror != nil {
		params.Remover, _ = built.Destination.(destination.Remover)
	}
	if sc.Partitions <= 1 {
		return runner.RunPreview(ctx, params)
	}
	// A partitioned sync's records live in its partitions' cursors and
	// ledgers, as its runs (serve's or by hand) work them: the sync's own
	// ledger would count every record as never delivered.
	var all runner.Preview
	for _, part := range partitionParts(sc, built.Sync) {
		pp := params
		pp.Sync, pp.Filter, pp.Slice = part.sync, part.filter, part.slice
		if progress != nil {
			before := all.Read
			pp.Progress = func(read int64) { progress(before + read) }
		}
		pv, err := runner.RunPreview(ctx, pp)
		if err != nil {
			return all, err
		}
		all.Add(pv, previewSample)
	}
	return all, nil
}

// previewSample is how many records of each action a preview names.
const previewSample = 10

// previewFrom says where a dry run started.
func previewFrom(cfg *config.Config, syncID string, pv runner.Preview) string {
	cursor := pv.From
	if pv.Changed {
		return "the start of the source (the mapping, the identity, the partitions, what the source reads, the destination's settings or its account changed since the cursor was saved: docs/guide.md#changing-a-sync)"
	}
	if cursor == "" {
		return "the start of the source"
	}
	if where := cfg.DescribeCursor(syncID, cursor); where != "" {
		return "the saved cursor (" + where + ")"
	}
	return "the saved cursor"
}

// removalText says what a mirror run would remove (docs/guide.md#write-modes),
// run with --allow-removals when allow.
func removalText(pv runner.Preview, allow bool) string {
	if pv.Unremovable > 0 && pv.From == "" {
		return removalCount(pv, allow) + "; " + runner.Unremovable(pv.Unremovable)
	}
	return removalCount(pv, allow)
}

func removalCount(pv runner.Preview, allow bool) string {
	switch {
	case pv.From != "":
		return "0  (the run resumes mid-source; removals are found by a run that reads the source from its start)"
	case pv.Removals > pv.RemovalsAllowed && allow:
		return fmt.Sprintf("%d  %s%s: more than max_removals allows (%d of %d), which --allow-removals lets this run remove",
			pv.Removals, removalWhat(pv), sampleText(pv.RemovalSample, pv.Removals), pv.RemovalsAllowed, pv.Delivered)
	case pv.Removals > pv.RemovalsAllowed:
		return fmt.Sprintf("%d  %s%s: MORE than max_removals allows (%d of %d); the run would fail with mirror_removals_refused unless run with --allow-removals",
			pv.Removals, removalWhat(pv), sampleText(pv.RemovalSample, pv.Removals), pv.RemovalsAllowed, pv.Delivered)
	default:
		return fmt.Sprintf("%d  %s%s (max_removals allows %d of %d)",
			pv.Removals, removalWhat(pv), sampleText(pv.RemovalSample, pv.Removals), pv.RemovalsAllowed, pv.Delivered)
	}
}

// removalWhat says what a dry run's removals are: rows gone, and the old
// contacts of rows whose handle (e-mail) changes.
func removalWhat(pv runner.Preview) string {
	if pv.Moved == 0 {
		return "delivered records whose source rows are gone"
	}
	return fmt.Sprintf("removals: %d delivered records whose source rows are gone, %d old contacts of rows whose e-mail (handle) changes",
		pv.Removals-pv.Moved, pv.Moved)
}

func sampleText(s []string, n int64) string {
	if len(s) == 0 {
		return ""
	}
	more := ""
	if int64(len(s)) < n {
		more = ", ..."
	}
	return " (" + strings.Join(s, ", ") + more + ")"
}

func loadConfig(env Env, path string) (*config.Config, error) {
	cfg, err := config.Load(path, env.LookupEnv, connector.Default().Kinds())
	return loaded(env, cfg, err)
}

// loadSyncConfig is loadConfig for a command that acts on sync id alone
// (run, run --dry-run, check): another sync's unset ${VAR} does not stop
// it (docs/config.md#environment-variables). serve and worker run every
// sync and keep loadConfig.
func loadSyncConfig(env Env, path, id string) (*config.Config, error) {
	cfg, err := config.LoadSync(path, env.LookupEnv, connector.Default().Kinds(), id)
	return loaded(env, cfg, err)
}

// loaded is a loaded config with its secrets told to the scrubber, or the
// load's error as a usage error.
func loaded(env Env, cfg *config.Config, err error) (*config.Config, error) {
	if err != nil {
		return nil, exit(ExitUsage, err)
	}
	env.scrub.add(cfg.SecretValues())
	return cfg, nil
}

func runSync(ctx context.Context, env Env, rf *rootFlags, f runFlags, syncID string) error {
	cfg, err := loadSyncConfig(env, f.config, syncID)
	if err != nil {
		recordConfigFailure(ctx, env, rf, err, syncID)
		return configFailed(env, err)
	}
	sc, err := syncOf(cfg, syncID)
	if err != nil {
		return configFailed(env, err)
	}
	env.hintConfig, env.hintSync = cfg.Path, sc.ID
	log := rf.logger(env.Stderr)
	clk := clock.Real{}

	// The sync is published, and refused when paused, before Redis is
	// reached.
	a, err := app.Open(ctx, app.OpenParams{Config: cfg, Clock: clk, Logger: log,
		Published: func(ctx context.Context, st store.Store) error {
			def, err := sc.DefinitionJSON()
			if err != nil {
				return failure.Wrap(failure.InvalidSyncDefinition, err, "encode the sync definition")
			}
			prev, err := st.GetSync(ctx, sc.ID)
			if errors.Is(err, store.ErrNotFound) {
				// A mistyped store path, or one a read-only command created
				// (status, whose notice this run would not repeat), made a
				// new, empty store, and this run wrote every record again
				// without a word (an independent check, 2026-12-06).
				// Never the store's URL, which may hold a password;
				// SQLitePath refuses any other store.
				where := "the store of " + cfg.Path
				if path, err := app.SQLitePath(cfg); err == nil {
					where = path
				}
				fmt.Fprintf(env.Stderr, "notice: sync %s has never run on %s: every record is sent as new. If it has run before, stop and check `store:` in %s.\n",
					sc.ID, where, cfg.Path)
			}
			if err == nil && prev.Workspace != "" && prev.Workspace != sc.Workspace {
				// Two configs on one store with one sync id took turns
				// publishing it, and each run wrote every record again (an
				// independent check, 2026-12-06): a workspace that moves is
				// the one sign of it the store keeps.
				fmt.Fprintf(env.Stderr, "warning: sync %s of this store is in workspace %s; %s puts it in %s. If another config uses this store with the same sync id, each run of either one sends every record again: give each config its own store, or its syncs their own ids.\n",
					sc.ID, prev.Workspace, cfg.Path, sc.Workspace)
			}
			row, err := st.PutSync(ctx, store.PutSyncParams{ID: sc.ID, Workspace: sc.Workspace, Definition: def, By: app.Publisher(cfg.Path)})
			if err != nil {
				return failure.Wrap(failure.StoreUnavailable, err, "publish the sync")
			}
			if row.State == store.SyncPaused && row.PauseReason == "breaker" {
				return failure.New(failure.CircuitBreakerTripped,
					fmt.Sprintf("sync %s was paused by the circuit breaker: %s; once the cause is fixed: `oncesync resume --config %s %s --by NAME --reason TEXT`",
						sc.ID, row.PausedWhy, f.config, sc.ID))
			}
			if row.State == store.SyncPaused {
				return failure.New(failure.SyncPaused,
					fmt.Sprintf("sync %s is paused (%s by %s: %s); resume it with `oncesync resume --config %s %s --by NAME --reason TEXT`",
						sc.ID, row.PauseReason, row.PausedBy, row.PausedWhy, f.config, sc.ID))
			}
			return nil
		}})
	if err != nil {
		return failed(env, err)
	}
	defer a.Close(ctx)
	st, leases, alerts := a.Store, a.Leases, a.Alerts

	// The sync's heartbeat (docs/guide.md#telling-silence-from-outside) goes out after the summary; the exit
	// waits for it a little, and its outcome never changes the exit code.
	beats := deadman.NewHeartbeats(deadman.HeartbeatParams{Logger: log})
	waitBeats := func() {
		hctx, hcancel := context.WithTimeout(context.WithoutCancel(ctx), heartbeatWait)
		defer hcancel()
		_ = beats.Close(hctx) // a heartbeat still going is cut off: it is logged
	}
	defer waitBeats()
	brk := breaker.New(breaker.Params{Store: st, Notifier: alerts, Logger: log, Link: app.SyncLink(cfg)})
	threshold := sc.EffectiveBreakerFailures(cfg.Settings)
	afterFailure := breakerAfterFailure(brk, threshold, log, env.Stderr)
	built, err := app.Build(cfg, sc, app.Options{Clock: clk, Accounts: a.Accounts})
	if err != nil {
		// A source that refuses or does not answer at the start is a
		// failed run, as a worker records it: the breaker counts it, the
		// heartbeat says /fail, and the dead-man does not take the sync
		// for one that never ran (docs/guide.md#running-on-a-schedule-serve-and-worker).
		recordBuildFailure(ctx, st, sc, err, cfg.SecretValues(), afterFailure, beats, log)
		waitBeats() // what it logs comes before the failed: line
		return failed(env, err)
	}
	defer built.Close()

	// SIGTERM/SIGINT: drain (finish the page, checkpoint, release); hard stop at
	// 15 s; exit at 25 s whatever still runs. A second signal stops at once.
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	drain := make(chan struct{})
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-runCtx.Done():
			return
		case <-sigs:
		}
		fmt.Fprintln(env.Stderr, "stopping: finishing the current page and checkpointing (up to 15 s)")
		close(drain)
		hard := time.AfterFunc(drainDeadline, cancel)
		defer hard.Stop()
		kill := time.AfterFunc(exitDeadline, func() {
			fmt.Fprintln(env.Stdout, failure.LastLine(failure.New(failure.Interrupted, "")))
			os.Exit(ExitFailed)
		})
		defer kill.Stop()
		select {
		case <-sigs:
			cancel()
		case <-runCtx.Done():
		}
		<-runCtx.Done()
	}()

	// The bar counts what the source's position is told in (bytes of a
	// CSV or JSONL file, rows of a Parquet export), else records read (a
	// spinner with the count on a terminal).
	locator, _ := built.Source.(source.Progressor)
	unit := progress.Records
	if locator != nil {
		if pos, err := locator.Progress(ctx, ""); err == nil && pos.InBytes {
			unit = progress.Bytes
		}
	}
	// A partitioned sync is run one partition after another, each under
	// its partition's own lease, cursor and ledger, as serve's partition
	// jobs run it: under the sync's own ledger a run by hand would know
	// nothing of what the partitions delivered, write every record again
	// beside them and leave the partitions' last delivered states behind
	// the destination (docs/guide.md#commands).
	parts := []runPart{{sync: built.Sync, desc: sc.ID}}
	workCtx := runCtx
	var whole *wholeRun
	if sc.Partitions > 1 {
		parts = partitionParts(sc, built.Sync)
		var err error
		if workCtx, whole, err = startWhole(runCtx, st, leases, cfg, sc, clk); err != nil {
			if failure.CodeOf(err) == failure.AlreadyRunning {
				fmt.Fprintln(env.Stdout, runner.SentenceAlreadyRunning)
				return exit(ExitSkipped, nil)
			}
			return failed(env, err)
		}
	}
	var (
		last, worst   store.Run
		worstErr      error
		skipped, done bool
		total         store.Counters
		beforeWrite   func(context.Context) error
	)
	if whole != nil {
		// The partitions run one after another, each over the whole
		// source: pinned here, its snapshot is checked again before each
		// page is written, as serve's partitions check the barrier's
		// (docs/guide.md#the-checkpoint-barrier). Without it a file
		// replaced while the first partition ran was written from its old
		// view by one partition and its new one by the next (an
		// independent check, 2026-12-06).
		pin, err := partition.Snapshot(workCtx, sc.Source.Type, built.Source, sc.Source.Timeout)
		if err != nil {
			worstErr, parts = whole.lost(workCtx, err), nil
		}
		beforeWrite = func(ctx context.Context) error {
			snap, err := partition.Snapshot(ctx, sc.Source.Type, built.Source, sc.Source.Timeout)
			if err != nil {
				return err
			}
			if snap != pin {
				return failure.New(failure.SourceChangedDuringRun, "the source changed since this run pinned its snapshot, before its first partition: nothing was written from the changed view, and the next run reads the source as it is then")
			}
			return nil
		}
	}
	for i, part := range parts {
		if i > 0 {
			select {
			case <-drain:
				done = true // draining: the next partitions wait for the next run
			default:
			}
			if done || workCtx.Err() != nil {
				done = true
				break
			}
		}
		var outMu sync.Mutex // the bar and the Waiting lines come from two goroutines
		// sayLine prints what the run tells a person mid-run on a line of
		// its own, below the bar.
		sayLine := func(format string, args ...any) {
			outMu.Lock()
			defer outMu.Unlock()
			if progress.IsTerminal(env.Stdout) {
				fmt.Fprintln(env.Stdout) // end the bar's line
			}
			fmt.Fprintf(env.Stdout, format, args...)
		}
		// waitLine prints why a run waits (format takes the records and
		// the time it waits until).
		waitLine := func(format string, n int, until time.Time) {
			sayLine(format, n, until.UTC().Format("15:04:05"))
		}
		run, runErr := runOnePart(workCtx, part, func(bar progress.Bar, barAt *int64) runner.Params {
			return runner.Params{
				Store:         st,
				Leases:        leases,
				Source:        built.Source,
				Destination:   built.Destination,
				Clock:         clk,
				Logger:        log,
				Sync:          part.sync,
				Secrets:       cfg.SecretValues(),
				Filter:        part.filter,
				Slice:         part.slice,
				LeaseTTL:      cfg.Settings.LeaseTTL,
				LeaseRenew:    cfg.Settings.LeaseRenew,
				InDoubtGrace:  cfg.Settings.InDoubtGrace,
				ResetCursor:   f.resetCursor,
				Resend:        f.resend,
				Drain:         drain,
				AllowRemovals: f.allowRemovals,
				BeforeWrite:   beforeWrite,
				AfterFailure: func(ctx context.Context, r store.Run) {
					if r.SyncID != sc.ID {
						return // a partition's streak is not the sync's (serve evaluates none either)
					}
					afterFailure(ctx, r)
				},
				// Up to settings.in_doubt_grace (10 s) of silence otherwise,
				// right after a resumed run's first line.
				Waiting: func(n int, until time.Time) {
					waitLine("%d record(s) of a write in doubt are not at the destination yet: reading them again at %s (settings.in_doubt_grace after the write), then sending those still missing\n", n, until)
				},
				WaitingChanged: func(n int, until time.Time) {
					waitLine("%d record(s) of earlier writes left in doubt may still land: reading back or writing the rows they concern at %s (settings.in_doubt_grace after those writes), so that such a write, if the destination applies it late, comes first\n", n, until)
				},
				StillProcessing: func(n int) {
					sayLine("%d record(s) accepted by the destination were still being processed when the run stopped waiting: they are in none of the run's figures, and the next run asks the destination about them\n", n)
				},
				HeldBack: func(n int) {
					sayLine("%d record(s) were left for the next run: another row's earlier write to the same contact was still being processed by the destination when the run stopped waiting, and written now they could land before it; they are in none of the run's figures, and the next run sends them once it knows what became of that write\n", n)
				},
				Resumed: func(o store.Run) {
					fmt.Fprintf(env.Stdout, "resuming the work of run %d, which stopped without finishing (its process died or lost its lease) after %d checkpointed page(s) and %d record(s) written; what it left in flight is settled before anything is sent again\n",
						o.ID, o.Pages, o.Written)
				},
				Progress: func(p runner.Progress) {
					outMu.Lock()
					defer outMu.Unlock()
					detail := fmt.Sprintf("(page %d: %d read, %d written, %d replayed)", p.Counters.Pages, p.Counters.Read, p.Counters.Written, p.Counters.Replayed)
					if locator == nil {
						bar.Set(p.Counters.Read, detail)
						return
					}
					// A position that cannot be read (the file went away) leaves
					// the bar where it was; the run itself reports the cause.
					if p.Cursor == "" && !p.Done {
						// The cursor has not moved past the first page yet (a
						// bulk import still accepted holds it), or it came back to
						// the start at the end, which the final report (Done) says:
						// the bar stays where it was.
						bar.Set(*barAt, detail)
						return
					}
					if pos, err := locator.Progress(runCtx, p.Cursor); err == nil {
						if p.Done {
							pos.Done = pos.Total // the end of the source: the cursor starts over ("")
						}
						*barAt = pos.Done
						bar.SetTotal(pos.Total)
						bar.Set(pos.Done, detail)
					}
				},
			}
		}, env.Stdout, unit)
		if run.ID != 0 {
			last = run
			total.Add(run.Counters)
		}
		if runErr != nil && whole != nil {
			runErr = whole.lost(workCtx, runErr)
		}
		switch {
		case runErr == nil:
			if run.FailureDetail != "" {
				// A succeeded run's detail says what it did beyond its
				// counters (a mirror's removals).
				fmt.Fprintln(env.Stdout, run.FailureDetail)
			}
		case failure.CodeOf(runErr) == failure.AlreadyRunning:
			skipped = true
		case worstErr == nil:
			worst, worstErr = run, runErr
		}
		if worstErr != nil && failure.CodeOf(worstErr) != failure.AlreadyRunning {
			break // the next partitions wait for the next run
		}
	}
	if worstErr != nil {
		last = worst
	}
	if whole != nil {
		if done && worstErr == nil {
			worstErr = failure.New(failure.Interrupted, "stopped before every partition was run")
		}
		last = whole.finish(ctx, total, skipped, worstErr, afterFailure, log)
		fmt.Fprintf(env.Stdout, "run %d of sync %s %s: its %d partitions' runs together: read %d, %s, replayed from ledger %d, rejected %d\n",
			last.ID, sc.ID, last.State, sc.Partitions, last.Read, writtenPhrase(last.Counters), last.Replayed, last.Rejected)
	}
	if last.Rejected > 0 {
		// The counter alone left a person asking which ones (a
		// refused record is named for a person: docs/guide.md#what-a-run-does).
		fmt.Fprintf(env.Stdout, "%d record(s) rejected by the destination: `oncesync records --config %s %s --rejected` names each with its reason; later runs send them again\n",
			last.Rejected, cfg.Path, sc.ID)
	}
	cancel()
	beats.Beat(ctx, sc.ID, sc.HeartbeatURL, last)
	if worstErr != nil {
		// The failed: line is the last one on a terminal (stdout and stderr
		// together), after what the heartbeat logs if its monitor fails.
		waitBeats()
	}
	if last.State == store.RunSucceeded {
		resolveSilence(ctx, app.DeadmanParams{Config: cfg, Store: st, Notifier: alerts, Clock: clk, Logger: log, Redis: a.Redis}, sc, last)
	}
	switch {
	case worstErr != nil:
		return failed(env, worstErr)
	case skipped:
		fmt.Fprintln(env.Stdout, runner.SentenceAlreadyRunning)
		return exit(ExitSkipped, nil)
	}
	return nil
}

// resolveSilence ends, after run succeeded, the dead-man silences it ends
// (the sync's, its workspace's) with their resolution notices, as serve's
// runs do (docs/guide.md#telling-silence-from-outside): a sync run from cron would otherwise wait
// for the next `oncesync deadman check`. A failure is logged: the next check
// resolves what this could not.
func resolveSilence(ctx context.Context, p app.DeadmanParams, sc *config.Sync, run store.Run) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	checker, err := app.Deadman(p)
	if err == nil {
		err = checker.Resolve(ctx, sc.ID, sc.Workspace, run.FinishedAt)
	}
	if err != nil {
		p.Logger.Warn("could not end the sync's dead-man silence; the next check does", "sync", sc.ID, "err", err)
	}
}

// wholeRun is the run of a partitioned sync itself that a run by hand
// records, as serve's coordinator does, so that the sync's status, breaker
// and dead-man check see it. It holds the sync's own lease while its
// partitions run: lease-expiry recovery then takes it for a live foreground
// run (not a coordinated run whose partition jobs are gone), and no
// coordinator resumes it.
type wholeRun struct {
	st   store.Store
	rec  store.Run
	held *lease.Held
	stop func()
	clk  clock.Clock
}

// startWhole records the run and takes the sync's lease; ctx is then the
// partitions' work, cancelled when the lease is lost. A lease another run
// holds is already_running (the run is recorded skipped).
//
// A stop (SIGTERM) before the run is recorded records nothing; one while it
// is being recorded cannot leave it running (store.InsertRunDetached): it
// ends interrupted, as a runner.Run stopped before its lease does.
func startWhole(ctx context.Context, st store.Store, leases lease.Manager, cfg *config.Config, sc *config.Sync, clk clock.Clock) (context.Context, *wholeRun, error) {
	if err := ctx.Err(); err != nil {
		return ctx, nil, failure.Wrap(failure.Interrupted, err, "the run was stopped before it started")
	}
	rec, err := store.InsertRunDetached(ctx, st, store.InsertRunParams{SyncID: sc.ID, State: store.RunRunning, Attempt: 1})
	if err != nil {
		return ctx, nil, failure.Wrap(failure.StoreUnavailable, err, "record the run")
	}
	w := &wholeRun{st: st, rec: rec, clk: clk}
	held, err := lease.Hold(ctx, lease.HoldParams{Manager: leases, SyncID: sc.ID, RunID: rec.ID,
		TTL: cfg.Settings.LeaseTTL, RenewEvery: cfg.Settings.LeaseRenew, Clock: clk})
	if err != nil {
		ferr := failure.Wrap(failure.StoreUnavailable, err, "take the sync's lease")
		state := store.RunFailed
		switch {
		case errors.Is(err, lease.ErrHeld):
			ferr, state = failure.New(failure.AlreadyRunning, runner.SentenceAlreadyRunning), store.RunSkipped
		case ctx.Err() != nil:
			ferr, state = failure.Wrap(failure.Interrupted, ctx.Err(), "the run was stopped before it started"), store.RunInterrupted
		}
		w.record(ctx, state, ferr)
		return ctx, nil, ferr
	}
	w.held = held
	work, cancel := context.WithCancelCause(ctx)
	w.stop = held.Keep(work, cancel)
	return work, w, nil
}

// lost is err, or lease_lost when the sync's own lease was lost meanwhile.
func (w *wholeRun) lost(work context.Context, err error) error {
	if c := context.Cause(work); errors.Is(c, lease.ErrLost) {
		return failure.Wrap(failure.LeaseLost, c, runner.SentenceLeaseLost)
	}
	return err
}

// finish releases the sync's lease and records how the partitions ended:
// succeeded, skipped (some partition was another run's), or the first
// failure; afterFailure runs for a failed run.
func (w *wholeRun) finish(ctx context.Context, total store.Counters, skipped bool, err error, afterFailure func(context.Context, store.Run), log *slog.Logger) store.Run {
	w.stop()
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if rerr := w.held.Release(rctx); rerr != nil {
		log.Warn("could not release the sync's lease; it expires by itself", "sync", w.rec.SyncID, "err", rerr)
	}
	w.rec.Counters = total
	state := store.RunSucceeded
	switch code := failure.CodeOf(err); {
	case err == nil && skipped:
		state, err = store.RunSkipped, failure.New(failure.AlreadyRunning, runner.SentenceAlreadyRunning)
	case err == nil:
	case code == failure.Interrupted:
		state = store.RunInterrupted
	default:
		state = store.RunFailed
	}
	if w.record(rctx, state, err) && state == store.RunFailed {
		afterFailure(rctx, w.rec)
	}
	return w.rec
}

// record saves the run's end; false if it could not.
func (w *wholeRun) record(ctx context.Context, state store.RunState, err error) bool {
	w.rec.State = state
	w.rec.FinishedAt = w.clk.Now()
	if err != nil {
		w.rec.FailureCode = string(failure.CodeOf(err))
		w.rec.FailureDetail = failure.Detail(err)
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return w.st.UpdateRun(sctx, w.rec) == nil
}

// runPart is one runner.Run of a foreground run: the sync's, or one
// partition's.
type runPart struct {
	sync   runner.Sync
	desc   string // the progress bar's label
	filter func(source.Record) bool
	slice  source.Slice
}

// partitionParts are the partitions of sc, each as serve's partition job
// runs it: its own sync id (lease, fence, cursor, ledger), and its rows.
func partitionParts(sc *config.Sync, whole runner.Sync) []runPart {
	parts := make([]runPart, sc.Partitions)
	for k := 1; k <= sc.Partitions; k++ {
		ps := whole
		ps.ID = partition.SyncID(sc.ID, k)
		parts[k-1] = runPart{
			sync:   ps,
			desc:   fmt.Sprintf("%s (partition %d of %d)", sc.ID, k, sc.Partitions),
			filter: partition.Filter(sc.Source.Identity, k, sc.Partitions),
			slice:  source.Slice{Identity: sc.Source.Identity, K: k, N: sc.Partitions},
		}
	}
	return parts
}

// runOnePart runs part with the params params builds around its progress bar,
// and prints its summary.
func runOnePart(ctx context.Context, part runPart, params func(bar progress.Bar, barAt *int64) runner.Params, w io.Writer, unit progress.Unit) (store.Run, error) {
	bar := progress.Open(progress.Params{W: w, Desc: part.desc, Unit: unit, Interval: 2 * time.Second})
	var barAt int64 // the bar's position (Progress calls come one at a time)
	start := time.Now()
	p := params(bar, &barAt)
	run, err := runner.Run(ctx, p)
	bar.Finish()
	if run.ID != 0 {
		c := destination.CapVerify
		if p.Destination != nil {
			c = p.Destination.Capability()
		}
		printSummary(w, run, time.Since(start), c)
	}
	return run, err
}

// recordBuildFailure stores a run of sc that failed before it could
// start (its source or destination could not be set up), evaluates the
// breaker and sends the heartbeat's /fail. A store that cannot record it
// is logged: the caller reports the original failure.
func recordBuildFailure(ctx context.Context, st store.Store, sc *config.Sync, err error, secrets []string, afterFailure func(context.Context, store.Run), beats *deadman.Heartbeats, log *slog.Logger) {
	err = failure.OutOfFiles(err)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	run, rerr := st.InsertRun(rctx, store.InsertRunParams{
		SyncID: sc.ID, State: store.RunFailed, Attempt: 1,
		// A secret in the detail (a password also in a socket path) is
		// hidden, as the printed lines hide it.
		FailureCode: string(failure.CodeOf(err)), Detail: apiclient.HideSecrets(failure.Detail(err), secrets),
	})
	if rerr != nil {
		log.Error("could not record a failed run", "sync", sc.ID, "code", failure.CodeOf(err), "err", rerr)
		return
	}
	afterFailure(rctx, run)
	beats.Beat(ctx, sc.ID, sc.HeartbeatURL, run)
}

// breakerAfterFailure evaluates the sync's breaker after a failed run of
// the sync itself, and tells w when it paused the sync.
func breakerAfterFailure(brk *breaker.Breaker, threshold int, log *slog.Logger, w io.Writer) func(context.Context, store.Run) {
	return func(ctx context.Context, r store.Run) {
		trip, err := brk.AfterFailure(ctx, r.SyncID, threshold)
		if err != nil {
			log.Error("circuit breaker evaluation failed", "sync", r.SyncID, "err", err)
		}
		if trip != nil {
			fmt.Fprintf(w, "circuit breaker: failure streak reached %d (failures that are the sync's to fix); sync %s is paused until a person resumes it\n", trip.Failures, r.SyncID)
		}
	}
}

// recordConfigFailure records a failed run of syncID when its own entry of
// the config cannot be run (an environment variable cron's environment
// lacks, a value of the wrong type) and the rest of the file can: the
// breaker counts it, the heartbeat says /fail, and status shows it. Unrecorded,
// every cron run died silently until the dead-man window ran out, and the
// dead-man then blamed a stopped scheduler (an independent check,
// 2026-12-07). A sync this store has never run, or that is paused, gets no
// run; a store that does not exist yet is not created. What it cannot record
// it logs: the caller reports the config's problems.
func recordConfigFailure(ctx context.Context, env Env, rf *rootFlags, err error, syncID string) {
	var probs *config.Problems
	if !errors.As(err, &probs) {
		return
	}
	cfg, ok := probs.SoundTopLevel()
	if !ok {
		return
	}
	sc, ok := cfg.Sync(syncID)
	if !ok {
		return
	}
	if _, isNew := app.NewSQLiteStore(cfg); isNew {
		return
	}
	env.scrub.add(cfg.SecretValues())
	// The alerts' log sink writes from its own goroutine beside this one.
	stderr := &lockedWriter{w: env.Stderr}
	log := rf.logger(stderr)
	clk := clock.Real{}
	st, err := app.OpenStore(ctx, cfg, clk)
	if err != nil {
		log.Warn("could not record the failed run: the store is unavailable", "sync", syncID, "code", failure.CodeOf(err))
		return
	}
	defer st.Close()
	if s, err := st.GetSync(ctx, syncID); err != nil || s.State == store.SyncPaused {
		return
	}
	alerts, err := alert.FromConfig(cfg.Alerts, log, clk)
	if err != nil {
		alerts = nil // the alerts' own entry may be what is wrong: the breaker still pauses
	}
	var notifier breaker.Notifier // a nil *alert.Dispatcher is not a nil Notifier
	if alerts != nil {
		notifier = alerts
	}
	brk := breaker.New(breaker.Params{Store: st, Notifier: notifier, Logger: log, Link: app.SyncLink(cfg)})
	afterFailure := breakerAfterFailure(brk, sc.EffectiveBreakerFailures(cfg.Settings), log, stderr)
	beats := deadman.NewHeartbeats(deadman.HeartbeatParams{Logger: log})
	if !probs.Concern(".heartbeat_url") {
		defer func() {
			hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), heartbeatWait)
			defer cancel()
			_ = beats.Close(hctx)
		}()
	} else {
		beats, sc.HeartbeatURL = nil, "" // its address is what is wrong
	}
	recordBuildFailure(ctx, st, sc, failure.Wrap(failure.InvalidSyncDefinition, err, "the sync's entry in %s cannot be run: %s", cfg.Path, strings.ReplaceAll(probs.Error(), "\n", "; ")),
		cfg.SecretValues(), afterFailure, beats, log)
	if alerts != nil {
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_ = alerts.Close(actx)
	}
}

// lockedWriter serialises the writes of several goroutines to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// configFailed prints a config that cannot be run as Main prints any
// error (FILE:LINE: FIELD: MESSAGE), then the contract's last line of a
// run that did not succeed (docs/guide.md#commands: `failed: <code>:
// ...`), which it lacked (an independent check, 2026-12-06); the exit code
// stays 2. It prints both itself so that the error comes before that line.
func configFailed(env Env, err error) error {
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != ExitUsage {
		return err
	}
	if ee.err != nil {
		fmt.Fprintln(env.Stderr, ee.err)
	}
	fmt.Fprintln(env.Stdout, failure.LastLine(failure.New(failure.InvalidSyncDefinition, "the config cannot be run")))
	return exit(ExitUsage, nil)
}

// failed prints the docs/guide.md#commands last line and exits 1.
func failed(env Env, err error) error {
	if env.debug != nil {
		// The printed lines hold the catalog's words and a safe detail;
		// the chain is for whoever debugs.
		env.debug(err)
	}
	w := env.Stdout
	var fe *failure.Error
	if errors.As(err, &fe) && fe.Detail != "" && fe.Detail != failure.Lookup(fe.Code).WhatHappened {
		fmt.Fprintf(w, "detail: %s\n", fe.Detail)
	}
	line := failure.LastLine(err)
	if env.hintConfig != "" && env.hintSync != "" {
		// The catalog's commands as they can be pasted (a config not
		// named oncesync.yaml made them fail as printed).
		line = concreteHint(line, env.hintConfig, env.hintSync)
	}
	fmt.Fprintln(w, line)
	return exit(ExitFailed, nil)
}

// printSummary is the run's summary line for a destination of capability c.
func printSummary(w io.Writer, r store.Run, d time.Duration, c destination.Capability) {
	fmt.Fprintf(w, "run %d %s: read %d, %s, replayed from ledger %d, rejected %d, %s, pages %d, duration %s\n",
		r.ID, r.State, r.Read, writtenPhrase(r.Counters), r.Replayed, r.Rejected, inDoubtPhrase(r, c), r.Pages, d.Round(time.Millisecond))
}

// writtenPhrase is "written N", and the records the write mode skipped
// when there are any (docs/guide.md#write-modes).
func writtenPhrase(c store.Counters) string {
	if c.Skipped == 0 {
		return fmt.Sprintf("written %d", c.Written)
	}
	return fmt.Sprintf("written %d, skipped %d (left as the destination had them: write_mode)", c.Written, c.Skipped)
}

// inDoubtPhrase says what became of the records earlier runs left in doubt:
// found delivered by reading the destination back (settled), or not found
// and written once, or resent under their idempotency key (a webhook, which
// is never read back), or (a destination that cannot be read back) left for
// a person.
func inDoubtPhrase(r store.Run, c destination.Capability) string {
	if r.InDoubt == 0 {
		return "in doubt 0"
	}
	rest := r.InDoubt - r.Settled
	var fate string
	switch {
	case r.FailureCode == string(failure.RecordsInDoubt):
		fate = "left for a person to settle (`oncesync runs` names the run)"
	case c == destination.CapIdempotent:
		// Nothing is looked for: "not found there" claimed a look.
		when := ""
		if r.State != store.RunSucceeded {
			when = " by this run or the next"
		}
		return fmt.Sprintf("in doubt %d (sent again with their Idempotency-Key%s: the destination drops those it already has; "+
			"rows changed since go with their new values once settings.in_doubt_grace has passed)", r.InDoubt, when)
	case r.State == store.RunSucceeded:
		fate = "not found there and written once"
	default:
		// A run stopped or failed part-way may not have read them back
		// at all (a second Ctrl-C cancels the read): "not found" would
		// claim a look that never happened.
		fate = "not found there or not read back yet: written once by this run, or settled by the next"
	}
	return fmt.Sprintf("in doubt %d (%d found already delivered, %d %s)", r.InDoubt, r.Settled, rest, fate)
}

// syncOf is sync id of cfg, or a usage error that names the config's ids
// (a typo).
func syncOf(cfg *config.Config, id string) (*config.Sync, error) {
	sc, ok := cfg.Sync(id)
	if !ok {
		return nil, exit(ExitUsage, fmt.Errorf("%s: no sync with id %q (syncs: %s)", cfg.Path, id, syncIDs(cfg)))
	}
	return sc, nil
}

func syncIDs(cfg *config.Config) string {
	s := ""
	for i, sc := range cfg.Syncs {
		if i > 0 {
			s += ", "
		}
		s += sc.ID
	}
	if s == "" {
		return "none"
	}
	return s
}
