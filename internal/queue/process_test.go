package queue_test

import (
	"bufio"
	"cmp"
	"encoding/csv"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/testenv"
)

const apiKey = "xkeysib-queue-secret-0123456789"

var binary string

func TestMain(m *testing.M) { testenv.Main(m, &binary) }

// env is a config with syncs against one fake Brevo, in a temp dir.
type env struct {
	t      *testing.T
	dir    string
	config string
	fake   *fakebrevo.Server
	total  int
	prefix string

	mu    sync.Mutex
	procs []*proc
}

type envParams struct {
	syncs    int // each with its own records
	records  int // per sync
	pageSize int
	schedule string
	settings string
	latency  time.Duration

	// store is the store URL (default sqlite://./oncesync.db); redis the
	// optional Redis URL.
	store string
	redis string
	// prefix names the syncs prefix0, prefix1, ... (default "s"); tests
	// sharing a Redis use unique prefixes so their lease keys never meet.
	prefix string
	// afterWrite is called by the fake after every applied write.
	afterWrite func(r *http.Request)
	// refuse are e-mails the fake refuses (an import skips their rows).
	refuse []string
}

func setupEnv(t *testing.T, p envParams) *env {
	t.Helper()
	e := &env{t: t, dir: t.TempDir(), total: p.syncs * p.records, prefix: cmp.Or(p.prefix, "s")}
	e.fake = fakebrevo.New(fakebrevo.Options{APIKey: apiKey, Validate: true, Latency: p.latency, AfterWrite: p.afterWrite, RefuseEmails: p.refuse})
	srv := httptest.NewServer(e.fake)
	t.Cleanup(srv.Close)
	if p.settings == "" {
		p.settings = "{lease_ttl: 30s, lease_renew: 10s}"
	}
	var syncs strings.Builder
	for s := range p.syncs {
		name := e.syncID(s)
		f, err := os.Create(filepath.Join(e.dir, name+".csv"))
		if err != nil {
			t.Fatal(err)
		}
		w := csv.NewWriter(f)
		_ = w.Write([]string{"id", "email", "first_name"})
		for i := 1; i <= p.records; i++ {
			_ = w.Write([]string{strconv.Itoa(i), fmt.Sprintf("%s-person%06d@example.com", name, i), "First" + strconv.Itoa(i)})
		}
		w.Flush()
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&syncs, `  - id: %s
    workspace: acme
    schedule: %q
    source: {type: csv, path: %s.csv, page_size: %d, identity: id}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: bulk, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name}}
`, name, p.schedule, name, p.pageSize, srv.URL)
	}
	e.config = filepath.Join(e.dir, "oncesync.yaml")
	head := fmt.Sprintf("store: %s\n", cmp.Or(p.store, "sqlite://./oncesync.db"))
	if p.redis != "" {
		head += fmt.Sprintf("redis: %s\n", p.redis)
	}
	head += "web: {api_tokens: [" + testAPIToken + "]}\n"
	cfg := fmt.Sprintf("%ssettings: %s\nsyncs:\n%s", head, p.settings, syncs.String())
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, p := range e.procs {
			_ = p.Cmd.Process.Kill()
			<-p.Done
		}
		if t.Failed() {
			for _, p := range e.procs {
				t.Logf("--- %s output:\n%s", p.Name, p.Out.String())
			}
		}
	})
	return e
}

// syncID is the id of the i-th sync.
func (e *env) syncID(i int) string { return fmt.Sprintf("%s%d", e.prefix, i) }

// proc is one running oncesync process.
type proc = testenv.Proc

func (e *env) start(name string, args ...string) *proc {
	e.t.Helper()
	args = append(args, "--config", e.config, "--log-level", "info")
	p := testenv.Start(e.t, testenv.StartParams{Binary: binary, Args: args, Dir: e.dir, Env: []string{"BREVO_API_KEY=" + apiKey}, Name: name})
	e.mu.Lock()
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	return p
}

var httpRE = regexp.MustCompile(`http://(\S+) \(`)

// started waits for p's start line and returns its HTTP address, if any.
func started(t *testing.T, p *proc) string {
	t.Helper()
	waitFor(t, 20*time.Second, p.Name+"'s start line", func() bool {
		select {
		case <-p.Done:
			t.Fatalf("%s exited at start: %v\n%s", p.Name, p.Err, p.Out.String())
		default:
		}
		return strings.Contains(p.Out.String(), "oncesync serve: ") || strings.Contains(p.Out.String(), "oncesync worker: ")
	})
	if m := httpRE.FindStringSubmatch(p.Out.String()); m != nil {
		return m[1]
	}
	return ""
}

