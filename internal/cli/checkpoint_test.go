package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/rediskey"
)

// The checkpoint and deadletter commands, in process through Main, against
// the Redis at ONCESYNC_TEST_REDIS_URL (default redis://127.0.0.1:6379/0;
// skipped without it, failing under CI=true) and a SQLite store.

func checkpointRedisURL(t *testing.T) string {
	t.Helper()
	u := os.Getenv("ONCESYNC_TEST_REDIS_URL")
	if u == "" {
		u = "redis://127.0.0.1:6379/0"
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	if err := c.Ping(t.Context()).Err(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("redis unreachable: %v", err)
		}
		t.Skipf("redis unreachable: %v", err)
	}
	return u
}

type cliBundle struct {
	redisURL string
	config   string
	dir      string
}

func setupCheckpointCLI(t *testing.T) *cliBundle {
	t.Helper()
	u := checkpointRedisURL(t)
	dir := t.TempDir()
	cfg := `store: sqlite://./oncesync.db
redis: ` + u + `
syncs:
  - id: contacts
    workspace: acme
    schedule: "*/15 * * * *"
    source: {type: csv, path: contacts.csv, page_size: 500, identity: id}
    destination: {type: webhook, url: "http://127.0.0.1:1/hook"}
    mapping: {fields: {email: email}}
`
	path := filepath.Join(dir, "oncesync.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return &cliBundle{redisURL: u, config: path, dir: dir}
}

// run runs the command line and returns stdout, stderr and the exit code.
func (cb *cliBundle) run(t *testing.T, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), args, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
	return out.String(), errOut.String(), code
}

// barrierName returns a fresh barrier name whose key is deleted at cleanup.
func (cb *cliBundle) barrierName(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "cli-test-" + hex.EncodeToString(b)
	t.Cleanup(func() {
		opt, _ := redis.ParseURL(cb.redisURL)
		c := redis.NewClient(opt)
		defer c.Close()
		_ = c.Del(context.Background(), rediskey.Default().Checkpoint(name)).Err()
	})
	return name
}

