package cli

import (
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

func newFakeBrevoCmd(env Env) *cobra.Command {
	var (
		opts   fakebrevo.Options
		listen string
	)
	cmd := &cobra.Command{
		Use:   "fake-brevo [--listen ADDR]",
		Short: "Serve a Brevo-compatible API for demos and tests, with fault injection",
		Long: `Serve a Brevo-compatible API (the contact endpoints oncesync uses, faithful to Brevo's
public API spec): /v3/contacts, /v3/contacts/{identifier}, /v3/contacts/import,
/v3/processes and /v3/processes/{id}, with Brevo's rate-limit headers.

GET /_stats returns JSON counters: requests, contacts_written, contacts and
duplicate_writes (a contact written again with exactly the attributes it had).
Point a sync's destination base_url at http://ADDR/v3 to use it.`,
		Example: `  oncesync fake-brevo --listen 127.0.0.1:8026
  oncesync fake-brevo --error-rate 0.05 --rate-limit 10 --refuse-email bad@example.com
  curl -s http://127.0.0.1:8026/_stats`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return fakebrevo.Serve(ctx, listen, opts, func(addr string) {
				fmt.Fprintf(env.Stdout, "fake Brevo listening on http://%s/v3 (stats: http://%s/_stats)\n", addr, addr)
			})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8026", "address to listen on (port 0 picks a free one)")
	fakebrevo.RegisterFlags(cmd.Flags(), &opts)
	return cmd
}
