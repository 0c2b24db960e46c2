package web

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"

	"github.com/oncesync/oncesync/internal/breaker"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

const (
	testUser     = "ana"
	testPassword = "correct horse battery staple"
	testToken    = "test-token-0123456789"
	// testTokenName is testToken's name in the audit log.
	testTokenName = "ci-bot"
	// secretValue must never appear in a page or response.
	secretValue = "xkeysib-SECRET-must-not-render"
)

var (
	hashOnce sync.Once
	testHash string
)

func passwordHash(tb testing.TB) string {
	hashOnce.Do(func() {
		h, err := bcrypt.GenerateFromPassword([]byte(testPassword), bcrypt.MinCost)
		if err != nil {
			tb.Fatal(err)
		}
		testHash = string(h)
	})
	return testHash
}

var t0 = time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC)

// openStore opens a real SQLite store in a temp dir (in /dev/shm when it
// exists, so fsyncs of a large seed are cheap).
func openStore(tb testing.TB, clk clock.Clock) *sqlite.Store {
	tb.Helper()
	st, _ := openStoreAt(tb, clk)
	return st
}

// openStoreAt is openStore, also returning the file's path (to open it
// again).
func openStoreAt(tb testing.TB, clk clock.Clock) (*sqlite.Store, string) {
	tb.Helper()
	dir := ""
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "oncesync-web-")
		if err == nil {
			dir = d
			tb.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	if dir == "" {
		dir = tb.TempDir()
	}
	st, err := sqlite.Open(context.Background(), sqlite.OpenParams{Path: dir + "/store.db", Clock: clk})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	return st, dir + "/store.db"
}

func definition(id, workspace, schedule string) string {
	sched := ""
	if schedule != "" {
		sched = fmt.Sprintf(`"schedule":%q,`, schedule)
	}
	return fmt.Sprintf(`{"id":%q,"workspace":%q,%s"source":{"type":"csv","path":"contacts.csv","page_size":500},`+
		`"destination":{"type":"brevo","base_url":"https://api.brevo.com/v3","mode":"bulk","api_key":%q,"headers":["api-key"]},`+
		`"mapping":{"email":"email"}}`, id, workspace, sched, secretValue)
}

// seeder writes realistic rows through the store's methods.
type seeder struct {
	tb  testing.TB
	ctx context.Context
	st  store.Store
	clk *clock.Fake
}

func (s seeder) sync(id, workspace, schedule string) {
	s.tb.Helper()
	if _, err := s.st.PutSync(s.ctx, store.PutSyncParams{ID: id, Workspace: workspace, Definition: definition(id, workspace, schedule)}); err != nil {
		s.tb.Fatal(err)
	}
	s.clk.Advance(time.Minute)
}

// run records a finished run of d.
func (s seeder) run(syncID string, state store.RunState, code failure.Code, detail string, c store.Counters, d time.Duration) store.Run {
	s.tb.Helper()
	r, err := s.st.InsertRun(s.ctx, store.InsertRunParams{SyncID: syncID, State: store.RunRunning, Attempt: 1})
	if err != nil {
		s.tb.Fatal(err)
	}
	s.clk.Advance(d)
	r.State, r.FailureCode, r.FailureDetail, r.Counters = state, string(code), detail, c
	if err := s.st.UpdateRun(s.ctx, r); err != nil {
		s.tb.Fatal(err)
	}
	s.clk.Advance(time.Minute)
	got, err := s.st.GetRun(s.ctx, r.ID)
	if err != nil {
		s.tb.Fatal(err)
	}
	return got
}

// pages records n checkpointed pages of run, 500 records each; the last
// page carries the run's replays, rejections and in-doubt records.
func (s seeder) pages(run store.Run, n int) {
	s.tb.Helper()
	for i := 1; i <= n; i++ {
		p := store.RunPage{RunID: run.ID, Page: int64(i), Read: 500, Claimed: 500, Sent: 500, Requests: 1,
			CheckpointedAt: run.StartedAt.Add(time.Duration(i) * time.Second)}
		if i == n {
			p.Claimed, p.Sent, p.Replayed, p.Rejected, p.InDoubt = 458, 456, 40, 2, 2
		}
		if err := s.st.RecordRunPage(s.ctx, p); err != nil {
			s.tb.Fatal(err)
		}
	}
}

func key(parts ...any) string {
	sum := sha256.Sum256([]byte(fmt.Sprint(parts...)))
	return hex.EncodeToString(sum[:])
}

