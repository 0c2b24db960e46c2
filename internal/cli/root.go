// Package cli is oncesync's command line (cobra). Commands parse flags, build
// the pieces from the config, and hand over to the domain packages.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
)

// Exit codes (docs/guide.md#commands).
const (
	ExitOK       = 0
	ExitFailed   = 1 // a run failed; the last line says why
	ExitUsage    = 2 // bad flags or an invalid config
	ExitSkipped  = 3 // another run of the sync was in progress
	ExitMismatch = 4 // checkpoint mismatch
	ExitDead     = 5 // checkpoint work dead-lettered
	ExitSilent   = 6 // `deadman check` found a silent workspace or sync
)

// Env is the process's outside world.
type Env struct {
	Stdout, Stderr io.Writer
	LookupEnv      func(string) (string, bool)
	// Clock tells commands that take it the time (nil: the wall clock).
	Clock clock.Clock
	// debug logs a failure's whole chain at debug level (Main sets it;
	// nil: not logged).
	debug func(err error)
	// scrub hides the loaded config's secrets in Stdout and Stderr (Main
	// sets it; nil: nothing hidden).
	scrub *scrubber
	// hintConfig and hintSync fill the config file and the sync id into
	// the commands of a failure's next step (run sets them once its config
	// is loaded; empty: printed as the catalog has them).
	hintConfig, hintSync string
}

func (e Env) clock() clock.Clock {
	if e.Clock == nil {
		return clock.Real{}
	}
	return e.Clock
}

// scrubbed is env with Stdout and Stderr written through a new scrubber,
// which loadConfig tells the secrets of each config it loads.
func (e Env) scrubbed() Env {
	e.scrub = &scrubber{}
	e.Stdout = scrubWriter{w: e.Stdout, s: e.scrub}
	e.Stderr = scrubWriter{w: e.Stderr, s: e.scrub}
	return e
}

// exitError carries an exit code through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// exit returns an error that makes Main exit with code; a nil err prints nothing more.
func exit(code int, err error) error { return &exitError{code: code, err: err} }

// invocationError is a usage error of the command line itself (a flag's
// value), as cobra's own flag and argument errors are.
type invocationError struct{ error }

func (e invocationError) Unwrap() error { return e.error }

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, env Env) int {
	var rf rootFlags
	env = env.scrubbed()
	// The log level is known once the flags are parsed, when a command
	// fails: the chain is logged then, before the failed: line that must
	// stay last (docs/recovery.md#reading-a-failure).
	env.debug = func(err error) { rf.logger(env.Stderr).Debug("failure", "err", err) }
	root := newRoot(env, &rf)
	root.SetArgs(args)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(env.Stderr, ee.err)
			invocationFailed(env, cmd, ee)
		}
		return ee.code
	}
	fmt.Fprintln(env.Stderr, "error:", err)
	invocationFailed(env, cmd, nil)
	return ExitUsage
}

// invocationFailed ends a usage error of `oncesync run` (a missing sync id,
// an unknown flag) with the contract's failed: line, as every other way a
// run fails does (docs/recovery.md#invalid_invocation). ee is the error's
// exit code and message; nil for an error cobra itself found (a flag).
// A config that cannot be run has printed its own failed: line (its
// exitError carries no message).
func invocationFailed(env Env, cmd *cobra.Command, ee *exitError) {
	if cmd == nil || cmd.Name() != "run" || cmd.Parent() == nil || cmd.Parent().Parent() != nil {
		return
	}
	var ie invocationError
	if ee != nil && (ee.code != ExitUsage || !errors.As(ee.err, &ie)) {
		return
	}
	fmt.Fprintln(env.Stdout, failure.LastLine(failure.New(failure.InvalidInvocation, "")))
}

type rootFlags struct {
	logLevel string
}

