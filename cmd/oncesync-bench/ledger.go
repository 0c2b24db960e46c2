package main

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"

	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/postgres"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

// ledgerMain is `oncesync-bench ledger`: the records/s of one bulk run of
// --records new contacts into the fake Brevo when the sync's ledger already
// holds each of --entries entries, on the embedded store (SQLite) and on
// PostgreSQL + Redis, with the ledger's disk bytes per entry
// (docs/PERFORMANCE.md#many-machines-2026-12-02).
//
// The ledger is filled once per size into a template that every timed run
// starts from a copy of, so each run sees exactly that many entries:
//   - SQLite: through the store's own API (LedgerClaim then LedgerFinish of
//     pages of hashed keys, complete, with a Result the size of the
//     runner's slot entries), so the log, its merges and the compact
//     ledger_done table are built as a sync builds them; the copy is a file
//     copy.
//   - PostgreSQL: one INSERT ... SELECT per chunk straight into the store's
//     ledger table (the same columns the store writes, keys hex SHA-256 in
//     random order, so the primary key grows as under real claims), then
//     VACUUM ANALYZE as autovacuum would; the copy is CREATE DATABASE ...
//     TEMPLATE. The store's API would take hours for 10,000,000 entries.
func ledgerMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("ledger", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		bin      = fs.String("oncesync", "bin/oncesync", "the oncesync binary")
		entries  = fs.String("entries", "100000,1000000", "ledger sizes before the run (comma separated)")
		stores   = fs.String("stores", "sqlite,postgres", "sqlite, postgres or both")
		records  = fs.Int("records", 100_000, "new contacts the timed run writes")
		pageSize = fs.Int("page-size", 500, "records per page (bulk: one import per page)")
		runs     = fs.Int("runs", 1, "timed runs per point, each on a fresh copy of the filled ledger")
		dir      = fs.String("dir", "", "where the work dir is created (default: the system temp dir)")
		dbURL    = fs.String("database-url", envOr("ONCESYNC_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL server")
		rdURL    = fs.String("redis-url", envOr("ONCESYNC_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis (leases of the PostgreSQL mode)")
		profile  = fs.String("cpuprofile", "", "after each point's runs, profile one more run in-process: DIR/STORE-ENTRIES.pprof")
		prewarm  = fs.Bool("prewarm", false, "PostgreSQL: load each copy's ledger and its indexes into shared_buffers (pg_prewarm) before its run, as a long-running server has them")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	sizes, err := parseSizes(*entries)
	if err != nil {
		return err
	}
	if *records <= 0 || *runs <= 0 || *pageSize < 1 || *pageSize > 10000 {
		return fmt.Errorf("%w: --records, --runs and --page-size must be positive (page size at most 10000)", errUsage)
	}
	var kinds []string
	for _, s := range strings.Split(*stores, ",") {
		if s = strings.TrimSpace(s); s != "sqlite" && s != "postgres" {
			return fmt.Errorf("%w: --stores: %q is neither sqlite nor postgres", errUsage, s)
		}
		kinds = append(kinds, strings.TrimSpace(s))
	}
	b := &bench{benchParams: benchParams{Records: *records, PageSize: *pageSize, Mode: "bulk", Runs: *runs, Concurrency: defaultConcurrency}, log: stderr}
	if b.self, err = os.Executable(); err != nil {
		return err
	}
	if *profile != "" {
		if b.CPUProfile, err = filepath.Abs(*profile); err != nil {
			return err
		}
	}
	if b.bin, err = filepath.Abs(*bin); err != nil {
		return err
	}
	if _, err := os.Stat(b.bin); err != nil {
		return fmt.Errorf("%w: the oncesync binary %s is missing", errUsage, *bin)
	}
	if b.work, err = os.MkdirTemp(*dir, "oncesync-bench-ledger-*"); err != nil {
		return err
	}
	defer os.RemoveAll(b.work)
	b.csvPath = filepath.Join(b.work, "contacts.csv")
	if err := writeContacts(b.csvPath, *records); err != nil {
		return err
	}
	fake, baseURL, stop, err := newFakeServer(fakebrevo.Options{APIKey: benchAPIKey})
	if err != nil {
		return err
	}
	defer stop()
	b.fake, b.baseURL = fake, baseURL

	var rows []ledgerPoint
	for _, kind := range kinds {
		for _, n := range sizes {
			lb := &ledgerBench{b: b, kind: kind, entries: n, serverURL: *dbURL, redisURL: *rdURL, prewarm: *prewarm}
			p, err := lb.measure(ctx)
			lb.cleanup()
			if err != nil {
				return fmt.Errorf("%s, %d entries: %w", kind, n, err)
			}
			rows = append(rows, p)
			fmt.Fprintf(stderr, "%s %d entries: %.0f records/s\n", kind, n, p.Median)
		}
	}
	printLedger(stdout, *records, *pageSize, rows)
	return nil
}

func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.ReplaceAll(strings.TrimSpace(f), "_", ""))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%w: --entries: %q is not a positive count", errUsage, f)
		}
		out = append(out, n)
	}
	return out, nil
}

