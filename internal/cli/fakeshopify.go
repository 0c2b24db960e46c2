package cli

import (
	"fmt"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/fakeshopify"
)

func newFakeShopifyCmd(env Env) *cobra.Command {
	var (
		opts      fakeshopify.Options
		listen    string
		customers int
	)
	cmd := &cobra.Command{
		Use:   "fake-shopify [--listen ADDR]",
		Short: "Serve a fake of Shopify's GraphQL Admin API (customers) for demos and tests, with faults",
		Long: `Serve a fake of Shopify's GraphQL Admin API, as far as oncesync's shopify source
reads it: POST /admin/api/{version}/graphql.json with the X-Shopify-Access-Token
header, the customers connection (first/after, query: "updated_at:>='...'",
sortKey), nodes(ids:), customersCount, and Shopify's calculated query cost
throttle (a 1,000-point bucket restored at 50 points per second, THROTTLED
errors, extensions.cost.throttleStatus).

Test endpoints: POST /_customers with {"seed": N} adds N generated customers,
{"customers": [{"id": 7000000000001, "email": "...", "firstName": "..."}]}
upserts customers (stamped updated now), {"delete": [ids]} removes some;
GET /_stats returns JSON counters (requests, customers, throttled, by_status,
cost_charged, nodes_served); POST /_reset forgets everything.
Point a sync's source shop_url at http://ADDR to use it.`,
		Example: `  oncesync fake-shopify --listen 127.0.0.1:8027 --customers 1000
  oncesync fake-shopify --token shpat_test --error-rate 0.05 --rate-limit-rate 0.02 --drop-rate 0.01
  curl -s -XPOST http://127.0.0.1:8027/_customers -d '{"seed": 500}'
  curl -s http://127.0.0.1:8027/_stats`,
		Args: argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
			defer stop()
			if customers < 0 {
				return fmt.Errorf("--customers must not be negative")
			}
			s := fakeshopify.New(opts)
			s.Seed(customers)
			return s.Serve(ctx, listen, func(addr string) {
				fmt.Fprintf(env.Stdout, "fake Shopify listening on http://%s (%d customers; stats: http://%s/_stats)\n", addr, customers, addr)
			})
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8027", "address to listen on (port 0 picks a free one)")
	fakeshopify.RegisterFlags(cmd.Flags(), &opts, &customers)
	return cmd
}
