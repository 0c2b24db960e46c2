package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// apiKey is the fake's only accepted key (a test value, passed to oncesync
// through the environment like a real key).
const apiKey = "xkeysib-chaos-0123456789abcdef"

// envParams configure newEnv.
type envParams struct {
	Options options
	Name    string    // the scenario
	Log     io.Writer // progress lines
}

// env is one scenario's world: a work directory, a seeded random source,
// the processes it started and what to undo at the end.
type env struct {
	o     options
	name  string
	log   io.Writer
	dir   string
	start time.Time

	rngMu sync.Mutex
	rng   *rand.Rand

	mu       sync.Mutex
	procs    []*proc
	cleanups []func()
	nproc    int
}

func newEnv(ctx context.Context, p envParams) (*env, error) {
	dir, err := os.MkdirTemp("", "oncesync-chaos-"+p.Name+"-*")
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(p.Name))
	log := p.Log
	if log == nil {
		log = io.Discard
	}
	return &env{
		o: p.Options, name: p.Name, log: log, dir: dir, start: time.Now(),
		rng: rand.New(rand.NewPCG(uint64(p.Options.Seed), h.Sum64())),
	}, nil
}

// logf prints a progress line with the time since the scenario started.
func (e *env) logf(format string, args ...any) {
	fmt.Fprintf(e.log, "chaos: [%s +%5.1fs] %s\n", e.name, time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// vlogf is logf with --verbose only.
func (e *env) vlogf(format string, args ...any) {
	if e.o.Verbose {
		e.logf(format, args...)
	}
}

// intN is a seeded random integer in [0, n).
func (e *env) intN(n int) int {
	e.rngMu.Lock()
	defer e.rngMu.Unlock()
	return e.rng.IntN(n)
}

// between is a seeded random duration in [lo, hi].
func (e *env) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	e.rngMu.Lock()
	defer e.rngMu.Unlock()
	return lo + time.Duration(e.rng.Int64N(int64(hi-lo)+1))
}

// onClose registers f to run when the scenario ends (last registered first).
func (e *env) onClose(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, f)
}

// close kills every process still running, runs the cleanups, and removes
// the work directory unless keep; it returns the directory when kept.
func (e *env) close(keep bool) string {
	e.mu.Lock()
	procs := append([]*proc(nil), e.procs...)
	cleanups := e.cleanups
	e.cleanups = nil
	e.mu.Unlock()
	for _, p := range procs {
		p.stop()
	}
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
	if keep {
		return e.dir
	}
	_ = os.RemoveAll(e.dir)
	return ""
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// proc is one oncesync process (or a service the scenario runs).
type proc struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	logFile *os.File
	started time.Time

	done   chan struct{}
	err    error
	exited time.Time
}

// startProc starts bin with args in the work directory, output to a log file.
func (e *env) startProc(name, bin string, args ...string) (*proc, error) {
	return e.startProcEnv(name, nil, bin, args...)
}

// startProcEnv is startProc with extra environment variables (a later one
// overrides an earlier one of the same name).
func (e *env) startProcEnv(name string, extraEnv []string, bin string, args ...string) (*proc, error) {
	return e.startProcAttr(name, extraEnv, nil, bin, args...)
}

// startProcAttr is startProcEnv with the process's attributes (nil: none).
func (e *env) startProcAttr(name string, extraEnv []string, attr *syscall.SysProcAttr, bin string, args ...string) (*proc, error) {
	e.mu.Lock()
	e.nproc++
	n := e.nproc
	e.mu.Unlock()
	logPath := filepath.Join(e.dir, "logs", fmt.Sprintf("%03d-%s.log", n, name))
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = e.dir
	cmd.Env = append(append(os.Environ(), "BREVO_API_KEY="+apiKey), extraEnv...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = attr
	p := &proc{name: name, cmd: cmd, logPath: logPath, logFile: f, done: make(chan struct{})}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p.started = time.Now()
	go func() {
		p.err = cmd.Wait()
		p.exited = time.Now()
		_ = f.Close()
		close(p.done)
	}()
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p, nil
}

// oncesync starts the oncesync binary. Its PostgreSQL connections carry
// the process's name as application_name (PGAPPNAME), so a scenario can
// tell in pg_stat_activity which process is doing what.
func (e *env) oncesync(name string, args ...string) (*proc, error) {
	return e.oncesyncEnv(name, nil, args...)
}

// oncesyncEnv is oncesync with extra environment variables.
func (e *env) oncesyncEnv(name string, extraEnv []string, args ...string) (*proc, error) {
	return e.oncesyncAttr(name, extraEnv, nil, args...)
}

// oncesyncAttr is oncesyncEnv with the process's attributes (nil: none).
func (e *env) oncesyncAttr(name string, extraEnv []string, attr *syscall.SysProcAttr, args ...string) (*proc, error) {
	return e.startProcAttr(name, append([]string{"PGAPPNAME=" + appName(name)}, extraEnv...), attr, e.o.Bin, args...)
}

// appName is the application_name of process name's connections.
func appName(name string) string { return "chaos-" + name }

func (p *proc) pid() int { return p.cmd.Process.Pid }

func (p *proc) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// wait waits up to limit for p to exit and returns its exit code (a negative
// signal number when a signal killed it); ok is false on timeout.
func (p *proc) wait(ctx context.Context, limit time.Duration) (code int, ok bool) {
	t := time.NewTimer(limit)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		return 0, false
	case <-ctx.Done():
		return 0, false
	}
	return p.exitCode(), true
}

func (p *proc) exitCode() int {
	var ee *exec.ExitError
	if errors.As(p.err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if p.err != nil {
		return -1000
	}
	return 0
}

// stop kills p if it still runs (SIGCONT first, in case it is frozen).
func (p *proc) stop() {
	if !p.running() {
		return
	}
	_ = p.signal(syscall.SIGCONT)
	_ = p.signal(syscall.SIGKILL)
	<-p.done
}

// output is p's log so far.
func (p *proc) output() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// lastLine is the last non-empty line p printed.
func (p *proc) lastLine() string {
	lines := strings.Split(strings.TrimSpace(p.output()), "\n")
	return lines[len(lines)-1]
}

// tail is the last n lines p printed.
func (p *proc) tail(n int) string {
	b := bytes.TrimSpace([]byte(p.output()))
	lines := strings.Split(string(b), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
