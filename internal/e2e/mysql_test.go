package e2e

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/testenv"
)

// mysqlBundle is a sync from a MySQL/MariaDB table of its own to a fake
// Brevo, in bulk mode with identity id and cursor_column updated_at.
type mysqlBundle struct {
	*testBundle
	db *sql.DB
	// want is every row's expected FIRSTNAME and SCORE at the fake, by e-mail.
	want map[string][2]string
}

// mysqlName is row i's first name: commas, quotes and non-ASCII text, as
// they must arrive.
func mysqlName(i int) string {
	return []string{"Zoë", "O'Brien, Pat", `Jo "JJ"`, "李雷", "Ada"}[i%5] + fmt.Sprint(i)
}

func setupMySQL(t *testing.T, rows, pageSize int, opts fakebrevo.Options) *mysqlBundle {
	t.Helper()
	dsn, db := testenv.MySQLDatabase(t)
	if _, err := db.Exec(`CREATE TABLE contacts (id BIGINT PRIMARY KEY, email VARCHAR(100) NOT NULL,
		first_name VARCHAR(100) NOT NULL, score DECIMAL(10,2) NOT NULL,
		updated_at TIMESTAMP(6) NOT NULL DEFAULT CURRENT_TIMESTAMP(6) ON UPDATE CURRENT_TIMESTAMP(6),
		KEY (updated_at, id)) CHARACTER SET utf8mb4`); err != nil {
		t.Fatal(err)
	}
	mb := &mysqlBundle{db: db, want: map[string][2]string{}}
	mb.insert(t, 1, rows, "")
	tb := &testBundle{t: t, dir: t.TempDir()}
	opts.APIKey, opts.Validate = apiKey, true
	opts.Attributes = fakebrevo.WithAttributes("SCORE")
	tb.fake = fakebrevo.New(opts)
	tb.srv = newServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tb.mu.Lock()
		ic := tb.intercept
		tb.mu.Unlock()
		if ic != nil && ic(w, r) {
			return
		}
		tb.fake.ServeHTTP(w, r)
	}))
	tb.config = filepath.Join(tb.dir, "oncesync.yaml")
	cfg := fmt.Sprintf(`store: sqlite://./oncesync.db
settings: {lease_ttl: 30s, lease_renew: 10s}
syncs:
  - id: contacts
    workspace: acme
    source: {type: mysql, dsn: "%s", table: contacts, cursor_column: updated_at, identity: id, page_size: %d}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: bulk, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name, SCORE: score}}
`, dsn, pageSize, tb.srv.URL)
	if err := os.WriteFile(tb.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	mb.testBundle = tb
	return mb
}

// insert inserts rows from..to; a non-empty prefix marks their names.
func (mb *mysqlBundle) insert(t *testing.T, from, to int, prefix string) {
	t.Helper()
	for start := from; start <= to; start += 1000 {
		var (
			vals []string
			args []any
		)
		for i := start; i <= min(start+999, to); i++ {
			email := fmt.Sprintf("my%06d@example.com", i)
			name, score := prefix+mysqlName(i), fmt.Sprintf("%d.%02d", i%1000, i%100)
			vals = append(vals, "(?, ?, ?, ?)")
			args = append(args, i, email, name, score)
			mb.want[email] = [2]string{name, score}
			if mb.testBundle != nil {
				mb.emails = append(mb.emails, email)
			}
		}
		if _, err := mb.db.Exec("INSERT INTO contacts (id, email, first_name, score) VALUES "+strings.Join(vals, ", "), args...); err != nil {
			t.Fatal(err)
		}
	}
}

