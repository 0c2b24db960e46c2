package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/pflag"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// storecmpMain is `oncesync-bench storecmp`: the same job (the bulk path over
// a CSV into the fake Brevo) run by the real binary on the embedded SQLite
// store and on a PostgreSQL store with Redis configured, as a deployment of
// several machines runs it, interleaved run by run so that other load on the
// machine hits both alike. It prints both records/s and their ratio, and the
// PostgreSQL server's transactions per page of each run (pg_stat_database
// of the run's own database), which counts its commits.
//
// Every PostgreSQL run gets a fresh database on --database-url, dropped
// after it; the SQLite runs a fresh store file.
func storecmpMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("storecmp", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var (
		p     benchParams
		dbURL = fs.String("database-url", envOr("ONCESYNC_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"), "PostgreSQL server (a database is created and dropped per run)")
		rdURL = fs.String("redis-url", envOr("ONCESYNC_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis, the PostgreSQL runs' redis: setting")
		prof  = fs.String("profile", "", "after the runs, run each store once more in-process and write its CPU profile and execution trace to DIR/{sqlite,postgres}.{pprof,trace} (go tool trace shows the runner's stages as regions)")
	)
	fs.IntVar(&p.Records, "records", 100_000, "contacts in the generated CSV")
	fs.IntVar(&p.PageSize, "page-size", 500, "records per page")
	fs.IntVar(&p.Runs, "runs", 3, "runs per store, interleaved; the median and spread are reported")
	fs.StringVar(&p.Bin, "bin", "bin/oncesync", "the oncesync binary")
	fs.StringVar(&p.Dir, "dir", "", "where the work dir is created (default: the system temp dir)")
	fs.BoolVar(&p.Keep, "keep", false, "keep the work dir")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case p.Records <= 0, p.Runs <= 0:
		return fmt.Errorf("%w: --records and --runs must be positive", errUsage)
	case p.PageSize < 1 || p.PageSize > 10000:
		return fmt.Errorf("%w: --page-size must be 1 to 10000", errUsage)
	}
	p.Mode, p.Source, p.Concurrency = "bulk", "csv", defaultConcurrency

	b := &bench{benchParams: p, log: stderr}
	var err error
	if b.bin, err = filepath.Abs(p.Bin); err != nil {
		return err
	}
	if b.self, err = os.Executable(); err != nil {
		return err
	}
	if _, err := os.Stat(b.bin); err != nil {
		return fmt.Errorf("%w: the oncesync binary %s is missing; build it with `go build -o bin/oncesync ./cmd/oncesync`", errUsage, p.Bin)
	}
	if b.work, err = os.MkdirTemp(p.Dir, "oncesync-storecmp-*"); err != nil {
		return err
	}
	if p.Keep {
		fmt.Fprintf(stderr, "work dir: %s\n", b.work)
	} else {
		defer os.RemoveAll(b.work)
	}
	b.csvPath = filepath.Join(b.work, "contacts.csv")
	if err := writeContacts(b.csvPath, p.Records); err != nil {
		return fmt.Errorf("generate the CSV: %w", err)
	}
	b.fake = fakebrevo.New(fakebrevo.Options{APIKey: benchAPIKey})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: b.fake, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	b.baseURL = "http://" + ln.Addr().String() + "/v3"

	load := loadAvg()
	var lite, pg []sample
	var xacts []float64
	pages := float64((p.Records + p.PageSize - 1) / p.PageSize)
	for i := 1; i <= p.Runs; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		dir := filepath.Join(b.work, fmt.Sprintf("sqlite-%d", i))
		fmt.Fprintf(stderr, "run %d/%d: sqlite ...", i, p.Runs)
		s, err := b.storeRun(ctx, dir, "sqlite://"+filepath.Join(dir, "oncesync.db"), "")
		if err != nil {
			fmt.Fprintln(stderr)
			return fmt.Errorf("sqlite run %d: %w", i, err)
		}
		lite = append(lite, s)
		fmt.Fprintf(stderr, " %.0f records/s; postgres ...", s.RecordsPerSec)
		s, x, err := b.postgresRun(ctx, filepath.Join(b.work, fmt.Sprintf("postgres-%d", i)), *dbURL, *rdURL)
		if err != nil {
			fmt.Fprintln(stderr)
			return fmt.Errorf("postgres run %d: %w", i, err)
		}
		pg = append(pg, s)
		xacts = append(xacts, float64(x)/pages)
		fmt.Fprintf(stderr, " %.0f records/s (%d transactions)\n", s.RecordsPerSec, x)
	}
	ls, ps := summarize(lite), summarize(pg)
	pairs := make([]float64, len(lite))
	for i := range lite {
		pairs[i] = pg[i].RecordsPerSec / lite[i].RecordsPerSec
	}
	fmt.Fprintf(stdout, "oncesync-bench storecmp: bulk path, %d records, pages of %d, %d runs per store, interleaved (median [min-max])\n",
		p.Records, p.PageSize, p.Runs)
	fmt.Fprintf(stdout, "machine: %s; load average at start %s, at end %s\n", machine(), load, loadAvg())
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "store\trecords/s\tcpu s (oncesync)\tserver transactions per page\t")
	fmt.Fprintf(tw, "sqlite\t%s\t%.2f\t-\t\n", rateSpread(ls), ls.CPUSecs)
	fmt.Fprintf(tw, "postgres + redis\t%s\t%.2f\t%.1f\t\n", rateSpread(ps), ps.CPUSecs, median(xacts))
	tw.Flush()
	fmt.Fprintf(stdout, "ratio postgres/sqlite: %.2f [%.2f-%.2f] (median of each; pairs run side by side)\n",
		ps.Median/ls.Median, slices.Min(pairs), slices.Max(pairs))
	fmt.Fprintln(stdout, "checked after every run: fake contacts == records, contacts_written == records, duplicate_writes == 0")
	if *prof == "" {
		return nil
	}
	return b.storeProfiles(ctx, *prof, *dbURL, *rdURL)
}

