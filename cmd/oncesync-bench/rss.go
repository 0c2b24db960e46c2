package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// rssGoalMiB is the bound on oncesync's peak RSS for a 1,000,000-row
// source (it must depend on the page size, not the source size).
const rssGoalMiB = 150

// child is a started process of the bench: oncesync, Benthos or the baseline.
type child struct {
	cmd   *exec.Cmd
	out   bytes.Buffer
	log   string
	start time.Time
}

// childResult is how a child process ended and what it cost.
type childResult struct {
	Wall      time.Duration
	CPU       time.Duration // user+system
	MaxRSSKiB int64         // peak resident set (getrusage ru_maxrss of the child)
	Output    []byte        // stdout and stderr together
	ExitCode  int           // -1 when killed by a signal
	Signal    syscall.Signal
}

// startChild starts argv with the fake's API key in its environment (never in
// argv), output captured and copied to logPath when it ends.
func startChild(ctx context.Context, logPath string, argv []string) (*child, error) {
	if len(argv) == 0 {
		return nil, errors.New("startChild: empty command")
	}
	c := &child{log: logPath}
	c.cmd = exec.CommandContext(ctx, argv[0], argv[1:]...)
	c.cmd.Env = append(os.Environ(), apiKeyEnv+"="+benchAPIKey)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.out
	c.start = time.Now()
	if err := c.cmd.Start(); err != nil {
		return nil, err
	}
	return c, nil
}

// kill sends SIGKILL (kill -9) to the child.
func (c *child) kill() error { return c.cmd.Process.Signal(syscall.SIGKILL) }

// wait waits for the child to end. A non-zero exit or a signal is not an
// error here (the caller decides); err is only for a wait that failed.
func (c *child) wait() (childResult, error) {
	err := c.cmd.Wait()
	r := childResult{Wall: time.Since(c.start), Output: c.out.Bytes()}
	_ = os.WriteFile(c.log, r.Output, 0o644)
	ps := c.cmd.ProcessState
	if ps == nil {
		return r, err
	}
	r.CPU = ps.UserTime() + ps.SystemTime()
	r.MaxRSSKiB = maxRSSKiB(ps)
	r.ExitCode = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		r.Signal = ws.Signal()
	}
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return r, err
	}
	return r, nil
}

// runChild runs argv to the end and fails unless it exits 0.
func runChild(ctx context.Context, logPath string, argv []string) (childResult, error) {
	c, err := startChild(ctx, logPath, argv)
	if err != nil {
		return childResult{}, err
	}
	r, err := c.wait()
	if err != nil {
		return r, err
	}
	if r.ExitCode != 0 {
		return r, fmt.Errorf("%s exited %d (signal %v); its output (%s) ends with:\n%s",
			filepath.Base(argv[0]), r.ExitCode, r.Signal, logPath, tail(r.Output, 10))
	}
	return r, nil
}

// The peak RSS of a child started by this process would be wrong: Go starts
// children with clone(CLONE_VM|CLONE_VFORK), and Linux folds the peak RSS of
// the memory the child had before its exec (this process's, with the fake's
// contacts in it) into the child's ru_maxrss. So measured children run under
// `oncesync-bench rusage`, a fresh, small copy of this binary that starts the
// child, waits for it and writes the child's own rusage to a file.

// rusage is what `oncesync-bench rusage` writes.
type rusage struct {
	WallNS    int64 `json:"wall_ns"`
	CPUNS     int64 `json:"cpu_ns"`
	MaxRSSKiB int64 `json:"max_rss_kib"`
	ExitCode  int   `json:"exit_code"`
	Signal    int   `json:"signal"`
}

