package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// benchAPIKey is the fake's only accepted key (a bench value, not a secret;
// still passed through the environment like a real key).
const benchAPIKey = "bench-key"

// syncID is the sync the generated config declares.
const syncID = "bench-contacts"

// benchParams configure a bench.
type benchParams struct {
	Records     int
	PageSize    int
	Mode        string
	Runs        int
	JSON        bool
	Bin         string        // the oncesync binary
	Dir         string        // parent of the work dir ("" = os.TempDir)
	Keep        bool          // keep the work dir
	Latency     time.Duration // added by the fake to every request (a network's round trip)
	Concurrency int           // single path, both sides
	SecondPass  bool
	CPUProfile  string // one extra in-process oncesync run, profiled
	Trace       string // with CPUProfile: that run's execution trace
	MemProfile  string // with CPUProfile: that run's allocation profile
	sourceParams
	Destination string // brevo | klaviyo
}

// sample is one timed process.
type sample struct {
	Wall time.Duration `json:"wall_ns"`
	CPU  time.Duration `json:"cpu_ns"` // user+system of the child
	// FakeCPU is this process's CPU while the child ran: the in-process
	// fake's, which shares the machine's cores with the child.
	FakeCPU       time.Duration `json:"fake_cpu_ns"`
	RecordsPerSec float64       `json:"records_per_s"`
	Requests      int64         `json:"requests"`         // seen by the fake
	Duplicates    int64         `json:"duplicate_writes"` // the fake's count after the run
}

// summary is the median and spread of samples.
type summary struct {
	Median  float64 `json:"median_records_per_s"`
	Min     float64 `json:"min_records_per_s"`
	Max     float64 `json:"max_records_per_s"`
	CPUSecs float64 `json:"median_cpu_s"`
	// FakeCPUSecs is the median of the samples' FakeCPU.
	FakeCPUSecs float64  `json:"median_fake_cpu_s"`
	Samples     []sample `json:"samples"`
}

// report is the bench's result (--json prints it).
type report struct {
	Mode            string    `json:"mode"`
	Records         int       `json:"records"`
	PageSize        int       `json:"page_size"`
	Runs            int       `json:"runs"`
	Oncesync        summary   `json:"oncesync"`
	Baseline        summary   `json:"baseline"`
	Ratio           float64   `json:"ratio"`       // median oncesync / median baseline
	PairRatios      []float64 `json:"pair_ratios"` // run i / baseline i (interleaved)
	DuplicateWrites int64     `json:"duplicate_writes"`
	SecondPass      *summary  `json:"second_pass,omitempty"`
	SecondPassReqs  int64     `json:"second_pass_requests"`
	Machine         string    `json:"machine"`
	Date            string    `json:"date"`
	GoVersion       string    `json:"go_version"`
	Source          string    `json:"source,omitempty"` // what oncesync read: csv or mysql
}

func benchMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("oncesync-bench", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var p benchParams
	fs.IntVar(&p.Records, "records", 200_000, "contacts in the generated CSV")
	fs.IntVar(&p.PageSize, "page-size", 500, "records per page (source.page_size; the baseline's page)")
	fs.StringVar(&p.Mode, "mode", "bulk", "bulk (POST /contacts/import per page) or single (POST /contacts per record)")
	fs.IntVar(&p.Runs, "runs", 3, "measurements per side; the median and spread are reported")
	fs.BoolVar(&p.JSON, "json", false, "print the report as JSON")
	fs.StringVar(&p.Bin, "bin", "bin/oncesync", "the oncesync binary (go build -o bin/oncesync ./cmd/oncesync)")
	fs.StringVar(&p.Dir, "dir", "", "where the work dir (CSV, stores, logs) is created (default: the system temp dir)")
	fs.BoolVar(&p.Keep, "keep", false, "keep the work dir")
	fs.DurationVar(&p.Latency, "latency", 0, "time the fake adds to every request, as a network's round trip would (both sides)")
	fs.IntVar(&p.Concurrency, "concurrency", defaultConcurrency, "calls in flight on the single path (both sides)")
	fs.BoolVar(&p.SecondPass, "second-pass", true, "after each oncesync run, run it again over the same store (all replayed)")
	fs.StringVar(&p.CPUProfile, "cpuprofile", "", "after the runs, profile one more oncesync run in-process and write the CPU profile here")
	fs.StringVar(&p.Destination, "destination", "brevo", "brevo, or klaviyo (its bulk path: one profile bulk import job per page; klaviyo.go)")
	fs.StringVar(&p.Trace, "trace", "", "with --cpuprofile: also write that run's execution trace here (go tool trace)")
	fs.StringVar(&p.MemProfile, "memprofile", "", "with --cpuprofile: also write that run's allocation profile here (pprof -sample_index=alloc_space)")
	addSourceFlags(fs, &p.sourceParams)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case p.Records <= 0, p.Runs <= 0, p.Concurrency <= 0:
		return fmt.Errorf("%w: --records, --runs and --concurrency must be positive", errUsage)
	case p.PageSize < 1 || p.PageSize > 10000:
		return fmt.Errorf("%w: --page-size must be 1 to 10000 (the config's range)", errUsage)
	case p.Mode != "bulk" && p.Mode != "single":
		return fmt.Errorf("%w: --mode must be bulk or single", errUsage)
	}
	if err := p.sourceParams.check(); err != nil {
		return err
	}
	run := runBench
	if p.Destination == "klaviyo" {
		run = runKlaviyoBench
	}
	rep, err := run(ctx, p, stderr)
	if err != nil {
		return err
	}
	if p.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printReport(stdout, rep)
	return nil
}

// bench is one bench in progress.
type bench struct {
	benchParams
	bin     string
	self    string
	inproc  []string // when set, storeRun runs oncesync in-process: self with these arguments first
	work    string
	csvPath string
	fake    *fakebrevo.Server
	baseURL string
	log     io.Writer
}

