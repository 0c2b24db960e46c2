// Package testenv is the environment oncesync's tests run in: the servers
// `make test` provides (scripts/test-services.sh exports their URLs), the rule
// for a server that does not answer (the test skips, and fails under
// CI=true), and the real oncesync binary, built once per test binary and run
// as a process whose output the test reads while it runs. Only tests import
// it (internal/layering checks that).
package testenv

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The servers' addresses when the environment names none: the ones this
// project's machines run.
const (
	DefaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379/0"
)

// DatabaseURL is the test PostgreSQL: ONCESYNC_TEST_DATABASE_URL, or
// DefaultDatabaseURL.
func DatabaseURL() string { return envOr("ONCESYNC_TEST_DATABASE_URL", DefaultDatabaseURL) }

// RedisURL is the test Redis: ONCESYNC_TEST_REDIS_URL, or DefaultRedisURL.
func RedisURL() string { return envOr("ONCESYNC_TEST_REDIS_URL", DefaultRedisURL) }

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// InCI reports whether the tests run in CI (CI=true), where a missing server
// is a failure, not a reason to skip.
func InCI() bool { return os.Getenv("CI") == "true" }

// Unavailable stops t because a server it needs does not answer: it skips,
// or fails under CI=true.
func Unavailable(t testing.TB, format string, args ...any) {
	t.Helper()
	if InCI() {
		t.Fatalf(format, args...)
	}
	t.Skipf(format, args...)
}

// Main is a TestMain that builds cmd/oncesync into a temporary directory,
// sets *binary to its path, runs the tests and exits with their code.
func Main(m *testing.M, binary *string) {
	dir, err := os.MkdirTemp("", "oncesync-test-bin-*")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*binary = filepath.Join(dir, "oncesync")
	build := exec.Command("go", "build", "-o", *binary, "github.com/oncesync/oncesync/cmd/oncesync")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building oncesync:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// Output is a buffer readable while it is written, from any goroutine: a
// process's output, or a logger's (slog.NewTextHandler(&out, nil)) in a test.
type Output struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.Write(p)
}

// Bytes is a copy of what was written so far.
func (o *Output) Bytes() []byte {
	o.mu.Lock()
	defer o.mu.Unlock()
	return bytes.Clone(o.buf.Bytes())
}

func (o *Output) String() string { return string(o.Bytes()) }

// Proc is one running process. Done is closed once it exited; Err and
// Exited are set before.
type Proc struct {
	Name   string
	Cmd    *exec.Cmd
	Out    *Output
	Done   chan struct{}
	Err    error
	Exited time.Time
}

// StartParams is what Start runs.
type StartParams struct {
	Binary string
	Args   []string
	Dir    string
	// Env is added to the test's environment.
	Env []string
	// Name names the process in failures (default: the binary's name).
	Name string
	// OnExit, if set, runs once the process exited, before Done is closed.
	OnExit func(*Proc)
}

// Start starts p's process with stdout and stderr in its Output.
func Start(t testing.TB, p StartParams) *Proc {
	t.Helper()
	cmd := exec.Command(p.Binary, p.Args...)
	cmd.Dir = p.Dir
	cmd.Env = append(os.Environ(), p.Env...)
	name := p.Name
	if name == "" {
		name = filepath.Base(p.Binary)
	}
	proc := &Proc{Name: name, Cmd: cmd, Out: &Output{}, Done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = proc.Out, proc.Out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		proc.Err = cmd.Wait()
		proc.Exited = time.Now()
		if p.OnExit != nil {
			p.OnExit(proc)
		}
		close(proc.Done)
	}()
	return proc
}

// Wait waits for p to exit and returns its exit code, or minus the signal
// that killed it. A process still running after limit is killed and fails t.
func (p *Proc) Wait(t testing.TB, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.Done:
	case <-time.After(limit):
		_ = p.Cmd.Process.Kill()
		<-p.Done
		t.Fatalf("%s did not exit within %s; output:\n%s", p.Name, limit, p.Out)
	}
	var ee *exec.ExitError
	if errors.As(p.Err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return -int(ws.Signal())
		}
		return ee.ExitCode()
	}
	if p.Err != nil {
		t.Fatal(p.Err)
	}
	return 0
}

// LastLine is the last line p wrote so far.
func (p *Proc) LastLine() string {
	lines := strings.Split(strings.TrimSpace(p.Out.String()), "\n")
	return lines[len(lines)-1]
}

// WaitFor polls cond every few milliseconds until it holds, and fails t if
// it does not within limit scaled by WaitScale.
func WaitFor(t testing.TB, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	limit *= time.Duration(WaitScale())
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", limit, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// WaitScale multiplies every WaitFor ceiling: ONCESYNC_TEST_WAIT_SCALE when
// set to a positive integer, else 3 under CI=true (a shared machine running
// the whole suite under -race is several times slower than a laptop running
// one package), else 1. A ceiling only decides how long a broken test takes
// to fail; no test passes because of it.
func WaitScale() int {
	if v, err := strconv.Atoi(os.Getenv("ONCESYNC_TEST_WAIT_SCALE")); err == nil && v > 0 {
		return v
	}
	if os.Getenv("CI") == "true" {
		return 3
	}
	return 1
}

// LogOnFailure is a debug-level logger whose lines the test prints only if
// it fails, after the cleanups registered later (a service's shutdown) have
// run: a flake seen once in CI is read from its own log, not guessed at.
func LogOnFailure(t testing.TB) *slog.Logger {
	t.Helper()
	var out Output
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the service's log:\n%s", out.String())
		}
	})
	return slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
