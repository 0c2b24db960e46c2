package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"
)

// scheduleMain is `oncesync-bench schedule`: the leader's work per cron tick
// with --syncs syncs scheduled every minute on PostgreSQL (`oncesync serve`).
// Every sync's tick falls on the same minute, the worst case. The one job
// slot (--workers 1) is held by a run whose destination never answers, so
// the tick's runs stay queued and the figures are the leader's, not runs'.
//
// Per tick it reports: how long after the minute the last run of the tick was
// in the queue (river_job.created_at) and how long serve was busy (its CPU,
// sampled every 100 ms), serve's CPU time, the database's transactions and
// table scans (pg_stat_database, pg_stat_user_tables: pg_stat_statements is
// not loaded on the bench's server) less the idle rate measured before the
// tick, and serve's resident memory (docs/PERFORMANCE.md#many-machines-2026-12-02).
func scheduleMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("schedule", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		bin   = fs.String("oncesync", "bin/oncesync", "the oncesync binary")
		syncs = fs.Int("syncs", 10_000, "syncs, each scheduled every minute")
		ticks = fs.Int("ticks", 2, "ticks measured")
		dbURL = fs.String("database-url", envOr("ONCESYNC_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL server")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if *syncs <= 0 || *ticks <= 0 {
		return fmt.Errorf("%w: --syncs and --ticks must be positive", errUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Duration(*ticks+3)*time.Minute+5*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "oncesync-bench-schedule-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	db, drop, err := benchDatabase(ctx, *dbURL)
	if err != nil {
		return err
	}
	defer drop()

	// A destination that never answers: the run in the one slot waits on it.
	hang, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hangDone := make(chan struct{})
	hsrv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-hangDone:
		case <-r.Context().Done():
		}
	})}
	go func() { _ = hsrv.Serve(hang) }()
	defer func() { close(hangDone); hsrv.Close() }()

	csv := filepath.Join(dir, "one.csv")
	if err := os.WriteFile(csv, []byte("id,email\n1,a@example.com\n"), 0o600); err != nil {
		return err
	}
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	apiAddr := apiLn.Addr().String()
	apiLn.Close()
	var cfg bytes.Buffer
	fmt.Fprintf(&cfg, "store: %s\nweb: {listen: %s, api_tokens: [bench-api-token-0123456789abcdef]}\nsyncs:\n", db, apiAddr)
	for i := 1; i <= *syncs; i++ {
		fmt.Fprintf(&cfg, `  - id: s%05d
    schedule: "* * * * *"
    source: {type: csv, path: %s, identity: id}
    destination: {type: brevo, base_url: http://%s/v3, api_key: ${%s}, mode: single}
    mapping: {email: email}
`, i, csv, hang.Addr(), apiKeyEnv)
	}
	cfgPath := filepath.Join(dir, "oncesync.yaml")
	if err := os.WriteFile(cfgPath, cfg.Bytes(), 0o600); err != nil {
		return err
	}
	start := time.Now()
	serve, err := startChild(ctx, filepath.Join(dir, "serve.log"), []string{*bin, "serve", "--config", cfgPath, "--workers", "1"})
	if err != nil {
		return err
	}
	defer func() {
		_ = serve.cmd.Process.Signal(syscall.SIGTERM)
		_, _ = serve.wait()
	}()
	if err := waitHTTP(ctx, "http://"+apiAddr+"/healthz"); err != nil {
		return fmt.Errorf("serve did not come up: %w\n%s", err, tail(serve.out.Bytes(), 2000))
	}
	up := time.Since(start)
	pid := serve.cmd.Process.Pid
	rssUp := procStatusKiB(pid, "VmRSS")
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)

	// The leader enqueues its periodic jobs once it is elected and has set
	// them up: its first job (the recovery sweep, run on start) says when.
	// Serve answers /healthz before it has published every sync (PutSyncs,
	// one transaction; one PutSync each before) and started the queue.
	var (
		firstJob  *time.Time
		published time.Duration
	)
	for firstJob == nil {
		var n int
		if err := conn.QueryRow(ctx, `SELECT (SELECT min(created_at) FROM oncesync.river_job), (SELECT count(*) FROM oncesync.syncs)`).Scan(&firstJob, &n); err != nil {
			return err
		}
		if n >= *syncs && published == 0 {
			published = time.Since(start)
		}
		if firstJob == nil {
			if err := sleepUntil(ctx, time.Now().Add(200*time.Millisecond)); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(stdout, "scheduling: %d syncs, each every minute (\"* * * * *\"), `oncesync serve` on PostgreSQL (leader, one job slot held)\n", *syncs)
	fmt.Fprintf(stdout, "  serve answers /healthz %.1f s after start (RSS %.0f MiB); all %d syncs published by %.1f s; the leader's first job %.1f s after start, %.2f s CPU by then\n",
		up.Seconds(), kibToMiB(rssUp), *syncs, published.Seconds(), firstJob.Sub(start).Seconds(), procCPU(pid).Seconds())
	for t := 1; t <= *ticks; t++ {
		tick := time.Now().Truncate(time.Minute).Add(time.Minute)
		if time.Until(tick) < 25*time.Second { // room for the idle window
			tick = tick.Add(time.Minute)
		}
		if err := sleepUntil(ctx, tick.Add(-21*time.Second)); err != nil {
			return err
		}
		idle0, err := dbCounters(ctx, conn)
		if err != nil {
			return err
		}
		if err := sleepUntil(ctx, tick.Add(-1*time.Second)); err != nil {
			return err
		}
		before, err := dbCounters(ctx, conn)
		if err != nil {
			return err
		}
		cpu0 := procCPU(pid)
		rss0 := procStatusKiB(pid, "VmRSS")
		var busyUntil time.Time
		maxRSS := rss0
		prev := cpu0
		for time.Now().Before(tick.Add(50 * time.Second)) {
			if err := sleepUntil(ctx, time.Now().Add(100*time.Millisecond)); err != nil {
				return err
			}
			c := procCPU(pid)
			if c-prev > 20*time.Millisecond { // busy in this 100 ms
				busyUntil = time.Now()
			}
			prev = c
			maxRSS = max(maxRSS, procStatusKiB(pid, "VmRSS"))
		}
		cpu := procCPU(pid) - cpu0
		time.Sleep(1500 * time.Millisecond) // backends publish their stats within a second
		after, err := dbCounters(ctx, conn)
		if err != nil {
			return err
		}
		window := time.Since(tick.Add(-1 * time.Second))
		idleRate := func(f func(dbStats) int64) float64 { return float64(f(before)-f(idle0)) / 20 }
		net := func(f func(dbStats) int64) int64 {
			return f(after) - f(before) - int64(idleRate(f)*window.Seconds())
		}
		var jobs int64
		var first, last *time.Time
		if err := conn.QueryRow(ctx, `SELECT count(*), min(created_at), max(created_at) FROM oncesync.river_job
			WHERE kind = 'oncesync_run_sync' AND created_at >= $1`, tick.Add(-time.Second)).Scan(&jobs, &first, &last); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "  tick %d (%s): %d runs enqueued", t, tick.Format("15:04:05"), jobs)
		if last != nil {
			fmt.Fprintf(stdout, ", the last %.2f s after the minute (first %.2f s)", last.Sub(tick).Seconds(), first.Sub(tick).Seconds())
		}
		fmt.Fprintln(stdout)
		busy := "not busy"
		if !busyUntil.IsZero() {
			busy = fmt.Sprintf("%.1f s after the minute", busyUntil.Sub(tick).Seconds())
		}
		fmt.Fprintf(stdout, "    serve busy until %s, %.2f s CPU in the tick's 51 s\n", busy, cpu.Seconds())
		fmt.Fprintf(stdout, "    database: %d transactions, %d table scans, %d rows inserted (net of the idle rate: %.1f transactions/s)\n",
			net(func(s dbStats) int64 { return s.xacts }), net(func(s dbStats) int64 { return s.scans }),
			net(func(s dbStats) int64 { return s.inserted }),
			idleRate(func(s dbStats) int64 { return s.xacts }))
		fmt.Fprintf(stdout, "    serve RSS %.0f MiB before, %.0f MiB at most during the tick\n", kibToMiB(rss0), kibToMiB(maxRSS))
	}
	fmt.Fprintf(stdout, "  serve peak RSS (VmHWM) %.0f MiB\n", kibToMiB(procStatusKiB(pid, "VmHWM")))
	fmt.Fprintf(stdout, "  load: %s\n", loadAvg())
	return nil
}

type dbStats struct{ xacts, scans, inserted int64 }

func dbCounters(ctx context.Context, conn *pgx.Conn) (dbStats, error) {
	var s dbStats
	err := conn.QueryRow(ctx, `SELECT d.xact_commit + d.xact_rollback, d.tup_inserted,
			(SELECT coalesce(sum(coalesce(seq_scan, 0) + coalesce(idx_scan, 0)), 0)::bigint FROM pg_stat_user_tables)
		FROM pg_stat_database AS d WHERE d.datname = current_database()`).Scan(&s.xacts, &s.inserted, &s.scans)
	return s, err
}

func sleepUntil(ctx context.Context, t time.Time) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(time.Until(t)):
		return nil
	}
}

// procStatusKiB is a "Vm..." line of /proc/PID/status in KiB (0 if unknown).
func procStatusKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}

// procCPU is the user+system time of process pid (/proc/PID/stat, in clock
// ticks of 10 ms).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	k, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+k) * 10 * time.Millisecond
}
