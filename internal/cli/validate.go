package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
)

func newValidateCmd(env Env) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "validate --config FILE",
		Short: "Check a config file and name every problem with its file, line and field",
		Long: `Check a config file: YAML syntax, unknown keys, required fields, sources,
destinations, schedules, durations, that every ${ENV} variable it uses is set, and
that every file a file source reads exists (without connecting to any server).
Every problem is printed as FILE:LINE: FIELD: MESSAGE. Secrets are never printed.
A valid file may still get warnings, printed as "warning: FILE:LINE: FIELD: MESSAGE":
settings that work but leave a connection unprotected (a PostgreSQL sslmode other
than verify-full to another machine), and a file or Parquet source without an
identity (its rows are known by their place, so an edit sends the rows after it
again).

Exit codes: 0 valid; 2 problems found.`,
		Example: `  oncesync validate --config oncesync.yaml
  BREVO_API_KEY=xkeysib-... oncesync validate -c sync.yaml`,
		Args: argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := config.Validate(path, env.LookupEnv, connector.Default().Kinds())
			if err != nil {
				return exit(ExitUsage, err)
			}
			env.scrub.add(cfg.SecretValues())
			fmt.Fprintf(env.Stdout, "%s: valid (%d sync(s))\n", path, len(cfg.Syncs))
			// Settings that work but are unsafe or costly: said, not
			// refused (a server on a private network may be trusted; an
			// append-only file needs no identity).
			for _, w := range cfg.WarningProblems() {
				fmt.Fprintf(env.Stdout, "warning: %s\n", w)
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "oncesync.yaml", "config file")
	return cmd
}
