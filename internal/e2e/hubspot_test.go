package e2e

import (
	"bufio"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakehubspot"
	"github.com/oncesync/oncesync/internal/testenv"
)

const hubspotToken = "pat-na1-e2e-s3cret-0123456789"

// hubspotBundle is one sync of a CSV file into an in-process fake HubSpot.
type hubspotBundle struct {
	t      *testing.T
	dir    string
	config string
	// configFmt is the config, with the settings map and what follows the
	// destination's fields left to writeConfig.
	configFmt string
	fake      *fakehubspot.Server
	n         int

	mu sync.Mutex
	// victim is the running oncesync process the hooks may kill.
	victim *os.Process
	// intercept, when set, may handle a request itself (return true); it
	// runs before the fake. after, when set, runs once the fake answered.
	intercept func(w http.ResponseWriter, r *http.Request) bool
	after     func(r *http.Request)
	// afterWrite, when set, runs once the fake applied a write, before it
	// answers.
	afterWrite func(r *http.Request)
	output     strings.Builder
}

func hubspotEmail(i int) string { return fmt.Sprintf("person%06d@example.com", i) }

func setupHubSpot(t *testing.T, records, pageSize int, mode, writeMode string, opts fakehubspot.Options) *hubspotBundle {
	t.Helper()
	hb := &hubspotBundle{t: t, dir: t.TempDir(), n: records}
	opts.Token = hubspotToken
	opts.RateLimit = -1
	opts.AfterWrite = func(r *http.Request) {
		hb.mu.Lock()
		aw := hb.afterWrite
		hb.mu.Unlock()
		if aw != nil {
			aw(r)
		}
	}
	hb.fake = fakehubspot.New(opts)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hb.mu.Lock()
		ic, after := hb.intercept, hb.after
		hb.mu.Unlock()
		if ic != nil && ic(w, r) {
			return
		}
		hb.fake.ServeHTTP(w, r)
		if after != nil {
			after(r)
		}
	}))
	t.Cleanup(srv.Close)
	f, err := os.Create(filepath.Join(hb.dir, "contacts.csv"))
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"id", "email", "first_name", "last_name"})
	for i := 1; i <= records; i++ {
		_ = w.Write([]string{strconv.Itoa(i), hubspotEmail(i), "First" + strconv.Itoa(i), "Last"})
	}
	w.Flush()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if writeMode == "" {
		writeMode = "upsert"
	}
	hb.config = filepath.Join(hb.dir, "oncesync.yaml")
	hb.configFmt = fmt.Sprintf(`store: sqlite://./oncesync.db
settings: %%s
syncs:
  - id: contacts
    workspace: acme
    source: {type: csv, path: contacts.csv, page_size: %d, identity: id}
    destination: {type: hubspot, base_url: %s, token: ${HUBSPOT_TOKEN}, mode: %s, write_mode: %s, rate_limit: 1000%%s}
    mapping: {email: email, attributes: {firstname: first_name, lastname: last_name}}
`, pageSize, srv.URL, mode, writeMode)
	hb.writeConfig(t, "{lease_ttl: 30s, lease_renew: 10s}", "")
	return hb
}

// writeConfig rewrites hb's config with settings (a YAML map) and dest
// appended to the destination's map (e.g. ", timeout: 1s").
func (hb *hubspotBundle) writeConfig(t *testing.T, settings, dest string) {
	t.Helper()
	if err := os.WriteFile(hb.config, []byte(fmt.Sprintf(hb.configFmt, settings, dest)), 0o600); err != nil {
		t.Fatal(err)
	}
}

func (hb *hubspotBundle) run() *proc {
	hb.t.Helper()
	p := testenv.Start(hb.t, testenv.StartParams{
		Binary: binary, Args: []string{"run", "--config", hb.config, "contacts", "--log-level", "debug"}, Dir: hb.dir,
		Env: []string{"HUBSPOT_TOKEN=" + hubspotToken}, Name: "oncesync run",
		OnExit: func(p *testenv.Proc) {
			hb.mu.Lock()
			hb.output.Write(p.Out.Bytes())
			hb.mu.Unlock()
		},
	})
	hb.mu.Lock()
	hb.victim = p.Cmd.Process
	hb.mu.Unlock()
	return p
}

// kill SIGKILLs the running process once; hb.mu must be held.
func (hb *hubspotBundle) kill() {
	if hb.victim != nil {
		_ = hb.victim.Signal(syscall.SIGKILL)
		hb.victim = nil
	}
}