// ledgerPoint is one (store, ledger size) measurement.
type ledgerPoint struct {
	Store         string
	Entries       int
	Median        float64 // records/s
	Rates         []float64
	CPUSecs       float64 // median user+sys of the oncesync process per run
	BytesPerEntry float64
	Fill          time.Duration
}

// ledgerBench measures one point.
type ledgerBench struct {
	b         *bench
	kind      string
	entries   int
	serverURL string
	redisURL  string
	prewarm   bool // PostgreSQL: pg_prewarm each copy (see --prewarm)
	syncID    string
	drops     []func()
}

func (lb *ledgerBench) cleanup() {
	for _, d := range slices.Backward(lb.drops) {
		d()
	}
}

func (lb *ledgerBench) measure(ctx context.Context) (ledgerPoint, error) {
	var rnd [4]byte
	_, _ = rand.Read(rnd[:])
	// A sync id of its own: Redis (leases) may be shared with other work.
	lb.syncID = "ledger-" + hex.EncodeToString(rnd[:])
	p := ledgerPoint{Store: lb.kind, Entries: lb.entries}
	start := time.Now()
	var (
		template string
		err      error
	)
	if lb.kind == "sqlite" {
		template, p.BytesPerEntry, err = lb.fillSQLite(ctx)
	} else {
		template, p.BytesPerEntry, err = lb.fillPostgres(ctx)
	}
	if err != nil {
		return p, fmt.Errorf("fill the ledger: %w", err)
	}
	p.Fill = time.Since(start)
	fmt.Fprintf(lb.b.log, "%s: %d entries filled in %s (%.0f bytes/entry)\n", lb.kind, lb.entries, p.Fill.Round(time.Second), p.BytesPerEntry)
	var samples []sample
	for i := 1; i <= lb.b.Runs; i++ {
		storeURL, err := lb.copyOf(ctx, template, i)
		if err != nil {
			return p, err
		}
		s, err := lb.timedRun(ctx, storeURL, i, nil)
		if err != nil {
			return p, err
		}
		samples = append(samples, s)
		p.Rates = append(p.Rates, s.RecordsPerSec)
	}
	sum := summarize(samples)
	p.Median, p.CPUSecs = sum.Median, sum.CPUSecs
	if lb.b.CPUProfile != "" {
		storeURL, err := lb.copyOf(ctx, template, 0)
		if err != nil {
			return p, err
		}
		prof := filepath.Join(lb.b.CPUProfile, fmt.Sprintf("%s-%d.pprof", lb.kind, lb.entries))
		if _, err := lb.timedRun(ctx, storeURL, 0, []string{"inproc", "--cpuprofile", prof, "--"}); err != nil {
			return p, fmt.Errorf("profiled run: %w", err)
		}
		fmt.Fprintf(lb.b.log, "CPU profile: %s\n", prof)
	}
	return p, nil
}

// prefillResult is the Result of a filled entry: the size of a complete slot's
// Result in the runner (storetest.SyncPathParams, 45 bytes).
func prefillResult(i int) string { return fmt.Sprintf("prefill-result-%030d", i) }

// fillSQLite fills a fresh embedded store through its API; it returns the
// store's path and its bytes per entry (the file and WAL, less an empty store's).
func (lb *ledgerBench) fillSQLite(ctx context.Context) (string, float64, error) {
	dir := filepath.Join(lb.b.work, fmt.Sprintf("sqlite-%d", lb.entries))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, err
	}
	lb.drops = append(lb.drops, func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "oncesync.db")
	st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: path})
	if err != nil {
		return "", 0, err
	}
	defer st.Close()
	empty := storeBytes(dir)
	l, err := st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: lb.syncID, Token: "fill", Holder: "bench", TTL: time.Hour})
	if err != nil {
		return "", 0, err
	}
	run, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: lb.syncID, State: store.RunRunning, Attempt: 1})
	if err != nil {
		return "", 0, err
	}
	const page = 5000
	for done, pg := 0, 1<<41; done < lb.entries; pg++ {
		keys := hashedKeys(pg, min(page, lb.entries-done))
		if err := st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: lb.syncID, Fence: l.Fence, RunID: run.ID, Keys: keys}); err != nil {
			return "", 0, err
		}
		fin := make([]store.LedgerFinish, len(keys))
		for j, k := range keys {
			fin[j] = store.LedgerFinish{Key: k, State: store.LedgerComplete, Result: prefillResult(done + j)}
		}
		if err := st.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: lb.syncID, Fence: l.Fence, RunID: run.ID, Entries: fin}); err != nil {
			return "", 0, err
		}
		done += len(keys)
	}
	run.State = store.RunSucceeded
	if err := st.UpdateRun(ctx, run); err != nil {
		return "", 0, err
	}
	if err := st.LeaseRelease(ctx, lb.syncID, "fill"); err != nil {
		return "", 0, err
	}
	if err := st.Close(); err != nil {
		return "", 0, err
	}
	return path, float64(storeBytes(dir)-empty) / float64(lb.entries), nil
}

