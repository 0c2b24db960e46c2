package e2e

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// writeRows writes path as a source of the rows of ids (1-based): the
// e-mail email(id), FIRSTNAME First<id>.
func writeRows(t *testing.T, path string, ids []int, email func(int) string) {
	t.Helper()
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	_ = w.Write([]string{"id", "email", "first_name", "last_name"})
	for _, id := range ids {
		_ = w.Write([]string{strconv.Itoa(id), email(id), "First" + strconv.Itoa(id), "Last"})
	}
	w.Flush()
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// writeRows rewrites tb's source with the rows of ids.
func (tb *testBundle) writeRows(t *testing.T, ids []int) {
	t.Helper()
	writeRows(t, filepath.Join(tb.dir, "contacts.csv"), ids, func(id int) string { return tb.emails[id-1] })
}

// useWriteMode rewrites tb's config with write_mode wm (and settings).
func (tb *testBundle) useWriteMode(t *testing.T, mode, wm, settings string) {
	t.Helper()
	cfg := fmt.Sprintf(`store: sqlite://./oncesync.db
settings: %s
syncs:
  - id: contacts
    workspace: acme
    source: {type: csv, path: contacts.csv, page_size: 40, identity: id}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: %s, list_ids: [2], rate_limit: 1000, write_mode: %s}
    mapping: {email: email, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}
`, settings, tb.srv.URL, mode, wm)
	if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}

// seedContact creates a contact at the fake as somebody else would.
func (tb *testBundle) seedContact(t *testing.T, email, first string, lists ...int64) {
	t.Helper()
	ids := make([]string, len(lists))
	for i, l := range lists {
		ids[i] = strconv.FormatInt(l, 10)
	}
	body := fmt.Sprintf(`{"email":%q,"attributes":{"FIRSTNAME":%q},"listIds":[%s]}`, email, first, strings.Join(ids, ","))
	req, _ := http.NewRequest(http.MethodPost, tb.srv.URL+"/v3/contacts", strings.NewReader(body))
	req.Header.Set("api-key", apiKey)
	req.Header.Set("content-type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("seeding a contact: HTTP %d", res.StatusCode)
	}
}

func (tb *testBundle) runOK(t *testing.T, args ...string) string {
	t.Helper()
	p := tb.start(append([]string{"run", "--config", tb.config, "contacts"}, args...)...)
	if code := p.Wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("run exited %d:\n%s", code, p.Out)
	}
	return p.Out.String()
}

// TestBrevoWriteModes runs write_mode update and create against a fake
// Brevo that already holds half of the source's contacts, with values
// another system wrote, and compares every contact's final value.
func TestBrevoWriteModes(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"bulk", "single"} {
		for _, wm := range []string{"update", "create"} {
			t.Run(wm+" "+mode, func(t *testing.T) {
				t.Parallel()
				tb := setup(t, setupParams{records: 100, pageSize: 40, mode: mode})
				tb.useWriteMode(t, mode, wm, "{lease_ttl: 30s, lease_renew: 10s}")
				for i := 1; i <= 50; i++ {
					tb.seedContact(t, tb.emails[i-1], "Pre", 7)
				}
				// 50 contacts written (updated, or created), 50 left as
				// they were: counted apart (all 100 were "written").
				if out := tb.runOK(t); !strings.Contains(out, "written 50, skipped 50 (left as the destination had them: write_mode)") {
					t.Fatalf("the run's summary does not count the skipped records apart:\n%s", out)
				}
				for i := 1; i <= 100; i++ {
					c, ok := tb.fake.Contact(tb.emails[i-1])
					switch {
					case wm == "update" && i <= 50:
						if !ok || c.Attributes["FIRSTNAME"] != "First"+strconv.Itoa(i) || !slices.Contains(c.ListIDs, 2) {
							t.Fatalf("update: contact %d = %+v (found %v), want it updated and on list 2", i, c.Attributes, ok)
						}
					case wm == "update":
						if ok {
							t.Fatalf("update created contact %d, which was not at the destination", i)
						}
					case i <= 50:
						if !ok || c.Attributes["FIRSTNAME"] != "Pre" || slices.Contains(c.ListIDs, 2) {
							t.Fatalf("create: contact %d = %+v lists %v, want it left as it was", i, c.Attributes, c.ListIDs)
						}
					default:
						if !ok || c.Attributes["FIRSTNAME"] != "First"+strconv.Itoa(i) {
							t.Fatalf("create: contact %d = %+v (found %v), want it created", i, c.Attributes, ok)
						}
					}
				}
				// Skipped records are settled: a second run sends nothing.
				before := tb.stats().Requests
				tb.runOK(t)
				if st := tb.stats(); st.DuplicateWrites != 0 || st.Invalid != 0 || st.Requests != before {
					t.Fatalf("second run: %d requests (want 0), %d duplicates, %d invalid", st.Requests-before, st.DuplicateWrites, st.Invalid)
				}
			})
		}
	}
}

