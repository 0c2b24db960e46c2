package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/store"
)

// newMigrateCmd applies the store's and the job queue's migrations and
// nothing else, so a DBA can apply them with the schema owner's URL and run
// serve and worker as a role that may only use the tables
// (docs/guide.md#least-privilege-and-migrations).
func newMigrateCmd(env Env) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "migrate --config FILE",
		Short: "Apply the store's and the job queue's migrations, and nothing else",
		Long: `Apply the pending migrations of the config's store (oncesync's tables) and of its
job queue (River's tables), then exit. Every command applies the store's
migrations when it opens the store, and serve and worker the queue's too; this one
lets a user who owns the schema apply them before an upgrade's processes start,
so that serve, worker and run may use a role that can read and write the tables
but not create them. Store the URL of that owning user in a config of its own
(or in the environment variable store's URL comes from). Applied under a lock:
safe while other processes start. Nothing is run and no sync is published.`,
		Example: `  oncesync migrate --config owner.yaml`,
		Args:    argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withConfigStore(cmd.Context(), env, path, func(cfg *config.Config, st store.Store) error {
				schema := ""
				if ss, ok := st.(interface{ Schema() string }); ok {
					schema = ss.Schema()
				}
				if err := queue.Migrate(cmd.Context(), cfg, schema); err != nil {
					return failure.Wrap(failure.StoreUnavailable, err, "migrate the job queue")
				}
				where := "store"
				if schema != "" {
					where = fmt.Sprintf("store (schema %s)", schema)
				}
				if sv, ok := st.(interface {
					SchemaVersion(context.Context) (int, error)
				}); ok {
					v, err := sv.SchemaVersion(cmd.Context())
					if err != nil {
						return err
					}
					where += fmt.Sprintf(" at version %d", v)
				}
				fmt.Fprintf(env.Stdout, "%s and job queue: up to date (pending migrations applied, if any)\n", where)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "oncesync.yaml", "config file")
	return cmd
}