// fillPostgres fills a fresh database's ledger; it returns the database's
// name and the ledger's bytes per entry (table, TOAST and indexes).
func (lb *ledgerBench) fillPostgres(ctx context.Context) (string, float64, error) {
	dbURL, drop, err := benchDatabase(ctx, lb.serverURL)
	if err != nil {
		return "", 0, err
	}
	lb.drops = append(lb.drops, drop)
	// Open migrates the fresh database.
	st, err := postgres.Open(ctx, postgres.OpenParams{URL: dbURL})
	if err != nil {
		return "", 0, err
	}
	st.Close()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return "", 0, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "SET synchronous_commit = off"); err != nil {
		return "", 0, err
	}
	now := time.Now().UnixNano()
	const chunk = 500_000
	for from := 1; from <= lb.entries; from += chunk {
		to := min(from+chunk-1, lb.entries)
		if _, err := conn.Exec(ctx, `INSERT INTO oncesync.ledger
			(sync_id, key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at)
			SELECT $1, encode(sha256(('prefill-' || g)::bytea), 'hex'), 'complete', 1, 1,
				'prefill-result-' || lpad(g::text, 30, '0'), '', 1, $2, $2, $2
			FROM generate_series($3::bigint, $4::bigint) AS g`, lb.syncID, now, from, to); err != nil {
			return "", 0, err
		}
	}
	if _, err := conn.Exec(ctx, "VACUUM ANALYZE oncesync.ledger"); err != nil {
		return "", 0, err
	}
	var bytes int64
	if err := conn.QueryRow(ctx, "SELECT pg_total_relation_size('oncesync.ledger')").Scan(&bytes); err != nil {
		return "", 0, err
	}
	return dbURL, float64(bytes) / float64(lb.entries), nil
}

// copyOf is a fresh copy of the filled template for run i: its store URL.
func (lb *ledgerBench) copyOf(ctx context.Context, template string, i int) (string, error) {
	if lb.kind == "sqlite" {
		dir := filepath.Join(filepath.Dir(template), fmt.Sprintf("run-%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return "", err
		}
		lb.drops = append(lb.drops, func() { os.RemoveAll(dir) })
		for _, suffix := range []string{"", "-wal"} {
			if err := copyFile(template+suffix, filepath.Join(dir, "oncesync.db"+suffix)); err != nil && !errors.Is(err, os.ErrNotExist) {
				return "", err
			}
		}
		return "sqlite://" + filepath.Join(dir, "oncesync.db"), nil
	}
	conn, err := pgx.Connect(ctx, lb.serverURL)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	tmpl := dbName(template)
	name := fmt.Sprintf("%s_run%d", tmpl, i)
	if _, err := conn.Exec(ctx, fmt.Sprintf("CREATE DATABASE %s TEMPLATE %s", name, tmpl)); err != nil {
		return "", err
	}
	lb.drops = append(lb.drops, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if c, err := pgx.Connect(ctx, lb.serverURL); err == nil {
			_, _ = c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
			c.Close(ctx)
		}
	})
	u := strings.Replace(template, "/"+tmpl, "/"+name, 1)
	if lb.prewarm {
		if err := prewarmLedger(ctx, u); err != nil {
			return "", fmt.Errorf("prewarm: %w", err)
		}
	}
	return u, nil
}

// prewarmLedger loads the ledger's table, then its indexes, into the
// server's shared_buffers: the indexes last, so that what a run probes
// (the primary key) stays when they do not all fit.
func prewarmLedger(ctx context.Context, dbURL string) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_prewarm"); err != nil {
		return err
	}
	rows, err := conn.Query(ctx, `SELECT c.oid::regclass::text FROM pg_class c
		WHERE c.oid = 'oncesync.ledger'::regclass
			OR c.oid IN (SELECT indexrelid FROM pg_index WHERE indrelid = 'oncesync.ledger'::regclass)
		ORDER BY c.relkind = 'i', c.relname`)
	if err != nil {
		return err
	}
	rels, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, rel := range rels {
		if _, err := conn.Exec(ctx, "SELECT pg_prewarm($1::regclass)", rel); err != nil {
			return err
		}
	}
	return nil
}

