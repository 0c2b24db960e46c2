package cli

import (
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

func newFakeKlaviyoCmd(env Env) *cobra.Command {
	var (
		opts   fakeklaviyo.Options
		listen string
	)
	cmd := &cobra.Command{
		Use:   "fake-klaviyo [--listen ADDR]",
		Short: "Serve a Klaviyo-compatible profiles API for demos and tests, with fault injection",
		Long: `Serve a Klaviyo-compatible API (the profile endpoints oncesync uses, checked against
Klaviyo's public OpenAPI spec, revision ` + fakeklaviyo.SpecRevision + `): /api/profile-import, /api/profiles,
/api/profiles/{id}, /api/profiles/{id}/relationships/lists, /api/profile-bulk-import-jobs,
/api/profile-bulk-import-jobs/{id}, its import-errors and relationships/profiles, and
/api/profile-subscription-bulk-delete-jobs, with Klaviyo's per-endpoint burst and
steady rate limits per API key (429 with Retry-After).

Bulk import jobs are asynchronous: 202 with a job id, queued then processing
for --job-delay, then complete; profiles they refuse (an invalid or
--refuse-email address, a phone number not in E.164 form, a share set by
--job-skip-rate) are listed as import errors (without their profile with
--omit-error-payload; late or never with --errors-listed-after and
--errors-never-listed, while failed_count counts them); --job-fail-rate
(or --job-fail-first N) makes jobs fail whole (cancelled, nothing applied,
or their first profiles with --job-fail-applies);
--job-refuse-rate refuses job requests whole (400). Unsubscribe jobs are queued
for --unsubscribe-delay too, and a profile one finds out of its list then is
unsubscribed globally, as Klaviyo's spec warns. Profiles are added to a list
with POST /api/lists/{id}/relationships/profiles.

GET /_stats returns JSON counters: requests, profiles_written, profiles,
duplicate_writes (a profile written again with exactly what it had),
jobs_created, jobs_failed, import_errors, list_removals, global_unsubscribes.
Point a sync's destination base_url at http://ADDR to use it.`,
		Example: `  oncesync fake-klaviyo --listen 127.0.0.1:8028
  oncesync fake-klaviyo --error-rate 0.05 --job-delay 2s --job-skip-rate 0.02 --job-fail-rate 0.1
  curl -s http://127.0.0.1:8028/_stats`,
		Args: argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return fakeklaviyo.Serve(ctx, listen, opts, func(addr string) {
				fmt.Fprintf(env.Stdout, "fake Klaviyo listening on http://%s (stats: http://%s/_stats)\n", addr, addr)
			})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8028", "address to listen on (port 0 picks a free one)")
	fakeklaviyo.RegisterFlags(cmd.Flags(), &opts)
	return cmd
}