// TestBrevoMirror holds write_mode mirror to its promise: rows that
// disappear are taken off the sync's list (the contacts stay), a mass
// removal is refused unless allowed, a row that comes back is sent again,
// and nothing is written twice.
func TestBrevoMirror(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"bulk", "single"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, setupParams{records: 100, pageSize: 40, mode: mode})
			tb.useWriteMode(t, mode, "mirror", "{lease_ttl: 30s, lease_renew: 10s, max_removals: 10%}")
			all := make([]int, 100)
			for i := range all {
				all[i] = i + 1
			}
			onList := func(id int) bool {
				c, ok := tb.fake.Contact(tb.emails[id-1])
				return ok && slices.Contains(c.ListIDs, 2)
			}
			tb.runOK(t)
			for _, id := range all {
				if !onList(id) {
					t.Fatalf("contact %d is not on list 2 after the first run", id)
				}
			}

			// Ten rows gone (10 %): removed from the list, not deleted.
			tb.writeRows(t, all[:90])
			dry := tb.start("run", "--config", tb.config, "contacts", "--dry-run")
			if code := dry.Wait(t, time.Minute); code != 0 || !strings.Contains(dry.Out.String(), "remove     10 ") {
				t.Fatalf("dry run exited %d, want it to count 10 removals:\n%s", code, dry.Out)
			}
			// docs/recovery.md#mirror_removals_refused: the dry run names
			// them, so a person tells a cleanup from a truncated source.
			if !strings.Contains(dry.Out.String(), "gone (91, 92, 93, 94, 95, 96, 97, 98, 99, 100) (max_removals") {
				t.Errorf("the dry run does not name the removals by identity:\n%s", dry.Out)
			}
			out := tb.runOK(t)
			if !strings.Contains(out, "removed 10 record(s)") {
				t.Errorf("the run's summary does not say what it removed:\n%s", out)
			}
			for _, id := range all {
				if onList(id) != (id <= 90) {
					t.Fatalf("after removing rows 91-100, contact %d on list: %v", id, onList(id))
				}
				if _, ok := tb.fake.Contact(tb.emails[id-1]); !ok {
					t.Fatalf("contact %d was deleted; mirror only takes it off the sync's lists", id)
				}
			}

			rec := tb.start("records", "--config", tb.config, "contacts", "--removed", "--format", "csv")
			if code := rec.Wait(t, time.Minute); code != 0 {
				t.Fatalf("records --removed exited %d:\n%s", code, rec.Out)
			}
			rows, err := csv.NewReader(strings.NewReader(rec.Out.String())).ReadAll()
			if err != nil || len(rows) != 11 {
				t.Fatalf("records --removed: want a header and 10 rows, got %d rows (%v):\n%s", len(rows), err, rec.Out)
			}
			var removedIDs []int
			for _, row := range rows[1:] {
				id, _ := strconv.Atoi(row[0])
				removedIDs = append(removedIDs, id)
				if row[1] != "removed" {
					t.Fatalf("records --removed: state %q", row[1])
				}
			}
			slices.Sort(removedIDs)
			if !slices.Equal(removedIDs, all[90:]) {
				t.Fatalf("records --removed lists identities %v, want 91-100", removedIDs)
			}

			// Fifty more gone: more than 10 %, refused, nothing removed.
			tb.writeRows(t, all[:40])
			p := tb.start("run", "--config", tb.config, "contacts")
			if code := p.Wait(t, 2*time.Minute); code != 1 || !strings.Contains(p.Out.String(), "failed: mirror_removals_refused") {
				t.Fatalf("mass removal: exit %d, want 1 with mirror_removals_refused:\n%s", code, p.Out)
			}
			for id := 41; id <= 90; id++ {
				if !onList(id) {
					t.Fatalf("a refused mirror run removed contact %d", id)
				}
			}
			tb.runOK(t, "--allow-removals")
			for _, id := range all {
				if onList(id) != (id <= 40) {
					t.Fatalf("after --allow-removals, contact %d on list: %v", id, onList(id))
				}
			}

			// A row that comes back is sent again, with its value.
			tb.writeRows(t, append(all[:40:40], 95))
			tb.runOK(t)
			if !onList(95) {
				t.Fatal("row 95 came back to the source, its contact is not back on list 2")
			}
			if st := tb.stats(); st.DuplicateWrites != 0 || st.Invalid != 0 {
				t.Fatalf("duplicates %d, invalid requests %d: %v", st.DuplicateWrites, st.Invalid, st.DuplicateExamples)
			}
			tb.checkNoSecrets(t)
		})
	}
}