func runBench(ctx context.Context, p benchParams, log io.Writer) (report, error) {
	b := &bench{benchParams: p, log: log}
	var err error
	if b.bin, err = filepath.Abs(p.Bin); err != nil {
		return report{}, err
	}
	if _, err := os.Stat(b.bin); err != nil {
		return report{}, fmt.Errorf("%w: the oncesync binary %s is missing; build it with `go build -o bin/oncesync ./cmd/oncesync`", errUsage, p.Bin)
	}
	if b.self, err = os.Executable(); err != nil {
		return report{}, err
	}
	if b.work, err = os.MkdirTemp(p.Dir, "oncesync-bench-*"); err != nil {
		return report{}, err
	}
	if p.Keep {
		fmt.Fprintf(log, "work dir: %s\n", b.work)
	} else {
		defer os.RemoveAll(b.work)
	}

	b.csvPath = filepath.Join(b.work, "contacts.csv")
	if err := writeContacts(b.csvPath, p.Records); err != nil {
		return report{}, fmt.Errorf("generate the CSV: %w", err)
	}
	defer b.cleanupSource()
	if err := b.setupSource(ctx); err != nil {
		return report{}, err
	}

	// The fake: no latency (unless --latency), no faults, no rate limit,
	// imports applied before the 202, and no spec validation: Validate
	// re-checks every request against Brevo's OpenAPI document, which is for
	// tests and would put the validator's cost, not oncesync's, in the
	// numbers.
	b.fake = fakebrevo.New(fakebrevo.Options{APIKey: benchAPIKey, Latency: p.Latency})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return report{}, err
	}
	srv := &http.Server{Handler: b.fake, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	b.baseURL = "http://" + ln.Addr().String() + "/v3"

	rep := report{
		Mode: p.Mode, Records: p.Records, PageSize: p.PageSize, Runs: p.Runs, Source: p.Source,
		Machine: machine(), Date: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version(),
	}
	var once, base, second []sample
	// Interleave the sides (oncesync, baseline, oncesync, ...) so that load
	// from other work on a shared machine hits both alike.
	for i := 1; i <= p.Runs; i++ {
		if err := ctx.Err(); err != nil {
			return report{}, err
		}
		fmt.Fprintf(log, "run %d/%d: oncesync ...", i, p.Runs)
		dir := filepath.Join(b.work, fmt.Sprintf("run-%d", i))
		s, err := b.oncesyncRun(ctx, dir)
		if err != nil {
			fmt.Fprintln(log)
			return report{}, fmt.Errorf("oncesync run %d: %w", i, err)
		}
		once = append(once, s)
		rep.DuplicateWrites = max(rep.DuplicateWrites, s.Duplicates)
		fmt.Fprintf(log, " %.0f records/s;", s.RecordsPerSec)
		if p.SecondPass {
			s, err := b.secondPass(ctx, dir)
			if err != nil {
				fmt.Fprintln(log)
				return report{}, fmt.Errorf("second pass %d: %w", i, err)
			}
			second = append(second, s)
			rep.DuplicateWrites = max(rep.DuplicateWrites, s.Duplicates)
			rep.SecondPassReqs = max(rep.SecondPassReqs, s.Requests)
			fmt.Fprintf(log, " second pass %.0f records/s;", s.RecordsPerSec)
		}
		s, err = b.baselineRun(ctx)
		if err != nil {
			fmt.Fprintln(log)
			return report{}, fmt.Errorf("baseline run %d: %w", i, err)
		}
		base = append(base, s)
		fmt.Fprintf(log, " baseline %.0f records/s\n", s.RecordsPerSec)
		rep.PairRatios = append(rep.PairRatios, once[i-1].RecordsPerSec/s.RecordsPerSec)
	}
	rep.Oncesync, rep.Baseline = summarize(once), summarize(base)
	rep.Ratio = rep.Oncesync.Median / rep.Baseline.Median
	if p.SecondPass {
		sp := summarize(second)
		rep.SecondPass = &sp
	}
	if p.CPUProfile != "" {
		if err := b.profile(ctx); err != nil {
			return report{}, fmt.Errorf("profile: %w", err)
		}
		fmt.Fprintf(log, "CPU profile of one in-process oncesync run: %s (go tool pprof -top %s)\n", p.CPUProfile, p.CPUProfile)
	}
	return rep, nil
}

// writeConfig writes dir/oncesync.yaml: a fresh SQLite store in dir, the CSV,
// the fake. rate_limit is raised far above Brevo's 10 requests/s (the default),
// or the client-side limiter, not oncesync's own work, would set the pace.
func (b *bench) writeConfig(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	cfg := fmt.Sprintf(`store: sqlite://%s
settings: {lease_ttl: 30s, lease_renew: 10s}
syncs:
  - id: %s
    workspace: bench
    source: %s
    destination: {type: brevo, base_url: %s, api_key: ${%s}, mode: %s, list_ids: [2], concurrency: %d, rate_limit: 1000000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}
`, filepath.Join(dir, "oncesync.db"), syncID, b.sourceYAML(), b.baseURL, apiKeyEnv, b.Mode, b.Concurrency)
	path := filepath.Join(dir, "oncesync.yaml")
	return path, os.WriteFile(path, []byte(cfg), 0o600)
}

// expectedRequests is how many writes a full pass makes.
func (b *bench) expectedRequests() int64 {
	if b.Mode == "single" {
		return int64(b.Records)
	}
	return int64((b.Records + b.PageSize - 1) / b.PageSize)
}