// rusageMain is the hidden `rusage` subcommand:
// `rusage --out FILE -- ARGV...` runs ARGV with this process's stdio and
// environment, writes its rusage to FILE and fails unless it exited 0.
// SIGINT/SIGTERM to this process reach ARGV as SIGTERM.
func rusageMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("rusage", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	out := fs.String("out", "", "write the child's rusage here as JSON")
	if err := fs.Parse(args); err != nil {
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	argv := fs.Args()
	if *out == "" || len(argv) == 0 {
		return fmt.Errorf("%w: rusage needs --out FILE -- COMMAND [ARGS]", errUsage)
	}
	cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := time.Now()
	err := cmd.Run()
	wall := time.Since(start)
	ps := cmd.ProcessState
	if ps == nil {
		return err
	}
	ru := rusage{WallNS: int64(wall), CPUNS: int64(ps.UserTime() + ps.SystemTime()), MaxRSSKiB: maxRSSKiB(ps), ExitCode: ps.ExitCode()}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		ru.Signal = int(ws.Signal())
	}
	b, err := json.Marshal(ru)
	if err != nil {
		return err
	}
	if err := os.WriteFile(*out, b, 0o644); err != nil {
		return err
	}
	if ru.ExitCode != 0 {
		return fmt.Errorf("%s exited %d (signal %d)", filepath.Base(argv[0]), ru.ExitCode, ru.Signal)
	}
	return nil
}

// runMeasured runs argv to the end under `self rusage` and fails unless it
// exits 0; the result's wall, CPU and peak RSS are argv's own.
func runMeasured(ctx context.Context, self, logPath string, argv []string) (childResult, error) {
	ruPath := strings.TrimSuffix(logPath, filepath.Ext(logPath)) + ".rusage.json"
	wrapped := append([]string{self, "rusage", "--out", ruPath, "--"}, argv...)
	r, err := runChild(ctx, logPath, wrapped)
	if err != nil {
		return r, err
	}
	b, err := os.ReadFile(ruPath)
	if err != nil {
		return r, fmt.Errorf("the rusage wrapper wrote no result: %w", err)
	}
	var ru rusage
	if err := json.Unmarshal(b, &ru); err != nil {
		return r, fmt.Errorf("the rusage wrapper's result: %w", err)
	}
	r.Wall, r.CPU, r.MaxRSSKiB = time.Duration(ru.WallNS), time.Duration(ru.CPUNS), ru.MaxRSSKiB
	return r, nil
}

// selfOr is path, or this executable when path is empty.
func selfOr(path string) (string, error) {
	if path == "" {
		return os.Executable()
	}
	return filepath.Abs(path)
}

// rssParams configure the `rss` subcommand.
type rssParams struct {
	Records  []int // one oncesync run per size
	PageSize int
	Bin      string
	Self     string // the oncesync-bench binary run as the rusage wrapper ("" = this one)
	Dir      string
	Keep     bool
	JSON     bool
}

// rssRow is one source size.
type rssRow struct {
	Records       int     `json:"records"`
	CSVBytes      int64   `json:"csv_bytes"`
	StoreBytes    int64   `json:"store_bytes"` // oncesync.db and its -wal after the run
	MaxRSSKiB     int64   `json:"max_rss_kib"`
	WallSecs      float64 `json:"wall_s"`
	CPUSecs       float64 `json:"cpu_s"`
	RecordsPerSec float64 `json:"records_per_s"`
	Duplicates    int64   `json:"duplicate_writes"`
}

// rssReport is the `rss` subcommand's result.
type rssReport struct {
	PageSize  int      `json:"page_size"`
	Rows      []rssRow `json:"rows"`
	GoalMiB   int      `json:"goal_mib"`
	GoalMet   bool     `json:"goal_met"` // every row below the goal
	Machine   string   `json:"machine"`
	Date      string   `json:"date"`
	GoVersion string   `json:"go_version"`
}

