package e2e

import (
	"bufio"
	"bytes"
	"encoding/csv"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakeklaviyo"
	"github.com/oncesync/oncesync/internal/testenv"
)

const klaviyoKey = "pk_e2e_secret_0123456789abcdef"

// klaviyoBundle is one sync against one fake Klaviyo (in process, every
// request checked against Klaviyo's spec, rate limits enforced).
type klaviyoBundle struct {
	t      *testing.T
	dir    string
	config string
	fake   *fakeklaviyo.Server
	emails []string

	mu        sync.Mutex
	output    bytes.Buffer
	intercept func(w http.ResponseWriter, r *http.Request) bool
}

type klaviyoParams struct {
	records, pageSize int
	mode, writeMode   string
	listID            string
	rateLimit         int
	opts              fakeklaviyo.Options
	extra             string // more destination keys, e.g. ", timeout: 1s"
	settings          string // YAML flow map; default {lease_ttl: 30s, lease_renew: 10s}
}

func setupKlaviyo(t *testing.T, p klaviyoParams) *klaviyoBundle {
	t.Helper()
	kb := &klaviyoBundle{t: t, dir: t.TempDir()}
	p.opts.APIKey, p.opts.Validate, p.opts.EnforceRateLimits = klaviyoKey, true, true
	if p.opts.JobDelay == 0 {
		p.opts.JobDelay = 30 * time.Millisecond
	}
	kb.fake = fakeklaviyo.New(p.opts)
	srv := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		kb.mu.Lock()
		ic := kb.intercept
		kb.mu.Unlock()
		if ic != nil && ic(w, r) {
			return
		}
		kb.fake.ServeHTTP(w, r)
	}))
	f, err := os.Create(filepath.Join(kb.dir, "people.csv"))
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"id", "email", "first_name", "last_name"})
	for i := 1; i <= p.records; i++ {
		email := fmt.Sprintf("person%06d@example.com", i)
		kb.emails = append(kb.emails, email)
		_ = w.Write([]string{strconv.Itoa(i), email, "First" + strconv.Itoa(i), "Last"})
	}
	w.Flush()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	extra := ""
	if p.writeMode != "" {
		extra += ", write_mode: " + p.writeMode
	}
	if p.listID != "" {
		extra += ", list_id: " + p.listID
	}
	if p.rateLimit > 0 {
		extra += ", rate_limit: " + strconv.Itoa(p.rateLimit)
	}
	extra += p.extra
	if p.settings == "" {
		p.settings = "{lease_ttl: 30s, lease_renew: 10s}"
	}
	kb.config = filepath.Join(kb.dir, "oncesync.yaml")
	cfg := fmt.Sprintf(`store: sqlite://./oncesync.db
settings: %s
syncs:
  - id: people
    source: {type: csv, path: people.csv, page_size: %d, identity: id}
    destination: {type: klaviyo, base_url: %s, api_key: ${KLAVIYO_KEY}, mode: %s%s}
    mapping: {email: email, attributes: {first_name: first_name, last_name: last_name, properties.customer_id: id}}
`, p.settings, p.pageSize, srv.URL, p.mode, extra)
	if err := os.WriteFile(kb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return kb
}

func (kb *klaviyoBundle) run() *proc {
	kb.t.Helper()
	return testenv.Start(kb.t, testenv.StartParams{
		Binary: binary, Args: []string{"run", "--config", kb.config, "people", "--log-level", "debug"}, Dir: kb.dir,
		Env: []string{"KLAVIYO_KEY=" + klaviyoKey}, Name: "oncesync run",
		OnExit: func(p *testenv.Proc) {
			kb.mu.Lock()
			kb.output.Write(p.Out.Bytes())
			kb.mu.Unlock()
		},
	})
}

// checkEveryProfileOnce asserts every source row is at the fake exactly
// once, with the source's values, written once.
func (kb *klaviyoBundle) checkEveryProfileOnce(t *testing.T) fakeklaviyo.Stats {
	t.Helper()
	st := kb.fake.Stats()
	if st.Profiles != int64(len(kb.emails)) || st.DuplicateWrites != 0 || st.ProfilesWritten != int64(len(kb.emails)) || st.Invalid != 0 {
		t.Fatalf("want %d profiles written once; got profiles %d, written %d, duplicates %d (%v), off-spec requests %d",
			len(kb.emails), st.Profiles, st.ProfilesWritten, st.DuplicateWrites, st.DuplicateExample, st.Invalid)
	}
	for i, e := range kb.emails {
		p, ok := kb.fake.Profile(e)
		n := strconv.Itoa(i + 1)
		if !ok || p.Attributes["first_name"] != "First"+n || p.Attributes["last_name"] != "Last" || p.Properties["customer_id"] != n {
			t.Fatalf("profile %d: %+v, want the source's values", i+1, p)
		}
	}
	kb.mu.Lock()
	out := kb.output.String()
	kb.mu.Unlock()
	if strings.Contains(out, klaviyoKey) || strings.Contains(out, "@example.com") {
		t.Error("the API key or an e-mail address appears in the output")
	}
	return st
}