// oncesyncRun runs `oncesync run` on a fresh store in dir against a reset
// fake and checks the fake's counters.
func (b *bench) oncesyncRun(ctx context.Context, dir string) (sample, error) {
	cfg, err := b.writeConfig(dir)
	if err != nil {
		return sample{}, err
	}
	b.fake.Reset()
	s, out, err := b.timed(ctx, filepath.Join(dir, "run.log"), b.bin, "run", "--config", cfg, syncID)
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

// secondPass reruns oncesync over dir's store without resetting the fake:
// every record must be replayed from the ledger and nothing sent.
func (b *bench) secondPass(ctx context.Context, dir string) (sample, error) {
	before := b.fake.Stats()
	s, out, err := b.timed(ctx, filepath.Join(dir, "second-pass.log"), b.bin, "run", "--config", filepath.Join(dir, "oncesync.yaml"), syncID)
	if err != nil {
		return sample{}, err
	}
	sum, err := parseSummary(out)
	if err != nil {
		return sample{}, err
	}
	after := b.fake.Stats()
	s.Requests, s.Duplicates = after.Requests-before.Requests, after.DuplicateWrites
	if sum.state != "succeeded" || sum.replayed != b.secondPassReplays() || sum.written != 0 {
		return sample{}, fmt.Errorf("oncesync said %q, want succeeded with %d replayed and none written", sum.line, b.secondPassReplays())
	}
	if s.Requests != 0 || after.ContactsWritten != before.ContactsWritten || after.DuplicateWrites != 0 {
		return sample{}, fmt.Errorf("the second pass sent %d requests (%d writes, %d duplicates); want none",
			s.Requests, after.ContactsWritten-before.ContactsWritten, after.DuplicateWrites)
	}
	return s, nil
}

// baselineRun runs the baseline as a child process against a reset fake.
func (b *bench) baselineRun(ctx context.Context) (sample, error) {
	b.fake.Reset()
	logPath := filepath.Join(b.work, "baseline.log")
	s, out, err := b.timed(ctx, logPath, b.self, "baseline", "--csv", b.csvPath, "--url", b.baseURL,
		"--mode", b.Mode, "--page-size", strconv.Itoa(b.PageSize), "--concurrency", strconv.Itoa(b.Concurrency), "--list-ids", "2")
	if err != nil {
		return sample{}, err
	}
	var res baselineResult
	if err := json.Unmarshal(lastLine(out), &res); err != nil {
		return sample{}, fmt.Errorf("the baseline printed no result: %w", err)
	}
	if res.Records != int64(b.Records) || res.Requests != b.expectedRequests() {
		return sample{}, fmt.Errorf("the baseline sent %d records in %d requests, want %d in %d", res.Records, res.Requests, b.Records, b.expectedRequests())
	}
	st := b.fake.Stats()
	if err := b.checkFull(st); err != nil {
		return sample{}, err
	}
	s.Requests, s.Duplicates = st.Requests, st.DuplicateWrites
	return s, nil
}

// checkFull checks the fake after one full pass from a reset.
func (b *bench) checkFull(st fakebrevo.Stats) error {
	n := int64(b.Records)
	var problems []string
	if st.Contacts != n {
		problems = append(problems, fmt.Sprintf("contacts %d, want %d", st.Contacts, n))
	}
	if st.ContactsWritten != n {
		problems = append(problems, fmt.Sprintf("contacts_written %d, want %d", st.ContactsWritten, n))
	}
	if st.DuplicateWrites != 0 {
		problems = append(problems, fmt.Sprintf("duplicate_writes %d, want 0", st.DuplicateWrites))
	}
	// Writes are counted exactly; oncesync then asks about each bulk import
	// (GET /processes/{id}, or GET /processes for several at once:
	// docs/guide.md#brevo-bulk-imports-accepted-then-delivered-or-rejected),
	// reads the account's attributes once a run (docs/guide.md#brevo-attributes)
	// and asks which account a key it has not seen reaches (GET /account,
	// docs/guide.md#changing-a-sync), which the baseline does not.
	writes := st.Requests - st.ByRoute["GET "+fakebrevo.BasePath+"/processes/{processId}"] - st.ByRoute["GET "+fakebrevo.BasePath+"/processes"] -
		st.ByRoute["GET "+fakebrevo.BasePath+"/contacts/attributes"] - st.ByRoute["GET "+fakebrevo.BasePath+"/account"]
	if writes != b.expectedRequests() {
		problems = append(problems, fmt.Sprintf("write requests %d, want %d", writes, b.expectedRequests()))
	}
	if st.Refused != 0 || st.Invalid != 0 || st.Dropped != 0 {
		problems = append(problems, fmt.Sprintf("refused %d, invalid %d, dropped %d, want 0", st.Refused, st.Invalid, st.Dropped))
	}
	if len(problems) > 0 {
		return fmt.Errorf("the fake's counters are wrong: %s", strings.Join(problems, "; "))
	}
	return nil
}

// timed runs name args with the API key in its environment, output to
// logPath, and times it wall-clock from start to exit.
func (b *bench) timed(ctx context.Context, logPath, name string, args ...string) (sample, []byte, error) {
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), apiKeyEnv+"="+benchAPIKey)
	cmd.Stdout, cmd.Stderr = &out, &out
	fake0 := selfCPU()
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	fakeCPU := selfCPU() - fake0
	_ = os.WriteFile(logPath, out.Bytes(), 0o644)
	if err != nil {
		return sample{}, out.Bytes(), fmt.Errorf("%s %s: %w; its output (%s) ends with:\n%s", filepath.Base(name), args[0], err, logPath, tail(out.Bytes(), 10))
	}
	s := sample{Wall: wall, RecordsPerSec: float64(b.Records) / wall.Seconds(), FakeCPU: fakeCPU}
	if ps := cmd.ProcessState; ps != nil {
		s.CPU = ps.UserTime() + ps.SystemTime()
	}
	return s, out.Bytes(), nil
}