// checkValues asserts every row is at the fake with its current values,
// written once per version, and /_stats reports no duplicate write.
func (mb *mysqlBundle) checkValues(t *testing.T, wantWritten int) {
	t.Helper()
	for email, w := range mb.want {
		c, ok := mb.fake.Contact(email)
		if !ok {
			t.Fatalf("%s is not at the fake", email)
		}
		if got := fmt.Sprint(c.Attributes["FIRSTNAME"]); got != w[0] {
			t.Fatalf("%s: FIRSTNAME %q, want %q", email, got, w[0])
		}
		if got := fmt.Sprintf("%.2f", toFloat(t, c.Attributes["SCORE"])); got != w[1] {
			t.Fatalf("%s: SCORE %q, want %q", email, got, w[1])
		}
	}
	resp, err := http.Get(mb.srv.URL + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Contacts        int64 `json:"contacts"`
		ContactsWritten int64 `json:"contacts_written"`
		DuplicateWrites int64 `json:"duplicate_writes"`
		Invalid         int64 `json:"invalid"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	if st.Contacts != int64(len(mb.want)) || st.ContactsWritten != int64(wantWritten) || st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("/_stats %+v: want %d contacts, %d writes, 0 duplicates, 0 invalid", st, len(mb.want), wantWritten)
	}
}

func toFloat(t *testing.T, v any) float64 {
	t.Helper()
	switch v := v.(type) {
	case float64:
		return v
	case string:
		var f float64
		if _, err := fmt.Sscan(v, &f); err == nil {
			return f
		}
	}
	t.Fatalf("SCORE %#v is not a number", v)
	return 0
}

// TestMySQLKillNine: a MySQL → Brevo sync whose worker is killed with
// SIGKILL twice (after Brevo applied a write it never heard back about, and
// anywhere once the run made progress), then resumed: every row is at the
// fake exactly once with its values.
func TestMySQLKillNine(t *testing.T) {
	t.Parallel()
	const rows, pageSize, every = 20000, 250, 8
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
	mb := setupMySQL(t, rows, pageSize, fakebrevo.Options{
		AfterWrite: func(*http.Request) {
			mu.Lock()
			defer mu.Unlock()
			writes++
			if armed && writes == every {
				armed = false
				kill()
			}
		},
	})
	run := func() *proc {
		p := mb.startRun()
		mu.Lock()
		victim = p.Cmd.Process
		mu.Unlock()
		return p
	}
	if code := run().Wait(t, 2*time.Minute); code != -int(syscall.SIGKILL) {
		t.Fatalf("run 1 should have been killed, exit %d", code)
	}
	before := mb.stats().ContactsWritten
	p2 := run()
	// Run 2's own progress: run 1's last imports may still be processed
	// after its death, so the fake's count alone proves nothing.
	checkpointed := regexp.MustCompile(`msg="page checkpointed" sync=contacts run=2 `)
	waitFor(t, time.Minute, "run 2 to make progress", func() bool {
		return mb.stats().ContactsWritten >= before+pageSize && checkpointed.MatchString(p2.Out.String())
	})
	mu.Lock()
	kill()
	mu.Unlock()
	if code := p2.Wait(t, time.Minute); code != -int(syscall.SIGKILL) {
		t.Fatalf("run 2 should have been killed, exit %d\n%s", code, p2.Out)
	}
	if mb.stats().Contacts >= rows {
		t.Fatal("run 2 finished before the kill; the test proves nothing")
	}
	p3 := run()
	if code := p3.Wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("final run exit %d:\n%s", code, p3.Out)
	}
	if out := p3.Out.String(); !strings.Contains(out, "resuming the work of run 2, which stopped without finishing") {
		t.Fatalf("the final run does not say it resumed the killed run 2:\n%s", out)
	}
	mb.checkValues(t, rows)
	mb.checkNoSecrets(t)
}

// TestMySQLIncremental: rows updated or inserted between runs are sent once
// with their new values; unchanged rows are never sent again, and a run
// without changes sends nothing.
func TestMySQLIncremental(t *testing.T) {
	t.Parallel()
	const rows = 3000
	mb := setupMySQL(t, rows, 500, fakebrevo.Options{})
	runOK := func(what string) {
		t.Helper()
		if p := mb.startRun(); p.Wait(t, 2*time.Minute) != 0 {
			t.Fatalf("%s failed:\n%s", what, p.Out)
		}
	}
	runOK("first run")
	mb.checkValues(t, rows)

	// Update 300 rows spread over the table, insert 200.
	if _, err := mb.db.Exec("UPDATE contacts SET first_name = CONCAT('Changed ', first_name), score = score + 1 WHERE id % 10 = 3"); err != nil {
		t.Fatal(err)
	}
	for i := 3; i <= rows; i += 10 {
		email := fmt.Sprintf("my%06d@example.com", i)
		w := mb.want[email]
		var f float64
		fmt.Sscan(w[1], &f)
		mb.want[email] = [2]string{"Changed " + w[0], fmt.Sprintf("%.2f", f+1)}
	}
	mb.insert(t, rows+1, rows+200, "New ")
	runOK("second run")
	mb.checkValues(t, rows+300+200)

	before := mb.stats().Requests
	runOK("third run")
	if n := mb.stats().Requests - before; n != 0 {
		t.Fatalf("a run without changes sent %d requests", n)
	}
	mb.checkValues(t, rows+300+200)
	mb.checkNoSecrets(t)
}

// TestMySQLRecordTooLarge: a row larger than max_record_bytes (1 MiB by
// default) fails the run with source_query_invalid, and nothing of its
// page is sent.
func TestMySQLRecordTooLarge(t *testing.T) {
	t.Parallel()
	mb := setupMySQL(t, 10, 500, fakebrevo.Options{})
	if _, err := mb.db.Exec("UPDATE contacts SET first_name = 'Big' WHERE id = 5"); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.db.Exec("ALTER TABLE contacts ADD COLUMN notes LONGTEXT"); err != nil {
		t.Fatal(err)
	}
	if _, err := mb.db.Exec("UPDATE contacts SET notes = REPEAT('x', 1100000) WHERE id = 5"); err != nil {
		t.Fatal(err)
	}
	p := mb.startRun()
	code := p.Wait(t, time.Minute)
	out := p.Out.String()
	if code != 1 || !strings.Contains(out, "failed: source_query_invalid:") || !strings.Contains(out, "max_record_bytes") {
		t.Fatalf("exit %d, want 1 with source_query_invalid about max_record_bytes:\n%s", code, out)
	}
	if strings.Contains(out, "xxxxxxxx") {
		t.Fatal("the output quotes the row's value")
	}
	if st := mb.stats(); st.ContactsWritten != 0 {
		t.Fatalf("%d contacts written from a page that could not be read", st.ContactsWritten)
	}
}

// TestMySQLRejectedRowReadAgain: a row the destination rejected is read
// again by identity on the next run (source.Refetcher), though the cursor
// has moved past it and its cursor column did not change; once fixed it is
// delivered, once, with its values.
func TestMySQLRejectedRowReadAgain(t *testing.T) {
	t.Parallel()
	const rows = 500
	mb := setupMySQL(t, rows, 200, fakebrevo.Options{RefuseEmails: []string{"bad000123@example.com"}})
	if _, err := mb.db.Exec("UPDATE contacts SET email = 'bad000123@example.com' WHERE id = 123"); err != nil {
		t.Fatal(err)
	}
	p := mb.startRun()
	if code := p.Wait(t, time.Minute); code != 0 {
		t.Fatalf("run 1 exit %d:\n%s", code, p.Out)
	}
	if !strings.Contains(p.Out.String(), "written 499, replayed from ledger 0, rejected 1,") {
		t.Fatalf("run 1 summary:\n%s", p.Out)
	}
	if _, ok := mb.fake.Contact("my000123@example.com"); ok {
		t.Fatal("row 123 is at the fake before it was fixed")
	}
	// Fixed without moving the cursor column (updated_at kept as it was).
	if _, err := mb.db.Exec("UPDATE contacts SET email = 'my000123@example.com', updated_at = updated_at WHERE id = 123"); err != nil {
		t.Fatal(err)
	}
	p2 := mb.startRun()
	if code := p2.Wait(t, time.Minute); code != 0 {
		t.Fatalf("run 2 exit %d:\n%s", code, p2.Out)
	}
	if !strings.Contains(p2.Out.String(), "written 1,") {
		t.Fatalf("run 2 summary:\n%s", p2.Out)
	}
	mb.checkValues(t, rows)
	mb.checkNoSecrets(t)
}