func isWrite(r *http.Request) bool {
	return r.Method == http.MethodPost && !strings.HasSuffix(r.URL.Path, "/batch/read")
}

// checkEveryContactOnce asserts every source row is at the fake once, with
// the source's values, written exactly once.
func (hb *hubspotBundle) checkEveryContactOnce(t *testing.T) fakehubspot.Stats {
	t.Helper()
	st := hb.fake.Stats()
	if st.Contacts != int64(hb.n) || st.ContactsWritten != int64(hb.n) || st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("want %d contacts written once; got contacts %d, written %d, duplicates %d (%v), invalid requests %d",
			hb.n, st.Contacts, st.ContactsWritten, st.DuplicateWrites, st.DuplicateExamples, st.Invalid)
	}
	for i := 1; i <= hb.n; i++ {
		c, ok := hb.fake.Contact(hubspotEmail(i))
		if !ok || c.Writes != 1 || c.Properties["firstname"] != "First"+strconv.Itoa(i) || c.Properties["lastname"] != "Last" {
			t.Fatalf("contact %d: present %v, %d writes, properties %v", i, ok, c.Writes, c.Properties)
		}
	}
	hb.mu.Lock()
	out := hb.output.String()
	hb.mu.Unlock()
	if strings.Contains(out, hubspotToken) || strings.Contains(out, "@example.com") {
		t.Error("the token or an e-mail address appears in the output")
	}
	return st
}

// TestHubSpotKillPoints kills the worker at each kill point, on the bulk
// and the single path, then runs to the end: every contact is at the fake
// once, with the source's values, and none was written twice.
func TestHubSpotKillPoints(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		mode              string
		records, pageSize int
		every             int // writes between kill points
	}{
		{"bulk", 3000, 250, 7},
		{"single", 600, 100, 90},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			hb := setupHubSpot(t, tc.records, tc.pageSize, tc.mode, "", fakehubspot.Options{})
			// Kill point "applied but unanswered": HubSpot applied the
			// write, the worker dies before it hears back.
			var writes int
			hb.afterWrite = func(r *http.Request) {
				hb.mu.Lock()
				defer hb.mu.Unlock()
				writes++
				if writes == tc.every {
					hb.kill()
				}
			}
			mustBeKilled := func(n int, p *proc) {
				t.Helper()
				if code := p.Wait(t, 2*time.Minute); code != -int(syscall.SIGKILL) {
					t.Fatalf("run %d should have been killed, exit %d\n%s", n, code, p.Out)
				}
			}
			mustBeKilled(1, hb.run())
			if hb.fake.Stats().Dropped != 0 {
				t.Fatal("the fake dropped answers it was not asked to")
			}

			// Kill point "before the call": the worker dies right after an
			// answer, before its next request leaves.
			var seen int
			hb.mu.Lock()
			hb.afterWrite = nil
			hb.after = func(r *http.Request) {
				if !isWrite(r) {
					return
				}
				hb.mu.Lock()
				defer hb.mu.Unlock()
				seen++
				if seen == tc.every/2+1 {
					hb.kill()
				}
			}
			hb.mu.Unlock()
			mustBeKilled(2, hb.run())

			// Kill point "on the wire": the fake stalls a write; the worker
			// dies while its request is in flight; nothing of it is applied.
			hb.mu.Lock() // a killed run's last request may still be in the fake
			seen = 0
			hb.after = nil
			hb.intercept = func(w http.ResponseWriter, r *http.Request) bool {
				if !isWrite(r) {
					return false
				}
				hb.mu.Lock()
				seen++
				stall := seen == tc.every/2+1
				hb.mu.Unlock()
				if !stall {
					return false
				}
				// Read the whole request (the server then notices the
				// connection closing), kill the worker, and hold the
				// request until its dead connection is gone.
				_, _ = io.Copy(io.Discard, r.Body)
				hb.mu.Lock()
				hb.kill()
				hb.mu.Unlock()
				select {
				case <-r.Context().Done():
				case <-time.After(time.Minute):
					t.Error("the killed worker's connection stayed open")
				}
				return true
			}
			hb.mu.Unlock()
			mustBeKilled(3, hb.run())
			hb.mu.Lock()
			hb.intercept = nil
			hb.mu.Unlock()

			if hb.fake.Stats().Contacts >= int64(tc.records) {
				t.Fatal("every contact was written before the last kill; the test proves nothing")
			}
			p := hb.run()
			if code := p.Wait(t, 3*time.Minute); code != 0 {
				t.Fatalf("final run exit %d:\n%s", code, p.Out)
			}
			st := hb.checkEveryContactOnce(t)
			// The write applied but unanswered was settled by reading it back.
			if st.ByRoute["POST /crm/v3/objects/contacts/batch/read"] == 0 {
				t.Error("no batch/read: the in-doubt write was not verified")
			}
			t.Logf("%s: %d contacts, %d writes, %d duplicates, %d requests (%d dropped)", tc.mode, st.Contacts,
				st.ContactsWritten, st.DuplicateWrites, st.Requests, st.Dropped)
		})
	}
}