// storeProfiles runs each store once more in-process (oncesync-bench
// inproc) under the CPU profiler and the execution tracer, writing
// dir/STORE.pprof and dir/STORE.trace.
func (b *bench) storeProfiles(ctx context.Context, dir, serverURL, redisURL string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range []string{"sqlite", "postgres"} {
		b.inproc = []string{"inproc", "--cpuprofile", filepath.Join(dir, name+".pprof"), "--trace", filepath.Join(dir, name+".trace"), "--"}
		work := filepath.Join(b.work, "profile-"+name)
		var s sample
		if name == "sqlite" {
			s, err = b.storeRun(ctx, work, "sqlite://"+filepath.Join(work, "oncesync.db"), "")
		} else {
			s, _, err = b.postgresRun(ctx, work, serverURL, redisURL)
		}
		b.inproc = nil
		if err != nil {
			return fmt.Errorf("profiled %s run: %w", name, err)
		}
		fmt.Fprintf(b.log, "profiled %s run: %.0f records/s; %s\n", name, s.RecordsPerSec, filepath.Join(dir, name+".{pprof,trace}"))
		regions, err := traceRegions(ctx, filepath.Join(dir, name+".trace"))
		if err != nil {
			fmt.Fprintf(b.log, "no stage times (%v)\n", err)
			continue
		}
		tw := tabwriter.NewWriter(b.log, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "%s stage\tcount\ttotal s\tms each\t\n", name)
		for _, r := range regions {
			fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.2f\t\n", r.name, r.n, r.total.Seconds(), float64(r.total.Microseconds())/1000/float64(r.n))
		}
		tw.Flush()
	}
	return nil
}

// region is the time a trace spent in the regions of one name.
type region struct {
	name  string
	n     int
	total time.Duration
}

// regionRE matches a region event of `go tool trace -d=parsed`.
var regionRE = regexp.MustCompile(`G=(\d+) Region(Begin|End) Time=(\d+) .*Type="([^"]+)"`)

