package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
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
  - id: contacts-split
    workspace: acme
    partitions: 2
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
	// What happened and what to do next, from the catalog, under the
	// code the dead letter is stored with.
	if !failure.Known(failure.Code(barrier.ReasonMismatch)) {
		t.Errorf("a dead letter's reason %q is no failure code of the catalog", barrier.ReasonMismatch)
	}
	if want := "failed: " + barrier.ReasonMismatch + ": "; !strings.Contains(err.Error(), want) {
		t.Errorf("--wait's error %q lacks %q", err, want)
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
	if code != 0 || !strings.HasPrefix(out2, "requeued "+id+": key="+fullKey) || !strings.HasSuffix(out2, "; nothing to queue: a named barrier, re-run the command that waited on it\n") {
		t.Errorf("requeue: exit %d, %q", code, out2)
	}
	// A named barrier's entry names no sync: the queue is not even opened.
	if _, err := os.Stat(filepath.Join(cb.dir, "oncesync.db.queue")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("re-queueing a named barrier's entry created the queue (%v)", err)
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

// queuedJob is one row of River's job table.
type queuedJob struct {
	ID     int64
	Kind   string
	State  string
	SyncID string
	Reason string
}

// queuedJobs reads River's job table in the SQLite queue file path (none
// when the file does not exist).
func queuedJobs(t *testing.T, path string) []queuedJob {
	t.Helper()
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT id, kind, state, json(args) FROM river_job ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []queuedJob
	for rows.Next() {
		var (
			j    queuedJob
			args string
		)
		if err := rows.Scan(&j.ID, &j.Kind, &j.State, &args); err != nil {
			t.Fatal(err)
		}
		var a struct {
			SyncID string `json:"sync_id"`
			Reason string `json:"reason"`
		}
		if err := json.Unmarshal([]byte(args), &a); err != nil {
			t.Fatalf("job %d: args %s: %v", j.ID, args, err)
		}
		j.SyncID, j.Reason = a.SyncID, a.Reason
		out = append(out, j)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestDeadLetterRequeueQueuesARun: re-queueing a partitioned sync's dead
// letter queues a new run of the sync on the config's queue (River's job
// table in <store>.queue), once however many of its entries are
// re-queued; an entry of a paused sync or of a sync not in the config stays
// parked, and --no-enqueue only marks.
func TestDeadLetterRequeueQueuesARun(t *testing.T) {
	t.Parallel()
	cb := setupCheckpointCLI(t)
	ctx := t.Context()
	st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: filepath.Join(cb.dir, "oncesync.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	park := func(syncID string, partition int) string {
		t.Helper()
		d, err := st.AddDeadLetter(ctx, barrier.DeadLetter{SyncID: syncID, RunID: 7, Partition: partition,
			Key: "oncesync:{" + syncID + "}:barrier:7", Reason: barrier.ReasonSourceChanged,
			Token: fmt.Sprintf("p%d-job%d", partition, partition+10), Snapshot: "snap-1", HolderToken: "run7", HolderSnapshot: "snap-0", Attempts: 4})
		if err != nil {
			t.Fatal(err)
		}
		return strconv.FormatInt(d.ID, 10)
	}
	queuePath := filepath.Join(cb.dir, "oncesync.db.queue")

	first, second := park("contacts-split", 1), park("contacts-split", 2)
	out, errOut, code := cb.run(t, "deadletter", "requeue", "--config", cb.config, "--by", "ada", first)
	m := regexp.MustCompile(`^requeued ` + first + `: key=oncesync:\{contacts-split\}:barrier:7 sync=contacts-split run=7 partition=1 reason=source_changed_during_run token=p1-job11 snapshot=snap-1; a new run of contacts-split is queued \(job (\d+)\); a serve or worker on this store works it\n$`).FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("requeue: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	jobs := queuedJobs(t, queuePath)
	if len(jobs) != 1 || strconv.FormatInt(jobs[0].ID, 10) != m[1] || jobs[0].Kind != queue.KindRunPartitioned ||
		jobs[0].SyncID != "contacts-split" || jobs[0].Reason != queue.ReasonManual || jobs[0].State != "available" {
		t.Fatalf("River's jobs after the requeue: %+v; want one available %s job %s of contacts-split", jobs, queue.KindRunPartitioned, m[1])
	}

	// The other partition's entry: the run already queued redoes it.
	out, _, code = cb.run(t, "deadletter", "requeue", "--config", cb.config, "--by", "ada", second)
	if code != 0 || !strings.HasSuffix(out, "; a run of contacts-split is already queued or working (job "+m[1]+"); it redoes the work\n") {
		t.Fatalf("second entry: exit %d, %q", code, out)
	}
	if n := len(queuedJobs(t, queuePath)); n != 1 {
		t.Fatalf("%d jobs after re-queueing the second entry, want still 1", n)
	}

	// A paused sync's entry stays parked: its run would do nothing.
	if _, err := st.PutSync(ctx, store.PutSyncParams{ID: "contacts", Workspace: "acme", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetSyncState(ctx, store.SetSyncStateParams{ID: "contacts", State: store.SyncPaused, Reason: "person", By: "bob", Why: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	paused := park("contacts", 1)
	out, errOut, code = cb.run(t, "deadletter", "requeue", "--config", cb.config, paused)
	if code != ExitFailed || out != "" || !strings.Contains(errOut, "paused; resume it first") {
		t.Fatalf("paused sync: exit %d, stdout %q, stderr %q; want exit %d and the pause", code, out, errOut, ExitFailed)
	}
	// A sync not in this config: parked until --no-enqueue.
	gone := park("gone", 1)
	if _, errOut, code := cb.run(t, "deadletter", "requeue", "--config", cb.config, gone); code != ExitFailed || !strings.Contains(errOut, "no such sync") {
		t.Fatalf("unknown sync: exit %d, stderr %q", code, errOut)
	}
	list, _, _ := cb.run(t, "deadletter", "list", "--config", cb.config)
	for _, id := range []string{paused, gone} {
		if !regexp.MustCompile(`(?m)^` + id + `\s`).MatchString(list) {
			t.Errorf("entry %s is no longer parked:\n%s", id, list)
		}
	}
	out, _, code = cb.run(t, "deadletter", "requeue", "--config", cb.config, "--no-enqueue", gone)
	if code != 0 || !strings.HasPrefix(out, "requeued "+gone+": key=") || !strings.HasSuffix(out, "; marked only (--no-enqueue): no run queued\n") {
		t.Fatalf("--no-enqueue: exit %d, %q", code, out)
	}
	jobs = queuedJobs(t, queuePath)
	if len(jobs) != 1 || jobs[0].SyncID != "contacts-split" {
		t.Fatalf("jobs %+v, want only contacts-split's run", jobs)
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

// TestCheckpointCheckBothSnapshotAndInputsSaysWhatToDo: given both
// --snapshot and --inputs, the error is the command's own "give exactly one
// of --snapshot HASH or --inputs FILE" (the usage's
// `(--snapshot HASH | --inputs FILE)`), not cobra's flag-group sentence,
// which names no way out (an independent check, 2026-12-08).
func TestCheckpointCheckBothSnapshotAndInputsSaysWhatToDo(t *testing.T) {
	t.Parallel()
	cb := setupCheckpointCLI(t)
	in := cb.writeFile(t, "in.json", `{"a": 1}`)
	out, errOut, code := cb.run(t, "checkpoint", "check", "--redis", cb.redisURL, "--key", "k", "--token", "t", "--snapshot", "s", "--inputs", in)
	if code != ExitUsage || out != "" {
		t.Errorf("exit %d, stdout %q; want exit %d and nothing on stdout", code, out, ExitUsage)
	}
	if !strings.Contains(errOut, "give exactly one of --snapshot HASH or --inputs FILE") || strings.Contains(errOut, "flags in the group") {
		t.Errorf("stderr %q; want the command's own \"give exactly one of --snapshot HASH or --inputs FILE\"", errOut)
	}
}
