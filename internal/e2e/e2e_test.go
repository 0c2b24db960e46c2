package e2e

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/testenv"
	_ "modernc.org/sqlite"
)

const apiKey = "xkeysib-e2e-secret-0123456789"

var binary string

func TestMain(m *testing.M) { testenv.Main(m, &binary) }

// testBundle is one sync against one fake Brevo.
type testBundle struct {
	t      *testing.T
	dir    string
	config string
	fake   *fakebrevo.Server
	srv    *httptest.Server
	emails []string

	mu     sync.Mutex
	output bytes.Buffer // everything every run printed
	// intercept, when set, may answer a request itself (return true) instead of the fake.
	intercept func(w http.ResponseWriter, r *http.Request) bool
}

type setupParams struct {
	records  int
	pageSize int
	mode     string
	opts     fakebrevo.Options
	settings string // YAML flow map; default {lease_ttl: 30s, lease_renew: 10s}
	dest     string // more destination keys, e.g. ", timeout: 1s"
}

func setup(t *testing.T, p setupParams) *testBundle {
	t.Helper()
	tb := &testBundle{t: t, dir: t.TempDir()}
	p.opts.APIKey = apiKey
	p.opts.Validate = true // every request the product sends must conform to Brevo's spec
	tb.fake = fakebrevo.New(p.opts)
	tb.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tb.mu.Lock()
		ic := tb.intercept
		tb.mu.Unlock()
		if ic != nil && ic(w, r) {
			return
		}
		tb.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(tb.srv.Close)

	csvPath := filepath.Join(tb.dir, "contacts.csv")
	f, err := os.Create(csvPath)
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"id", "email", "first_name", "last_name"})
	for i := 1; i <= p.records; i++ {
		email := fmt.Sprintf("person%06d@example.com", i)
		tb.emails = append(tb.emails, email)
		_ = w.Write([]string{strconv.Itoa(i), email, "First" + strconv.Itoa(i), "Last"})
	}
	w.Flush()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if p.settings == "" {
		p.settings = "{lease_ttl: 30s, lease_renew: 10s}"
	}
	tb.config = filepath.Join(tb.dir, "oncesync.yaml")
	cfg := fmt.Sprintf(`store: sqlite://./oncesync.db
settings: %s
syncs:
  - id: contacts
    workspace: acme
    schedule: "*/15 * * * *"
    source: {type: csv, path: contacts.csv, page_size: %d, identity: id}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: %s, list_ids: [2], rate_limit: 1000%s}
    mapping: {email: email, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}
`, p.settings, p.pageSize, tb.srv.URL, p.mode, p.dest)
	if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return tb
}

// proc is one running oncesync process.
type proc = testenv.Proc

func (tb *testBundle) start(args ...string) *proc {
	tb.t.Helper()
	return testenv.Start(tb.t, testenv.StartParams{
		Binary: binary, Args: args, Dir: tb.dir, Env: []string{"BREVO_API_KEY=" + apiKey}, Name: "oncesync " + args[0],
		OnExit: func(p *testenv.Proc) {
			tb.mu.Lock()
			tb.output.Write(p.Out.Bytes())
			tb.mu.Unlock()
		},
	})
}

func (tb *testBundle) startRun() *proc {
	return tb.start("run", "--config", tb.config, "contacts", "--log-level", "debug")
}

func newServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func (tb *testBundle) stats() fakebrevo.Stats { return tb.fake.Stats() }

var waitFor = testenv.WaitFor

// checkDelivered asserts every contact is at the fake exactly once.
func (tb *testBundle) checkDelivered(t *testing.T) fakebrevo.Stats {
	t.Helper()
	st := tb.stats()
	if st.Contacts != int64(len(tb.emails)) || st.DuplicateWrites != 0 || st.ContactsWritten != int64(len(tb.emails)) {
		t.Fatalf("want %d contacts written once, 0 duplicates; got contacts %d, written %d, duplicates %d",
			len(tb.emails), st.Contacts, st.ContactsWritten, st.DuplicateWrites)
	}
	if st.Invalid != 0 {
		t.Fatalf("%d requests did not conform to Brevo's spec", st.Invalid)
	}
	return st
}

