package testenv

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// ErrNoPgBouncer: pgbouncer is not installed (a reason to skip, or to fail
// under CI).
var ErrNoPgBouncer = errors.New("pgbouncer not installed")

// PgBouncer starts a throwaway pgbouncer on a free loopback port in front of
// the PostgreSQL of upstream (a postgres:// URL; trust authentication, as the
// test servers have), pooling in mode ("session", "transaction" or
// "statement"), with extra lines appended to its [pgbouncer] section. It
// returns upstream with its host and port replaced by pgbouncer's, and stops
// pgbouncer when t ends. A missing pgbouncer skips t (fails it under CI).
func PgBouncer(t testing.TB, upstream, mode string, extra ...string) string {
	t.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		if _, serr := os.Stat("/usr/sbin/pgbouncer"); serr != nil {
			Unavailable(t, "%v: %v", ErrNoPgBouncer, err)
		}
		bin = "/usr/sbin/pgbouncer"
	}
	u, err := url.Parse(upstream)
	if err != nil {
		t.Fatalf("upstream is not a URL")
	}
	host, port, err := net.SplitHostPort(u.Host)
	if err != nil {
		host, port = u.Hostname(), "5432"
	}
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	lhost, lport, _ := net.SplitHostPort(addr)
	// Not t.TempDir: pgbouncer started as root switches to another user
	// (it refuses to run as root), who must read its files.
	dir, err := os.MkdirTemp("", "oncesync-pgbouncer-*")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`[databases]
* = host=%s port=%s

[pgbouncer]
listen_addr = %s
listen_port = %s
unix_socket_dir =
auth_type = trust
auth_file = %s
pool_mode = %s
max_client_conn = 100
default_pool_size = 10
`, host, port, lhost, lport, filepath.Join(dir, "users.txt"), mode)
	for _, l := range extra {
		conf += l + "\n"
	}
	// auth_type trust still wants the user listed.
	users := fmt.Sprintf("%q \"\"\n", u.User.Username())
	for name, body := range map[string]string{"pgbouncer.ini": conf, "users.txt": users} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres"}, args...)
	}
	cmd := exec.Command(bin, args...)
	out := &Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("pgbouncer did not listen on %s: %v\n%s", addr, err, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	u.Host = addr
	return u.String()
}
