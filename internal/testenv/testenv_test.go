package testenv

import (
	"context"
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestURLsFollowTheEnvironment(t *testing.T) {
	t.Setenv("ONCESYNC_TEST_REDIS_URL", "")
	if got := RedisURL(); got != DefaultRedisURL {
		t.Fatalf("RedisURL() = %q with no variable, want %q", got, DefaultRedisURL)
	}
	t.Setenv("ONCESYNC_TEST_REDIS_URL", "redis://10.0.0.1:6380/3")
	if got := RedisURL(); got != "redis://10.0.0.1:6380/3" {
		t.Fatalf("RedisURL() = %q, want the variable's", got)
	}
	t.Setenv("ONCESYNC_TEST_DATABASE_URL", "postgres://x@y/z")
	if got := DatabaseURL(); got != "postgres://x@y/z" {
		t.Fatalf("DatabaseURL() = %q, want the variable's", got)
	}
}

// TestProcExitCodes runs this test binary as the child (a helper that exits
// with a given code, or kills itself) and checks what Wait says.
func TestProcExitCodes(t *testing.T) {
	if code := os.Getenv("TESTENV_CHILD_EXIT"); code != "" {
		os.Stdout.WriteString("first line\nlast line\n")
		if code == "kill" {
			p, _ := os.FindProcess(os.Getpid())
			_ = p.Kill()
			time.Sleep(time.Minute)
		}
		os.Exit(map[string]int{"0": 0, "3": 3}[code])
	}
	for _, tt := range []struct {
		exit string
		want int
	}{{"0", 0}, {"3", 3}, {"kill", -9}} {
		exited := false
		p := Start(t, StartParams{Binary: os.Args[0], Args: []string{"-test.run", "^TestProcExitCodes$"},
			Env: []string{"TESTENV_CHILD_EXIT=" + tt.exit}, OnExit: func(*Proc) { exited = true }})
		if got := p.Wait(t, 30*time.Second); got != tt.want {
			t.Errorf("exit %s: Wait = %d, want %d (output %q)", tt.exit, got, tt.want, p.Out)
		}
		if !exited || p.Exited.IsZero() {
			t.Errorf("exit %s: OnExit ran %v, Exited %v", tt.exit, exited, p.Exited)
		}
		if tt.exit != "kill" && p.LastLine() != "last line" {
			t.Errorf("exit %s: LastLine = %q, want %q", tt.exit, p.LastLine(), "last line")
		}
	}
}

func TestWaitForSeesTheCondition(t *testing.T) {
	n := 0
	WaitFor(t, 5*time.Second, "three polls", func() bool { n++; return n >= 3 })
	if n != 3 {
		t.Fatalf("cond was asked %d times, want 3", n)
	}
	if !strings.Contains(DefaultDatabaseURL, "127.0.0.1:5432") {
		t.Fatalf("DefaultDatabaseURL %q is not the machines' server", DefaultDatabaseURL)
	}
}

func TestWaitScale(t *testing.T) {
	for _, tt := range []struct {
		ci, scale string
		want      int
	}{{"", "", 1}, {"true", "", 3}, {"true", "1", 1}, {"", "5", 5}, {"", "0", 1}, {"", "x", 1}} {
		t.Setenv("CI", tt.ci)
		t.Setenv("ONCESYNC_TEST_WAIT_SCALE", tt.scale)
		if got := WaitScale(); got != tt.want {
			t.Errorf("CI=%q ONCESYNC_TEST_WAIT_SCALE=%q: WaitScale() = %d, want %d", tt.ci, tt.scale, got, tt.want)
		}
	}
}

func TestRedisServersStartAndStop(t *testing.T) {
	var s RedisServers
	t.Cleanup(s.Stop)
	dir, err := s.Dir("testenv-redis-")
	if err != nil {
		t.Fatal(err)
	}
	addr, stop, err := s.Start(dir, "--maxmemory-policy", "noeviction")
	if errors.Is(err, ErrNoRedisServer) {
		Unavailable(t, "%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	if got, err := c.ConfigGet(context.Background(), "maxmemory-policy").Result(); err != nil || got["maxmemory-policy"] != "noeviction" {
		t.Fatalf("CONFIG GET maxmemory-policy = %v, %v: the extra arguments did not reach the server", got, err)
	}
	if err := c.Set(context.Background(), "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("the server still answers after stop")
	}
	// Started again where the clients expect it, without the data.
	if _, err := s.StartAt(addr, dir); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(context.Background(), "k").Result(); err != nil || n != 0 {
		t.Fatalf("after StartAt on %s: EXISTS k = %d, %v; want a server at the same address, without the data", addr, n, err)
	}
	s.Stop()
	if err := c.Ping(context.Background()).Err(); err == nil {
		t.Fatal("the restarted server still answers after Stop")
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("Stop left %s: %v", dir, err)
	}
}

func TestDeletePrefixDeletesOnlyThePrefix(t *testing.T) {
	opt, err := redis.ParseURL(RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx := context.Background()
	if err := c.Ping(ctx).Err(); err != nil {
		Unavailable(t, "redis unreachable: %v", err)
	}
	ns, other := "testenv:"+RandHex(4)+":", "testenv:"+RandHex(4)+":"
	if len(ns) != len("testenv:")+8+1 || ns == other {
		t.Fatalf("RandHex(4) gave namespaces %q and %q", ns, other)
	}
	for i := range 150 { // more than one SCAN page
		c.Set(ctx, ns+strconv.Itoa(i), "x", time.Minute)
	}
	c.Set(ctx, other+"keep", "x", time.Minute)
	defer c.Del(ctx, other+"keep")
	DeletePrefix(t, c, ns)
	if n, err := c.Keys(ctx, ns+"*").Result(); err != nil || len(n) != 0 {
		t.Fatalf("after DeletePrefix %d keys of %s* are left (%v)", len(n), ns, err)
	}
	if n, _ := c.Exists(ctx, other+"keep").Result(); n != 1 {
		t.Fatal("DeletePrefix deleted a key of another namespace")
	}
}

func TestRefusedAddrRefusesAndIsHeld(t *testing.T) {
	addr := RefusedAddr(t)
	if c, err := net.DialTimeout("tcp", addr, 2*time.Second); err == nil {
		c.Close()
		t.Fatalf("dial %s succeeded, want refused", addr)
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %s: %v, want connection refused", addr, err)
	}
	if l, err := net.Listen("tcp", addr); err == nil {
		l.Close()
		t.Fatalf("listen on %s succeeded while the test holds it", addr)
	}
}
