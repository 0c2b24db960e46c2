package cli

import (
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/fakehubspot"
)

func newFakeHubSpotCmd(env Env) *cobra.Command {
	var (
		opts   fakehubspot.Options
		listen string
	)
	cmd := &cobra.Command{
		Use:   "fake-hubspot [--listen ADDR]",
		Short: "Serve a HubSpot-compatible contacts API for demos and tests, with fault injection",
		Long: `Serve a HubSpot-compatible CRM v3 contacts API, written from HubSpot's public
documentation: POST /crm/v3/objects/contacts/batch/{upsert,read,create,update,archive}
(at most 100 inputs, 207 Multi-Status for per-input errors, 409 for a create
conflict) and GET /crm/v3/properties/contacts[/{name}], behind a bearer token
and the ten-second rolling rate limit (X-HubSpot-RateLimit-* headers, 429 with
policyName TEN_SECONDLY_ROLLING).

GET /_stats returns JSON counters: requests, contacts_written, duplicate_writes
(a contact written again with exactly the properties it had), contacts,
archived, rejected, rate_limited, dropped_responses, invalid_requests.
Point a sync's destination base_url at http://ADDR to use it.`,
		Example: `  oncesync fake-hubspot --listen 127.0.0.1:8029
  oncesync fake-hubspot --rate-limit 190 --error-rate 0.05 --property customer_id:string:unique
  curl -s http://127.0.0.1:8029/_stats`,
		Args: argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			return fakehubspot.Serve(ctx, listen, opts, func(addr string) {
				fmt.Fprintf(env.Stdout, "fake HubSpot listening on http://%s (stats: http://%s/_stats)\n", addr, addr)
			})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8029", "address to listen on (port 0 picks a free one)")
	fakehubspot.RegisterFlags(cmd.Flags(), &opts)
	return cmd
}
