// Command oncesync-bench measures the throughput of the real oncesync binary
// (`oncesync run`, embedded SQLite store, ledger, lease and cursor) against a
// bare baseline that reads the same CSV and posts the same requests to the
// same local fake Brevo with nothing else: no ledger, no lease, no cursor.
//
//	oncesync-bench --records 200000 --page-size 500 --mode bulk --runs 3
//	oncesync-bench --source mysql --mysql-url mysql://root@127.0.0.1:3306/ ...  // oncesync reads a MySQL table
//
// Both sides run as separate processes (the baseline is this binary re-run
// with the hidden `baseline` subcommand), so both pay process start-up; both
// are timed wall-clock from start to exit. The fake runs in this process, is
// reset before every run and its counters are checked after it: a run whose
// contacts, writes or duplicates are not exactly right fails the bench.
//
// Hidden subcommands (used by the bench itself):
//
//	oncesync-bench baseline --csv F --url U --mode M --page-size N ...
//	oncesync-bench inproc --cpuprofile F -- run --config F SYNC
//	oncesync-bench hubspot-baseline --csv F --url U --page-size N
//
// The HubSpot destination's bulk path against fakehubspot, with its own
// bare baseline (hubspot.go):
//
//	oncesync-bench hubspot --records 100000 --page-size 500 --runs 3
//
// Subcommands for scripts/bench-peer.sh:
//
//	oncesync-bench peer --benthos bin/benthos-v4.60.0 ...  // oncesync vs Benthos, kill -9 of each
//	oncesync-bench rss --records 100000,1000000   // oncesync's peak RSS per source size
//	oncesync-bench rusage --out F -- CMD ...      // (hidden) runs CMD, writes its own rusage to F
//	oncesync-bench shopify --records 200000       // fake Shopify -> fake Brevo (shopify.go)
//
// And for the shared rate limit (docs/guide.md#one-rate-limit-per-account):
//
//	oncesync-bench accounts --syncs 4 --workers 2   // the 429 share of syncs on one account
//
// Subcommand for scripts/bench.sh:
//
//	oncesync-bench parquet --records 200000 --rss-records 1000000  // CSV vs Parquet records/s, Parquet peak RSS
//
// Many machines (scripts/bench.sh, scripts/bench-scale.sh; docs/PERFORMANCE.md#many-machines-2026-12-02):
//
//	oncesync-bench ledger --entries 100000,1000000    // records/s by entries already in the ledger, both stores (ledger.go)
//	oncesync-bench schedule --syncs 10000             // the leader's work per cron tick on PostgreSQL (schedule.go)
//	oncesync-bench scaleout --rows 100000             // a partitioned sync over 1, 2, 4 processes (scaleout.go)
//
// And the stores side by side (storecmp.go):
//
//	oncesync-bench storecmp --records 100000 --page-size 500 --runs 3  // SQLite vs PostgreSQL + Redis records/s
//
// `inproc` runs the oncesync CLI in this process under the CPU profiler, so
// `go tool pprof` can say where oncesync's time goes.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// errUsage marks a flag or argument problem (exit 2).
var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var err error
	switch {
	case len(args) > 0 && args[0] == "baseline":
		err = baselineMain(ctx, args[1:], stdout)
	case len(args) > 0 && args[0] == "baseline-klaviyo":
		err = baselineKlaviyoMain(ctx, args[1:], stdout)
	case len(args) > 0 && args[0] == "inproc":
		err = inprocMain(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "peer":
		err = peerMain(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "rss":
		err = rssMain(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "accounts":
		err = accountsMain(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "ledger":
		err = ledgerMain(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "scaleout":
		err = scaleoutMain(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "schedule":
		err = scheduleMain(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "parquet":
		err = parquetMain(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "shopify":
		err = shopifyMain(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "hubspot":
		err = hubspotMain(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "hubspot-baseline":
		err = hubspotBaselineMain(ctx, args[1:], stdout)
	case len(args) > 0 && args[0] == "storecmp":
		err = storecmpMain(ctx, args[1:], stdout, stderr)
	case len(args) > 0 && args[0] == "rusage":
		err = rusageMain(ctx, args[1:], stdout, stderr)
	default:
		err = benchMain(ctx, args, stdout, stderr)
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "oncesync-bench:", err)
		return 2
	default:
		fmt.Fprintln(stderr, "oncesync-bench: FAILED:", err)
		return 1
	}
}
