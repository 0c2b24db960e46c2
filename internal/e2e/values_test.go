package e2e

import (
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"
)

// rewriteCSV rewrites tb's source with first_name First<i>, or names[i].
func (tb *testBundle) rewriteCSV(t *testing.T, names map[int]string) {
	t.Helper()
	f, err := os.Create(filepath.Join(tb.dir, "contacts.csv"))
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"id", "email", "first_name", "last_name"})
	for i, email := range tb.emails {
		name, ok := names[i+1]
		if !ok {
			name = "First" + strconv.Itoa(i+1)
		}
		_ = w.Write([]string{strconv.Itoa(i + 1), email, name, "Last"})
	}
	w.Flush()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestChangeAndChangeBackAtTheDestination is issue 13's finding 1 held
// against the fake Brevo and a webhook receiver: FIRSTNAME First7 →
// Changed7 → First7, one run after each change, and the destination's
// final value is compared with the source's after every run (not the
// count of writes).
func TestChangeAndChangeBackAtTheDestination(t *testing.T) {
	t.Parallel()
	steps := []string{"First7", "Changed7", "First7"}
	for _, mode := range []string{"bulk", "single"} {
		t.Run("brevo "+mode, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, setupParams{records: 600, pageSize: 200, mode: mode})
			for i, name := range steps {
				tb.rewriteCSV(t, map[int]string{7: name})
				p := tb.startRun()
				if code := p.Wait(t, 2*time.Minute); code != 0 {
					t.Fatalf("run %d exited %d:\n%s", i+1, code, p.Out)
				}
				c, ok := tb.fake.Contact(tb.emails[6])
				if !ok || c.Attributes["FIRSTNAME"] != name {
					t.Fatalf("after run %d (%s) Brevo holds %v for row 7 (found %v)", i+1, name, c.Attributes["FIRSTNAME"], ok)
				}
			}
			if st := tb.stats(); st.DuplicateWrites != 0 || st.Invalid != 0 {
				t.Fatalf("duplicates %d, invalid requests %d", st.DuplicateWrites, st.Invalid)
			}
		})
	}
	for _, mode := range []string{"bulk", "single"} {
		t.Run("webhook "+mode, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, setupParams{records: 600, pageSize: 200, mode: mode})
			var (
				mu   sync.Mutex
				last = map[string]any{} // email -> FIRSTNAME last received
			)
			record := func(data map[string]any) { last[fmt.Sprint(data["email"])] = data["FIRSTNAME"] }
			hook := newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				b, _ := io.ReadAll(r.Body)
				mu.Lock()
				defer mu.Unlock()
				if mode == "bulk" {
					var body struct {
						Records []struct {
							Data map[string]any `json:"data"`
						} `json:"records"`
					}
					if err := json.Unmarshal(b, &body); err != nil {
						http.Error(w, err.Error(), http.StatusBadRequest)
						return
					}
					for _, rec := range body.Records {
						record(rec.Data)
					}
				} else {
					var data map[string]any
					if err := json.Unmarshal(b, &data); err != nil {
						http.Error(w, err.Error(), http.StatusBadRequest)
						return
					}
					record(data)
				}
				w.WriteHeader(http.StatusOK)
			}))
			cfg := fmt.Sprintf(`store: sqlite://./oncesync.db
syncs:
  - id: contacts
    workspace: acme
    source: {type: csv, path: contacts.csv, page_size: 200, identity: id}
    destination: {type: webhook, url: %s/hook, mode: %s}
    mapping: {fields: {email: email, FIRSTNAME: first_name, LASTNAME: last_name}}
`, hook.URL, mode)
			if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
				t.Fatal(err)
			}
			for i, name := range steps {
				tb.rewriteCSV(t, map[int]string{7: name})
				p := tb.startRun()
				if code := p.Wait(t, 2*time.Minute); code != 0 {
					t.Fatalf("run %d exited %d:\n%s", i+1, code, p.Out)
				}
				mu.Lock()
				got := last[tb.emails[6]]
				mu.Unlock()
				if got != name {
					t.Fatalf("after run %d (%s) the webhook last received %v for row 7", i+1, name, got)
				}
			}
		})
	}
}

// TestClearedValueIsClearedAtBrevo: a value cleared in the source (FIRSTNAME
// First7 → "") is cleared at Brevo on both paths, not kept stale.
func TestClearedValueIsClearedAtBrevo(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"bulk", "single"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, setupParams{records: 600, pageSize: 200, mode: mode})
			for i, name := range []string{"First7", "", "Again7", ""} {
				tb.rewriteCSV(t, map[int]string{7: name})
				p := tb.startRun()
				if code := p.Wait(t, 2*time.Minute); code != 0 {
					t.Fatalf("run %d exited %d:\n%s", i+1, code, p.Out)
				}
				c, ok := tb.fake.Contact(tb.emails[6])
				got, held := c.Attributes["FIRSTNAME"]
				if !ok || (name == "" && held && got != "" && got != nil) || (name != "" && got != name) {
					t.Fatalf("after run %d (%q) Brevo holds %#v for row 7 (found %v)", i+1, name, got, ok)
				}
			}
			if st := tb.stats(); st.DuplicateWrites != 0 || st.Invalid != 0 {
				t.Fatalf("duplicates %d, invalid requests %d", st.DuplicateWrites, st.Invalid)
			}
		})
	}
}