// TestHubSpotWriteModes: write_mode update updates only the contacts
// HubSpot has (the others are skipped, not created); write_mode create
// creates only the missing ones (the others are skipped, left as they are).
func TestHubSpotWriteModes(t *testing.T) {
	t.Parallel()
	const n, existing = 40, 20
	for _, mode := range []string{"update", "create"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			hb := setupHubSpot(t, n, 10, "bulk", mode, fakehubspot.Options{})
			for i := 1; i <= existing; i++ {
				hb.fake.Put(map[string]string{"email": hubspotEmail(i), "firstname": "Old" + strconv.Itoa(i), "lastname": "Old"})
			}
			p := hb.run()
			if code := p.Wait(t, 2*time.Minute); code != 0 {
				t.Fatalf("run exit %d:\n%s", code, p.Out)
			}
			st := hb.fake.Stats()
			for route := range st.ByRoute {
				if strings.Contains(route, "/batch/") && !strings.HasSuffix(route, "/batch/"+mode) && !strings.HasSuffix(route, "/batch/read") {
					t.Errorf("write_mode %s used %s", mode, route)
				}
			}
			if st.ContactsWritten != n-existing || st.DuplicateWrites != 0 || st.Invalid != 0 {
				t.Errorf("fake: %d written, %d duplicates, %d invalid; want %d, 0, 0", st.ContactsWritten, st.DuplicateWrites, st.Invalid, n-existing)
			}
			for i := 1; i <= n; i++ {
				c, ok := hb.fake.Contact(hubspotEmail(i))
				first, last := "First"+strconv.Itoa(i), "Last"
				switch {
				case mode == "update" && i > existing:
					if ok {
						t.Fatalf("update created contact %d: %v", i, c.Properties)
					}
					continue
				case mode == "create" && i <= existing:
					first, last = "Old"+strconv.Itoa(i), "Old" // left as it was
				}
				if !ok || c.Properties["firstname"] != first || c.Properties["lastname"] != last {
					t.Fatalf("contact %d: present %v, properties %v; want firstname %s lastname %s", i, ok, c.Properties, first, last)
				}
			}
			// A second run sends nothing: skipped records count as delivered.
			before := hb.fake.Stats().Requests
			p = hb.run()
			if code := p.Wait(t, 2*time.Minute); code != 0 {
				t.Fatalf("second run exit %d:\n%s", code, p.Out)
			}
			if after := hb.fake.Stats().Requests; after != before {
				t.Errorf("the second run sent %d requests, want 0 (nothing changed)", after-before)
			}
		})
	}
}