func (cb *cliBundle) writeFile(t *testing.T, name, body string) string {
	t.Helper()
	p := filepath.Join(cb.dir, name)
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestCheckpointCheckCommand(t *testing.T) {
	t.Parallel()
	cb := setupCheckpointCLI(t)
	key := cb.barrierName(t)
	a := cb.writeFile(t, "a.json", `{"source": "orders", "rows": 100000, "max_id": 99, "tables": ["a", "b"]}`)
	b := cb.writeFile(t, "b.json", "{\n  \"tables\": [\"a\", \"b\"],\n  \"max_id\": 99,\n  \"source\": \"orders\",\n  \"rows\": 100000\n}\n")
	c := cb.writeFile(t, "c.json", `{"source": "orders", "rows": "100000", "max_id": 99, "tables": ["a", "b"]}`)

	steps := []struct {
		name     string
		args     []string
		wantOut  string // regexp, whole stdout
		wantCode int
	}{
		{"first worker creates", []string{"--token", "w1", "--inputs", a}, `created\n`, ExitOK},
		{"same inputs, other key order: aligned", []string{"--token", "w2", "--inputs", b}, `aligned\n`, ExitOK},
		{"a string where a number was: mismatch", []string{"--token", "w3", "--inputs", c},
			`mismatch holder=w1 snapshot=[0-9a-f]{64}\n`, ExitMismatch},
		{"explicit snapshot: mismatch", []string{"--token", "w4", "--snapshot", "deadbeef"},
			`mismatch holder=w1 snapshot=[0-9a-f]{64}\n`, ExitMismatch},
	}
	for _, st := range steps {
		args := append([]string{"checkpoint", "check", "--redis", cb.redisURL, "--key", key}, st.args...)
		out, errOut, code := cb.run(t, args...)
		if code != st.wantCode || !regexp.MustCompile(`^`+st.wantOut+`$`).MatchString(out) {
			t.Errorf("%s: exit %d, stdout %q (stderr %q); want exit %d, stdout /%s/", st.name, code, out, errOut, st.wantCode, st.wantOut)
		}
	}
	// The snapshot the mismatch reports is the hash of a.json, which a
	// worker can pass back with --snapshot to align.
	out, _, _ := cb.run(t, "checkpoint", "check", "--redis", cb.redisURL, "--key", key, "--token", "w5", "--snapshot", "x")
	hash := strings.TrimSpace(out[strings.LastIndex(out, "=")+1:])
	if out, _, code := cb.run(t, "checkpoint", "check", "--redis", cb.redisURL, "--key", key, "--token", "w6", "--snapshot", hash); out != "aligned\n" || code != 0 {
		t.Errorf("--snapshot <holder's hash>: %q exit %d, want aligned", out, code)
	}
}

func TestCheckpointCheckUsage(t *testing.T) {
	t.Parallel()
	cb := setupCheckpointCLI(t)
	bad := cb.writeFile(t, "bad.json", `[1, 2]`)
	for _, tt := range []struct {
		name string
		args []string
	}{
		{"no key", []string{"--redis", cb.redisURL, "--token", "t", "--snapshot", "s"}},
		{"no snapshot", []string{"--redis", cb.redisURL, "--key", "k", "--token", "t"}},
		{"both snapshot and inputs", []string{"--redis", cb.redisURL, "--key", "k", "--token", "t", "--snapshot", "s", "--inputs", bad}},
		{"inputs not an object", []string{"--redis", cb.redisURL, "--key", "k", "--token", "t", "--inputs", bad}},
		{"token with colon", []string{"--redis", cb.redisURL, "--key", cb.barrierName(t), "--token", "a:b", "--snapshot", "s"}},
		{"no redis", []string{"--key", "k", "--token", "t", "--snapshot", "s"}},
		{"bad ttl", []string{"--redis", cb.redisURL, "--key", "k", "--token", "t", "--snapshot", "s", "--ttl", "0s"}},
	} {
		out, _, code := cb.run(t, append([]string{"checkpoint", "check"}, tt.args...)...)
		if code != ExitUsage || out != "" {
			t.Errorf("%s: exit %d, stdout %q; want exit %d and nothing on stdout", tt.name, code, out, ExitUsage)
		}
	}
	out, _, code := cb.run(t, "checkpoint", "check", "--help")
	if code != 0 || !strings.Contains(out, "Examples:") || !strings.Contains(out, "--inputs") {
		t.Errorf("--help: exit %d, %q", code, out)
	}
}

// TestCheckpointWaitDeadLetters: --wait with a barrier that keeps holding
// another snapshot sleeps 3 times, stores a dead letter in the config's
// store and exits 5; deadletter list shows it, requeue marks it.
func TestCheckpointWaitDeadLetters(t *testing.T) {
	t.Parallel()
	cb := setupCheckpointCLI(t)
	key := cb.barrierName(t)
	if _, _, code := cb.run(t, "checkpoint", "check", "--config", cb.config, "--key", key, "--token", "holder", "--snapshot", "snap-a"); code != 0 {
		t.Fatalf("creating the barrier: exit %d", code)
	}
	var slept []time.Duration
	var out, errOut bytes.Buffer
	env := Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }}
	err := checkpointCheck(t.Context(), env, &rootFlags{logLevel: "warn"}, checkpointFlags{
		config: cb.config, key: key, token: "late", snapshot: "snap-b", ttl: time.Minute, wait: true,
		sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil },
	})
	if code := exitCode(err); code != ExitDead {
		t.Fatalf("--wait: exit %d (%v), want %d", code, err, ExitDead)
	}
	if out.String() != "mismatch holder=holder snapshot=snap-a\n" {
		t.Errorf("stdout %q", out.String())
	}
	if len(slept) != 3 {
		t.Errorf("slept %d times, want 3 retries", len(slept))
	}
	for i, d := range slept {
		if ceiling := time.Second << i; d < 0 || d > ceiling {
			t.Errorf("sleep %d = %s, want in [0, %s]", i, d, ceiling)
		}
	}

	list, _, code := cb.run(t, "deadletter", "list", "--config", cb.config)
	if code != 0 {
		t.Fatalf("deadletter list: exit %d", code)
	}
	fullKey := rediskey.Default().Checkpoint(key)
	for _, want := range []string{"checkpoint_mismatch", "late", "snap-b", "holder", "snap-a", fullKey} {
		if !strings.Contains(list, want) {
			t.Errorf("deadletter list does not show %q:\n%s", want, list)
		}
	}
	id := strings.Fields(strings.Split(list, "\n")[1])[0]

	out2, _, code := cb.run(t, "deadletter", "requeue", "--config", cb.config, "--by", "alice", id)
	if code != 0 || !strings.HasPrefix(out2, "requeued "+id+": key="+fullKey) {
		t.Errorf("requeue: exit %d, %q", code, out2)
	}
	if _, errOut, code := cb.run(t, "deadletter", "requeue", "--config", cb.config, id); code != ExitFailed || !strings.Contains(errOut, "already requeued") {
		t.Errorf("second requeue: exit %d, stderr %q; want %d, already requeued", code, errOut, ExitFailed)
	}
	if list, _, _ := cb.run(t, "deadletter", "list", "--config", cb.config); list != "no dead letters\n" {
		t.Errorf("list after requeue = %q, want none parked", list)
	}
	if all, _, _ := cb.run(t, "deadletter", "list", "--config", cb.config, "--all"); !strings.Contains(all, "by alice") {
		t.Errorf("list --all does not show the requeue by alice:\n%s", all)
	}
	if _, _, code := cb.run(t, "deadletter", "requeue", "--config", cb.config, "999999"); code != ExitFailed {
		t.Errorf("requeue of an unknown id: exit %d, want %d", code, ExitFailed)
	}
}

func TestCheckpointRefusesEvictingRedis(t *testing.T) {
	t.Parallel()
	cb := setupCheckpointCLI(t)
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Skipf("redis-server not installed: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	_, port, _ := net.SplitHostPort(addr)
	srv := exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--maxmemory", "64mb", "--maxmemory-policy", "allkeys-lru")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); c.Ping(t.Context()).Err() != nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not start")
		}
	}
	url := "redis://" + addr + "/0"
	out, errOut, code := cb.run(t, "checkpoint", "check", "--redis", url, "--key", "k", "--token", "t", "--snapshot", "s")
	if code != ExitFailed || out != "" || !strings.Contains(errOut, "allkeys-lru") || !strings.Contains(errOut, "fresh start") {
		t.Errorf("evicting Redis: exit %d, stdout %q, stderr %q; want a refusal explaining the eviction incident", code, out, errOut)
	}
	if n, _ := c.DBSize(t.Context()).Result(); n != 0 {
		t.Errorf("the refused check wrote %d keys", n)
	}
	out, _, code = cb.run(t, "checkpoint", "check", "--redis", url, "--key", "k", "--token", "t", "--snapshot", "s", "--allow-evicting-redis")
	if code != 0 || out != "created\n" {
		t.Errorf("--allow-evicting-redis: exit %d, %q; want created", code, out)
	}
}

func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	if ee, ok := err.(*exitError); ok {
		return ee.code
	}
	return -1
}
