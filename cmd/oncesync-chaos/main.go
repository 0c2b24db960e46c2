// Command oncesync-chaos is oncesync's Jepsen-style scenario runner (`make
// chaos`): it starts the real oncesync binary as separate processes against a
// real store (SQLite, or PostgreSQL with Redis leases) and an in-process fake
// Brevo, applies a nemesis (SIGKILL, SIGTERM, SIGSTOP/SIGCONT, a Redis or
// PostgreSQL outage or data loss, a silent partition, destination faults,
// asynchronous imports that skip rows or fail), then checks the destination
// against the source: every record there with the source's current values,
// no duplicate write, nothing lost.
//
//	oncesync-chaos                               # every scenario
//	oncesync-chaos --scenario workers-kill9 --duration 5m --seed 42
//	oncesync-chaos --short --json
//
// Each scenario prints one table row (scenario, seed, runs, kills, records,
// delivered, duplicate writes, lost, wrong values, in-doubt settled, resume
// p50/p95/max). The exit status is 1 when any scenario saw a duplicate
// write, a lost record, a wrong final value or a broken invariant (a run
// left running, a drain slower than 25 s), 2 on bad flags. A failed scenario
// can be replayed with --scenario NAME --seed N.
//
// PostgreSQL and Redis come from ONCESYNC_TEST_DATABASE_URL and
// ONCESYNC_TEST_REDIS_URL (scripts/test-services.sh exports them), else
// 127.0.0.1:5432 (user postgres) and 127.0.0.1:6379. Every cluster scenario
// works in a database of its own, created and dropped by the runner.
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

// errFailed: at least one scenario failed its checks (exit 1).
var errFailed = errors.New("a scenario failed its checks")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	err := chaosMain(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, errUsage):
		fmt.Fprintln(stderr, "oncesync-chaos:", err)
		return 2
	case errors.Is(err, errFailed):
		fmt.Fprintln(stderr, "oncesync-chaos: FAILED:", err)
		return 1
	default:
		fmt.Fprintln(stderr, "oncesync-chaos: FAILED:", err)
		return 1
	}
}
