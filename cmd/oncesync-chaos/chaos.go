package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
)

// options are the command's flags.
type options struct {
	Scenario string
	Duration time.Duration // workers-kill9; the other cluster scenarios scale from it
	Seed     int64
	Short    bool
	JSON     bool
	Bin      string // the oncesync binary ("" = build one)
	Keep     bool   // keep work directories
	Verbose  bool
	DBURL    string
	RedisURL string
	DropRate float64 // destination-faults: fraction of write responses cut after the write
	// Flips: sources gain rows that change and change back while runs go on
	// (the value checker then catches a lost update).
	Flips bool
}

// scenario is one nemesis and its checks.
type scenario struct {
	Name string
	// What it proves, one line (printed under the table and in docs).
	What string
	Run  func(ctx context.Context, e *env) (*Row, error)
}

// scenarios in the order `all` runs them.
func scenarios() []scenario {
	return []scenario{
		{"kill9-foreground", "oncesync run on SQLite, SIGKILL at seeded points (in-doubt window, request on the wire, anywhere), then run to the end", kill9Foreground},
		{"sigterm", "oncesync run on SQLite, SIGTERM at seeded points: each drain exits within 25 s, the rerun is never skipped", sigtermForeground},
		{"workers-kill9", "serve + 3 workers on PostgreSQL + Redis, 20 syncs @every 5s on growing sources, a worker SIGKILLed every ~20 s and restarted", workersKill9},
		{"workers-kill9-machines", "workers-kill9 with each worker in a PID namespace of its own, as on a machine of its own: no death is seen at once, every takeover waits for the lease to expire (needs root)", workersKill9Machines},
		{"workers-sigterm", "serve + 3 workers on PostgreSQL + Redis, 12 syncs @every 5s; a busy worker SIGTERMed at seeded points (anywhere, on the wire, in doubt, past the drain deadline) must exit 0 within its grace, leases released, and is restarted", workersSigterm},
		{"redis-restart", "serve + 2 workers; the Redis server is stopped for 30 s mid-run and restarted empty", redisRestart},
		{"redis-restart-limiter", "serve + 2 workers, 6 syncs on one Brevo account the fake limits to 20 requests/s, paced together by the limiter in Redis; Redis SIGKILLed with requests in flight, down 30 s, restarted empty: nothing written twice or lost, every sync converges, and once Redis is back at most 5 % of requests are answered 429", redisRestartLimiter},
		{"redis-partitioned", "serve + 2 workers, one sync with partitions: 4 over 100,000 PostgreSQL rows (40,000 with --short); Redis SIGKILLed a third of the way in, down 15 s, restarted empty: no write while it is down, the same run converges", redisPartitioned},
		{"destination-faults", "serve + 2 workers; 5xx bursts, 429 storms, slow responses, and responses cut after the write was applied", destinationFaults},
		{"zombie", "a worker frozen (SIGSTOP) once a write has fully left it, past its 3 s lease; another takes over; SIGCONT: the zombie is fenced", zombie},
		{"pauses", "serve x2 + 2 workers, lease 3 s: a worker frozen (SIGSTOP) with no request at the fake, past its lease, then thawed; runs by hand beside the workers; a long lock on the cursors table: no write after a thaw, nothing twice or lost", pauses},
		{"pg-restart", "serve + 2 workers on a throwaway PostgreSQL restarted mid-run (fallback: pg_terminate_backend of the store's connections)", pgRestart},
		{"rejected-then-accepted", "oncesync run, PostgreSQL source of 1,000 rows, single path: 10 rows refused for their content, then accepted: the next runs deliver all 10", rejectedThenAccepted},
		{"source-locked", "oncesync run, PostgreSQL source of 2,000 rows, single path, source.timeout 5s: another session locks the source table (ACCESS EXCLUSIVE) for 40 s mid-run: the run fails with source_unavailable within the timeout instead of holding its sync for the lock's length, and the next runs deliver every row, none twice", sourceLocked},
		{"cut-off-worker", "serve + 2 workers; worker1 silently cut off from PostgreSQL and Redis (bytes held, connections open) as its write meets a slow or rate-limited Brevo: none of its writes lands past its lease TTL, its syncs resume elsewhere", cutOffWorker},
		{"coordinator-kill", "a partitioned sync (serve + 2 workers, 4 partitions over a PostgreSQL table): SIGKILL of the worker running its coordinator, then of one holding partition jobs before their leases: the sync runs again within a lease TTL plus a recovery sweep and succeeds", coordinatorKill},
		{"async-import-faults", "oncesync run on SQLite, bulk, imports processed 1.5 s after their 202: rows skipped by the import and processes failed whole; skipped rows are not counted written and are delivered once acceptable, failed processes are sent again", asyncImportFaults},
		{"lease-store-loss", "oncesync run on PostgreSQL + a throwaway Redis; Redis flushed or restarted empty while a bulk write is held on the wire 4 s, a second run started at once: nothing written twice", leaseStoreLoss},
		{"lease-store-snapshot", "as lease-store-loss, but Redis restarted from a snapshot taken before the holder's last lease renewals (its copy of the lease long expired): nothing written twice", leaseStoreSnapshot},
	}
}

func chaosMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o options
	fs := pflag.NewFlagSet("oncesync-chaos", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.Scenario, "scenario", "all", "scenario to run: all, or one or more of "+strings.Join(scenarioNames(), ", ")+" (comma-separated)")
	fs.DurationVar(&o.Duration, "duration", 0, "how long workers-kill9 and workers-kill9-machines apply their nemesis (default 5m; 2m with --short)")
	fs.Int64Var(&o.Seed, "seed", 0, "seed of every random choice (0 = pick one and print it)")
	fs.BoolVar(&o.Short, "short", false, "smaller and shorter scenarios")
	fs.BoolVar(&o.JSON, "json", false, "print the rows as JSON instead of a table")
	fs.StringVar(&o.Bin, "bin", "", "oncesync binary to drive (default: build ./cmd/oncesync into a temp dir)")
	fs.BoolVar(&o.Keep, "keep", false, "keep every work directory (failed scenarios keep theirs anyway)")
	fs.BoolVar(&o.Verbose, "verbose", false, "print every nemesis step")
	fs.StringVar(&o.DBURL, "database-url", envOr("ONCESYNC_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL server for the cluster scenarios")
	fs.StringVar(&o.RedisURL, "redis-url", envOr("ONCESYNC_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis server for the cluster scenarios")
	fs.BoolVar(&o.Flips, "flips", true, "change source rows and change them back while runs go on (--flips=false isolates the other checks)")
	fs.Float64Var(&o.DropRate, "drop-rate", 0.02, "destination-faults: fraction of write responses the fake cuts after applying the write (0 isolates the other faults)")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	if o.Duration == 0 {
		o.Duration = 5 * time.Minute
		if o.Short {
			o.Duration = 2 * time.Minute
		}
	}
	if o.Duration < 20*time.Second {
		return fmt.Errorf("%w: --duration %s: at least 20s", errUsage, o.Duration)
	}
	selected, err := selectScenarios(o.Scenario)
	if err != nil {
		return err
	}
	if o.Seed == 0 {
		o.Seed = time.Now().UnixNano() % 1_000_000_000
	}

	progress := stderr
	if o.Bin == "" {
		dir, err := os.MkdirTemp("", "oncesync-chaos-bin-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		o.Bin = filepath.Join(dir, "oncesync")
		fmt.Fprintf(progress, "chaos: building oncesync into %s\n", o.Bin)
		build := exec.CommandContext(ctx, "go", "build", "-o", o.Bin, "github.com/oncesync/oncesync/cmd/oncesync")
		build.Stdout, build.Stderr = stderr, stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building oncesync: %w", err)
		}
	}
	fmt.Fprintf(progress, "chaos: seed %d (replay one scenario with --scenario NAME --seed %d)\n", o.Seed, o.Seed)
	fmt.Fprintf(progress, "chaos: %d cpus, %s %s, %s\n", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version())

	var rows []*Row
	failed := 0
	for _, sc := range selected {
		if ctx.Err() != nil {
			break
		}
		fmt.Fprintf(progress, "\nchaos: == %s (seed %d): %s\n", sc.Name, o.Seed, sc.What)
		start := time.Now()
		e, err := newEnv(ctx, envParams{Options: o, Name: sc.Name, Log: progress})
		if err != nil {
			return err
		}
		row, err := sc.Run(ctx, e)
		if row == nil {
			row = &Row{Scenario: sc.Name, Seed: o.Seed}
		}
		row.Scenario, row.Seed = sc.Name, o.Seed
		row.Took = time.Since(start).Round(time.Second)
		if errors.Is(err, errSkip) {
			row.Skipped, err = err.Error(), nil
		}
		if err != nil {
			row.Problems = append(row.Problems, "error: "+err.Error())
		}
		row.judge()
		if !row.OK {
			failed++
		}
		kept := e.close(!row.OK || o.Keep)
		if kept != "" {
			row.WorkDir = kept
		}
		fmt.Fprintf(progress, "chaos: == %s done in %s: %s\n", sc.Name, row.Took, row.verdict())
		rows = append(rows, row)
	}

	if o.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rows); err != nil {
			return err
		}
	} else {
		printTable(stdout, rows)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if failed > 0 {
		return fmt.Errorf("%w: %d of %d scenarios (seed %d)", errFailed, failed, len(rows), o.Seed)
	}
	return nil
}

func scenarioNames() []string {
	var names []string
	for _, s := range scenarios() {
		names = append(names, s.Name)
	}
	return names
}

func selectScenarios(spec string) ([]scenario, error) {
	all := scenarios()
	if spec == "" || spec == "all" {
		return all, nil
	}
	var out []scenario
	for _, name := range strings.Split(spec, ",") {
		name = strings.TrimSpace(name)
		i := slices.IndexFunc(all, func(s scenario) bool { return s.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("%w: unknown scenario %q (want all or %s)", errUsage, name, strings.Join(scenarioNames(), ", "))
		}
		out = append(out, all[i])
	}
	return out, nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// printTable prints one row per scenario, then each row's notes and problems.
func printTable(w io.Writer, rows []*Row) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tseed\truns\tkills\trecords\tdelivered\tduplicate writes\tlost\twrong values\tin-doubt settled\tresume p50 / p95 / max\tresult")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\n",
			r.Scenario, r.Seed, r.Runs, r.Kills, r.Records, r.Delivered, r.DuplicateWrites, r.Lost, r.WrongValues, r.InDoubtSettled,
			r.resumeText(), r.verdict())
	}
	_ = tw.Flush()
	for _, r := range rows {
		if len(r.Notes) == 0 && len(r.Problems) == 0 && r.WorkDir == "" {
			continue
		}
		fmt.Fprintf(w, "\n%s (seed %d, %s):\n", r.Scenario, r.Seed, r.Took)
		for _, n := range r.Notes {
			fmt.Fprintf(w, "  - %s\n", n)
		}
		for _, p := range r.Problems {
			fmt.Fprintf(w, "  ! %s\n", p)
		}
		if r.WorkDir != "" {
			fmt.Fprintf(w, "  work dir (configs, process logs): %s\n", r.WorkDir)
		}
	}
}
