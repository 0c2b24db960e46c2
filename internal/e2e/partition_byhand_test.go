package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
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
	writePartitionedConfig(t, tb, ls, partitionedConfig{schedule: `"@every 2s"`, pageSize: 50, mode: "bulk"})
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
		// The sync's own run, as serve's coordinator records one: its
		// status and dead-man check see it.
		if want := "of sync " + ls.syncID + " succeeded: its 2 partitions' runs together"; !strings.Contains(p.Out.String(), want) {
			t.Fatalf("%s: the run by hand does not say %q:\n%s", step, want, p.Out)
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

	// A dry run reads the partitions' ledgers, as their runs do: the
	// sync's own ledger would count every record a create.
	dry := func(step string, want ...string) {
		t.Helper()
		p := tb.start("run", "--dry-run", "--config", tb.config, ls.syncID)
		if code := p.Wait(t, time.Minute); code != 0 {
			t.Fatalf("%s: dry run exited %d:\n%s", step, code, p.Out)
		}
		for _, w := range want {
			if !strings.Contains(p.Out.String(), w) {
				t.Fatalf("%s: the dry run does not say %q:\n%s", step, w, p.Out)
			}
		}
	}
	dry("nothing changed", fmt.Sprintf("  read       %d\n", records), "  create     0  ", "  update     0  ", fmt.Sprintf("  unchanged  %d  ", records))

	tb.rewriteCSV(t, map[int]string{7: "Changed7"})
	dry("row 7 changed", "  create     0  ", "  update     1  ", fmt.Sprintf("  unchanged  %d  ", records-1))
	byHand("row 7 changed")
	if c, _ := tb.fake.Contact(tb.emails[6]); c.Attributes["FIRSTNAME"] != "Changed7" {
		t.Fatalf("after the run by hand Brevo holds %v for row 7, want Changed7", c.Attributes["FIRSTNAME"])
	}
	tb.rewriteCSV(t, nil)
	serveUntil("row 7 changed back at Brevo", func() bool {
		c, _ := tb.fake.Contact(tb.emails[6])
		return c.Attributes["FIRSTNAME"] == "First7"
	})

	// A run by hand while serve's partition jobs work: each partition is
	// worked by one of them at a time.
	changed := map[int]string{}
	for i := 1; i <= records; i += 3 {
		changed[i] = fmt.Sprintf("Again%d", i)
	}
	tb.rewriteCSV(t, changed)
	s := tb.start("serve", "--config", tb.config, "--listen", "127.0.0.1:0", "--workers", "3")
	waitFor(t, 30*time.Second, "serve's first write of the change", func() bool {
		c, _ := tb.fake.Contact(tb.emails[0])
		return c.Attributes["FIRSTNAME"] == "Again1" || len(tb.emails) == 0
	})
	p := tb.start("run", "--config", tb.config, ls.syncID)
	if code := p.Wait(t, time.Minute); code != 0 && code != 3 {
		t.Fatalf("run by hand beside serve exited %d:\n%s", code, p.Out)
	}
	waitFor(t, 60*time.Second, "every changed row at Brevo", func() bool {
		for i, name := range changed {
			if c, _ := tb.fake.Contact(tb.emails[i-1]); c.Attributes["FIRSTNAME"] != name {
				return false
			}
		}
		return true
	})
	if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, s.Out)
	}
	if st := tb.stats(); st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("duplicate writes %d, invalid requests %d", st.DuplicateWrites, st.Invalid)
	}
}

// TestPartitionedSyncAfterTheFileIsRegenerated: serve stopped while the
// partitions of a CSV sync were part-way through the file, the file then
// exported again with new values (docs/guide.md#changing-a-sync: a regenerated
// file). A partition's saved cursor no longer matched the file's bytes, and
// unlike an unpartitioned sync's, its first read did not start over: every
// later run of that partition failed source_changed_during_run and its rows
// kept their old values at Brevo until a person reset the cursor.
func TestPartitionedSyncAfterTheFileIsRegenerated(t *testing.T) {
	t.Parallel()
	const records = 400
	ls := newLeaseStores(t)
	tb := setup(t, setupParams{records: records, pageSize: 20, mode: "single",
		opts: fakebrevo.Options{Latency: 5 * time.Millisecond}})
	writePartitionedConfig(t, tb, ls, partitionedConfig{schedule: `"@every 2s"`, pageSize: 20, mode: "single"})
	s := tb.start("serve", "--config", tb.config, "--listen", "127.0.0.1:0", "--workers", "3")
	waitFor(t, 60*time.Second, "a quarter of the contacts", func() bool { return tb.stats().Contacts >= records/4 })
	if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, s.Out)
	}
	if n := tb.stats().Contacts; n >= records {
		t.Fatalf("serve delivered all %d contacts before it stopped; the test needs a pass stopped part-way", n)
	}
	again := map[int]string{}
	for i := 1; i <= records; i++ {
		again[i] = fmt.Sprintf("Again%d", i)
	}
	tb.rewriteCSV(t, again)
	s = tb.start("serve", "--config", tb.config, "--listen", "127.0.0.1:0", "--workers", "3")
	defer func() {
		_ = s.Cmd.Process.Signal(syscall.SIGTERM)
		s.Wait(t, 30*time.Second)
	}()
	waitFor(t, 90*time.Second, "every contact with its exported value", func() bool {
		for i, name := range again {
			if c, _ := tb.fake.Contact(tb.emails[i-1]); c.Attributes["FIRSTNAME"] != name {
				return false
			}
		}
		return true
	})
	if st := tb.stats(); st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("duplicate writes %d, invalid requests %d", st.DuplicateWrites, st.Invalid)
	}
}

