package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestUnreadableLineIsRejected: a JSONL line that is not JSON is rejected
// with its line number, the rest of the file is delivered, and once the
// line is fixed the next run sends it; no value of the line is shown.
func TestUnreadableLineIsRejected(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 1, pageSize: 100, mode: "bulk"})
	write := func(bad bool) {
		var b strings.Builder
		for i := 1; i <= 250; i++ {
			if i == 120 && bad {
				fmt.Fprintf(&b, "{\"id\":%d,\"email\":\"line%d@example.com\",\"first_name\":\"N%d\"\n", i, i, i) // unclosed
				continue
			}
			fmt.Fprintf(&b, "{\"id\":%d,\"email\":\"line%d@example.com\",\"first_name\":\"N%d\"}\n", i, i, i)
		}
		if err := os.WriteFile(filepath.Join(tb.dir, "contacts.jsonl"), []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fmt.Sprintf(`store: sqlite://./oncesync.db
syncs:
  - id: contacts
    source: {type: jsonl, path: contacts.jsonl, page_size: 100, identity: id}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: bulk, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name}}
`, tb.srv.URL)
	if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	write(true)
	p := tb.startRun()
	if code := p.Wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("run with one unreadable line exited %d:\n%s", code, p.Out)
	}
	if !strings.Contains(p.Out.String(), "rejected 1") {
		t.Fatalf("the summary does not count the unreadable line as rejected:\n%s", p.Out)
	}
	if _, ok := tb.fake.Contact("line120@example.com"); ok {
		t.Fatal("the unreadable line reached Brevo")
	}
	if st := tb.stats(); st.Contacts != 249 {
		t.Fatalf("%d contacts at Brevo, want the 249 readable ones", st.Contacts)
	}
	rec := tb.start("records", "--config", tb.config, "contacts", "--rejected")
	if code := rec.Wait(t, time.Minute); code != 0 || !strings.Contains(rec.Out.String(), "line 120: not a JSON object") ||
		strings.Contains(rec.Out.String(), "example.com") {
		t.Fatalf("records --rejected (exit %d) should name line 120 and no value:\n%s", code, rec.Out)
	}
	write(false)
	p = tb.startRun()
	if code := p.Wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("run after the fix exited %d:\n%s", code, p.Out)
	}
	if c, ok := tb.fake.Contact("line120@example.com"); !ok || c.Attributes["FIRSTNAME"] != "N120" {
		t.Fatalf("the fixed line was not delivered: %+v %v", c.Attributes, ok)
	}
	if st := tb.stats(); st.DuplicateWrites != 0 || st.Contacts != 250 {
		t.Fatalf("contacts %d, duplicates %d", st.Contacts, st.DuplicateWrites)
	}
}