// TestBrevoMirrorEmailChange: a mirror row whose e-mail changed is upserted
// under the new address and its old contact taken off the sync's list; two
// rows that swapped their addresses keep both contacts on it.
func TestBrevoMirrorEmailChange(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 50, pageSize: 40, mode: "bulk"})
	tb.useWriteMode(t, "bulk", "mirror", "{lease_ttl: 30s, lease_renew: 10s, max_removals: 10%}")
	all := make([]int, 50)
	for i := range all {
		all[i] = i + 1
	}
	onList := func(email string) bool {
		c, ok := tb.fake.Contact(email)
		return ok && slices.Contains(c.ListIDs, 2)
	}
	tb.runOK(t)
	const moved = "moved1@example.com"
	writeRows(t, filepath.Join(tb.dir, "contacts.csv"), all, func(id int) string {
		switch id {
		case 1:
			return moved
		case 2:
			return tb.emails[2]
		case 3:
			return tb.emails[1]
		}
		return tb.emails[id-1]
	})
	out := tb.runOK(t)
	if !strings.Contains(out, "removed 1 record(s)") {
		t.Errorf("the run's summary does not say it removed the left contact:\n%s", out)
	}
	if onList(tb.emails[0]) || !onList(moved) {
		t.Fatalf("row 1's old contact on the list: %v, its new one: %v", onList(tb.emails[0]), onList(moved))
	}
	for id := 2; id <= 50; id++ {
		if !onList(tb.emails[id-1]) {
			t.Fatalf("contact %d is off the list", id)
		}
	}
	if c, _ := tb.fake.Contact(tb.emails[1]); c.Attributes["FIRSTNAME"] != "First3" {
		t.Fatalf("row 3's contact (row 2's old address) holds FIRSTNAME %v", c.Attributes["FIRSTNAME"])
	}
	if st := tb.stats(); st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("duplicates %d, invalid requests %d", st.DuplicateWrites, st.Invalid)
	}
}

// TestBrevoMirrorKilledMidRemoval: the worker is killed with SIGKILL right
// after Brevo applied one of its removals and before it heard back. The next
// run settles the removals left in doubt: every gone row's contact is off the
// list once, every other contact still on it, and records --removed lists
// the ten.
func TestBrevoMirrorKilledMidRemoval(t *testing.T) {
	t.Parallel()
	var (
		mu     sync.Mutex
		victim *os.Process
		puts   int
	)
	tb := setup(t, setupParams{records: 100, pageSize: 40, mode: "bulk", opts: fakebrevo.Options{
		AfterWrite: func(r *http.Request) {
			mu.Lock()
			defer mu.Unlock()
			if r.Method != http.MethodPut { // bulk writes are imports; a PUT is a removal
				return
			}
			if puts++; puts == 4 && victim != nil {
				_ = victim.Signal(syscall.SIGKILL)
				victim = nil
			}
		},
	}})
	tb.useWriteMode(t, "bulk", "mirror", "{lease_ttl: 30s, lease_renew: 10s, max_removals: 10%}")
	all := make([]int, 100)
	for i := range all {
		all[i] = i + 1
	}
	tb.runOK(t)
	tb.writeRows(t, all[:90])
	p := tb.start("run", "--config", tb.config, "contacts")
	mu.Lock()
	victim = p.Cmd.Process
	mu.Unlock()
	if code := p.Wait(t, time.Minute); code == 0 {
		t.Fatalf("the run was not killed:\n%s", p.Out)
	}
	mu.Lock()
	killedAt := puts
	mu.Unlock()
	if killedAt < 4 {
		t.Fatalf("the run ended after %d removals, before the kill point", killedAt)
	}
	tb.runOK(t)
	for _, id := range all {
		c, ok := tb.fake.Contact(tb.emails[id-1])
		if !ok {
			t.Fatalf("contact %d was deleted", id)
		}
		if on := slices.Contains(c.ListIDs, 2); on != (id <= 90) {
			t.Errorf("contact %d on list 2: %v", id, on)
		}
	}
	rec := tb.start("records", "--config", tb.config, "contacts", "--removed", "--format", "csv")
	if code := rec.Wait(t, time.Minute); code != 0 {
		t.Fatalf("records --removed exited %d:\n%s", code, rec.Out)
	}
	if rows, err := csv.NewReader(strings.NewReader(rec.Out.String())).ReadAll(); err != nil || len(rows) != 11 {
		t.Fatalf("records --removed: want a header and 10 rows, got %d (%v):\n%s", len(rows), err, rec.Out)
	}
	st := tb.stats()
	if st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("duplicates %d, invalid requests %d: %v", st.DuplicateWrites, st.Invalid, st.DuplicateExamples)
	}
	if n := st.ByRoute["PUT /v3/contacts/{identifier}"]; n != 10 {
		t.Errorf("%d removals reached Brevo, want 10 (each gone row's once)", n)
	}
}