// TestHubSpotCheckCommand: `oncesync check` finds a mapped property the
// account does not have, and writes nothing.
func TestHubSpotCheckCommand(t *testing.T) {
	t.Parallel()
	hb := setupHubSpot(t, 5, 5, "bulk", "", fakehubspot.Options{})
	check := func() (string, int) {
		t.Helper()
		cmd := exec.Command(binary, "check", "--config", hb.config, "contacts")
		cmd.Dir = hb.dir
		cmd.Env = append(os.Environ(), "HUBSPOT_TOKEN="+hubspotToken)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	out, code := check()
	if code != 0 || !strings.Contains(out, "id_property email identifies contacts") || !strings.Contains(out, "property firstname exists") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	b, err := os.ReadFile(hb.config)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(hb.config, []byte(strings.Replace(string(b), "lastname: last_name", "shoe_size: last_name", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code = check()
	if code != 1 || !strings.Contains(out, "invalid_sync_definition") || !strings.Contains(out, "property shoe_size does not exist") {
		t.Fatalf("unknown property: exit %d:\n%s", code, out)
	}
	if st := hb.fake.Stats(); st.ContactsWritten != 0 || strings.Contains(out, hubspotToken) {
		t.Fatalf("check wrote %d contacts (or showed the token)", st.ContactsWritten)
	}
}

// TestFakeHubSpotCommand: `oncesync fake-hubspot` serves the API behind its
// token, its custom properties and /_stats, and stops on SIGTERM.
func TestFakeHubSpotCommand(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(binary, "fake-hubspot", "--listen", "127.0.0.1:0", "--token", "tk", "--property", "customer_id:string:unique")
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
			base = f
		}
	}
	if base == "" {
		t.Fatalf("no address in %q", line)
	}
	post := func(tok, body string) int {
		req, _ := http.NewRequest(http.MethodPost, base+"/crm/v3/objects/contacts/batch/upsert", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+tok)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	body := `{"inputs":[{"idProperty":"customer_id","id":"C1","properties":{"email":"a@example.org","firstname":"A"}}]}`
	if code := post("wrong", body); code != http.StatusUnauthorized {
		t.Errorf("wrong token: %d, want 401", code)
	}
	for range 2 {
		if code := post("tk", body); code != http.StatusOK {
			t.Fatalf("upsert: %d, want 200", code)
		}
	}
	resp, err := http.Get(base + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`"requests":3`, `"contacts_written":2`, `"duplicate_writes":1`, `"contacts":1`} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("/_stats %s lacks %s", b, want)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("fake-hubspot did not stop cleanly on SIGTERM: %v", err)
	}
}

// writeRows rewrites hb's source with the rows of ids.
func (hb *hubspotBundle) writeRows(t *testing.T, ids []int) {
	t.Helper()
	writeRows(t, filepath.Join(hb.dir, "contacts.csv"), ids, hubspotEmail)
}

// TestHubSpotMirror: contacts whose rows disappear are archived, a mass
// removal is refused unless allowed, a row that comes back is written
// again with its values, and nothing is written twice.
func TestHubSpotMirror(t *testing.T) {
	t.Parallel()
	hb := setupHubSpot(t, 100, 40, "bulk", "mirror", fakehubspot.Options{})
	all := make([]int, 100)
	for i := range all {
		all[i] = i + 1
	}
	live := func(id int) bool {
		_, ok := hb.fake.Contact(hubspotEmail(id))
		return ok
	}
	runOK := func(args ...string) string {
		t.Helper()
		p := testenv.Start(t, testenv.StartParams{Binary: binary, Args: append([]string{"run", "--config", hb.config, "contacts"}, args...),
			Dir: hb.dir, Env: []string{"HUBSPOT_TOKEN=" + hubspotToken}, Name: "oncesync run"})
		if code := p.Wait(t, 2*time.Minute); code != 0 {
			t.Fatalf("run exited %d:\n%s", code, p.Out)
		}
		return p.Out.String()
	}
	runOK()
	hb.writeRows(t, all[:90])
	if out := runOK(); !strings.Contains(out, "removed 10 record(s)") {
		t.Errorf("the summary does not say what was removed:\n%s", out)
	}
	for _, id := range all {
		if live(id) != (id <= 90) {
			t.Fatalf("after removing rows 91-100, contact %d live: %v", id, live(id))
		}
	}
	hb.writeRows(t, all[:40])
	p := testenv.Start(t, testenv.StartParams{Binary: binary, Args: []string{"run", "--config", hb.config, "contacts"},
		Dir: hb.dir, Env: []string{"HUBSPOT_TOKEN=" + hubspotToken}, Name: "oncesync run"})
	if code := p.Wait(t, 2*time.Minute); code != 1 || !strings.Contains(p.Out.String(), "failed: mirror_removals_refused") {
		t.Fatalf("mass removal: exit %d, want 1 with mirror_removals_refused:\n%s", code, p.Out)
	}
	if !live(41) || !live(90) {
		t.Fatal("a refused mirror run archived contacts")
	}
	runOK("--allow-removals")
	for _, id := range all {
		if live(id) != (id <= 40) {
			t.Fatalf("after --allow-removals, contact %d live: %v", id, live(id))
		}
	}
	hb.writeRows(t, append(all[:40:40], 95))
	runOK()
	if c, ok := hb.fake.Contact(hubspotEmail(95)); !ok || c.Properties["firstname"] != "First95" {
		t.Fatalf("row 95 came back; its contact is %+v (live %v)", c.Properties, ok)
	}
	if st := hb.fake.Stats(); st.DuplicateWrites != 0 {
		t.Fatalf("%d duplicate writes", st.DuplicateWrites)
	}
}