// dbName is the database of a postgres:// URL made by benchDatabase.
func dbName(u string) string {
	s := u[strings.LastIndex(u, "/")+1:]
	if i := strings.IndexByte(s, '?'); i >= 0 {
		s = s[:i]
	}
	return s
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// timedRun runs `oncesync run` of the bulk sync on storeURL against a reset
// fake, checks the fake's counters and oncesync's summary.
// With inproc set, the bench binary runs oncesync in-process (a profiled run).
func (lb *ledgerBench) timedRun(ctx context.Context, storeURL string, i int, inproc []string) (sample, error) {
	dir := filepath.Join(lb.b.work, fmt.Sprintf("%s-%d-run-%d", lb.kind, lb.entries, i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sample{}, err
	}
	defer os.RemoveAll(dir)
	redis := ""
	if lb.kind == "postgres" {
		redis = "redis: " + lb.redisURL + "\n"
		if err := forgetStoredFences(ctx, lb.redisURL, lb.syncID); err != nil {
			return sample{}, err
		}
	}
	cfg := fmt.Sprintf(`store: %s
%ssettings: {lease_ttl: 30s, lease_renew: 10s}
syncs:
  - id: %s
    workspace: bench
    source: {type: csv, path: %s, identity: id, page_size: %d}
    destination: {type: brevo, base_url: %s, api_key: ${%s}, mode: bulk, list_ids: [2], concurrency: %d, rate_limit: 1000000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}
`, storeURL, redis, lb.syncID, lb.b.csvPath, lb.b.PageSize, lb.b.baseURL, apiKeyEnv, lb.b.Concurrency)
	cfgPath := filepath.Join(dir, "oncesync.yaml")
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		return sample{}, err
	}
	lb.b.fake.Reset()
	name, args := lb.b.bin, []string{"run", "--config", cfgPath, lb.syncID}
	if inproc != nil {
		name, args = lb.b.self, append(inproc, args...)
	}
	s, out, err := lb.b.timed(ctx, filepath.Join(dir, "run.log"), name, args...)
	if err != nil {
		return sample{}, err
	}
	sum, err := parseSummary(out)
	if err != nil {
		return sample{}, err
	}
	if sum.state != "succeeded" || sum.written != int64(lb.b.Records) {
		return sample{}, fmt.Errorf("oncesync said %q, want succeeded with %d written", sum.line, lb.b.Records)
	}
	return s, lb.b.checkFull(lb.b.fake.Stats())
}

func printLedger(w io.Writer, records, pageSize int, rows []ledgerPoint) {
	fmt.Fprintf(w, "ledger growth: one bulk run of %d new contacts (pages of %d) into the fake Brevo, by entries already in the sync's ledger\n", records, pageSize)
	fmt.Fprintf(w, "load: %s\n", loadAvg())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	// CPU per run is printed beside the wall-clock figures: on a loaded
	// machine it is the steadier of the two.
	fmt.Fprintln(tw, "store\tledger entries\trecords/s\truns\tus/record\tcost vs smallest\tcpu s/run\tcpu vs smallest\tdisk bytes/entry\tfill\t")
	first, firstCPU := map[string]float64{}, map[string]float64{}
	for _, r := range rows {
		cost := 1e6 / r.Median
		if _, ok := first[r.Store]; !ok {
			first[r.Store], firstCPU[r.Store] = cost, r.CPUSecs
		}
		rates := make([]string, len(r.Rates))
		for i, x := range r.Rates {
			rates[i] = fmt.Sprintf("%.0f", x)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%s\t%.1f\t%.2fx\t%.2f\t%.2fx\t%.0f\t%s\t\n", r.Store, r.Entries, r.Median, strings.Join(rates, " "),
			cost, cost/first[r.Store], r.CPUSecs, r.CPUSecs/firstCPU[r.Store], r.BytesPerEntry, r.Fill.Round(time.Second))
	}
	tw.Flush()
	fmt.Fprintln(w, "  (goal: cost per record within 1.4x from 100,000 to 10,000,000 entries)")
}

// loadAvg is /proc/loadavg's 1, 5 and 15 minute figures.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ") + " (1, 5, 15 min)"
}

// hashedKeys are n keys shaped like delivery keys (hex SHA-256, scattered over
// the ledger's B-tree as real keys are), distinct per page.
func hashedKeys(page, n int) []string {
	out := make([]string, n)
	var buf [16]byte
	for j := range out {
		binary.BigEndian.PutUint64(buf[:8], uint64(page))
		binary.BigEndian.PutUint64(buf[8:], uint64(j))
		sum := sha256.Sum256(buf[:])
		out[j] = hex.EncodeToString(sum[:])
	}
	return out
}
