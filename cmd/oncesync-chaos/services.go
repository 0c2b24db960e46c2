package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// freePort is a TCP port on 127.0.0.1 nothing listens on right now.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// throwawayRedis is a redis-server this scenario runs on a free port, with
// no persistence: a restart comes back empty, unless save wrote a snapshot.
type throwawayRedis struct {
	e    *env
	bin  string
	port int
	p    *proc
}

func (e *env) startRedis(ctx context.Context) (*throwawayRedis, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w: redis-server is not installed", errSkip)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	r := &throwawayRedis{e: e, bin: bin, port: port}
	return r, r.start(ctx)
}

func (r *throwawayRedis) URL() string { return fmt.Sprintf("redis://127.0.0.1:%d/0", r.port) }

func (r *throwawayRedis) start(ctx context.Context) error {
	p, err := r.e.startProc("redis-server", r.bin, "--port", strconv.Itoa(r.port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", r.e.dir)
	if err != nil {
		return err
	}
	r.p = p
	c := r.client()
	defer c.Close()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if c.Ping(ctx).Err() == nil {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("redis-server exited at start:\n%s", p.tail(10))
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("redis-server on port %d did not answer within 15 s", r.port)
}

// save writes a snapshot (SAVE) that the next start loads: the server
// saves nothing on its own.
func (r *throwawayRedis) save(ctx context.Context) error {
	c := r.client()
	defer c.Close()
	return c.Save(ctx).Err()
}

// client is a new client of the server (close it).
func (r *throwawayRedis) client() *redis.Client {
	return redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", r.port)})
}

// stop stops the server (SIGTERM; it saves nothing).
func (r *throwawayRedis) stop(ctx context.Context) error {
	if err := r.p.signal(15); err != nil {
		return err
	}
	if _, ok := r.p.wait(ctx, 15*time.Second); !ok {
		r.p.stop()
	}
	return nil
}

// throwawayPG is a PostgreSQL cluster this scenario runs (initdb + pg_ctl, as
// user postgres when run as root), so it can be restarted.
type throwawayPG struct {
	e      *env
	bindir string
	dir    string
	port   int
	runAs  string
}

func pgBindir() string {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			return filepath.Dir(p)
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "pg_ctl")); err == nil {
			return dirs[i]
		}
	}
	return ""
}

func (e *env) startPG(ctx context.Context) (*throwawayPG, error) {
	bindir := pgBindir()
	if bindir == "" {
		return nil, errors.New("initdb/pg_ctl not found")
	}
	dir, err := os.MkdirTemp("", "oncesync-chaos-pg-*")
	if err != nil {
		return nil, err
	}
	t := &throwawayPG{e: e, bindir: bindir, dir: dir}
	e.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = t.ctl(ctx, "stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, errors.New("running as root and there is no postgres user to run PostgreSQL as")
		}
		t.runAs = "postgres"
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	if out, err := t.as(ctx, filepath.Join(bindir, "initdb"), "-D", filepath.Join(dir, "data"), "-U", "postgres",
		"-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync"); err != nil {
		return nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	if t.port, err = freePort(); err != nil {
		return nil, err
	}
	if err := t.start(ctx); err != nil {
		return nil, err
	}
	return t, nil
}

// as runs a command as the PostgreSQL user.
func (t *throwawayPG) as(ctx context.Context, name string, args ...string) ([]byte, error) {
	var cmd *exec.Cmd
	if t.runAs != "" {
		cmd = exec.CommandContext(ctx, "runuser", append([]string{"-u", t.runAs, "--", name}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, name, args...)
	}
	cmd.Dir = t.dir
	return cmd.CombinedOutput()
}

func (t *throwawayPG) ctl(ctx context.Context, args ...string) error {
	full := append([]string{"-D", filepath.Join(t.dir, "data"), "-w", "-t", "60"}, args...)
	if out, err := t.as(ctx, filepath.Join(t.bindir, "pg_ctl"), full...); err != nil {
		return fmt.Errorf("pg_ctl %v: %w: %s", args, err, out)
	}
	return nil
}

func (t *throwawayPG) start(ctx context.Context) error {
	return t.ctl(ctx, "-l", filepath.Join(t.dir, "server.log"), "-o",
		fmt.Sprintf("-p %d -c listen_addresses=127.0.0.1 -c unix_socket_directories=%s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", t.port, t.dir),
		"start")
}

// stop stops the server, fast: open connections are cut.
func (t *throwawayPG) stop(ctx context.Context) error { return t.ctl(ctx, "stop", "-m", "fast") }

func (t *throwawayPG) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", t.port)
}