// traceRegions sums the runner's regions (its stages' steps and waits, see
// runner.pages) of an execution trace, by name, from `go tool trace
// -d=parsed` (the go command must be on PATH).
func traceRegions(ctx context.Context, path string) ([]region, error) {
	out, err := exec.CommandContext(ctx, "go", "tool", "trace", "-d=parsed", path).Output()
	if err != nil {
		return nil, fmt.Errorf("go tool trace: %w", err)
	}
	type open struct{ g, name string }
	began := map[open][]int64{}
	byName := map[string]*region{}
	for _, line := range strings.Split(string(out), "\n") {
		m := regionRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		k := open{m[1], m[4]}
		t, _ := strconv.ParseInt(m[3], 10, 64)
		if m[2] == "Begin" {
			began[k] = append(began[k], t)
			continue
		}
		if n := len(began[k]); n > 0 {
			r := byName[k.name]
			if r == nil {
				r = &region{name: k.name}
				byName[k.name] = r
			}
			r.n++
			r.total += time.Duration(t - began[k][n-1])
			began[k] = began[k][:n-1]
		}
	}
	out2 := make([]region, 0, len(byName))
	for _, r := range byName {
		out2 = append(out2, *r)
	}
	slices.SortFunc(out2, func(a, b region) int { return strings.Compare(a.name, b.name) })
	return out2, nil
}

// postgresRun is one run on a fresh database of serverURL, with Redis. It
// returns the sample and the transactions the server committed in the
// run's database while the run lasted.
func (b *bench) postgresRun(ctx context.Context, dir, serverURL, redisURL string) (sample, int64, error) {
	db, drop, err := benchDatabase(ctx, serverURL)
	if err != nil {
		return sample{}, 0, err
	}
	defer drop()
	before, err := commits(ctx, serverURL, db)
	if err != nil {
		return sample{}, 0, err
	}
	s, err := b.storeRun(ctx, dir, db, redisURL)
	if err != nil {
		return sample{}, 0, err
	}
	// The statistics collector publishes a backend's counts when it goes
	// idle, within a second.
	time.Sleep(1500 * time.Millisecond)
	after, err := commits(ctx, serverURL, db)
	if err != nil {
		return sample{}, 0, err
	}
	return s, after - before, nil
}

// commits is pg_stat_database.xact_commit of db's database.
func commits(ctx context.Context, serverURL, db string) (int64, error) {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	name := db[strings.LastIndexByte(db, '/')+1:]
	if i := strings.IndexByte(name, '?'); i >= 0 {
		name = name[:i]
	}
	var n int64
	err = conn.QueryRow(ctx, `SELECT coalesce((SELECT xact_commit FROM pg_stat_database WHERE datname = $1), 0)`, name).Scan(&n)
	return n, err
}

// storeRun runs `oncesync run` once with storeURL (and redisURL when set)
// against a reset fake and checks the fake's counters.
func (b *bench) storeRun(ctx context.Context, dir, storeURL, redisURL string) (sample, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return sample{}, err
	}
	if err := forgetStoredFences(ctx, redisURL, syncID); err != nil {
		return sample{}, err
	}
	var cfg strings.Builder
	fmt.Fprintf(&cfg, "store: %s\n", storeURL)
	if redisURL != "" {
		fmt.Fprintf(&cfg, "redis: %s\n", redisURL)
	}
	fmt.Fprintf(&cfg, `settings: {lease_ttl: 30s, lease_renew: 10s}
syncs:
  - id: %s
    workspace: bench
    source: %s
    destination: {type: brevo, base_url: %s, api_key: ${%s}, mode: bulk, list_ids: [2], rate_limit: 1000000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}
`, syncID, b.sourceYAML(), b.baseURL, apiKeyEnv)
	path := filepath.Join(dir, "oncesync.yaml")
	if err := os.WriteFile(path, []byte(cfg.String()), 0o600); err != nil {
		return sample{}, err
	}
	b.fake.Reset()
	bin, args := b.bin, []string{"run", "--config", path, syncID}
	if b.inproc != nil {
		bin, args = b.self, append(slices.Clone(b.inproc), args...)
	}
	s, out, err := b.timed(ctx, filepath.Join(dir, "run.log"), bin, args...)
	if err != nil {
		return sample{}, err
	}
	sum, err := parseSummary(out)
	if err != nil {
		return sample{}, err
	}
	if sum.state != "succeeded" || sum.written != int64(b.Records) || sum.read != int64(b.Records) {
		return sample{}, fmt.Errorf("oncesync said %q, want succeeded with %d read and written", sum.line, b.Records)
	}
	st := b.fake.Stats()
	if err := b.checkFull(st); err != nil {
		return sample{}, err
	}
	s.Requests, s.Duplicates = st.Requests, st.DuplicateWrites
	return s, nil
}
