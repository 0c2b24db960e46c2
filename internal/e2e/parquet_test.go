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

	pq "github.com/parquet-go/parquet-go"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// parquetContact is a row of the warehouse export the parquet test syncs.
type parquetContact struct {
	ID        int64     `parquet:"id"`
	Email     string    `parquet:"email"`
	FirstName string    `parquet:"first_name"`
	LastName  *string   `parquet:"last_name,optional"`
	SignedUp  time.Time `parquet:"signed_up,timestamp(millisecond)"`
}

// writeParquetPart writes rows ids from..to (first_name First<id>, or
// names[id]) as one file of the export, in row groups of 400.
func writeParquetPart(t *testing.T, dir, name string, from, to int, names map[int]string) {
	t.Helper()
	var rows []parquetContact
	for i := from; i <= to; i++ {
		first := fmt.Sprintf("First%d", i)
		if n, ok := names[i]; ok {
			first = n
		}
		var last *string
		if i%3 != 0 {
			l := "Last" + fmt.Sprint(i%7)
			last = &l
		}
		rows = append(rows, parquetContact{ID: int64(i), Email: fmt.Sprintf("person%06d@example.com", i), FirstName: first,
			LastName: last, SignedUp: time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)})
	}
	tmp := filepath.Join(dir, "."+name) // hidden until whole, as exporters do
	if err := pq.WriteFile(tmp, rows, pq.MaxRowsPerRowGroup(400)); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// checkParquetValues asserts every contact 1..n is at the fake with the
// values of its row.
func checkParquetValues(t *testing.T, fake *fakebrevo.Server, n int, names map[int]string) {
	t.Helper()
	for i := 1; i <= n; i++ {
		email := fmt.Sprintf("person%06d@example.com", i)
		c, ok := fake.Contact(email)
		want := fmt.Sprintf("First%d", i)
		if name, ok := names[i]; ok {
			want = name
		}
		if !ok || c.Attributes["FIRSTNAME"] != want || c.ExtID != fmt.Sprint(i) {
			t.Fatalf("row %d: Brevo holds %+v (found %v); want FIRSTNAME %s, ext_id %d", i, c, ok, want, i)
		}
		if last, ok := c.Attributes["LASTNAME"]; i%3 != 0 && last != "Last"+fmt.Sprint(i%7) || i%3 == 0 && ok && last != nil && last != "" {
			t.Fatalf("row %d: LASTNAME %#v", i, last)
		}
	}
}

// TestParquetDirectoryKillNine: a sync of a directory of Parquet files into
// Brevo, killed with SIGKILL mid-run and run again: every row once with its
// values. A file added to the directory is all the next run sends, and a
// row changed in a rewritten file is sent once more, with its new value.
func TestParquetDirectoryKillNine(t *testing.T) {
	t.Parallel()
	const files, perFile = 4, 1500
	var (
		mu     sync.Mutex
		victim *os.Process
		writes int
	)
	tb := setup(t, setupParams{mode: "bulk", opts: fakebrevo.Options{
		AfterWrite: func(*http.Request) {
			mu.Lock()
			defer mu.Unlock()
			writes++
			// Brevo applied the 8th import; the worker dies before it hears back.
			if writes == 8 && victim != nil {
				_ = victim.Signal(syscall.SIGKILL)
				victim = nil
			}
		},
	}})
	export := filepath.Join(tb.dir, "export")
	if err := os.Mkdir(export, 0o700); err != nil {
		t.Fatal(err)
	}
	for f := range files {
		writeParquetPart(t, export, fmt.Sprintf("part-%05d.parquet", f), f*perFile+1, (f+1)*perFile, nil)
	}
	cfg := fmt.Sprintf(`store: sqlite://./oncesync.db
settings: {lease_ttl: 30s, lease_renew: 10s}
syncs:
  - id: contacts
    workspace: acme
    source: {type: parquet, path: export, page_size: 250, identity: id}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: bulk, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, ext_id: id, attributes: {FIRSTNAME: first_name, LASTNAME: last_name}}
`, tb.srv.URL)
	if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
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
	if n := tb.stats().Contacts; n == 0 || n >= files*perFile {
		t.Fatalf("run 1 was killed after %d of %d contacts; the test proves nothing", n, files*perFile)
	}
	p := run()
	if code := p.Wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("run 2 exit %d:\n%s", code, p.Out)
	}
	if out := p.Out.String(); !strings.Contains(out, "resuming the work of run 1") {
		t.Fatalf("run 2 does not say it resumed the killed run 1:\n%s", out)
	}
	for i := 1; i <= files*perFile; i++ {
		tb.emails = append(tb.emails, fmt.Sprintf("person%06d@example.com", i))
	}
	tb.checkDelivered(t)
	checkParquetValues(t, tb.fake, files*perFile, nil)

	// A new export file: only its rows are sent.
	writeParquetPart(t, export, "part-00004.parquet", files*perFile+1, files*perFile+300, nil)
	before := tb.stats().ContactsWritten
	if p := run(); p.Wait(t, 2*time.Minute) != 0 {
		t.Fatalf("run 3 failed:\n%s", p.Out)
	}
	if got := tb.stats().ContactsWritten - before; got != 300 {
		t.Fatalf("run 3 wrote %d contacts; want the new file's 300", got)
	}
	for i := files*perFile + 1; i <= files*perFile+300; i++ {
		tb.emails = append(tb.emails, fmt.Sprintf("person%06d@example.com", i))
	}
	tb.checkDelivered(t)

	// A re-exported file with one row changed: that row alone is sent.
	changed := map[int]string{perFile + 7: "Changed"}
	writeParquetPart(t, export, "part-00001.parquet", perFile+1, 2*perFile, changed)
	before = tb.stats().ContactsWritten
	if p := run(); p.Wait(t, 2*time.Minute) != 0 {
		t.Fatalf("run 4 failed:\n%s", p.Out)
	}
	st := tb.stats()
	if got := st.ContactsWritten - before; got != 1 || st.DuplicateWrites != 0 {
		t.Fatalf("run 4 wrote %d contacts (%d duplicates); want the changed row once", got, st.DuplicateWrites)
	}
	checkParquetValues(t, tb.fake, files*perFile+300, changed)
	tb.checkNoSecrets(t)
}