// checkNoSecrets asserts that no e-mail address and no API key appear in any
// output or in the store's files (docs/guide.md#what-a-run-does; acceptance 7).
func (tb *testBundle) checkNoSecrets(t *testing.T) {
	t.Helper()
	tb.mu.Lock()
	out := tb.output.String()
	tb.mu.Unlock()
	if strings.Contains(out, apiKey) {
		t.Error("the API key appears in the output")
	}
	if strings.Contains(out, "@example.com") {
		t.Error("an e-mail address appears in the output")
	}
	matches, _ := filepath.Glob(filepath.Join(tb.dir, "oncesync.db*"))
	if len(matches) == 0 {
		t.Fatal("no store files found")
	}
	for _, m := range matches {
		b, err := os.ReadFile(m)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(apiKey)) {
			t.Errorf("the API key is stored in %s", filepath.Base(m))
		}
		if bytes.Contains(b, []byte("@example.com")) {
			t.Errorf("an e-mail address is stored in %s", filepath.Base(m))
		}
	}
}

// TestKillNineThreeTimes is acceptance 2: SIGKILL at three different points,
// then run to the end: every contact once, no duplicate write.
func TestKillNineThreeTimes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode     string
		records  int
		pageSize int
		every    int // writes between kill points
	}{
		{"bulk", 20000, 250, 8},
		{"single", 3000, 250, 500},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			var (
				mu     sync.Mutex
				victim *os.Process
				writes int
				armed  = true
			)
			kill := func() {
				if victim != nil {
					_ = victim.Signal(syscall.SIGKILL)
					victim = nil
				}
			}
			tb := setup(t, setupParams{records: tc.records, pageSize: tc.pageSize, mode: tc.mode, opts: fakebrevo.Options{
				// Point 1: Brevo applied the write, the worker dies before it hears back (in doubt).
				AfterWrite: func(r *http.Request) {
					mu.Lock()
					defer mu.Unlock()
					writes++
					if armed && writes == tc.every {
						armed = false
						kill()
					}
				},
			}})
			run := func() *proc {
				p := tb.startRun()
				mu.Lock()
				victim = p.Cmd.Process
				mu.Unlock()
				return p
			}

			if code := run().Wait(t, 2*time.Minute); code != -int(syscall.SIGKILL) {
				t.Fatalf("run 1 should have been killed, exit %d", code)
			}
			// Point 2: the worker dies while its request is on the wire, before Brevo applied it.
			var seen int
			tb.mu.Lock()
			tb.intercept = func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method != http.MethodPost {
					return false
				}
				mu.Lock()
				defer mu.Unlock()
				seen++
				if seen == tc.every/2+1 {
					kill()
					w.WriteHeader(http.StatusServiceUnavailable)
					return true
				}
				return false
			}
			tb.mu.Unlock()
			if code := run().Wait(t, 2*time.Minute); code != -int(syscall.SIGKILL) {
				t.Fatalf("run 2 should have been killed, exit %d", code)
			}
			tb.mu.Lock()
			tb.intercept = nil
			tb.mu.Unlock()
			// Point 3: anywhere, once the run has made progress.
			before := tb.stats().ContactsWritten
			p3 := run()
			// Run 3's own progress: an import of run 2's may still be
			// processed after its death, so the fake's count alone proves
			// nothing.
			checkpointed := regexp.MustCompile(`msg="page checkpointed" sync=contacts run=3 `)
			waitFor(t, time.Minute, "run 3 to make progress", func() bool {
				return tb.stats().ContactsWritten >= before+int64(tc.pageSize) && checkpointed.MatchString(p3.Out.String())
			})
			mu.Lock()
			kill()
			mu.Unlock()
			if code := p3.Wait(t, time.Minute); code != -int(syscall.SIGKILL) {
				t.Fatalf("run 3 should have been killed, exit %d\n%s", code, p3.Out)
			}
			if tb.stats().Contacts >= int64(tc.records) {
				t.Fatal("run 3 finished before the kill; the test proves nothing")
			}
			// Run to the end.
			p4 := run()
			if code := p4.Wait(t, 3*time.Minute); code != 0 {
				t.Fatalf("final run exit %d:\n%s", code, p4.Out)
			}
			// The recovery is told, not silent.
			if out := p4.Out.String(); !strings.Contains(out, "resuming the work of run 3, which stopped without finishing") {
				t.Fatalf("the final run does not say it resumed the killed run 3:\n%s", out)
			}
			st := tb.checkDelivered(t)
			t.Logf("%s: %d contacts, %d writes, %d duplicates, %d requests; final run: %s",
				tc.mode, st.Contacts, st.ContactsWritten, st.DuplicateWrites, st.Requests, p4.LastLine())
			tb.checkNoSecrets(t)
		})
	}
}