// TestRunByHandOfAPartitionedSyncPinsItsSource: `oncesync run` works a
// partitioned sync's partitions one after another, each over the whole
// source. An export replaced (written aside, then renamed over) while the
// first partition ran was written from its old view by that partition and
// from its new one by the next, and the run succeeded (an independent
// check, 2026-12-06). The run now pins the source's snapshot before its
// first partition and checks it before every page it writes, as serve's
// partitions check the barrier: it fails source_changed_during_run with
// nothing written from the new view, and the next run writes every
// record's new value.
func TestRunByHandOfAPartitionedSyncPinsItsSource(t *testing.T) {
	t.Parallel()
	const records = 400
	ls := newLeaseStores(t)
	tb := setup(t, setupParams{records: records, pageSize: 50, mode: "bulk"})
	writePartitionedConfig(t, tb, ls, partitionedConfig{schedule: `""`, pageSize: 50, mode: "bulk"})
	renamed := make(map[int]string, records)
	for i := 1; i <= records; i++ {
		renamed[i] = fmt.Sprintf("New%d", i)
	}
	var once sync.Once
	tb.mu.Lock()
	tb.intercept = func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/contacts/import") {
			once.Do(func() {
				// The new export is written aside and renamed over the
				// old one: the partition reading the old file goes on in it.
				csvPath := filepath.Join(tb.dir, "contacts.csv")
				old := filepath.Join(tb.dir, "contacts.old")
				if err := os.Rename(csvPath, old); err != nil {
					t.Error(err)
				}
				tb.rewriteCSV(t, renamed)
				if err := os.Rename(csvPath, csvPath+".new"); err != nil {
					t.Error(err)
				}
				if err := os.Rename(old, csvPath); err != nil {
					t.Error(err)
				}
				if err := os.Rename(csvPath+".new", csvPath); err != nil {
					t.Error(err)
				}
			})
		}
		return false
	}
	tb.mu.Unlock()
	newValues := func() (n int) {
		for _, e := range tb.emails {
			if c, _ := tb.fake.Contact(e); strings.HasPrefix(fmt.Sprint(c.Attributes["FIRSTNAME"]), "New") {
				n++
			}
		}
		return n
	}
	p := tb.start("run", "--config", tb.config, ls.syncID)
	if code := p.Wait(t, time.Minute); code == 0 || !strings.Contains(p.Out.String(), "failed: source_changed_during_run:") {
		t.Fatalf("the run over a source replaced mid-run exited %d:\n%s", code, p.Out)
	}
	if n := newValues(); n != 0 {
		t.Fatalf("%d contacts hold a value of the export that replaced the pinned one:\n%s", n, p.Out)
	}
	tb.mu.Lock()
	tb.intercept = nil
	tb.mu.Unlock()
	p = tb.start("run", "--config", tb.config, ls.syncID)
	if code := p.Wait(t, time.Minute); code != 0 {
		t.Fatalf("the next run exited %d:\n%s", code, p.Out)
	}
	if n := newValues(); n != records {
		t.Fatalf("after the next run %d of %d contacts hold their new value:\n%s", n, records, p.Out)
	}
	if st := tb.stats(); st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("duplicate writes %d, invalid requests %d", st.DuplicateWrites, st.Invalid)
	}
}

// partitionedConfig is what writePartitionedConfig's sync differs by:
// its schedule (YAML; `""` for none), its pages and its Brevo path.
type partitionedConfig struct {
	schedule string
	pageSize int
	mode     string
}

// writePartitionedConfig writes tb's config: its sync on ls's stores with
// partitions: 2 and c, into tb's fake Brevo.
func writePartitionedConfig(t *testing.T, tb *testBundle, ls *leaseStores, c partitionedConfig) {
	t.Helper()
	cfg := fmt.Sprintf(`store: %s
redis: %s
settings: {lease_ttl: 5s, lease_renew: 1s}
syncs:
  - id: %s
    workspace: acme
    schedule: %s
    partitions: 2
    source: {type: csv, path: contacts.csv, page_size: %d, identity: id}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: %s, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}
`, ls.storeURL, ls.redisURL, ls.syncID, c.schedule, c.pageSize, tb.srv.URL, c.mode)
	tb.config = filepath.Join(tb.dir, "oncesync.yaml")
	if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
}