// TestBrevoWriteModeSwitchedBack: a record write_mode create or update
// leaves as the destination has it is recorded as delivered; when the sync
// goes back to upsert, those records must be written (on 97d6e75 the run
// said "unchanged" and the destination kept the old values for good, and
// never got the contacts update mode had skipped).
func TestBrevoWriteModeSwitchedBack(t *testing.T) {
	t.Parallel()
	const settings = "{lease_ttl: 30s, lease_renew: 10s}"
	tb := setup(t, setupParams{records: 105, pageSize: 40, mode: "single"})
	first := map[int]string{}
	write := func(n int) {
		var b bytes.Buffer
		w := csv.NewWriter(&b)
		_ = w.Write([]string{"id", "email", "first_name", "last_name"})
		for id := 1; id <= n; id++ {
			name, ok := first[id]
			if !ok {
				name = "First" + strconv.Itoa(id)
			}
			_ = w.Write([]string{strconv.Itoa(id), tb.emails[id-1], name, "Last"})
		}
		w.Flush()
		if err := os.WriteFile(filepath.Join(tb.dir, "contacts.csv"), b.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(100)
	tb.useWriteMode(t, "single", "upsert", settings)
	tb.runOK(t)
	// Ten rows change while the sync only creates: the contacts exist, so
	// they are left as they are.
	for id := 1; id <= 10; id++ {
		first[id] = "Changed" + strconv.Itoa(id)
	}
	write(100)
	tb.useWriteMode(t, "single", "create", settings)
	if out := tb.runOK(t, "--dry-run"); !strings.Contains(out, "write_mode create: of the records above, those the destination already holds are left as they are") {
		t.Fatalf("the dry run under create does not say what create leaves:\n%s", out)
	}
	tb.runOK(t)
	if c, _ := tb.fake.Contact(tb.emails[0]); c.Attributes["FIRSTNAME"] != "First1" {
		t.Fatalf("create mode wrote over contact 1: %v", c.Attributes)
	}
	// Five new rows while the sync only updates: not created.
	write(105)
	tb.useWriteMode(t, "single", "update", settings)
	tb.runOK(t)
	if _, ok := tb.fake.Contact(tb.emails[100]); ok {
		t.Fatal("update mode created contact 101")
	}
	tb.useWriteMode(t, "single", "upsert", settings)
	tb.runOK(t)
	for id := 1; id <= 105; id++ {
		want, ok := first[id]
		if !ok {
			want = "First" + strconv.Itoa(id)
		}
		if c, found := tb.fake.Contact(tb.emails[id-1]); !found || c.Attributes["FIRSTNAME"] != want {
			t.Errorf("after going back to upsert: contact %d = %v (found %v), want FIRSTNAME %s", id, c.Attributes, found, want)
		}
	}
	if st := tb.stats(); st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("%d duplicate writes, %d invalid requests", st.DuplicateWrites, st.Invalid)
	}
}