// records runs syncID under a fresh lease: it claims and finishes keys
// (rejected with messages, in doubt), saves the cursor and releases.
func (s seeder) records(syncID string, runID int64, rejected, inDoubt []string, cursor string) int64 {
	s.tb.Helper()
	l, err := s.st.LeaseAcquire(s.ctx, store.LeaseAcquireParams{SyncID: syncID, Token: key("tok", runID), Holder: "host-a/boot-1/pid-4242", RunID: runID, TTL: 30 * time.Second})
	if err != nil {
		s.tb.Fatal(err)
	}
	all := append(append([]string(nil), rejected...), inDoubt...)
	for i := 0; i < len(all); i += 500 {
		j := min(i+500, len(all))
		if err := s.st.LedgerClaim(s.ctx, store.LedgerClaimParams{SyncID: syncID, Fence: l.Fence, RunID: runID, Keys: all[i:j]}); err != nil {
			s.tb.Fatal(err)
		}
		var fin []store.LedgerFinish
		for _, k := range all[i:j] {
			// Each record's identity is "id-" and its index among all.
			id := fmt.Sprint("id-", i+len(fin))
			slot := ledger.Slot(syncID, "csv:/seed.csv", id)
			if len(fin)+i < len(rejected) {
				fin = append(fin, store.LedgerFinish{Key: k, State: store.LedgerRejected, Message: "Invalid phone number (attribute SMS)",
					Result: ledger.RejectedResult(slot, id)})
			} else {
				fin = append(fin, store.LedgerFinish{Key: k, State: store.LedgerInDoubt, Result: ledger.InDoubtResult(slot, id)})
			}
		}
		if err := s.st.LedgerFinish(s.ctx, store.LedgerFinishParams{SyncID: syncID, Fence: l.Fence, RunID: runID, Entries: fin}); err != nil {
			s.tb.Fatal(err)
		}
	}
	if err := s.st.SaveCursor(s.ctx, store.SaveCursorParams{SyncID: syncID, Value: cursor, Fence: l.Fence, RunID: runID}); err != nil {
		s.tb.Fatal(err)
	}
	if err := s.st.LeaseRelease(s.ctx, syncID, l.Token); err != nil {
		s.tb.Fatal(err)
	}
	r, err := s.st.GetRun(s.ctx, runID)
	if err != nil {
		s.tb.Fatal(err)
	}
	r.Fence = l.Fence
	if err := s.st.UpdateRun(s.ctx, r); err != nil {
		s.tb.Fatal(err)
	}
	return l.Fence
}

// demo is the fixture every test and the screenshots use.
type demo struct {
	Healthy, Breaker, Person, Silent, NoRuns, Failing string
	RecordsRun                                        store.Run
	Rejected, InDoubt                                 []string
}

func seedDemo(tb testing.TB, ctx context.Context, st store.Store, clk *clock.Fake) demo {
	s := seeder{tb: tb, ctx: ctx, st: st, clk: clk}
	d := demo{
		Healthy: "newsletter-contacts", Breaker: "crm-leads", Person: "webinar-signups",
		Silent: "warehouse-events", NoRuns: "orders-backfill", Failing: "churn-scores",
	}
	s.sync(d.Healthy, "marketing", "*/15 * * * *")
	s.sync(d.Breaker, "marketing", "0 * * * *")
	s.sync(d.Person, "marketing", "")
	s.sync(d.Silent, "data", "@hourly")
	s.sync(d.NoRuns, "data", "0 3 * * *")
	s.sync(d.Failing, "data", "30 * * * *")

	ok := store.Counters{Read: 12000, Written: 11950, Replayed: 40, Rejected: 2, InDoubt: 2, Pages: 24, Requests: 24}
	s.run(d.Healthy, store.RunSucceeded, "", "", store.Counters{Read: 12000, Written: 12000, Pages: 24, Requests: 24}, 42*time.Second)
	s.run(d.Healthy, store.RunSucceeded, "", "", store.Counters{Read: 300, Written: 10, Replayed: 290, Pages: 1, Requests: 1}, 3*time.Second)
	d.RecordsRun = s.run(d.Healthy, store.RunSucceeded, "", "", ok, 40*time.Second)
	for i := range 2 {
		d.Rejected = append(d.Rejected, key("rejected", i))
		d.InDoubt = append(d.InDoubt, key("in-doubt", i))
	}
	s.records(d.Healthy, d.RecordsRun.ID, d.Rejected, d.InDoubt, "offset:12000")
	d.RecordsRun, _ = st.GetRun(ctx, d.RecordsRun.ID)
	s.pages(d.RecordsRun, 24)

	s.run(d.Breaker, store.RunSucceeded, "", "", store.Counters{Read: 800, Written: 800, Pages: 2, Requests: 2}, 8*time.Second)
	b := breaker.New(breaker.Params{Store: st})
	for range breaker.DefaultThreshold {
		s.run(d.Breaker, store.RunFailed, failure.DestinationAuth, "brevo answered 401 unauthorized: key not found", store.Counters{}, 2*time.Second)
		if _, err := b.AfterFailure(ctx, d.Breaker, breaker.DefaultThreshold); err != nil {
			tb.Fatal(err)
		}
	}

	s.run(d.Person, store.RunSucceeded, "", "", store.Counters{Read: 50, Written: 50, Pages: 1, Requests: 1}, time.Second)
	if _, err := st.SetSyncState(ctx, store.SetSyncStateParams{ID: d.Person, State: store.SyncPaused, Reason: "person", By: "Bo", Why: "campaign over until January"}); err != nil {
		tb.Fatal(err)
	}

	s.run(d.Silent, store.RunFailed, failure.SourceUnavailable, "open warehouse export: no such file", store.Counters{}, time.Second)
	s.run(d.Failing, store.RunSucceeded, "", "", store.Counters{Read: 90, Written: 90, Pages: 1, Requests: 1}, time.Second)
	s.run(d.Failing, store.RunFailed, failure.DestinationUnavailable, "brevo answered 503 three times", store.Counters{Read: 500}, 9*time.Second)
	s.run(d.Failing, store.RunFailed, failure.DestinationUnavailable, "brevo answered 503 three times", store.Counters{Read: 500}, 9*time.Second)
	return d
}

