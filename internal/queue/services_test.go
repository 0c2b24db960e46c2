package queue_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/testenv"
)

// unavailable skips, or fails under CI=true (internal/testenv).
var unavailable = testenv.Unavailable

// randHex is a random namespace or id (internal/testenv).
var randHex = testenv.RandHex

// The multi-machine tests run against the PostgreSQL at
// ONCESYNC_TEST_DATABASE_URL and the Redis at ONCESYNC_TEST_REDIS_URL
// (defaults: 127.0.0.1:5432 user postgres, 127.0.0.1:6379), each test in its
// own random schema and with its own sync ids (so lease keys never meet).
// Outage tests start throwaway redis-server / PostgreSQL processes on free
// ports and never touch the shared servers. Without the services the tests
// skip, except under CI=true where they fail.

// testDatabaseURL returns the test PostgreSQL's URL once it answered.
func testDatabaseURL(t *testing.T) string {
	t.Helper()
	u := testenv.DatabaseURL()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, u)
	if err != nil {
		unavailable(t, "PostgreSQL unreachable: %v", err)
	}
	_ = conn.Close(ctx)
	return u
}

// testRedisURL returns the test Redis's URL once it answered.
func testRedisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("ONCESYNC_TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatalf("ONCESYNC_TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		unavailable(t, "Redis unreachable: %v", err)
	}
	return u
}

// newSchema returns a store URL on dbURL whose tables (and queue) live in a
// fresh random schema, dropped when the test ends, and whose connections
// carry the schema as application_name.
func newSchema(t *testing.T, dbURL string) (storeURL, schema string) {
	t.Helper()
	schema = "oncesync_q_" + randHex(6)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Logf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	q.Set("application_name", schema)
	u.RawQuery = q.Encode()
	return u.String(), schema
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	_ = l.Close()
	return port
}

// throwawayRedis is a redis-server without persistence on a free port that
// a test stops and starts again on the same port (its data is lost, as in a
// restart without persistence).
type throwawayRedis struct {
	t       *testing.T
	addr    string
	dir     string
	servers *testenv.RedisServers
	stopNow func()
}

func startThrowawayRedis(t *testing.T) *throwawayRedis {
	t.Helper()
	addr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	r := &throwawayRedis{t: t, addr: addr, dir: t.TempDir(), servers: &testenv.RedisServers{}}
	t.Cleanup(r.servers.Stop)
	r.start()
	return r
}

func (r *throwawayRedis) url() string { return "redis://" + r.addr + "/0" }

func (r *throwawayRedis) start() {
	r.t.Helper()
	stop, err := r.servers.StartAt(r.addr, r.dir)
	if errors.Is(err, testenv.ErrNoRedisServer) {
		unavailable(r.t, "%v", err)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.stopNow = stop
}

// stop kills the server (as a crash would).
func (r *throwawayRedis) stop() { r.stopNow() }

// throwawayPostgres is a PostgreSQL cluster in a temp dir on a free port,
// run as the postgres user when the test runs as root (postgres refuses
// root), as scripts/test-services.sh does.
type throwawayPostgres struct {
	t      *testing.T
	bindir string
	dir    string
	port   string
	runas  string
}

// startThrowawayPostgres returns nil when initdb/pg_ctl are not installed.
func startThrowawayPostgres(t *testing.T) *throwawayPostgres {
	t.Helper()
	bindir := ""
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if _, err := exec.LookPath("initdb"); err == nil {
			bindir = filepath.Dir(p)
		}
	}
	if bindir == "" {
		dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, "pg_ctl")); err == nil {
				bindir = d
			}
		}
	}
	if bindir == "" {
		return nil
	}
	// Not t.TempDir: its parent is 0700 and the postgres user must reach it.
	dir, err := os.MkdirTemp("", "oncesync-pg-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	p := &throwawayPostgres{t: t, bindir: bindir, dir: dir, port: freePort(t)}
	if os.Geteuid() == 0 {
		p.runas = "postgres"
		uid, gid, ok := lookupUser("postgres")
		if !ok {
			return nil
		}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if out, err := p.command("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	p.start()
	t.Cleanup(func() {
		_, _ = p.command("pg_ctl", "-D", filepath.Join(dir, "data"), "-m", "immediate", "-w", "stop").CombinedOutput()
	})
	return p
}

func (p *throwawayPostgres) url() string {
	return "postgres://postgres@127.0.0.1:" + p.port + "/postgres?sslmode=disable"
}

func (p *throwawayPostgres) command(name string, args ...string) *exec.Cmd {
	bin := filepath.Join(p.bindir, name)
	var cmd *exec.Cmd
	if p.runas != "" {
		cmd = exec.Command("runuser", append([]string{"-u", p.runas, "--", bin}, args...)...)
	} else {
		cmd = exec.Command(bin, args...)
	}
	cmd.Dir = p.dir
	return cmd
}

func (p *throwawayPostgres) start() {
	p.t.Helper()
	if out, err := p.command("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-l", filepath.Join(p.dir, "server.log"), "-w", "-t", "60",
		"-o", "-p "+p.port+" -c listen_addresses=127.0.0.1 -c unix_socket_directories="+p.dir+
			" -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200",
		"start").CombinedOutput(); err != nil {
		log, _ := os.ReadFile(filepath.Join(p.dir, "server.log"))
		p.t.Fatalf("pg_ctl start: %v\n%s\n%s", err, out, log)
	}
}

// stop shuts the server down at once (-m fast: every session is ended).
func (p *throwawayPostgres) stop() {
	p.t.Helper()
	if out, err := p.command("pg_ctl", "-D", filepath.Join(p.dir, "data"), "-m", "fast", "-w", "stop").CombinedOutput(); err != nil {
		p.t.Fatalf("pg_ctl stop: %v\n%s", err, out)
	}
}

// lookupUser returns the uid and gid of name.
func lookupUser(name string) (uid, gid int, ok bool) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, false
	}
	uid, err1 := strconv.Atoi(u.Uid)
	gid, err2 := strconv.Atoi(u.Gid)
	return uid, gid, err1 == nil && err2 == nil
}

// writeLog records when the fake applied each write.
type writeLog struct {
	mu sync.Mutex
	at []time.Time
}

func (w *writeLog) add() {
	w.mu.Lock()
	w.at = append(w.at, time.Now())
	w.mu.Unlock()
}

// between returns the writes applied in (from, to).
func (w *writeLog) between(from, to time.Time) []time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []time.Time
	for _, a := range w.at {
		if a.After(from) && a.Before(to) {
			out = append(out, a)
		}
	}
	return out
}

// firstAfter returns the first write after t (zero if none).
func (w *writeLog) firstAfter(t time.Time) time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, a := range w.at {
		if a.After(t) {
			return a
		}
	}
	return time.Time{}
}