// TestKlaviyoKillNineThreeTimes kills the worker at each kill point, on the
// bulk path (asynchronous import jobs) and on the single path (profile
// import): Klaviyo applied a write and the worker dies before hearing
// back; the worker dies while its request is on the wire (not applied);
// anywhere once the run made progress. A last run finishes: every profile
// once, with the source's values, no duplicate write.
func TestKlaviyoKillNineThreeTimes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode, listID      string
		records, pageSize int
		every             int // writes between kill points
		rateLimit         int
	}{
		{"bulk", "L1st01", 3000, 200, 4, 0},
		{"single", "", 600, 50, 120, 1000},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			var (
				mu     sync.Mutex
				victim *proc
				writes int
				armed  = true
			)
			kill := func() {
				if victim != nil {
					_ = victim.Cmd.Process.Signal(syscall.SIGKILL)
					victim = nil
				}
			}
			kb := setupKlaviyo(t, klaviyoParams{records: tc.records, pageSize: tc.pageSize, mode: tc.mode, listID: tc.listID,
				rateLimit: tc.rateLimit, opts: fakeklaviyo.Options{
					// Point 1: Klaviyo applied the write (a job created, a
					// profile imported); the worker dies before the answer.
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
				p := kb.run()
				mu.Lock()
				victim = p
				mu.Unlock()
				return p
			}
			if code := run().Wait(t, 2*time.Minute); code != -int(syscall.SIGKILL) {
				t.Fatalf("run 1 should have been killed, exit %d", code)
			}
			// Point 2: the worker dies while its write is on the wire, before
			// Klaviyo applied it.
			seen := 0
			kb.mu.Lock()
			kb.intercept = func(w http.ResponseWriter, r *http.Request) bool {
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
			kb.mu.Unlock()
			if code := run().Wait(t, 2*time.Minute); code != -int(syscall.SIGKILL) {
				t.Fatalf("run 2 should have been killed, exit %d", code)
			}
			kb.mu.Lock()
			kb.intercept = nil
			kb.mu.Unlock()
			// Point 3: anywhere, once the run has made progress.
			before := kb.fake.Stats().ProfilesWritten
			p3 := run()
			waitFor(t, 2*time.Minute, "run 3 to make progress", func() bool {
				return kb.fake.Stats().ProfilesWritten >= before+int64(tc.pageSize)
			})
			mu.Lock()
			kill()
			mu.Unlock()
			if code := p3.Wait(t, time.Minute); code != -int(syscall.SIGKILL) {
				t.Fatalf("run 3 should have been killed, exit %d\n%s", code, p3.Out)
			}
			if kb.fake.Stats().Profiles >= int64(tc.records) {
				t.Fatal("run 3 finished before the kill; the test proves nothing")
			}
			p4 := run()
			if code := p4.Wait(t, 4*time.Minute); code != 0 {
				t.Fatalf("final run exit %d:\n%s", code, p4.Out)
			}
			st := kb.checkEveryProfileOnce(t)
			t.Logf("%s: %d profiles, %d writes, %d duplicates, %d requests, %d jobs, %d rate limited; final run: %s",
				tc.mode, st.Profiles, st.ProfilesWritten, st.DuplicateWrites, st.Requests, st.JobsCreated, st.RateLimited, p4.LastLine())
		})
	}
}