// rssMain is the `rss` subcommand: `oncesync run` (bulk, fresh SQLite store)
// over generated CSVs of each --records size against the in-process fake,
// reporting the child's peak RSS from getrusage.
func rssMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := pflag.NewFlagSet("rss", pflag.ContinueOnError)
	fs.SetOutput(stderr)
	var p rssParams
	fs.IntSliceVar(&p.Records, "records", []int{100_000, 1_000_000}, "source sizes, one oncesync run each (comma-separated)")
	fs.IntVar(&p.PageSize, "page-size", 500, "records per page")
	fs.StringVar(&p.Bin, "bin", "bin/oncesync", "the oncesync binary")
	fs.StringVar(&p.Dir, "dir", "", "where the work dir is created (default: the system temp dir)")
	fs.BoolVar(&p.Keep, "keep", false, "keep the work dir")
	fs.BoolVar(&p.JSON, "json", false, "print the report as JSON")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return nil
		}
		return fmt.Errorf("%w: %w", errUsage, err)
	}
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	case len(p.Records) == 0:
		return fmt.Errorf("%w: --records needs at least one size", errUsage)
	case p.PageSize < 1 || p.PageSize > 10000:
		return fmt.Errorf("%w: --page-size must be 1 to 10000", errUsage)
	}
	for _, n := range p.Records {
		if n <= 0 {
			return fmt.Errorf("%w: --records sizes must be positive", errUsage)
		}
	}
	rep, err := runRSS(ctx, p, stderr)
	if err != nil {
		return err
	}
	if p.JSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	printRSS(stdout, rep)
	return nil
}

