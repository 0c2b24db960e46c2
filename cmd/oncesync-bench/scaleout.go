package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
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
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// scaleoutMain is `oncesync-bench scaleout`: one partitioned sync of --rows
// PostgreSQL rows into a fake Brevo that takes --latency per request, worked
// by 1, 2, 4 ... processes (serve, then `oncesync worker`s), each working
// --slots jobs at once. The fake's latency, not the two cores, bounds each
// partition, so the table shows what more processes buy
// (docs/PERFORMANCE.md#many-machines-2026-12-02).
func scaleoutMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("scaleout", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		bin        = fs.String("oncesync", "bin/oncesync", "the oncesync binary")
		rows       = fs.Int("rows", 100_000, "rows in the source table")
		procsFlag  = fs.String("processes", "1,2,4", "processes working jobs (serve + workers), comma separated")
		partitions = fs.Int("partitions", 16, "the sync's partitions")
		slots      = fs.Int("slots", 4, "jobs each process works at once (serve --workers; a worker's default is 4)")
		pageSize   = fs.Int("page-size", 5000, "source rows per page (each partition sends its share of a page in one import)")
		latency    = fs.Duration("latency", 50*time.Millisecond, "the fake's added latency per request")
		dbURL      = fs.String("database-url", envOr("ONCESYNC_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL server")
		rdURL      = fs.String("redis-url", envOr("ONCESYNC_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis")
		timeout    = fs.Duration("timeout", 40*time.Minute, "give up after")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	procs, err := parseSizes(*procsFlag)
	if err != nil {
		return err
	}
	if *rows <= 0 || *partitions < 2 || *partitions > 64 || *slots < 1 {
		return fmt.Errorf("%w: --rows positive, --partitions 2 to 64, --slots at least 1", errUsage)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	binAbs, err := filepath.Abs(*bin)
	if err != nil {
		return err
	}
	fake, baseURL, stop, err := newFakeServer(fakebrevo.Options{APIKey: benchAPIKey, Latency: *latency})
	if err != nil {
		return err
	}
	defer stop()
	type point struct {
		procs    int
		wall     time.Duration
		requests int64
	}
	var points []point
	for _, n := range procs {
		fake.Reset()
		wall, err := scaleoutRun(ctx, scaleoutParams{bin: binAbs, rows: *rows, procs: n, partitions: *partitions, slots: *slots,
			pageSize: *pageSize, baseURL: baseURL, serverURL: *dbURL, redisURL: *rdURL, fake: fake, log: stderr})
		if err != nil {
			return fmt.Errorf("%d processes: %w", n, err)
		}
		st := fake.Stats()
		fmt.Fprintf(stderr, "%d processes: %.0f records/s (%s)\n", n, float64(*rows)/wall.Seconds(), wall.Round(time.Millisecond))
		points = append(points, point{procs: n, wall: wall, requests: st.Requests})
	}
	fmt.Fprintf(stdout, "scale-out: a sync of %d PostgreSQL rows, %d partitions, pages of %d rows, into a fake Brevo with %s per request; %d jobs at once per process\n",
		*rows, *partitions, *pageSize, *latency, *slots)
	fmt.Fprintf(stdout, "load: %s\n", loadAvg())
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "processes\twall\trecords/s\tspeed-up\trequests\t")
	for _, p := range points {
		fmt.Fprintf(tw, "%d\t%.1f s\t%.0f\t%.2fx\t%d\t\n", p.procs, p.wall.Seconds(), float64(*rows)/p.wall.Seconds(),
			points[0].wall.Seconds()/p.wall.Seconds(), p.requests)
	}
	return tw.Flush()
}

type scaleoutParams struct {
	bin                            string
	rows, procs, partitions, slots int
	pageSize                       int
	baseURL, serverURL, redisURL   string
	fake                           *fakebrevo.Server
	log                            io.Writer
}

// scaleoutRun runs the sync once on a fresh database over p.procs processes
// and returns the time from "run now" to the last contact at the fake.
func scaleoutRun(ctx context.Context, p scaleoutParams) (time.Duration, error) {
	dir, err := os.MkdirTemp("", "oncesync-bench-scaleout-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	db, drop, err := benchDatabase(ctx, p.serverURL)
	if err != nil {
		return 0, err
	}
	defer drop()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		return 0, err
	}
	_, err = conn.Exec(ctx, `CREATE TABLE public.contacts AS
		SELECT g AS id, 'c' || g || '@example.com' AS email, 'First' || g AS first_name
		FROM generate_series(1, `+strconv.Itoa(p.rows)+`) AS g;
		ALTER TABLE public.contacts ADD PRIMARY KEY (id)`)
	conn.Close(ctx)
	if err != nil {
		return 0, err
	}
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	id := "scaleout-" + hex.EncodeToString(rnd[:]) // Redis may be shared
	apiLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	apiAddr := apiLn.Addr().String()
	apiLn.Close()
	const token = "bench-api-token-0123456789abcdef"
	cfg := fmt.Sprintf(`store: %s
redis: %s
web: {listen: %s, api_tokens: [%s]}
syncs:
  - id: %s
    partitions: %d
    source: {type: postgres, dsn: "%s", table: public.contacts, cursor_column: id, identity: id, page_size: %d,
      version_query: "select count(*), max(id) from public.contacts"}
    destination: {type: brevo, base_url: %s, api_key: ${%s}, mode: bulk, list_ids: [2], concurrency: 1, rate_limit: 1000000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name}}
`, db, p.redisURL, apiAddr, token, id, p.partitions, db, p.pageSize, p.baseURL, apiKeyEnv)
	cfgPath := filepath.Join(dir, "oncesync.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return 0, err
	}
	var children []*child
	defer func() {
		for _, c := range children {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
		}
		for _, c := range children {
			_, _ = c.wait()
		}
	}()
	serve, err := startChild(ctx, filepath.Join(dir, "serve.log"), []string{p.bin, "serve", "--config", cfgPath, "--workers", strconv.Itoa(p.slots)})
	if err != nil {
		return 0, err
	}
	children = append(children, serve)
	api := "http://" + apiAddr
	if err := waitHTTP(ctx, api+"/healthz"); err != nil {
		return 0, fmt.Errorf("serve did not come up: %w\n%s", err, tail(serve.out.Bytes(), 2000))
	}
	for i := 1; i < p.procs; i++ {
		w, err := startChild(ctx, filepath.Join(dir, fmt.Sprintf("worker%d.log", i)), []string{p.bin, "worker", "--config", cfgPath})
		if err != nil {
			return 0, err
		}
		children = append(children, w)
	}
	time.Sleep(time.Second) // let the workers reach the queue
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, api+"/api/v1/syncs/"+id+"/run", strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return 0, fmt.Errorf("run now: %s", resp.Status)
	}
	want := int64(p.rows)
	for {
		st := p.fake.Stats()
		if st.Contacts >= want {
			wall := time.Since(start)
			if st.Contacts != want || st.DuplicateWrites != 0 {
				return 0, fmt.Errorf("the fake holds %d contacts (want %d), %d duplicate writes", st.Contacts, want, st.DuplicateWrites)
			}
			return wall, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("only %d of %d contacts written: %w; serve's log ends with:\n%s", st.Contacts, want, ctx.Err(), tail(serve.out.Bytes(), 2000))
		case <-time.After(100 * time.Millisecond):
		}
	}
}
