package cli

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

func newDeadmanCmd(env Env, rf *rootFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deadman",
		Short: "The dead-man check from the shell (for deployments without serve)",
		Long: `The dead-man check of serve's leader (every hour at minute 13), for deployments
that run syncs from cron with ` + "`oncesync run`" + ` and no serve.`,
		Example: `  oncesync deadman check --config oncesync.yaml`,
	}
	cmd.AddCommand(newDeadmanCheckCmd(env, rf))
	return asGroup(cmd)
}

func newDeadmanCheckCmd(env Env, rf *rootFlags) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check --config FILE",
		Short: "Run the dead-man check once: alert every silent workspace and sync, print what was found",
		Long: `Run, once, the check serve's leader runs every hour at minute 13: for every
workspace with an active sync, and for every active sync, did a run succeed within
its deadman_window (24h)? A silent one gets one critical alert through the
config's alert sinks, saying which silence: runs_without_success (runs failed,
or the latest run failed and its retry is waiting out a backoff)
or no_runs (nothing ran: a stopped scheduler or cron, a stuck queue, workers that
never started). One alert per incident: the same markers as serve's check
suppress repeats until the first success, which sends a resolution notice, or
until the sync is resumed or republished (a new window, a new incident).
Workspaces and syncs enabled less than a window ago are skipped.

It needs no serve and no Redis: on a SQLite store it keeps the markers in the
store. With redis: in the config, markers are in Redis, shared with serve. A sync
of the config that the store has never seen is published first (as serve and
run do), so a sync that never ran is found silent once it is a window old.
Every check is recorded; workers run the check themselves when none was recorded
for 70 minutes.

The check waits up to 10 s for each new silence's alert to reach a sink
other than the log (webhook, e-mail, Sentry; the log when no other is
configured). One that reached nobody is not marked: the check exits 1 and the
next check sends it again.

Exit codes: 0 nothing is silent; 6 silence found (alerted now, or already
alerted earlier in the same incident); 1 the check could not run (store or
Redis unreachable) or an alert reached nobody (the next check sends it
again); 2 bad flags or config.`,
		Example: `  oncesync deadman check --config oncesync.yaml

  # crontab: runs every 15 minutes, and the dead-man check every hour
  */15 * * * * oncesync run --config /etc/oncesync/oncesync.yaml contacts-to-brevo
  13 * * * *   oncesync deadman check --config /etc/oncesync/oncesync.yaml`,
		Args: argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return deadmanCheck(cmd.Context(), env, rf, path)
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "oncesync.yaml", "config file")
	return cmd
}

func deadmanCheck(ctx context.Context, env Env, rf *rootFlags, path string) error {
	cfg, err := loadConfig(env, path)
	if err != nil {
		return err
	}
	log := rf.logger(env.Stderr)
	clk := env.clock()
	a, err := app.Open(ctx, app.OpenParams{Config: cfg, Clock: clk, Logger: log,
		Published: func(ctx context.Context, st store.Store) error {
			return publishNew(ctx, cfg.Syncs, st, app.Publisher(cfg.Path))
		}})
	if err != nil {
		return failed(env, err)
	}
	defer a.Close(ctx)
	st, rdb, alerts := a.Store, a.Redis, a.Alerts
	checker, err := app.Deadman(app.DeadmanParams{
		Config: cfg, Store: st, Notifier: alerts, Clock: clk, Logger: log, Redis: rdb, Who: "oncesync deadman check",
		DeliveryWait: app.AlertWait,
	})
	if err != nil {
		return failed(env, failure.Wrap(failure.StoreUnavailable, err, "set up the dead-man check"))
	}
	prev, err := checker.LastCheck(ctx)
	if err != nil {
		return failed(env, err)
	}
	rep, err := checker.Check(ctx)
	printDeadmanReport(env.Stdout, rep, prev)
	if err != nil {
		return failed(env, err)
	}
	if rep.Count("", deadman.StatusSilent) > 0 {
		return exit(ExitSilent, nil)
	}
	return nil
}

// publishNew publishes the syncs the store has never seen, so that the check
// sees a sync that never ran. Syncs it knows are left alone: republishing a
// changed definition would move its changed_at and hide a silence for a
// window.
func publishNew(ctx context.Context, syncs []config.Sync, st store.Store, by string) error {
	// One read and one transaction, whatever the number of syncs.
	known, err := st.ListSyncs(ctx)
	if err != nil {
		return failure.Wrap(failure.StoreUnavailable, err, "read the syncs")
	}
	seen := make(map[string]bool, len(known))
	for _, k := range known {
		seen[k.ID] = true
	}
	var fresh []store.PutSyncParams
	for i := range syncs {
		sc := &syncs[i]
		if seen[sc.ID] {
			continue
		}
		def, err := sc.DefinitionJSON()
		if err != nil {
			return failure.Wrap(failure.InvalidSyncDefinition, err, "encode the definition of sync %s", sc.ID)
		}
		fresh = append(fresh, store.PutSyncParams{ID: sc.ID, Workspace: sc.Workspace, Definition: def})
	}
	if _, err := st.PutSyncs(ctx, fresh); err != nil {
		return failure.Wrap(failure.StoreUnavailable, err, "publish the new syncs")
	}
	return nil
}

// printDeadmanReport prints one line per silence and ended silence, then a
// summary.
func printDeadmanReport(w io.Writer, rep deadman.Report, prev deadman.LastCheck) {
	fmt.Fprintf(w, "dead-man check at %s (previous check: %s)\n", fmtUTC(rep.At), prev)
	for _, v := range rep.Verdicts {
		if v.Status != deadman.StatusSilent {
			continue
		}
		var alerted string
		switch {
		case v.Alerted:
			alerted = "alerted now"
		case v.Marker != nil:
			alerted = "alerted at " + fmtUTC(v.Marker.RaisedAt) + " (one alert per incident)"
		case v.Deferred:
			alerted = "not alerted yet: this check reached its cap of alerts; the next check sends it"
		default:
			alerted = "not alerted (the alert reached nobody: see the last line; the next check sends it again)"
		}
		fmt.Fprintf(w, "SILENT  %s: %s since %s (window %s); %s\n", target(v.Scope, v.Workspace, v.ID), v.Kind, fmtUTC(v.SilentSince), deadman.FormatWindow(v.Window), alerted)
	}
	for _, m := range rep.Resolved {
		fmt.Fprintf(w, "ENDED   %s: succeeded again after the %s silence alerted at %s; resolution notice sent\n",
			target(m.Scope, m.Workspace, m.ID), m.Kind, fmtUTC(m.RaisedAt))
	}
	ws, syncs := 0, 0
	for _, v := range rep.Verdicts {
		if v.Scope == deadman.ScopeWorkspace {
			ws++
		} else {
			syncs++
		}
	}
	silent := rep.Count("", deadman.StatusSilent)
	fmt.Fprintf(w, "checked %d workspaces and %d syncs (active, or paused by the circuit breaker): %d silent, %d ok, %d young (enabled less than a window ago)\n",
		ws, syncs, silent, rep.Count("", deadman.StatusOK), rep.Count("", deadman.StatusYoung))
}

func target(scope deadman.Scope, workspace, id string) string {
	if scope == deadman.ScopeWorkspace {
		return "workspace " + id
	}
	return "sync " + workspace + "/" + id
}

func fmtUTC(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return t.UTC().Format("2006-01-02 15:04 UTC")
}
