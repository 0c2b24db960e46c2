package cli

import (
	"github.com/spf13/cobra"
)

func newWorkerCmd(env Env, rf *rootFlags) *cobra.Command {
	var f daemonFlags
	cmd := &cobra.Command{
		Use:   "worker --config FILE",
		Short: "Run workers only (extra processes or machines next to serve)",
		Long: `Work runs queued by serve: no scheduler and, unless --listen is given, no HTTP.
Start as many as you like, on this machine (sharing the SQLite store) or on
others (with a PostgreSQL store and Redis). At least one serve must run: it
enqueues the schedules and recovers runs whose worker died.

With --listen, /healthz, /readyz and /metrics are served on that address.

A worker also watches the dead-man check (docs/guide.md, "Telling silence from
outside"): when no check was recorded for 70 minutes (the leader checks every
hour at minute 13), it runs the check itself, alerting through the config's
alert sinks; of several workers finding it overdue, one runs it. Runs it works
tell their sync's heartbeat_url.

SIGTERM or SIGINT: stop taking runs; every run in flight finishes its page,
checkpoints, releases its lease and is handed back to the queue (any worker
resumes it at once) within 15 s; the process exits by 25 s whatever still
runs. A second signal stops at once.`,
		Example: `  oncesync worker --config oncesync.yaml
  oncesync worker --config /etc/oncesync/oncesync.yaml --workers 8 --listen 127.0.0.1:8081`,
		Args: argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runDaemon(cmd.Context(), env, rf, f, false)
		},
	}
	addDaemonFlags(cmd, &f)
	cmd.Flags().StringVar(&f.listen, "listen", "", "optional HTTP address for /healthz, /readyz and /metrics")
	return cmd
}