// TestKlaviyoWriteModeUpdate: only the profiles Klaviyo has are updated;
// the others are skipped, never created, and not sent again.
func TestKlaviyoWriteModeUpdate(t *testing.T) {
	t.Parallel()
	kb := setupKlaviyo(t, klaviyoParams{records: 40, pageSize: 10, mode: "bulk", writeMode: "update"})
	for i := 0; i < 40; i += 2 {
		kb.fake.AddProfile(kb.emails[i], map[string]any{"first_name": "Old", "title": "Kept"})
	}
	base := kb.fake.Stats()
	p := kb.run()
	if code := p.Wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.Out)
	}
	st := kb.fake.Stats()
	if st.Profiles != 20 || st.ProfilesWritten-base.ProfilesWritten != 20 || st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("stats %+v: want the 20 existing profiles updated, none created", st)
	}
	for i, e := range kb.emails {
		pr, ok := kb.fake.Profile(e)
		if i%2 == 1 {
			if ok {
				t.Fatalf("profile %d was created by write_mode update", i+1)
			}
			continue
		}
		if pr.Attributes["first_name"] != "First"+strconv.Itoa(i+1) || pr.Attributes["title"] != "Kept" {
			t.Fatalf("profile %d: %v", i+1, pr.Attributes)
		}
	}
	if st.ByRoute["POST /api/profile-bulk-import-jobs"] != 0 {
		t.Error("update sent a bulk import job, which would create profiles")
	}
	// Unchanged rows are not sent again, skipped ones included.
	again := kb.run()
	if code := again.Wait(t, time.Minute); code != 0 {
		t.Fatalf("second run exit %d:\n%s", code, again.Out)
	}
	if st2 := kb.fake.Stats(); st2.ProfilesWritten != st.ProfilesWritten || st2.ByRoute["GET /api/profiles"] != st.ByRoute["GET /api/profiles"] {
		t.Errorf("the second run wrote or looked up again: %+v", st2.ByRoute)
	}
}

// TestKlaviyoWriteModeCreate: new profiles are created; existing ones are
// left as they are.
func TestKlaviyoWriteModeCreate(t *testing.T) {
	t.Parallel()
	kb := setupKlaviyo(t, klaviyoParams{records: 30, pageSize: 10, mode: "single", writeMode: "create"})
	for i := 0; i < 30; i += 3 {
		kb.fake.AddProfile(kb.emails[i], map[string]any{"first_name": "Theirs"})
	}
	base := kb.fake.Stats()
	p := kb.run()
	if code := p.Wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.Out)
	}
	st := kb.fake.Stats()
	if st.Profiles != 30 || st.ProfilesWritten-base.ProfilesWritten != 20 || st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("stats %+v: want 20 profiles created, 10 left alone", st)
	}
	for i, e := range kb.emails {
		pr, _ := kb.fake.Profile(e)
		want := "First" + strconv.Itoa(i+1)
		if i%3 == 0 {
			want = "Theirs"
		}
		if pr.Attributes["first_name"] != want {
			t.Fatalf("profile %d: first_name %v, want %s", i+1, pr.Attributes["first_name"], want)
		}
	}
}