// TestSIGTERMDrains is acceptance 3.
func TestSIGTERMDrains(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 10000, pageSize: 250, mode: "bulk", opts: fakebrevo.Options{Latency: 100 * time.Millisecond}})
	p := tb.startRun()
	waitFor(t, time.Minute, "progress", func() bool { return tb.stats().Contacts >= 1000 })
	sent := time.Now()
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	code := p.Wait(t, 30*time.Second)
	took := time.Since(sent)
	if took > 25*time.Second {
		t.Fatalf("exit took %s", took)
	}
	if code != 1 || !strings.HasPrefix(p.LastLine(), "failed: interrupted: ") {
		t.Fatalf("exit %d, last line %q", code, p.LastLine())
	}
	if tb.stats().Contacts >= 10000 {
		t.Fatal("the run finished before SIGTERM; the test proves nothing")
	}
	t.Logf("SIGTERM to exit: %s", took.Round(time.Millisecond))
	// Released: an immediate rerun is not skipped.
	p2 := tb.startRun()
	if code := p2.Wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("rerun exit %d:\n%s", code, p2.Out)
	}
	tb.checkDelivered(t)
}

// TestTwoRunsAtOnce is acceptance 4.
func TestTwoRunsAtOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 3000, pageSize: 250, mode: "bulk", opts: fakebrevo.Options{Latency: 50 * time.Millisecond}})
	a := tb.startRun()
	waitFor(t, time.Minute, "the first run to write", func() bool { return tb.stats().Requests > 0 })
	b := tb.startRun()
	if code := b.Wait(t, 30*time.Second); code != 3 {
		t.Fatalf("second run: exit %d, want 3:\n%s", code, b.Out)
	}
	if got := b.LastLine(); got != "Another run of this sync was already in progress" {
		t.Fatalf("second run printed %q", got)
	}
	if code := a.Wait(t, time.Minute); code != 0 {
		t.Fatalf("first run exit %d:\n%s", code, a.Out)
	}
	tb.checkDelivered(t)
}

// TestCompletePagesSendNothing is acceptance 6.
func TestCompletePagesSendNothing(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"bulk", "single"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, setupParams{records: 1000, pageSize: 100, mode: mode})
			if code := tb.startRun().Wait(t, time.Minute); code != 0 {
				t.Fatal("first run failed")
			}
			before := tb.stats().Requests
			p := tb.startRun()
			if code := p.Wait(t, time.Minute); code != 0 {
				t.Fatalf("second run failed:\n%s", p.Out)
			}
			if d := tb.stats().Requests - before; d != 0 {
				t.Fatalf("a pass over complete pages sent %d requests", d)
			}
			if !strings.Contains(p.Out.String(), "replayed from ledger 1000") {
				t.Fatalf("summary lacks the replay count:\n%s", p.Out)
			}
			tb.checkDelivered(t)
		})
	}
}

