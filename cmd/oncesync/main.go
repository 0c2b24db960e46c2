// Command oncesync moves records from a source into a SaaS destination without
// duplicate writes or lost records, even when a worker dies mid-batch.
package main

import (
	"context"
	"os"
	_ "time/tzdata" // a schedule's CRON_TZ zone resolves on hosts without a zoneinfo database

	"github.com/redis/go-redis/v9/logging"

	"github.com/oncesync/oncesync/internal/cli"
)

func main() {
	// go-redis prints its own dial failures to stderr, outside the
	// structured log and next to the failure code oncesync reports for
	// the same failure (docs/recovery.md#store_unavailable).
	logging.Disable()
	os.Exit(cli.Main(context.Background(), os.Args[1:], cli.Env{
		Stdout: os.Stdout, Stderr: os.Stderr, LookupEnv: os.LookupEnv,
	}))
}