var waitFor = testenv.WaitFor

// store opens the processes' store as they do, from the config (SQLite in
// WAL mode: readers never block them).
func (e *env) store() store.Store {
	e.t.Helper()
	cfg, err := config.Load(e.config, func(k string) (string, bool) {
		if k == "BREVO_API_KEY" {
			return apiKey, true
		}
		return os.LookupEnv(k)
	}, connector.Default().Kinds())
	if err != nil {
		e.t.Fatal(err)
	}
	st, err := app.OpenStore(e.t.Context(), cfg, clock.Real{})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { st.Close() })
	return st
}

// checkDelivered asserts every record of every sync is at the fake once.
func (e *env) checkDelivered(t *testing.T) fakebrevo.Stats {
	t.Helper()
	st := e.fake.Stats()
	if st.Contacts != int64(e.total) || st.ContactsWritten != int64(e.total) || st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("want %d contacts written once; got contacts %d, written %d, duplicates %d, invalid requests %d",
			e.total, st.Contacts, st.ContactsWritten, st.DuplicateWrites, st.Invalid)
	}
	return st
}

// checkNoSecrets asserts no process printed the API key or an e-mail address.
func (e *env) checkNoSecrets(t *testing.T) {
	t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, p := range e.procs {
		if out := p.Out.String(); strings.Contains(out, apiKey) || strings.Contains(out, "@example.com") {
			t.Errorf("%s printed a secret or an e-mail address", p.Name)
		}
	}
}

// testAPIToken is the bearer token the test configs accept (/metrics, /api/v1).
const testAPIToken = "test-token-0123456789"

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAPIToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// runsOf returns a sync's runs, oldest first.
func runsOf(t *testing.T, st store.Store, syncID string) []store.Run {
	t.Helper()
	runs, err := st.ListRuns(t.Context(), syncID, 0)
	if err != nil {
		t.Fatal(err)
	}
	for i, j := 0, len(runs)-1; i < j; i, j = i+1, j-1 {
		runs[i], runs[j] = runs[j], runs[i]
	}
	return runs
}

func lines(s, sub string) int {
	n := 0
	sc := bufio.NewScanner(strings.NewReader(s))
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			n++
		}
	}
	return n
}

// TestServeAndWorkerShareTheQueue: embedded serve runs two scheduled syncs,
// a worker process on the same SQLite file takes jobs too (one machine,
// several processes), every record arrives once; the HTTP endpoints answer;
// SIGTERM stops both cleanly.
func TestServeAndWorkerShareTheQueue(t *testing.T) {
	t.Parallel()
	e := setupEnv(t, envParams{syncs: 2, records: 1500, pageSize: 100, schedule: "@every 2s", latency: 100 * time.Millisecond})
	w := e.start("worker", "worker", "--workers", "2")
	started(t, w)
	s := e.start("serve", "serve", "--workers", "1", "--listen", "127.0.0.1:0")
	addr := started(t, s)
	if addr == "" {
		t.Fatalf("no address in serve's start line:\n%s", s.Out.String())
	}
	if !strings.Contains(s.Out.String(), "scheduler (2 of 2 syncs on a schedule) and 1 workers") {
		t.Fatalf("start line:\n%s", s.Out.String())
	}

	waitFor(t, 40*time.Second, "every record delivered", func() bool { return e.fake.Stats().Contacts >= int64(e.total) })
	st := e.store()
	waitFor(t, 10*time.Second, "both syncs' first runs to succeed", func() bool {
		for _, id := range []string{"s0", "s1"} {
			runs := runsOf(t, st, id)
			if len(runs) == 0 || runs[0].State != store.RunSucceeded {
				return false
			}
		}
		return true
	})
	if n := lines(w.Out.String(), "run started"); n == 0 {
		t.Fatalf("the worker process ran nothing; serve ran %d runs", lines(s.Out.String(), "run started"))
	}

	if code, body := get(t, "http://"+addr+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, "http://"+addr+"/readyz"); code != 200 {
		t.Fatalf("/readyz: %d %q", code, body)
	}
	for _, path := range []string{"/metrics", "/", "/api/v1/syncs", "/riverui/"} {
		noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
		resp, err := noFollow.Get("http://" + addr + path) // no token, no session
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			t.Fatalf("%s served without authentication", path)
		}
	}
	if code, body := get(t, "http://"+addr+"/api/v1/syncs"); code != 200 || !strings.Contains(body, `"s0"`) {
		t.Fatalf("/api/v1/syncs with a token: %d %s", code, body)
	}
	_, metrics := get(t, "http://"+addr+"/metrics")
	for _, want := range []string{`oncesync_jobs_enqueued_total{reason="schedule"}`, `oncesync_runs_total{outcome="`, "go_goroutines"} {
		if !strings.Contains(metrics, want) {
			t.Fatalf("/metrics lacks %s:\n%s", want, metrics)
		}
	}

	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	_ = w.Cmd.Process.Signal(syscall.SIGTERM)
	if code := s.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	if code := w.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("worker exit %d", code)
	}
	stats := e.checkDelivered(t)
	t.Logf("runs by serve %d, by worker %d; %d requests, 0 duplicates",
		lines(s.Out.String(), "run started"), lines(w.Out.String(), "run started"), stats.Requests)
	e.checkNoSecrets(t)
}