// newFakeServer starts opts' fake on a free 127.0.0.1 port; it returns the
// fake, its /v3 base URL and a stop function.
func newFakeServer(opts fakebrevo.Options) (*fakebrevo.Server, string, func(), error) {
	fake := fakebrevo.New(opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	srv := &http.Server{Handler: fake, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return fake, "http://" + ln.Addr().String() + "/v3", func() { srv.Close() }, nil
}

func runRSS(ctx context.Context, p rssParams, log io.Writer) (rssReport, error) {
	bin, err := filepath.Abs(p.Bin)
	if err != nil {
		return rssReport{}, err
	}
	self, err := selfOr(p.Self)
	if err != nil {
		return rssReport{}, err
	}
	if _, err := os.Stat(bin); err != nil {
		return rssReport{}, fmt.Errorf("%w: the oncesync binary %s is missing; build it with `go build -o bin/oncesync ./cmd/oncesync`", errUsage, p.Bin)
	}
	work, err := os.MkdirTemp(p.Dir, "oncesync-rss-*")
	if err != nil {
		return rssReport{}, err
	}
	if p.Keep {
		fmt.Fprintf(log, "work dir: %s\n", work)
	} else {
		defer os.RemoveAll(work)
	}
	fake, baseURL, stop, err := newFakeServer(fakebrevo.Options{APIKey: benchAPIKey})
	if err != nil {
		return rssReport{}, err
	}
	defer stop()

	rep := rssReport{PageSize: p.PageSize, GoalMiB: rssGoalMiB, GoalMet: true,
		Machine: machine(), Date: time.Now().UTC().Format(time.RFC3339), GoVersion: runtime.Version()}
	for i, n := range p.Records {
		if err := ctx.Err(); err != nil {
			return rssReport{}, err
		}
		dir := filepath.Join(work, fmt.Sprintf("rss-%d", i+1))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return rssReport{}, err
		}
		b := &bench{
			benchParams: benchParams{Records: n, PageSize: p.PageSize, Mode: "bulk", Concurrency: defaultConcurrency},
			bin:         bin, self: self, work: work, fake: fake, baseURL: baseURL, log: log,
			csvPath: filepath.Join(dir, "contacts.csv"),
		}
		if err := writeContacts(b.csvPath, n); err != nil {
			return rssReport{}, fmt.Errorf("generate the CSV: %w", err)
		}
		fi, err := os.Stat(b.csvPath)
		if err != nil {
			return rssReport{}, err
		}
		fmt.Fprintf(log, "rss: oncesync run over %d records (%.1f MB of CSV) ...", n, float64(fi.Size())/1e6)
		s, err := b.oncesyncPass(ctx, dir)
		if err != nil {
			fmt.Fprintln(log)
			return rssReport{}, fmt.Errorf("oncesync over %d records: %w", n, err)
		}
		fmt.Fprintf(log, " peak RSS %.1f MiB, %.0f records/s\n", kibToMiB(s.MaxRSSKiB), s.RecordsPerSec)
		// Drop the source before the next size: only one CSV at a time on disk.
		_ = os.Remove(b.csvPath)
		row := rssRow{Records: n, CSVBytes: fi.Size(), StoreBytes: storeBytes(dir), MaxRSSKiB: s.MaxRSSKiB, WallSecs: s.Wall.Seconds(),
			CPUSecs: s.CPU.Seconds(), RecordsPerSec: s.RecordsPerSec, Duplicates: s.Duplicates}
		rep.Rows = append(rep.Rows, row)
		if kibToMiB(row.MaxRSSKiB) >= rssGoalMiB {
			rep.GoalMet = false
		}
	}
	return rep, nil
}

func kibToMiB(k int64) float64 { return float64(k) / 1024 }

// storeBytes is the size of dir's SQLite store: oncesync.db and its -wal.
func storeBytes(dir string) int64 {
	var n int64
	for _, f := range []string{"oncesync.db", "oncesync.db-wal"} {
		if fi, err := os.Stat(filepath.Join(dir, f)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

func printRSS(w io.Writer, r rssReport) {
	fmt.Fprintf(w, "oncesync-bench rss: `oncesync run`, bulk path, pages of %d, a fresh SQLite store per size; peak RSS = oncesync's own ru_maxrss (getrusage via the rusage wrapper)\n", r.PageSize)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "records\tCSV MB\tstore MB\tpeak RSS MiB\twall s\tcpu s\trecords/s\tfake duplicate_writes\t")
	for _, row := range r.Rows {
		fmt.Fprintf(tw, "%s\t%.1f\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%d\t\n", thousands(float64(row.Records)), float64(row.CSVBytes)/1e6,
			float64(row.StoreBytes)/1e6, kibToMiB(row.MaxRSSKiB), row.WallSecs, row.CPUSecs, thousands(row.RecordsPerSec), row.Duplicates)
	}
	tw.Flush()
	verdict := "met"
	if !r.GoalMet {
		verdict = "NOT met"
	}
	fmt.Fprintf(w, "goal: peak RSS < %d MiB for every size: %s\n", r.GoalMiB, verdict)
}

// passSample is one timed full pass of a tool (a child process).
type passSample struct {
	Wall          time.Duration `json:"wall_ns"`
	CPU           time.Duration `json:"cpu_ns"`
	RecordsPerSec float64       `json:"records_per_s"`
	MaxRSSKiB     int64         `json:"max_rss_kib"`
	Requests      int64         `json:"requests"`
	Duplicates    int64         `json:"duplicate_writes"`
}

// oncesyncPass runs `oncesync run` on a fresh store in dir against a reset
// fake, checks its summary line and the fake's counters, and keeps the
// child's rusage (bench.oncesyncRun, plus peak RSS).
func (b *bench) oncesyncPass(ctx context.Context, dir string) (passSample, error) {
	cfg, err := b.writeConfig(dir)
	if err != nil {
		return passSample{}, err
	}
	b.fake.Reset()
	r, err := runMeasured(ctx, b.self, filepath.Join(dir, "run.log"), []string{b.bin, "run", "--config", cfg, syncID})
	if err != nil {
		return passSample{}, err
	}
	sum, err := parseSummary(r.Output)
	if err != nil {
		return passSample{}, err
	}
	if sum.state != "succeeded" || sum.written != int64(b.Records) || sum.read != int64(b.Records) {
		return passSample{}, fmt.Errorf("oncesync said %q, want succeeded with %d read and written", sum.line, b.Records)
	}
	st := b.fake.Stats()
	if err := b.checkFull(st); err != nil {
		return passSample{}, err
	}
	return passSample{Wall: r.Wall, CPU: r.CPU, RecordsPerSec: float64(b.Records) / r.Wall.Seconds(),
		MaxRSSKiB: r.MaxRSSKiB, Requests: st.Requests, Duplicates: st.DuplicateWrites}, nil
}