// profile runs oncesync once more, in-process in a child of this binary,
// under the CPU profiler.
func (b *bench) profile(ctx context.Context) error {
	dir := filepath.Join(b.work, "profile")
	cfg, err := b.writeConfig(dir)
	if err != nil {
		return err
	}
	b.fake.Reset()
	prof, err := filepath.Abs(b.CPUProfile)
	if err != nil {
		return err
	}
	args := []string{"inproc", "--cpuprofile", prof}
	if b.Trace != "" {
		tr, err := filepath.Abs(b.Trace)
		if err != nil {
			return err
		}
		args = append(args, "--trace", tr)
	}
	if b.MemProfile != "" {
		mp, err := filepath.Abs(b.MemProfile)
		if err != nil {
			return err
		}
		args = append(args, "--memprofile", mp)
	}
	args = append(args, "--", "run", "--config", cfg, syncID)
	if _, _, err := b.timed(ctx, filepath.Join(dir, "run.log"), b.self, args...); err != nil {
		return err
	}
	return b.checkFull(b.fake.Stats())
}

// runSummary is oncesync's "run N STATE: read R, written W, replayed ..." line.
type runSummary struct {
	line                    string
	state                   string
	read, written, replayed int64
}

var summaryRE = regexp.MustCompile(`(?m)^run \d+ (\w+): read (\d+), written (\d+), replayed from ledger (\d+)`)

func parseSummary(out []byte) (runSummary, error) {
	m := summaryRE.FindAllSubmatch(out, -1)
	if len(m) == 0 {
		return runSummary{}, fmt.Errorf("no run summary in oncesync's output:\n%s", tail(out, 10))
	}
	last := m[len(m)-1]
	s := runSummary{line: string(last[0]), state: string(last[1])}
	s.read, _ = strconv.ParseInt(string(last[2]), 10, 64)
	s.written, _ = strconv.ParseInt(string(last[3]), 10, 64)
	s.replayed, _ = strconv.ParseInt(string(last[4]), 10, 64)
	return s, nil
}