// TestSIGTERMServeHandsTheRunToAWorker: SIGTERM to a busy serve drains its
// run (interrupted) and exits well within 25 s; a worker process resumes the
// run within 5 s; every record once.
func TestSIGTERMServeHandsTheRunToAWorker(t *testing.T) {
	t.Parallel()
	e := setupEnv(t, envParams{syncs: 1, records: 5000, pageSize: 100, schedule: "@every 2s", latency: 100 * time.Millisecond})
	s := e.start("serve", "serve", "--workers", "1", "--listen", "127.0.0.1:0")
	started(t, s)
	waitFor(t, 30*time.Second, "serve's run to make progress", func() bool { return e.fake.Stats().Contacts >= 500 })
	w := e.start("worker", "worker")
	started(t, w)

	sent := time.Now()
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	if code := s.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	took := s.Exited.Sub(sent)
	if took > 25*time.Second {
		t.Fatalf("serve took %s to exit", took)
	}
	if e.fake.Stats().Contacts >= int64(e.total) {
		t.Fatal("the run finished before SIGTERM; the test proves nothing")
	}
	st := e.store()
	var resumed store.Run
	waitFor(t, 10*time.Second, "the worker to resume the run", func() bool {
		runs := runsOf(t, st, "s0")
		if len(runs) < 2 {
			return false
		}
		resumed = runs[1]
		return true
	})
	first := runsOf(t, st, "s0")[0]
	if first.State != store.RunInterrupted {
		t.Fatalf("serve's run is %s, want interrupted", first.State)
	}
	latency := resumed.StartedAt.Sub(s.Exited)
	if latency > 5*time.Second {
		t.Fatalf("the run was resumed %s after serve exited (want <= 5 s)", latency)
	}
	waitFor(t, 40*time.Second, "every record delivered", func() bool { return e.fake.Stats().Contacts >= int64(e.total) })
	waitFor(t, 10*time.Second, "the resumed run to succeed", func() bool {
		r, err := st.GetRun(t.Context(), resumed.ID)
		return err == nil && r.State == store.RunSucceeded
	})
	if lines(w.Out.String(), "run started") == 0 {
		t.Fatal("the worker did not run it")
	}
	_ = w.Cmd.Process.Signal(syscall.SIGTERM)
	w.Wait(t, 30*time.Second)
	e.checkDelivered(t)
	t.Logf("SIGTERM to exit %s; resumed by the worker %s after serve exited; run %d interrupted at %d pages, run %d resumed",
		took.Round(time.Millisecond), latency.Round(time.Millisecond), first.ID, first.Pages, resumed.ID)
}