func newRoot(env Env, rf *rootFlags) *cobra.Command {
	root := &cobra.Command{
		Use:   "oncesync",
		Short: "Sync records into SaaS tools with no duplicate writes and no lost records",
		Long: `oncesync reads records from a source (a CSV, JSONL or Parquet file, a PostgreSQL or
MySQL table, Shopify customers) page by page and writes them to a destination (Brevo,
HubSpot, Klaviyo, a webhook). Every record's delivery is recorded in a ledger before and
after the destination call, and the cursor moves only at a clean page end under a fenced
lease: a worker killed mid-batch costs a replay of seconds, never a duplicate write and
never a lost or stale record; a sync that goes silent is noticed.

Start with:
  oncesync demo                         the whole story on embedded defaults
  oncesync validate --config sync.yaml  check a config
  oncesync run --config sync.yaml SYNC  run one sync now`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       versionLineOf(debug.ReadBuildInfo()),
	}
	root.SetVersionTemplate("oncesync {{.Version}}\n")
	root.PersistentFlags().StringVar(&rf.logLevel, "log-level", "warn", "log level on stderr: debug, info, warn, error")
	// A level that is not one is a bad flag (exit 2), not a silent warn: a
	// person who asked for debug lines must not be left reading none.
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		var lvl slog.Level
		if err := lvl.UnmarshalText([]byte(rf.logLevel)); err != nil {
			return exit(ExitUsage, invocationError{fmt.Errorf("--log-level %q: want debug, info, warn or error", rf.logLevel)})
		}
		return nil
	}
	root.AddCommand(
		newRunCmd(env, rf),
		newValidateCmd(env),
		newCheckCmd(env),
		newFakeBrevoCmd(env),
		newFakeKlaviyoCmd(env),
		newFakeShopifyCmd(env),
		newFakeHubSpotCmd(env),
		newDemoCmd(env, rf),
		newStatusCmd(env),
		newRunsCmd(env),
		newRecordsCmd(env),
		newPauseCmd(env),
		newResumeCmd(env),
		newSignOutCmd(env),
		newMigrateCmd(env),
		newServeCmd(env, rf),
		newWorkerCmd(env, rf),
		newCheckpointCmd(env, rf),
		newDeadLetterCmd(env, rf),
		newDeadmanCmd(env, rf),
	)
	return root
}

func (rf *rootFlags) logger(w io.Writer) *slog.Logger {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(rf.logLevel)); err != nil {
		lvl = slog.LevelWarn
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: lvl}))
}

// argsNamed checks a command's positional arguments, from min to max (max
// < 0: no limit), and names what is missing or extra with the command's
// usage line: cobra's own "accepts 1 arg(s), received 0" does not say that
// the argument is a sync's id.
func argsNamed(what string, min, max int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		usage := strings.TrimSuffix(cmd.UseLine(), " [flags]")
		quoted := make([]string, len(args))
		for i, a := range args {
			quoted[i] = strconv.Quote(a)
		}
		switch {
		case len(args) < min && what == "SYNC":
			return fmt.Errorf("%s needs SYNC, the id of a sync in the config (usage: %s; `oncesync status --config FILE` lists them)", cmd.CommandPath(), usage)
		case len(args) < min:
			return fmt.Errorf("%s needs %s (usage: %s)", cmd.CommandPath(), what, usage)
		case max == 0 && len(args) > 0:
			return fmt.Errorf("%s takes no argument, not %d (%s) (usage: %s)", cmd.CommandPath(), len(args), strings.Join(quoted, " "), usage)
		case max >= 0 && len(args) > max && min == max:
			return fmt.Errorf("%s takes one %s, not %d (%s) (usage: %s)", cmd.CommandPath(), what, len(args), strings.Join(quoted, " "), usage)
		case max >= 0 && len(args) > max:
			return fmt.Errorf("%s takes at most one %s, not %d (%s) (usage: %s)", cmd.CommandPath(), what, len(args), strings.Join(quoted, " "), usage)
		}
		return nil
	}
}

// asGroup makes cmd a group of subcommands that refuses one it does not
// have (exit 2): cobra would print the group's help and exit 0, so a typo
// in a script (`oncesync deadman chek`) would pass for a check that ran.
// Alone, the group prints its help.
func asGroup(cmd *cobra.Command) *cobra.Command {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(c *cobra.Command, args []string) error {
		if len(args) == 0 {
			return c.Help()
		}
		var names []string
		for _, s := range c.Commands() {
			if s.IsAvailableCommand() {
				names = append(names, s.Name())
			}
		}
		return fmt.Errorf("unknown command %q for %q (commands: %s; see `%s --help`)", args[0], c.CommandPath(), strings.Join(names, ", "), c.CommandPath())
	}
	return cmd
}