func summarize(ss []sample) summary {
	rates := make([]float64, len(ss))
	cpus := make([]float64, len(ss))
	fakes := make([]float64, len(ss))
	for i, s := range ss {
		rates[i] = s.RecordsPerSec
		cpus[i] = s.CPU.Seconds()
		fakes[i] = s.FakeCPU.Seconds()
	}
	return summary{Median: median(rates), Min: slices.Min(rates), Max: slices.Max(rates), CPUSecs: median(cpus),
		FakeCPUSecs: median(fakes), Samples: ss}
}

// median of xs (the mean of the middle two for an even count); 0 when empty.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

func printReport(w io.Writer, r report) {
	fmt.Fprintf(w, "oncesync-bench: %s path, %d records, pages of %d, %d runs per side (median [min-max])\n",
		r.Mode, r.Records, r.PageSize, r.Runs)
	if r.Source != "" && r.Source != "csv" {
		fmt.Fprintf(w, "oncesync reads the contacts from %s; the baseline reads the same contacts from the CSV\n", r.Source)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "mode\trecords\toncesync records/s\tbaseline records/s\tratio\tfake duplicate_writes\t")
	fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.2f [%.2f-%.2f]\t%d\t\n", r.Mode, r.Records,
		rateSpread(r.Oncesync), rateSpread(r.Baseline), r.Ratio, slices.Min(r.PairRatios), slices.Max(r.PairRatios), r.DuplicateWrites)
	tw.Flush()
	fmt.Fprintf(w, "cpu per run (user+sys of the process, median): oncesync %.2fs, baseline %.2fs; the in-process fake meanwhile: %.2fs, %.2fs (on the same %d cores)\n",
		r.Oncesync.CPUSecs, r.Baseline.CPUSecs, r.Oncesync.FakeCPUSecs, r.Baseline.FakeCPUSecs, runtime.NumCPU())
	if r.SecondPass != nil {
		what := "everything replayed from the ledger"
		if r.Source == "mysql" {
			what = "the keyset source reads nothing new"
		}
		fmt.Fprintf(w, "second pass (same store, %s): %s records/s, requests sent %d\n",
			what, rateSpread(*r.SecondPass), r.SecondPassReqs)
	}
	fmt.Fprintln(w, "checked after every run: fake contacts == records, contacts_written == records, duplicate_writes == 0")
}

func rateSpread(s summary) string {
	return fmt.Sprintf("%s [%s-%s]", thousands(s.Median), thousands(s.Min), thousands(s.Max))
}

// thousands formats x rounded, with a comma every three digits.
func thousands(x float64) string {
	s := strconv.FormatInt(int64(x+0.5), 10)
	var out []byte
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			out = append(out, ',')
		}
		out = append(out, s[i])
	}
	return string(out)
}

// machine is "N cpus, MODEL" from /proc/cpuinfo where available.
func machine() string {
	model := runtime.GOARCH
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return fmt.Sprintf("%d cpus, %s, %s/%s", runtime.NumCPU(), model, runtime.GOOS, runtime.GOARCH)
}

func lastLine(b []byte) []byte {
	b = bytes.TrimRight(b, "\n")
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

func tail(b []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// writeContacts writes n contacts (id,email,first_name,last_name).
func writeContacts(path string, n int) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"id", "email", "first_name", "last_name"})
	first := []string{"Ada", "Alan", "Grace", "Edsger", "Barbara", "Donald", "Frances", "Ken", "Radia", "Leslie"}
	last := []string{"Lovelace", "Turing", "Hopper", "Dijkstra", "Liskov", "Knuth", "Allen", "Thompson", "Perlman", "Lamport"}
	for i := 1; i <= n; i++ {
		_ = w.Write([]string{strconv.Itoa(i), fmt.Sprintf("contact%07d@example.com", i), first[i%10], last[(i/10)%10]})
	}
	w.Flush()
	if err := w.Error(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