// TestFakeKlaviyoCommand: `oncesync fake-klaviyo` serves the fake, checks
// requests against Klaviyo's spec and counts duplicate writes.
func TestFakeKlaviyoCommand(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "fake-klaviyo", "--listen", "127.0.0.1:0", "--api-key", "k")
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
		if strings.HasPrefix(f, "http://") && !strings.Contains(f, "_stats") {
			base = strings.TrimSuffix(f, ")")
		}
	}
	if base == "" {
		t.Fatalf("no address in %q", line)
	}
	post := func(revision string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/api/profile-import",
			strings.NewReader(`{"data":{"type":"profile","attributes":{"email":"a@example.org","first_name":"A"}}}`))
		req.Header.Set("Authorization", "Klaviyo-API-Key k")
		req.Header.Set("Content-Type", "application/vnd.api+json")
		if revision != "" {
			req.Header.Set("revision", revision)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := []int{post(fakeklaviyo.SpecRevision), post(fakeklaviyo.SpecRevision), post("")}; got[0] != 201 || got[1] != 200 || got[2] != 400 {
		t.Fatalf("statuses %v, want 201, 200 and 400 without the revision header", got)
	}
	resp, err := http.Get(base + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	for _, want := range []string{`"requests":3`, `"profiles_written":2`, `"duplicate_writes":1`, `"profiles":1`} {
		if !strings.Contains(buf.String(), want) {
			t.Fatalf("/_stats %s lacks %s", buf.String(), want)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("fake-klaviyo did not stop cleanly on SIGTERM: %v", err)
	}
}

// TestKlaviyoCheckCommand: `oncesync check` on a Klaviyo sync reads one
// profile (the key and the revision), writes nothing, and names a refused
// key without showing it.
func TestKlaviyoCheckCommand(t *testing.T) {
	t.Parallel()
	kb := setupKlaviyo(t, klaviyoParams{records: 5, pageSize: 5, mode: "bulk", listID: "L1"})
	check := func(key string) (string, int) {
		cmd := exec.Command(binary, "check", "--config", kb.config, "people")
		cmd.Dir = kb.dir
		cmd.Env = append(os.Environ(), "KLAVIYO_KEY="+key)
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, code := check(klaviyoKey)
	if code != 0 || !strings.Contains(out, "revision 2026-07-15 are accepted") || !strings.Contains(out, "nothing was written") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if st := kb.fake.Stats(); st.ProfilesWritten != 0 || st.ByRoute["GET /api/profiles"] != 1 || st.Invalid != 0 {
		t.Fatalf("fake after check: %+v", st)
	}
	out, code = check("pk_wrong_key_value")
	if code != 1 || !strings.Contains(out, "failed: destination_auth:") || strings.Contains(out, "pk_wrong_key_value") {
		t.Fatalf("bad key: exit %d:\n%s", code, out)
	}
}

// writeRows rewrites kb's source with the rows of ids.
func (kb *klaviyoBundle) writeRows(t *testing.T, ids []int) {
	t.Helper()
	writeRows(t, filepath.Join(kb.dir, "people.csv"), ids, func(id int) string { return kb.emails[id-1] })
}

// TestKlaviyoMirror: rows that disappear are taken out of the sync's list
// (the profiles stay, nobody is unsubscribed globally), a mass removal is
// refused, and nothing is written twice.
func TestKlaviyoMirror(t *testing.T) {
	t.Parallel()
	// Few rows: Klaviyo reads a profile's lists at 1/s (steady 60/m), one
	// read per removal, and the fake keeps to it.
	kb := setupKlaviyo(t, klaviyoParams{records: 30, pageSize: 10, mode: "bulk", writeMode: "mirror", listID: "Mir0r1"})
	all := make([]int, 30)
	for i := range all {
		all[i] = i + 1
	}
	inList := func(id int) bool {
		p, ok := kb.fake.Profile(kb.emails[id-1])
		return ok && slices.Contains(p.Lists, "Mir0r1")
	}
	runOK := func(args ...string) string {
		p := testenv.Start(t, testenv.StartParams{Binary: binary, Args: append([]string{"run", "--config", kb.config, "people"}, args...),
			Dir: kb.dir, Env: []string{"KLAVIYO_KEY=" + klaviyoKey}, Name: "oncesync run"})
		if code := p.Wait(t, 2*time.Minute); code != 0 {
			t.Fatalf("run exited %d:\n%s", code, p.Out)
		}
		return p.Out.String()
	}
	runOK()
	for _, id := range all {
		if !inList(id) {
			t.Fatalf("profile %d is not in the list after the first run", id)
		}
	}
	kb.writeRows(t, all[:27])
	if out := runOK(); !strings.Contains(out, "removed 3 record(s)") {
		t.Errorf("the summary does not say what was removed:\n%s", out)
	}
	for _, id := range all {
		if inList(id) != (id <= 27) {
			t.Fatalf("after removing rows 28-30, profile %d in the list: %v", id, inList(id))
		}
		if _, ok := kb.fake.Profile(kb.emails[id-1]); !ok {
			t.Fatalf("profile %d was deleted", id)
		}
	}
	kb.writeRows(t, all[:12])
	p := testenv.Start(t, testenv.StartParams{Binary: binary, Args: []string{"run", "--config", kb.config, "people"},
		Dir: kb.dir, Env: []string{"KLAVIYO_KEY=" + klaviyoKey}, Name: "oncesync run"})
	if code := p.Wait(t, 2*time.Minute); code != 1 || !strings.Contains(p.Out.String(), "failed: mirror_removals_refused") {
		t.Fatalf("mass removal: exit %d, want 1 with mirror_removals_refused:\n%s", code, p.Out)
	}
	if !inList(13) || !inList(27) {
		t.Fatal("a refused mirror run removed profiles")
	}
	// 5 of 27 is more than 10% too: the flag lets it through.
	kb.writeRows(t, all[:22])
	if out := runOK("--allow-removals"); !strings.Contains(out, "removed 5 record(s)") {
		t.Errorf("the summary does not say what was removed:\n%s", out)
	}
	for _, id := range all {
		if inList(id) != (id <= 22) {
			t.Fatalf("after --allow-removals, profile %d in the list: %v", id, inList(id))
		}
	}
	st := kb.fake.Stats()
	if st.DuplicateWrites != 0 || st.GlobalUnsubs != 0 {
		t.Fatalf("duplicate writes %d, global unsubscribes %d", st.DuplicateWrites, st.GlobalUnsubs)
	}
	if errs := kb.fake.SpecErrors(); len(errs) > 0 {
		t.Fatalf("requests outside Klaviyo's spec: %v", errs[0])
	}
}