// bundle is a test's server over a seeded store.
type bundle struct {
	t        *testing.T
	ctx      context.Context
	st       *sqlite.Store
	path     string // the store's file
	clk      *clock.Fake
	srv      *Server
	d        demo
	mu       sync.Mutex
	enqueued []string
}

type option func(*Params)

func setup(t *testing.T, opts ...option) *bundle {
	t.Helper()
	clk := clock.NewFake(t0)
	b := &bundle{t: t, ctx: context.Background(), clk: clk}
	b.st, b.path = openStoreAt(t, clk)
	b.d = seedDemo(t, b.ctx, b.st, clk)
	p := Params{
		Store: b.st, Clock: clk, APITokens: []Token{
			{Name: "other", Secret: "other-token", Access: Access{Role: RoleAdmin}},
			{Name: testTokenName, Secret: testToken, Access: Access{Role: RoleAdmin}},
		},
		DescribeCursor: func(syncID, cursor string) string {
			if cursor == "offset:12000" {
				return "after record 12,000 of contacts.csv"
			}
			return ""
		},
		Users: map[string]User{testUser: {Hash: passwordHash(t), Access: Access{Role: RoleAdmin}}},
		Enqueue: func(ctx context.Context, syncID, reason string) error {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.enqueued = append(b.enqueued, syncID+":"+reason)
			return nil
		},
		Silence: func(context.Context) (map[string]string, error) {
			return map[string]string{b.d.Silent: "runs_without_success", b.d.NoRuns: "no_runs",
				b.d.Breaker: "runs_without_success", b.d.Person: "no_runs"}, nil
		},
	}
	for _, o := range opts {
		o(&p)
	}
	srv, err := New(p)
	if err != nil {
		t.Fatal(err)
	}
	b.srv = srv
	return b
}

// signIn starts a session of the test user directly and returns its
// cookie and CSRF token.
func (b *bundle) signIn() (*http.Cookie, string) {
	return b.signInAs(testUser)
}

// signInAs starts a session of a configured user.
func (b *bundle) signInAs(user string) (*http.Cookie, string) {
	b.t.Helper()
	u, ok := b.srv.users[user]
	if !ok {
		b.t.Fatalf("no user %q", user)
	}
	secret, err := b.srv.createSession(b.ctx, principalOf(user, u.Access), providerPassword)
	if err != nil {
		b.t.Fatal(err)
	}
	return &http.Cookie{Name: b.srv.cookieName(), Value: secret}, csrfOf(secret)
}

type resp struct {
	code int
	hdr  http.Header
	body string
}

func (b *bundle) do(req *http.Request) resp {
	b.t.Helper()
	rec := httptest.NewRecorder()
	b.srv.ServeHTTP(rec, req)
	body, _ := io.ReadAll(rec.Result().Body)
	return resp{code: rec.Code, hdr: rec.Result().Header, body: string(body)}
}

// get fetches a page as the signed-in user.
func (b *bundle) get(path string) resp {
	b.t.Helper()
	c, _ := b.signIn()
	req := httptest.NewRequest("GET", path, nil)
	req.AddCookie(c)
	return b.do(req)
}

// post submits a form as the signed-in user, from this site.
func (b *bundle) post(path string, form url.Values) resp {
	b.t.Helper()
	c, csrf := b.signIn()
	form.Set("csrf", csrf)
	req := httptest.NewRequest("POST", path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(c)
	return b.do(req)
}

func mustContain(t *testing.T, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("body lacks %q", w)
		}
	}
}

func mustNotContain(t *testing.T, body string, bad ...string) {
	t.Helper()
	for _, w := range bad {
		if strings.Contains(body, w) {
			t.Errorf("body contains %q", w)
		}
	}
}

func argonKey(pw string, a argon2Hash) string {
	return base64.RawStdEncoding.EncodeToString(argon2.IDKey([]byte(pw), a.salt, a.time, a.memory, a.threads, 32))
}
