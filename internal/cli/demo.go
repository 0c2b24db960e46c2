package cli

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/demo"
)

func newDemoCmd(env Env, rf *rootFlags) *cobra.Command {
	var p demo.Params
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch a worker die mid-batch and the sync recover with no duplicate and no loss",
		Long: `Run the whole story on embedded defaults, with nothing to install: a temporary SQLite
store, the built-in fake Brevo (validating every request against Brevo's API spec),
generated contacts, a worker killed with SIGKILL right after Brevo applied one of its
writes but before it heard back, a second worker that resumes from the checkpoint and
settles that in-doubt write by reading Brevo back, and a summary measured at the
destination: records, destination writes, duplicates, what became of the records in
doubt, recovery time.

Exit code 0 when every contact arrived exactly once.`,
		Example: `  oncesync demo
  oncesync demo --records 20000 --mode single`,
		Args: argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := p.Check(); err != nil {
				return exit(ExitUsage, err)
			}
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			p.Executable, p.Stdout = exe, env.Stdout
			start := time.Now()
			// Ctrl-C or SIGTERM stops the workers (their commands end with
			// the context) and removes the demo's temporary directory; the
			// signal's default killed the demo alone, leaving a worker
			// running and the directory behind (an independent check,
			// 2026-12-06).
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if _, err := demo.Run(ctx, p); err != nil {
				if ctx.Err() != nil && cmd.Context().Err() == nil {
					fmt.Fprintln(env.Stdout, "\ndemo stopped: its workers were stopped and its temporary files removed")
					return exit(ExitFailed, errors.New("demo stopped by a signal"))
				}
				return exit(ExitFailed, err)
			}
			fmt.Fprintf(env.Stdout, "\ndemo finished in %s: every contact arrived exactly once.\n", time.Since(start).Round(time.Millisecond))
			return nil
		},
	}
	cmd.Flags().IntVar(&p.Records, "records", 5000, "contacts to generate")
	cmd.Flags().IntVar(&p.PageSize, "page-size", 250, "records per page")
	cmd.Flags().StringVar(&p.Mode, "mode", "bulk", "Brevo write path: bulk (contacts/import) or single (one call per contact)")
	cmd.Flags().IntVar(&p.KillAtWrite, "kill-at-write", 0, "kill worker 1 right after this destination write (default: a write in the middle)")
	cmd.Flags().StringVar(&p.Dir, "dir", "", "keep the store, CSV, config and worker logs in this directory (default: a temp dir, removed)")
	return cmd
}
