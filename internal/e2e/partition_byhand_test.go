package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRunByHandOfAPartitionedSync: `oncesync run SYNC` of a sync with
// `partitions: 2` that serve's partition jobs deliver (docs/guide.md#commands).
// Each partition keeps its own ledger, cursor and lease; a run by hand that
// worked the sync unpartitioned, under the sync's own ledger, knew nothing
// of what the partitions had delivered: it wrote every record a second time,
// and a row it delivered changed (Changed7) and then changed back stayed
// changed at Brevo, because partition's last delivered state already said
// First7 (a stale record). The run by hand now works the partitions' own
// ledgers, leases and cursors.
func TestRunByHandOfAPartitionedSync(t *testing.T) {
	t.Parallel()
	const records = 400
	ls := newLeaseStores(t)
	tb := setup(t, setupParams{records: records, pageSize: 50, mode: "bulk"})
	cfg := fmt.Sprintf(`store: %s
redis: %s
settings: {lease_ttl: 5s, lease_renew: 1s}
syncs:
  - id: %s
    workspace: acme
    schedule: "@every 2s"
    partitions: 2
    source: {type: csv, path: contacts.csv, page_size: 50, identity: id}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: bulk, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}
`, ls.storeURL, ls.redisURL, ls.syncID, tb.srv.URL)
	tb.config = filepath.Join(tb.dir, "oncesync.yaml")
	if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	serveUntil := func(what string, done func() bool) {
		t.Helper()
		s := tb.start("serve", "--config", tb.config, "--listen", "127.0.0.1:0", "--workers", "3")
		waitFor(t, 90*time.Second, what, done)
		if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := s.Wait(t, 30*time.Second); code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, s.Out)
		}
	}
	byHand := func(step string) {
		t.Helper()
		p := tb.start("run", "--config", tb.config, ls.syncID)
		if code := p.Wait(t, time.Minute); code != 0 {
			t.Fatalf("%s: run by hand exited %d:\n%s", step, code, p.Out)
		}
	}
	serveUntil("the partitions to deliver every contact", func() bool {
		st := tb.stats()
		return st.Contacts == records && st.ContactsWritten == records
	})
	byHand("nothing changed")
	if st := tb.stats(); st.DuplicateWrites != 0 || st.ContactsWritten != records {
		t.Fatalf("a run by hand after the partitions delivered everything: %d contacts written (want %d), %d duplicate writes",
			st.ContactsWritten, records, st.DuplicateWrites)
	}

	tb.rewriteCSV(t, map[int]string{7: "Changed7"})
	byHand("row 7 changed")
	if c, _ := tb.fake.Contact(tb.emails[6]); c.Attributes["FIRSTNAME"] != "Changed7" {
		t.Fatalf("after the run by hand Brevo holds %v for row 7, want Changed7", c.Attributes["FIRSTNAME"])
	}
	tb.rewriteCSV(t, nil)
	serveUntil("row 7 changed back at Brevo", func() bool {
		c, _ := tb.fake.Contact(tb.emails[6])
		return c.Attributes["FIRSTNAME"] == "First7"
	})
	if st := tb.stats(); st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("duplicate writes %d, invalid requests %d", st.DuplicateWrites, st.Invalid)
	}
}