// TestRejections is acceptance 8 (the run half; bad configs are below).
func TestRejections(t *testing.T) {
	t.Parallel()
	t.Run("one bad email among 500", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, setupParams{records: 500, pageSize: 500, mode: "bulk",
			opts: fakebrevo.Options{RefuseEmails: []string{"person000123@example.com"}}})
		p := tb.startRun()
		if code := p.Wait(t, time.Minute); code != 0 {
			t.Fatalf("exit %d:\n%s", code, p.Out)
		}
		if !strings.Contains(p.Out.String(), "written 499, replayed from ledger 0, rejected 1,") ||
			!strings.Contains(p.Out.String(), "1 record(s) rejected by the destination: `oncesync records --config "+tb.config+" contacts --rejected` names each") {
			t.Fatalf("summary:\n%s", p.Out)
		}
		if st := tb.stats(); st.Contacts != 499 || st.DuplicateWrites != 0 {
			t.Fatalf("stats %+v", st)
		}
		// The rejected record is listed by its identity (id 123) with the
		// destination's reason, as a table and as CSV read back.
		records := func(args ...string) *exec.Cmd {
			cmd := exec.Command(binary, append([]string{"records", "--config", tb.config, "contacts"}, args...)...)
			cmd.Env = append(os.Environ(), "BREVO_API_KEY="+apiKey)
			return cmd
		}
		out, err := records().CombinedOutput()
		if err != nil || !regexp.MustCompile(`(?m)^123\s+rejected\s+1\s`).Match(out) {
			t.Fatalf("records: %v\n%s", err, out)
		}
		out, err = records("--rejected", "--format", "csv").Output()
		if err != nil {
			t.Fatalf("records --format csv: %v", err)
		}
		rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
		if err != nil || len(rows) != 2 || rows[0][0] != "identity" || rows[1][0] != "123" || rows[1][1] != "rejected" || rows[1][2] == "" || rows[1][3] != "1" {
			t.Fatalf("records csv %q (%v)", rows, err)
		}
		// The stored reason names no contact: e-mails are redacted
		// (docs/guide.md#the-sync-pages-and-the-api).
		if strings.Contains(rows[1][2], "@") {
			t.Fatalf("the stored reason holds an e-mail address: %q", rows[1][2])
		}
		tb.checkNoSecrets(t)
	})
	t.Run("every record refused", func(t *testing.T) {
		t.Parallel()
		var all []string
		for i := 1; i <= 50; i++ {
			all = append(all, fmt.Sprintf("person%06d@example.com", i))
		}
		tb := setup(t, setupParams{records: 50, pageSize: 50, mode: "single", opts: fakebrevo.Options{RefuseEmails: all}})
		p := tb.startRun()
		if code := p.Wait(t, time.Minute); code != 1 {
			t.Fatalf("exit %d:\n%s", code, p.Out)
		}
		want := "failed: destination_rejected_records: The destination refused every record of a page, so the mapping is most likely wrong. Next: "
		if !strings.HasPrefix(p.LastLine(), want) || !strings.HasSuffix(p.LastLine(), "(owner: you)") {
			t.Fatalf("last line %q", p.LastLine())
		}
	})
	t.Run("bad api key fails at once", func(t *testing.T) {
		t.Parallel()
		tb := setup(t, setupParams{records: 50, pageSize: 50, mode: "bulk"})
		cmd := exec.Command(binary, "run", "--config", tb.config, "contacts")
		cmd.Dir = tb.dir
		cmd.Env = append(os.Environ(), "BREVO_API_KEY=wrong-key-"+apiKey[:4])
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 {
			t.Fatalf("exit %v:\n%s", err, out)
		}
		if !strings.Contains(string(out), "failed: destination_auth: ") || strings.Contains(string(out), "wrong-key") {
			t.Fatalf("output:\n%s", out)
		}
		if st := tb.stats(); st.ByStatus["401"] != 1 {
			t.Fatalf("a 401 must fail at once, without retry: %v %v", st.ByStatus, st.ByRoute)
		}
	})
}

