package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/store"
)

// newSignOutCmd ends every web session of a person, from the shell (a lost
// laptop): docs/guide.md#running-oncesync-for-several-teams.
func newSignOutCmd(env Env) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "signout --config FILE USER",
		Short: "End every web UI session of a person (a web.users name, or oidc:NAME#DIGEST)",
		Example: `  oncesync signout --config oncesync.yaml alice
  oncesync signout --config oncesync.yaml 'oidc:jane.doe#1a2b3c4d'`,
		Args: argsNamed("USER", 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withConfigStore(cmd.Context(), env, path, func(cfg *config.Config, st store.Store) error {
				ss, ok := st.(store.Sessions)
				if !ok {
					return exit(ExitUsage, errors.New("this store keeps no web sessions"))
				}
				n, err := ss.DeleteUserSessions(cmd.Context(), args[0])
				if err != nil {
					return err
				}
				_, known := cfg.Web.Users[args[0]]
				if n == 0 && !known && !strings.HasPrefix(args[0], "oidc:") {
					// A mistyped name ended nothing: say so rather than
					// look like success (an independent check, 2026-12-06).
					return exit(ExitFailed, fmt.Errorf("no session of %q, and it is not a name in web.users of %s: nothing was ended "+
						"(a single sign-on person is oidc:NAME#DIGEST, as the audit log names them)", args[0], cfg.Path))
				}
				fmt.Fprintf(env.Stdout, "%s: %d session(s) ended\n", args[0], n)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "oncesync.yaml", "config file")
	return cmd
}