// TestSIGKILLRecoveredByLeaseExpiry: the serve running a run (and leading)
// is SIGKILLed; the other serve takes the lead, lease-expiry recovery finds
// the dead run, hands its job back and resumes it; every record once.
func TestSIGKILLRecoveredByLeaseExpiry(t *testing.T) {
	t.Parallel()
	e := setupEnv(t, envParams{syncs: 1, records: 5000, pageSize: 100, schedule: "@every 2s",
		settings: "{lease_ttl: 2s, lease_renew: 500ms}", latency: 100 * time.Millisecond})
	victim := e.start("serve-1", "serve", "--workers", "1", "--listen", "127.0.0.1:0")
	started(t, victim)
	waitFor(t, 30*time.Second, "the run to make progress", func() bool { return e.fake.Stats().Contacts >= 500 })
	st := e.store()
	l, err := st.LeaseGet(t.Context(), "s0")
	if err != nil || !strings.Contains(l.Holder, fmt.Sprintf("pid=%d", victim.Cmd.Process.Pid)) {
		t.Fatalf("lease %+v (%v): want it held by serve-1", l, err)
	}
	survivor := e.start("serve-2", "serve", "--workers", "1", "--listen", "127.0.0.1:0")
	started(t, survivor)

	killed := time.Now()
	_ = victim.Cmd.Process.Signal(syscall.SIGKILL)
	victim.Wait(t, 10*time.Second)
	if e.fake.Stats().Contacts >= int64(e.total) {
		t.Fatal("the run finished before the kill; the test proves nothing")
	}
	var resumed store.Run
	waitFor(t, 40*time.Second, "the run to be resumed", func() bool {
		runs := runsOf(t, st, "s0")
		if len(runs) < 2 {
			return false
		}
		resumed = runs[1]
		return true
	})
	latency := resumed.StartedAt.Sub(killed)
	waitFor(t, 40*time.Second, "every record delivered", func() bool { return e.fake.Stats().Contacts >= int64(e.total) })
	dead := runsOf(t, st, "s0")[0]
	if dead.State != store.RunInterrupted || !strings.Contains(dead.FailureDetail, "lease-expiry recovery") {
		t.Fatalf("the killed run is %s (%q), want interrupted by recovery", dead.State, dead.FailureDetail)
	}
	if !strings.Contains(survivor.Out.String(), "resuming the sync") {
		t.Fatalf("serve-2 did not recover the run")
	}
	_ = survivor.Cmd.Process.Signal(syscall.SIGTERM)
	survivor.Wait(t, 30*time.Second)
	e.checkDelivered(t)
	t.Logf("SIGKILL of the leader to resumed run: %s (lease TTL 2 s, leader failover, 10 s sweep)", latency.Round(time.Millisecond))
}

// TestSIGKILLForegroundRunRecovered: a foreground `oncesync run` is
// SIGKILLed while serve leads: recovery queues a run within lease TTL + one
// sweep, and serve finishes the sync; every record once.
func TestSIGKILLForegroundRunRecovered(t *testing.T) {
	t.Parallel()
	e := setupEnv(t, envParams{syncs: 1, records: 5000, pageSize: 100, schedule: "0 0 1 1 *",
		settings: "{lease_ttl: 2s, lease_renew: 500ms}", latency: 100 * time.Millisecond})
	s := e.start("serve", "serve", "--workers", "1", "--listen", "127.0.0.1:0")
	started(t, s)
	run := e.start("run", "run", "s0")
	waitFor(t, 30*time.Second, "the run to make progress", func() bool { return e.fake.Stats().Contacts >= 500 })
	killed := time.Now()
	_ = run.Cmd.Process.Signal(syscall.SIGKILL)
	run.Wait(t, 10*time.Second)
	st := e.store()
	var resumed store.Run
	waitFor(t, 30*time.Second, "the run to be resumed", func() bool {
		runs := runsOf(t, st, "s0")
		if len(runs) < 2 {
			return false
		}
		resumed = runs[1]
		return true
	})
	latency := resumed.StartedAt.Sub(killed)
	if latency > 2*time.Second+10*time.Second+3*time.Second {
		t.Fatalf("resumed %s after the kill: want within lease TTL + one sweep", latency)
	}
	waitFor(t, 40*time.Second, "every record delivered", func() bool { return e.fake.Stats().Contacts >= int64(e.total) })
	if dead := runsOf(t, st, "s0")[0]; dead.State != store.RunInterrupted {
		t.Fatalf("the killed run is %s, want interrupted", dead.State)
	}
	_ = s.Cmd.Process.Signal(syscall.SIGTERM)
	s.Wait(t, 30*time.Second)
	e.checkDelivered(t)
	t.Logf("SIGKILL of a foreground run to resumed run: %s (lease TTL 2 s, 10 s sweep)", latency.Round(time.Millisecond))
}