// TestValidate: bad configs each produce a precise message (acceptance 8).
func TestValidate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown key", "syncs:\n  - id: a\n    source: {type: csv, path: a.csv, pagesize: 5}\n    destination: {type: webhook, url: http://127.0.0.1:1/x}\n",
			`bad.yaml:3: syncs[0].source.pagesize: unknown key "pagesize" (did you mean "page_size"?)`},
		{"unset secret", "syncs:\n  - id: a\n    source: {type: csv, path: a.csv}\n    destination: {type: brevo, api_key: ${NOT_SET_ANYWHERE_42}, list_ids: [2]}\n    mapping: {email: email}\n",
			"NOT_SET_ANYWHERE_42"},
		{"bad cron", "syncs:\n  - id: a\n    schedule: \"61 * * * *\"\n    source: {type: csv, path: a.csv}\n    destination: {type: webhook, url: http://127.0.0.1:1/x}\n",
			"bad.yaml:3: syncs[0].schedule:"},
		{"bad page size", "syncs:\n  - id: a\n    source: {type: csv, path: a.csv, page_size: 0}\n    destination: {type: webhook, url: http://127.0.0.1:1/x}\n",
			"bad.yaml:3: syncs[0].source.page_size:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sub := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "_"))
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(sub, "bad.yaml")
			if err := os.WriteFile(path, []byte(tc.yaml), 0o600); err != nil {
				t.Fatal(err)
			}
			cmd := exec.Command(binary, "validate", "--config", "bad.yaml")
			cmd.Dir = sub
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit %v, want 2:\n%s", err, out)
			}
			if !strings.Contains(string(out), tc.want) {
				t.Fatalf("output lacks %q:\n%s", tc.want, out)
			}
		})
	}
}

// TestFakeBrevoCommand: `oncesync fake-brevo` serves the API and /_stats.
func TestFakeBrevoCommand(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "fake-brevo", "--listen", "127.0.0.1:0", "--api-key", "k", "--validate")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	var base string
	for _, f := range strings.Fields(line) {
		if strings.HasPrefix(f, "http://") && strings.HasSuffix(f, "/v3") {
			base = f
		}
	}
	if base == "" {
		t.Fatalf("no address in %q", line)
	}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/contacts",
		strings.NewReader(`{"email":"a@example.org","attributes":{"FIRSTNAME":"A"},"updateEnabled":true}`))
	req.Header.Set("api-key", "k")
	req.Header.Set("content-type", "application/json")
	for i := 0; i < 2; i++ {
		resp, err := http.DefaultClient.Do(req.Clone(context.Background()))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		req.Body = http.NoBody
		req, _ = http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/contacts",
			strings.NewReader(`{"email":"a@example.org","attributes":{"FIRSTNAME":"A"},"updateEnabled":true}`))
		req.Header.Set("api-key", "k")
		req.Header.Set("content-type", "application/json")
	}
	resp, err := http.Get(strings.TrimSuffix(base, "/v3") + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	for _, want := range []string{`"requests":2`, `"contacts_written":2`, `"duplicate_writes":1`} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("/_stats %s lacks %s", buf.String(), want)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("fake-brevo did not stop cleanly on SIGTERM: %v", err)
	}
}

// TestStalledRunIsFenced is acceptance 5 on real processes: a run frozen with
// SIGSTOP past its lease TTL, another run takes over after expiry and
// finishes, then the frozen run is resumed with SIGCONT. It must stop with the
// lost-slot sentence without writing anything twice.
func TestStalledRunIsFenced(t *testing.T) {
	t.Parallel()
	checkpointed4 := regexp.MustCompile(`msg="page checkpointed".* page=4 `)
	claimed9 := regexp.MustCompile(`msg="page claimed".* page=9 `)
	tb := setup(t, setupParams{records: 6000, pageSize: 250, mode: "bulk",
		settings: "{lease_ttl: 2s, lease_renew: 500ms}",
		opts:     fakebrevo.Options{Latency: 50 * time.Millisecond}})
	// Freeze A once its 5th request is fully sent, while it waits for the
	// answer: not inside a store transaction (a process frozen inside a
	// SQLite write transaction holds the file's write lock) and not half-way
	// through sending a body (a zombie that finishes sending after it wakes
	// is the one gap no client-side check closes; see docs/RELIABILITY.md).
	// Page 4's marks and checkpoint are saved, page 6 is sent beside page 5
	// (two bulk imports in flight; its POST waits behind this one here) and
	// pages 7 to 9 are claimed while page 5 is out (the run's pipeline), so
	// the freeze also waits for A to log page 4's checkpoint and page 9's
	// claim. The poller's settling and the ledger's merges still write at
	// any time, so the freeze is retried until A holds no write lock.
	var (
		mu    sync.Mutex
		posts int
		a     *proc
	)
	frozen := make(chan struct{})
	tb.mu.Lock()
	tb.intercept = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodPost {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if posts++; posts == 5 {
			body, err := io.ReadAll(r.Body) // the whole request has left A
			if err != nil {
				t.Error(err)
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
			for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(2 * time.Millisecond) {
				if out := a.Out.String(); checkpointed4.MatchString(out) && claimed9.MatchString(out) {
					break
				}
				if time.Now().After(deadline) {
					t.Error("run A did not log page 4's checkpoint and page 9's claim within 30 s")
					break
				}
			}
			freezeOutsideWrite(t, a.Cmd.Process, filepath.Join(tb.dir, "oncesync.db"))
			close(frozen)
		}
		return false // the fake applies the write; A hears back only after SIGCONT
	}
	tb.mu.Unlock()
	mu.Lock()
	a = tb.startRun()
	mu.Unlock()
	select {
	case <-frozen:
	case <-time.After(time.Minute):
		t.Fatal("run A never reached its 5th request")
	}
	time.Sleep(2500 * time.Millisecond) // past A's 2 s lease
	b := tb.startRun()
	if code := b.Wait(t, time.Minute); code != 0 {
		_ = a.Cmd.Process.Signal(syscall.SIGCONT)
		t.Fatalf("run B exit %d:\n%s\nrun A:\n%s", code, b.Out, a.Out)
	}
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if code := a.Wait(t, 30*time.Second); code != 1 {
		t.Fatalf("run A exit %d:\n%s", code, a.Out)
	}
	want := "failed: lease_lost: The run lost its slot part-way through and stopped to avoid writing twice. Next: "
	if !strings.HasPrefix(a.LastLine(), want) || !strings.HasSuffix(a.LastLine(), "(owner: operator)") {
		t.Fatalf("run A last line %q", a.LastLine())
	}
	tb.checkDelivered(t)
}

// freezeOutsideWrite stops p (SIGSTOP) at a moment it holds no write
// transaction on the SQLite store at db: a process frozen inside one holds
// the file's write lock, and no other process could open the store. It
// resumes p and tries again for as long as the lock is held.
func freezeOutsideWrite(t *testing.T, p *os.Process, db string) {
	t.Helper()
	probe, err := sql.Open("sqlite", "file:"+db+"?_pragma=busy_timeout(0)")
	if err != nil {
		t.Fatal(err)
	}
	defer probe.Close()
	ctx := context.Background()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(3 * time.Millisecond) {
		if err := p.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		conn, err := probe.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = conn.ExecContext(ctx, "BEGIN IMMEDIATE")
		if err == nil {
			_, err = conn.ExecContext(ctx, "ROLLBACK")
			conn.Close()
			if err != nil {
				t.Fatal(err)
			}
			return
		}
		conn.Close()
		if err := p.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
	}
	t.Fatal("the run held the store's write lock at every try for 30 s")
}

// TestBreakerPausesAndResumeRearms: five failed runs in a row pause the sync
// with one critical alert; a paused sync does not run; resume re-arms.
func TestBreakerPausesAndResumeRearms(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		alerts []string
	)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b bytes.Buffer
		_, _ = b.ReadFrom(r.Body)
		mu.Lock()
		alerts = append(alerts, r.Header.Get("webhook-signature")+" "+b.String())
		mu.Unlock()
	}))
	defer hook.Close()
	tb := setup(t, setupParams{records: 20, pageSize: 10, mode: "bulk"})
	cfg, err := os.ReadFile(tb.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = append([]byte(fmt.Sprintf("alerts: {webhook: {url: %s, secret: s3cret}}\nweb: {url: https://oncesync.example.com/}\n", hook.URL)), cfg...)
	if err := os.WriteFile(tb.config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	runWithKey := func(key string) (int, string) {
		cmd := exec.Command(binary, "run", "--config", tb.config, "contacts")
		cmd.Dir = tb.dir
		cmd.Env = append(os.Environ(), "BREVO_API_KEY="+key)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	for i := 1; i <= 5; i++ {
		code, out := runWithKey("wrong-key")
		if code != 1 || !strings.Contains(out, "failed: destination_auth: ") {
			t.Fatalf("run %d: exit %d\n%s", i, code, out)
		}
		if tripped := strings.Contains(out, "circuit breaker"); tripped != (i == 5) {
			t.Fatalf("run %d: breaker message present=%v\n%s", i, tripped, out)
		}
	}
	mu.Lock()
	n := len(alerts)
	first := ""
	if n > 0 {
		first = alerts[0]
	}
	mu.Unlock()
	if n != 1 || !strings.HasPrefix(first, "v1,") || !strings.Contains(first, `"circuit_breaker_tripped"`) {
		t.Fatalf("want one signed breaker alert, got %d: %q", n, first)
	}
	// Every alert links to the sync's page (docs/guide.md#guardrails), at web.url.
	if !strings.Contains(first, `"link":"https://oncesync.example.com/syncs/contacts"`) {
		t.Errorf("the breaker alert has no link to the sync's page at web.url: %q", first)
	}
	code, out := runWithKey(apiKey)
	if code != 1 || !strings.Contains(out, "failed: circuit_breaker_tripped: ") {
		t.Fatalf("a paused sync ran: exit %d\n%s", code, out)
	}
	status := exec.Command(binary, "status", "--config", tb.config, "contacts")
	status.Env = append(os.Environ(), "BREVO_API_KEY="+apiKey)
	sout, _ := status.CombinedOutput()
	for _, want := range []string{"paused (breaker", "failure streak: 5", "destination_auth", "owner: you"} {
		if !strings.Contains(string(sout), want) {
			t.Fatalf("status lacks %q:\n%s", want, sout)
		}
	}
	resume := exec.Command(binary, "resume", "--config", tb.config, "contacts", "--by", "ada", "--reason", "fixed the API key")
	resume.Env = append(os.Environ(), "BREVO_API_KEY="+apiKey)
	if out, err := resume.CombinedOutput(); err != nil {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	// One more failure after resume does not re-trip on the old streak.
	if code, out := runWithKey("wrong-key"); code != 1 || strings.Contains(out, "circuit breaker") {
		t.Fatalf("re-tripped on the old streak: exit %d\n%s", code, out)
	}
	if code, out := runWithKey(apiKey); code != 0 {
		t.Fatalf("run after resume: exit %d\n%s", code, out)
	}
	tb.checkDelivered(t)
}

// TestUnreachableRedisSaysItOnce: a command that cannot reach Redis prints
// its failure code with the address it tried, and nothing of the Redis
// client's own retry lines (they were printed on stderr, one per dial).
func TestUnreachableRedisSaysItOnce(t *testing.T) {
	t.Parallel()
	addr, err := testenv.FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary, "checkpoint", "check", "--redis", "redis://"+addr+"/0", "--key", "k", "--token", "t", "--snapshot", "s")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("exit %v, want 1:\n%s%s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stdout.String(), "detail: reach Redis at "+addr) || !strings.Contains(stdout.String(), "failed: store_unavailable:") {
		t.Fatalf("stdout:\n%s", stdout.String())
	}
	if strings.Contains(stderr.String(), "pool.go") || strings.Contains(stderr.String(), "redis: ") {
		t.Fatalf("the Redis client's own lines reached stderr:\n%s", stderr.String())
	}
}
