package web

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/store"
)

// concretePath fills a route's wildcards.
func concretePath(p string, syncID string, runID int64) string {
	p = strings.ReplaceAll(p, "{$}", "")
	p = strings.ReplaceAll(p, "{dl}", "dl-1")
	if strings.HasPrefix(p, "/runs/") || strings.HasPrefix(p, "/api/v1/runs/") {
		return strings.ReplaceAll(p, "{id}", fmt.Sprint(runID))
	}
	return strings.ReplaceAll(p, "{id}", syncID)
}

func TestEveryRouteRefusesUnauthenticated(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	reg.MustRegister(prometheus.NewCounter(prometheus.CounterOpts{Name: "oncesync_test_total", Help: "test"}))
	extra := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "river ui "+b64secret) })
	b := setup(t, func(p *Params) {
		p.Metrics = reg
		p.Extra = map[string]http.Handler{"/riverui/": extra}
		p.Requeue = func(context.Context, RequeueParams) error { return nil }
	})
	routes := append([]route(nil), b.srv.routes...)
	routes = append(routes, route{method: "GET", path: "/riverui/", kind: kindExtra}, route{method: "POST", path: "/riverui/api/jobs/cancel", kind: kindExtra})
	tested := 0
	for _, r := range routes {
		if r.kind == kindPublic {
			continue
		}
		methods := []string{r.method}
		if r.method == "" {
			methods = []string{"GET", "POST"}
		}
		for _, m := range methods {
			path := concretePath(r.path, b.d.Breaker, b.d.RecordsRun.ID)
			if path == "/api/" {
				path = "/api/v2/nothing"
			}
			if r.path == "/" {
				path = "/no/such/page"
			}
			name := m + " " + path
			tested++
			t.Run(name, func(t *testing.T) {
				for _, cred := range []struct {
					name string
					set  func(*http.Request)
				}{
					{"none", func(*http.Request) {}},
					{"wrong token", func(r *http.Request) { r.Header.Set("Authorization", "Bearer nope") }},
					{"token prefix", func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+testToken[:10]) }},
					{"forged cookie", func(r *http.Request) { r.AddCookie(&http.Cookie{Name: sessionCookie, Value: "forged"}) }},
					{"basic auth", func(r *http.Request) { r.SetBasicAuth(testUser, testPassword) }},
				} {
					req := httptest.NewRequest(m, path, strings.NewReader(`{"by":"x","why":"y"}`))
					cred.set(req)
					got := b.do(req)
					switch {
					case r.kind == kindPage && m == "GET" || r.kind == kindExtra && m == "GET":
						if got.code != http.StatusSeeOther || !strings.HasPrefix(got.hdr.Get("Location"), "/login?next=") {
							t.Errorf("%s: got %d %q, want a redirect to /login", cred.name, got.code, got.hdr.Get("Location"))
						}
					default:
						if got.code != http.StatusUnauthorized {
							t.Errorf("%s: got %d, want 401", cred.name, got.code)
						}
					}
					mustNotContain(t, got.body, b.d.Breaker, b.d.Healthy, "river ui", "oncesync_test_total", failure.Lookup(failure.DestinationAuth).NextStep)
				}
				// The route is real: with credentials it is not refused.
				req := httptest.NewRequest(m, path, strings.NewReader(`{}`))
				if r.kind == kindAPI || r.kind == kindMetrics {
					req.Header.Set("Authorization", "Bearer "+testToken)
				} else {
					c, _ := b.signIn()
					req.AddCookie(c)
				}
				got := b.do(req)
				if got.code == http.StatusUnauthorized || got.code == http.StatusSeeOther && strings.HasPrefix(got.hdr.Get("Location"), "/login") {
					t.Errorf("authenticated: got %d %s", got.code, got.hdr.Get("Location"))
				}
			})
		}
	}
	if tested < 25 {
		t.Fatalf("walked %d routes; the table looks incomplete", tested)
	}
}

const b64secret = "c2VjcmV0"

func TestExpiredSessionIsRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	c, _ := b.signIn()
	req := httptest.NewRequest("GET", "/", nil)
	req.AddCookie(c)
	if got := b.do(req); got.code != http.StatusOK {
		t.Fatalf("fresh session: %d", got.code)
	}
	b.clk.Advance(DefaultSessionTTL + time.Second)
	req = httptest.NewRequest("GET", "/", nil)
	req.AddCookie(c)
	if got := b.do(req); got.code != http.StatusSeeOther {
		t.Fatalf("expired session: got %d, want 303 to /login", got.code)
	}
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

func TestLogin(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		t.Run(fmt.Sprintf("secure=%v", secure), func(t *testing.T) {
			t.Parallel()
			b := setup(t, func(p *Params) { p.Secure = secure })
			form := b.do(httptest.NewRequest("GET", "/login?next=/syncs/crm-leads", nil))
			if form.code != 200 {
				t.Fatalf("login form: %d", form.code)
			}
			m := csrfField.FindStringSubmatch(form.body)
			if m == nil {
				t.Fatal("login form has no csrf field")
			}
			var loginC *http.Cookie
			for _, c := range (&http.Response{Header: form.hdr}).Cookies() {
				if c.Name == b.srv.loginCookieName() {
					loginC = c
				}
			}
			if loginC == nil {
				t.Fatal("no login cookie")
			}
			submit := func(user, pw, token, site string, cookie bool) resp {
				v := url.Values{"user": {user}, "password": {pw}, "csrf": {token}, "next": {"/syncs/crm-leads"}}
				req := httptest.NewRequest("POST", "/login", strings.NewReader(v.Encode()))
				req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
				if site != "" {
					req.Header.Set("Sec-Fetch-Site", site)
				}
				if cookie {
					req.AddCookie(&http.Cookie{Name: loginC.Name, Value: loginC.Value})
				}
				return b.do(req)
			}
			if got := submit(testUser, "wrong", m[1], "same-origin", true); got.code != http.StatusUnauthorized || strings.Contains(got.body, "wrong\"") {
				t.Errorf("wrong password: %d", got.code)
			}
			if got := submit("nobody", testPassword, m[1], "same-origin", true); got.code != http.StatusUnauthorized {
				t.Errorf("unknown user: %d", got.code)
			}
			if got := submit(testUser, testPassword, m[1], "same-origin", false); got.code != http.StatusForbidden {
				t.Errorf("no login cookie: %d", got.code)
			}
			if got := submit(testUser, testPassword, m[1], "cross-site", true); got.code != http.StatusForbidden {
				t.Errorf("cross-site login: %d", got.code)
			}
			got := submit(testUser, testPassword, m[1], "same-origin", true)
			if got.code != http.StatusSeeOther || got.hdr.Get("Location") != "/syncs/crm-leads" {
				t.Fatalf("sign in: %d %q", got.code, got.hdr.Get("Location"))
			}
			var sess *http.Cookie
			for _, c := range (&http.Response{Header: got.hdr}).Cookies() {
				if c.Name == b.srv.cookieName() {
					sess = c
				}
			}
			if sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode || sess.Secure != secure || sess.Path != "/" {
				t.Fatalf("session cookie %+v", sess)
			}
			if secure && !strings.HasPrefix(sess.Name, "__Host-") {
				t.Errorf("secure cookie name %q", sess.Name)
			}
			req := httptest.NewRequest("GET", "/syncs/crm-leads", nil)
			req.AddCookie(sess)
			if page := b.do(req); page.code != 200 || !strings.Contains(page.body, "Paused by the circuit breaker") {
				t.Fatalf("after sign-in: %d", page.code)
			}
		})
	}
}

func TestSafeNext(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"":                     "/",
		"/syncs/a?x=1":         "/syncs/a?x=1",
		"//evil.example/":      "/",
		"/\\evil.example":      "/",
		"https://evil.example": "/",
		"/login?next=/":        "/",
		"javascript:alert(1)":  "/",
	} {
		if got := safeNext(in); got != want {
			t.Errorf("safeNext(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestArgon2idUsers(t *testing.T) {
	t.Parallel()
	// argon2id of "pw" with salt "saltsaltsaltsalt", m=64 KiB, t=1, p=1 (computed by x/crypto/argon2).
	h := "$argon2id$v=19$m=64,t=1,p=1$c2FsdHNhbHRzYWx0c2FsdA$"
	a := argon2Hash{memory: 64, time: 1, threads: 1, salt: []byte("saltsaltsaltsalt"), key: make([]byte, 32)}
	key := argonKey("pw", a)
	h += key
	if !supportedHash(h) {
		t.Fatal("argon2id hash not accepted")
	}
	if !checkPassword(h, "pw") || checkPassword(h, "PW") {
		t.Fatal("argon2id check wrong")
	}
	if supportedHash("plaintext") || supportedHash("$argon2id$v=19$m=0,t=1,p=1$AA$AA") {
		t.Fatal("bad hashes accepted")
	}
	if _, err := New(Params{Store: openStore(t, nil), Users: map[string]User{"x": {Hash: "plain", Access: Access{Role: RoleAdmin}}}}); err == nil {
		t.Fatal("New accepted a plaintext password")
	}
}

func TestCrossSiteFormPostRefused(t *testing.T) {
	t.Parallel()
	b := setup(t)
	form := url.Values{"by": {"Mallory"}, "why": {"because"}}
	cases := []struct {
		name   string
		mutate func(*http.Request, string)
		want   int
	}{
		{"sec-fetch-site cross-site", func(r *http.Request, _ string) { r.Header.Set("Sec-Fetch-Site", "cross-site") }, 403},
		{"sec-fetch-site same-site", func(r *http.Request, _ string) { r.Header.Set("Sec-Fetch-Site", "same-site") }, 403},
		{"foreign origin", func(r *http.Request, _ string) { r.Header.Set("Origin", "https://evil.example") }, 403},
		{"no csrf token", func(r *http.Request, _ string) { r.Header.Set("Sec-Fetch-Site", "same-origin"); r.Form = nil }, 403},
		{"wrong csrf token", func(r *http.Request, _ string) { r.Header.Set("Sec-Fetch-Site", "same-origin") }, 403},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, csrf := b.signIn()
			v := url.Values{}
			for k, x := range form {
				v[k] = x
			}
			switch tc.name {
			case "no csrf token":
			case "wrong csrf token":
				v.Set("csrf", csrf+"x")
			default:
				v.Set("csrf", csrf)
			}
			req := httptest.NewRequest("POST", "/syncs/"+b.d.Healthy+"/pause", strings.NewReader(v.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.AddCookie(c)
			tc.mutate(req, csrf)
			if got := b.do(req); got.code != tc.want {
				t.Errorf("got %d, want %d", got.code, tc.want)
			}
			sy, err := b.st.GetSync(b.ctx, b.d.Healthy)
			if err != nil || sy.State != store.SyncActive {
				t.Fatalf("sync changed by a refused post: %+v %v", sy.State, err)
			}
		})
	}
	// The same post from this site goes through.
	if got := b.post("/syncs/"+b.d.Healthy+"/pause", form); got.code != http.StatusSeeOther {
		t.Fatalf("same-site post: %d %s", got.code, got.body)
	}
	if sy, _ := b.st.GetSync(b.ctx, b.d.Healthy); sy.State != store.SyncPaused || sy.PausedBy != testUser {
		t.Fatalf("after pause: %+v", sy)
	}
}

func TestSecurityHeadersAndNoScript(t *testing.T) {
	t.Parallel()
	b := setup(t)
	paths := []string{"/", "/syncs/" + b.d.Breaker, "/syncs/" + b.d.Healthy, "/syncs/" + b.d.Silent,
		fmt.Sprintf("/runs/%d", b.d.RecordsRun.ID), "/audit", "/no/such/page"}
	for _, p := range paths {
		got := b.get(p)
		if p != "/no/such/page" && got.code != 200 {
			t.Errorf("%s: %d", p, got.code)
		}
		for h, want := range map[string]string{
			"Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'",
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
			"Cache-Control":           "no-store",
		} {
			if !strings.Contains(got.hdr.Get(h), want) {
				t.Errorf("%s: %s = %q, want %q", p, h, got.hdr.Get(h), want)
			}
		}
		mustNotContain(t, strings.ToLower(got.body), "<script", " style=", "onclick", "javascript:")
		mustNotContain(t, got.body, secretValue)
	}
	login := b.do(httptest.NewRequest("GET", "/login", nil))
	if !strings.Contains(login.hdr.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Error("login page lacks the CSP")
	}
	css := b.do(httptest.NewRequest("GET", "/static/style.css", nil))
	if css.code != 200 || !strings.HasPrefix(css.hdr.Get("Content-Type"), "text/css") {
		t.Errorf("style.css: %d %s", css.code, css.hdr.Get("Content-Type"))
	}
}

func TestOverview(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got := b.get("/")
	if got.code != 200 {
		t.Fatalf("overview: %d", got.code)
	}
	want := map[string]Health{
		b.d.Healthy: HealthHealthy, b.d.Breaker: HealthPausedBreaker, b.d.Person: HealthPausedPerson,
		b.d.Silent: HealthSilent, b.d.NoRuns: HealthSilent, b.d.Failing: HealthFailing,
	}
	for id, h := range want {
		row := regexp.MustCompile(`(?s)<a href="/syncs/` + id + `">` + id + `</a></td>\s*<td><span class="badge h-` + string(h) + `">`)
		if !row.MatchString(got.body) {
			t.Errorf("%s: no %s badge on its row", id, h)
		}
	}
	mustContain(t, got.body, `<h2 id="workspace-marketing">marketing`, `<h2 id="workspace-data">data`, "paused by breaker 1", "failing 1")
	// Failing streak and next run of the */15 schedule.
	sums, err := b.srv.summaries(b.ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range sums {
		switch s.ID {
		case b.d.Failing:
			// Two destination_unavailable failures: failing, but the
			// operator's, so the breaker's streak is 0 (docs/guide.md#guardrails).
			if s.FailureStreak != 0 || s.OperatorFailures != 2 || s.LastSuccessAt == nil {
				t.Errorf("failing: streak %d, operator failures %d, last success %v", s.FailureStreak, s.OperatorFailures, s.LastSuccessAt)
			}
		case b.d.Healthy:
			now := b.clk.Now()
			if s.NextRunAt == nil || !s.NextRunAt.After(now) || s.NextRunAt.Sub(now) > 15*time.Minute || s.NextRunAt.Minute()%15 != 0 {
				t.Errorf("healthy next run %v (now %v)", s.NextRunAt, now)
			}
		case b.d.Breaker:
			if s.NextRunAt != nil || s.FailureStreak != 5 {
				t.Errorf("paused sync: next %v streak %d", s.NextRunAt, s.FailureStreak)
			}
		}
	}
	filtered := b.get("/?health=failing")
	mustContain(t, filtered.body, b.d.Failing)
	mustNotContain(t, filtered.body, `href="/syncs/`+b.d.Healthy+`"`)
}

func TestSyncPagePausedByBreaker(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got := b.get("/syncs/" + b.d.Breaker)
	if got.code != 200 {
		t.Fatalf("%d", got.code)
	}
	e := failure.Lookup(failure.DestinationAuth)
	mustContain(t, got.body,
		"Paused by the circuit breaker",
		"failure streak reached 5 (breaker_failures 5; failures the operator owns are not counted); last error destination_auth",
		"<dt>Failure streak</dt><dd>5</dd>",
		htmlEsc(e.WhatHappened), string(codeSpans(e.NextStep)), "you (the sync's owner)",
		`href="`+DefaultDocsBase+`#destination_auth"`,
		"brevo answered 401 unauthorized: key not found",
		`action="/syncs/`+b.d.Breaker+`/resume"`, "circuit_breaker_tripped",
	)
	mustNotContain(t, got.body, `action="/syncs/`+b.d.Breaker+`/run"`, secretValue)
}

// htmlEsc escapes s as html/template does for text.
func htmlEsc(s string) string {
	return strings.NewReplacer("&", "&amp;", "'", "&#39;", "<", "&lt;", ">", "&gt;", `"`, "&#34;").Replace(s)
}

func TestSyncPageFigures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	d, err := b.srv.syncDetail(b.ctx, b.d.Healthy)
	if err != nil {
		t.Fatal(err)
	}
	if d.Ledger.Rejected != 2 || d.Ledger.InDoubt != 2 || d.Cursor.Value != "offset:12000" || d.Cursor.Fence != 1 {
		t.Errorf("figures: %+v %+v", d.Ledger, d.Cursor)
	}
	if d.Lease != nil {
		t.Errorf("released lease shown: %+v", d.Lease)
	}
	if _, err := b.st.LeaseAcquire(b.ctx, store.LeaseAcquireParams{SyncID: b.d.Healthy, Token: "t", Holder: "host-a/boot-1/pid-4242", RunID: 99, TTL: 30 * time.Second}); err != nil {
		t.Fatal(err)
	}
	if d, err = b.srv.syncDetail(b.ctx, b.d.Healthy); err != nil || d.Lease == nil || d.Lease.Holder != "host-a/boot-1/pid-4242" || !d.Lease.Live || d.Lease.Fence != 2 {
		t.Errorf("lease: %+v %v", d.Lease, err)
	}
	if len(d.Runs) != 3 || d.Runs[0].ID != b.d.RecordsRun.ID || d.Runs[0].DurationMS != 40_000 {
		t.Errorf("runs: %+v", d.Runs)
	}
	if d.Paused != nil || d.LastError != nil || d.Health != HealthHealthy {
		t.Errorf("healthy sync shows %+v %+v %s", d.Paused, d.LastError, d.Health)
	}
	got := b.get("/syncs/" + b.d.Healthy)
	mustContain(t, got.body, "after record 12,000 of contacts.csv", "2 rejected", "2 in doubt", "host-a/boot-1/pid-4242", "40.0 s", "*/15 * * * *")
	mustNotContain(t, got.body, secretValue, "Paused by")
	if !strings.Contains(got.body, `&#34;api_key&#34;: &#34;[redacted]&#34;`) {
		t.Error("definition shown without the redacted api_key")
	}

	person := b.get("/syncs/" + b.d.Person)
	mustContain(t, person.body, "Paused by Bo", "campaign over until January", "Since 2026-11-30")
	silent := b.get("/syncs/" + b.d.Silent)
	mustContain(t, silent.body, "Silent: runs, but none succeeded", "runs_without_success", "source_unavailable")
	noRuns := b.get("/syncs/" + b.d.NoRuns)
	mustContain(t, noRuns.body, "Silent: no runs recorded", "No runs yet.")
	if got := b.get("/syncs/nope"); got.code != 404 {
		t.Errorf("unknown sync: %d", got.code)
	}
	if got := b.get("/runs/999999"); got.code != 404 {
		t.Errorf("unknown run: %d", got.code)
	}
}

func TestRunPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got := b.get(fmt.Sprintf("/runs/%d", b.d.RecordsRun.ID))
	if got.code != 200 {
		t.Fatalf("%d", got.code)
	}
	// Records are named by their identity (the seeder's "id-N"), never a bare key.
	mustContain(t, got.body, "Invalid phone number (attribute SMS)", "<td>id-0</td>", "<td>id-1</td>", "<td>id-2</td>", "<td>id-3</td>",
		`name="key" value="`+b.d.InDoubt[0]+`"`, `name="key" value="`+b.d.InDoubt[1]+`"`,
		"12,000", "Settle selected records")
	if strings.Contains(got.body, ">"+b.d.Rejected[0]+"<") {
		t.Error("a rejected record is shown by its delivery key though it has an identity")
	}
	// Keys appear in no link.
	if regexp.MustCompile(`href="[^"]*[0-9a-f]{64}`).MatchString(got.body) {
		t.Error("a delivery key appears in a URL")
	}
	// The timeline: every page with its own figures, the last one's in full.
	mustContain(t, got.body, `<section id="pages">`, "Checkpointed at",
		`<tr><td class="n">24</td><td class="n">500</td><td class="n">458</td><td class="n">456</td><td class="n">40</td><td class="n">2</td><td class="n">2</td><td class="n">1</td>`)
	mustNotContain(t, got.body, "Showing 24 of")
	failed := b.get("/runs/" + fmt.Sprint(mustRuns(t, b, b.d.Breaker)[0].ID))
	mustContain(t, failed.body, "destination_auth", string(codeSpans(failure.Lookup(failure.DestinationAuth).NextStep)),
		"No pages recorded.")
}

func TestRunPageTimelineIsCapped(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: b.d.Healthy, State: store.RunSucceeded, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	const n = listLimit + 7
	for i := int64(1); i <= n; i++ {
		if err := b.st.RecordRunPage(b.ctx, store.RunPage{RunID: r.ID, Page: i, Read: 1000 + i, Sent: 1000 + i, Requests: 1}); err != nil {
			t.Fatal(err)
		}
	}
	got := b.get(fmt.Sprintf("/runs/%d", r.ID))
	if got.code != 200 {
		t.Fatalf("%d", got.code)
	}
	mustContain(t, got.body, fmt.Sprintf("Showing %d of %d.", listLimit, n), "1,500") // page 500 read 1,500
	mustNotContain(t, got.body, "1,501")                                              // page 501 is past the cap
	if rows := strings.Count(got.body[strings.Index(got.body, `<section id="pages">`):strings.Index(got.body, `<section id="in-doubt">`)], "<tr><td"); rows != listLimit {
		t.Fatalf("timeline rows = %d, want %d", rows, listLimit)
	}
}

// TestRunPagePrunedTimeline: once the prune removed a run's page rows, the
// run page says so instead of "No pages recorded".
func TestRunPagePrunedTimeline(t *testing.T) {
	t.Parallel()
	b := setup(t)
	r, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: b.d.Healthy, State: store.RunRunning, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := int64(1); i <= 3; i++ {
		if err := b.st.RecordRunPage(b.ctx, store.RunPage{RunID: r.ID, Page: i, Read: 10, Sent: 10, Requests: 1}); err != nil {
			t.Fatal(err)
		}
	}
	r.State, r.FinishedAt, r.Read, r.Written, r.Pages = store.RunSucceeded, r.StartedAt.Add(time.Minute), 30, 30, 3
	if err := b.st.UpdateRun(b.ctx, r); err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprintf("/runs/%d", r.ID)
	const note = "removed by the hourly prune"
	mustNotContain(t, b.get(path).body, note)
	if n, err := b.st.PruneRunPages(b.ctx, time.Now().Add(1000*time.Hour)); err != nil || n < 3 {
		t.Fatalf("PruneRunPages = %d, %v; want at least this run's 3", n, err)
	}
	got := b.get(path)
	mustContain(t, got.body, note)
	mustNotContain(t, got.body, "No pages recorded.")
}

func mustRuns(t *testing.T, b *bundle, id string) []store.Run {
	t.Helper()
	rs, err := b.st.ListRuns(b.ctx, id, 10)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func TestSettle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	runPath := fmt.Sprintf("/runs/%d/settle", b.d.RecordsRun.ID)
	// Refusals first: nothing changes.
	for _, tc := range []struct {
		name string
		form url.Values
		want int
	}{
		{"no outcome", url.Values{"key": {b.d.InDoubt[0]}, "why": {"checked"}}, 400},
		{"no why", url.Values{"key": {b.d.InDoubt[0]}, "outcome": {"delivered"}}, 400},
		{"no keys", url.Values{"outcome": {"delivered"}, "why": {"checked"}}, 400},
		{"not a key", url.Values{"key": {"jane@example.com"}, "outcome": {"delivered"}, "why": {"checked"}}, 400},
		{"rejected, not in doubt", url.Values{"key": {b.d.Rejected[0]}, "outcome": {"delivered"}, "why": {"checked"}}, 409},
		{"unknown key", url.Values{"key": {key("nope")}, "outcome": {"delivered"}, "why": {"checked"}}, 404},
	} {
		if got := b.post(runPath, tc.form); got.code != tc.want {
			t.Errorf("%s: got %d, want %d", tc.name, got.code, tc.want)
		}
	}
	if es, _ := b.st.LedgerList(b.ctx, b.d.Healthy, store.LedgerInDoubt, 0); len(es) != 2 {
		t.Fatalf("in doubt after refusals: %d", len(es))
	}
	got := b.post(runPath, url.Values{"key": {b.d.InDoubt[0]}, "outcome": {SettleDelivered}, "by": {testUser}, "why": {"found both in Brevo"}})
	if got.code != http.StatusSeeOther {
		t.Fatalf("settle delivered: %d %s", got.code, got.body)
	}
	got = b.post(runPath, url.Values{"key": {b.d.InDoubt[1]}, "outcome": {SettleResend}, "why": {"missing in Brevo"}})
	if got.code != http.StatusSeeOther {
		t.Fatalf("settle resend: %d %s", got.code, got.body)
	}
	es, err := b.st.LedgerGet(b.ctx, b.d.Healthy, b.d.InDoubt)
	if err != nil {
		t.Fatal(err)
	}
	if e := es[b.d.InDoubt[0]]; e.State != store.LedgerComplete || e.RunID != b.d.RecordsRun.ID {
		t.Errorf("delivered entry %+v", e)
	}
	if e := es[b.d.InDoubt[1]]; e.State != store.LedgerRejected {
		t.Errorf("resend entry %+v", e)
	}
	// A later run claims the resend key (rejected keys are claimable).
	audit, _ := b.st.ListAudit(b.ctx, b.d.Healthy, 5)
	if len(audit) < 2 || audit[0].Action != AuditSettle || audit[0].By != testUser ||
		!strings.Contains(audit[0].Why, "1 in-doubt records marked resend: missing in Brevo") ||
		!strings.Contains(audit[1].Why, "marked delivered: found both in Brevo") {
		t.Errorf("audit %+v", audit)
	}
	// Settling again is a conflict: they are no longer in doubt.
	if got := b.post(runPath, url.Values{"key": {b.d.InDoubt[0]}, "outcome": {SettleDelivered}, "why": {"again"}}); got.code != 409 {
		t.Errorf("second settle: %d", got.code)
	}
	// Both are listed as settled, under the run, with how
	// (docs/guide.md#the-ledger-and-its-retention), in the API and the page.
	var l RecordList
	_, router := loadDoc(t)
	api := apiCall(t, b, router, "GET", fmt.Sprintf("/api/v1/syncs/%s/records?state=settled&run=%d", b.d.Healthy, b.d.RecordsRun.ID), "")
	if api.code != http.StatusOK {
		t.Fatalf("settled records: %d %s", api.code, api.body)
	}
	mustJSON(t, api.body, &l)
	hows := map[string]string{}
	for _, r := range l.Records {
		hows[r.Key] = r.Reason
		if r.State != ledger.RecordSettled || r.RunID != b.d.RecordsRun.ID {
			t.Errorf("settled record %+v", r)
		}
	}
	if l.Total != 2 || !strings.Contains(hows[b.d.InDoubt[0]], "marked it delivered") || !strings.Contains(hows[b.d.InDoubt[1]], "marked it to send again") {
		t.Errorf("settled records: %+v", l)
	}
	mustContain(t, b.get(fmt.Sprintf("/syncs/%s/records?state=settled", b.d.Healthy)).body, "marked it delivered", "marked it to send again")
	mustNotContain(t, b.get(fmt.Sprintf("/syncs/%s/records", b.d.Healthy)).body, "marked it delivered")
}

func TestActionsAreAudited(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if got := b.post("/syncs/"+b.d.Healthy+"/run", url.Values{}); got.code != http.StatusSeeOther {
		t.Fatalf("run now: %d %s", got.code, got.body)
	}
	if fmt.Sprint(b.enqueued) != "["+b.d.Healthy+":manual]" {
		t.Errorf("enqueued %v", b.enqueued)
	}
	if got := b.post("/syncs/"+b.d.Breaker+"/run", url.Values{}); got.code != http.StatusConflict {
		t.Errorf("run now of a paused sync: %d", got.code)
	}
	if got := b.post("/syncs/"+b.d.Breaker+"/resume", url.Values{"by": {testUser}}); got.code != 400 {
		t.Errorf("resume without why: %d", got.code)
	}
	before, _ := b.st.GetSync(b.ctx, b.d.Breaker)
	b.clk.Advance(time.Hour)
	if got := b.post("/syncs/"+b.d.Breaker+"/resume", url.Values{"by": {testUser}, "why": {"rotated the Brevo key"}}); got.code != http.StatusSeeOther {
		t.Fatalf("resume: %d %s", got.code, got.body)
	}
	after, _ := b.st.GetSync(b.ctx, b.d.Breaker)
	if after.State != store.SyncActive || !after.ChangedAt.After(before.ChangedAt) {
		t.Errorf("resume did not re-publish: %+v", after)
	}
	if got := b.post("/syncs/"+b.d.Breaker+"/resume", url.Values{"why": {"x"}}); got.code != http.StatusConflict {
		t.Errorf("resume of an active sync: %d", got.code)
	}
	audit, err := b.st.ListAudit(b.ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range audit[:2] {
		actions = append(actions, a.SyncID+" "+a.Action+" "+a.By+" "+a.Why)
	}
	want := []string{b.d.Breaker + " resume ana rotated the Brevo key", b.d.Healthy + " run_now ana run now"}
	if fmt.Sprint(actions) != fmt.Sprint(want) {
		t.Errorf("audit\n got %q\nwant %q", actions, want)
	}
	page := b.get("/audit")
	mustContain(t, page.body, "rotated the Brevo key", "run_now", "circuit_breaker_tripped")
	filtered := b.get("/audit?sync=" + b.d.Person)
	mustContain(t, filtered.body, "campaign over until January")
	mustNotContain(t, filtered.body, "rotated the Brevo key")
}

func TestRunNowDisabledAndFailing(t *testing.T) {
	t.Parallel()
	off := setup(t, func(p *Params) { p.Enqueue = nil })
	if got := off.post("/syncs/"+off.d.Healthy+"/run", url.Values{}); got.code != 404 {
		t.Errorf("disabled run now: %d", got.code)
	}
	mustNotContain(t, off.get("/syncs/"+off.d.Healthy).body, "/run\"")
	bad := setup(t, func(p *Params) {
		p.Enqueue = func(context.Context, string, string) error {
			return failure.New(failure.InvalidSyncDefinition, "mapping.email: required")
		}
	})
	got := bad.post("/syncs/"+bad.d.Healthy+"/run", url.Values{})
	if got.code != http.StatusConflict || !strings.Contains(got.body, "invalid_sync_definition") {
		t.Errorf("failing enqueue: %d %s", got.code, got.body)
	}
	if a, _ := bad.st.ListAudit(bad.ctx, bad.d.Healthy, 1); len(a) == 1 && a[0].Action == AuditRunNow {
		t.Error("a run that was not queued was audited as queued")
	}
	down := setup(t, func(p *Params) {
		p.Enqueue = func(context.Context, string, string) error { return errors.New("dial tcp: secret-host refused") }
	})
	got = down.post("/syncs/"+down.d.Healthy+"/run", url.Values{})
	if got.code != http.StatusServiceUnavailable || strings.Contains(got.body, "secret-host") {
		t.Errorf("enqueue error leaked or wrong status: %d %s", got.code, got.body)
	}
}

func TestDeadLetters(t *testing.T) {
	t.Parallel()
	var requeued []RequeueParams
	b := setup(t, func(p *Params) {
		p.DeadLetters = func(_ context.Context, syncID string) ([]DeadLetter, error) {
			return []DeadLetter{{ID: "dl-1", RunID: 7, Partition: 3, Code: string(failure.SourceChangedDuringRun), At: t0}}, nil
		}
		p.Requeue = func(_ context.Context, rp RequeueParams) error { requeued = append(requeued, rp); return nil }
	})
	page := b.get("/syncs/" + b.d.Healthy)
	mustContain(t, page.body, "Dead-lettered work", "dl-1", "source_changed_during_run", "/dead-letters/dl-1/requeue")
	if got := b.post("/syncs/"+b.d.Healthy+"/dead-letters/dl-1/requeue", url.Values{}); got.code != http.StatusSeeOther {
		t.Fatalf("requeue: %d %s", got.code, got.body)
	}
	if len(requeued) != 1 || requeued[0].ID != "dl-1" || requeued[0].SyncID != b.d.Healthy || requeued[0].By != testUser {
		t.Errorf("requeued %+v", requeued)
	}
	if a, _ := b.st.ListAudit(b.ctx, b.d.Healthy, 1); len(a) != 1 || a[0].Action != AuditRequeue {
		t.Errorf("audit %+v", a)
	}
	hidden := setup(t)
	mustNotContain(t, hidden.get("/syncs/"+hidden.d.Healthy).body, "Dead-lettered work")
}

func TestMetricsAndExtraBehindAuth(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "oncesync_runs_total", Help: "runs"})
	c.Add(3)
	reg.MustRegister(c)
	b := setup(t, func(p *Params) {
		p.Metrics = reg
		p.Extra = map[string]http.Handler{"/riverui/": http.StripPrefix("/riverui", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, "river "+r.URL.Path)
		}))}
	})
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if got := b.do(req); got.code != 200 || !strings.Contains(got.body, "oncesync_runs_total 3") {
		t.Errorf("metrics with token: %d %s", got.code, got.body)
	}
	if got := b.get("/metrics"); got.code != 200 {
		t.Errorf("metrics with session: %d", got.code)
	}
	if got := b.get("/riverui/jobs"); got.code != 200 || got.body != "river /jobs" || got.hdr.Get("Content-Security-Policy") != "" || got.hdr.Get("X-Frame-Options") != "DENY" {
		t.Errorf("river ui: %d %q %v", got.code, got.body, got.hdr)
	}
	mustContain(t, b.get("/").body, `href="/riverui/"`)
	if _, err := New(Params{Store: b.st, Extra: map[string]http.Handler{"/api/v1/x": http.NotFoundHandler()}}); err == nil {
		t.Error("an extra handler under /api/ was accepted")
	}
}

func TestRedactDefinition(t *testing.T) {
	t.Parallel()
	in := `{"source":{"dsn":"postgres://app:hunter2@db:5432/x","query":"select 1"},"other":"host=db password=hunter3 user=app",` +
		`"destination":{"api_key":"k1","headers":["Authorization"],"webhook_secret":"k2"},"alerts":{"token":"k3"}}`
	out := string(redactDefinition(in))
	mustNotContain(t, out, "hunter2", "hunter3", `"k1"`, `"k2"`, `"k3"`)
	mustContain(t, out, "Authorization", "select 1", "postgres://app:redacted@db:5432/x")
}

// TestRunningSyncHasNoCountdown: while a run is going, the sync page and
// the overview say so instead of counting down to the schedule's next run.
func TestRunningSyncHasNoCountdown(t *testing.T) {
	t.Parallel()
	b := setup(t)
	before := b.get("/syncs/" + b.d.Healthy)
	if strings.Contains(before.body, "a run is going now") {
		t.Fatal("a sync with no run going says one is")
	}
	if _, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: b.d.Healthy, State: store.RunRunning, Attempt: 1}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, b.get("/syncs/"+b.d.Healthy).body, "a run is going now", "after record 12,000 of contacts.csv")
	mustContain(t, b.get("/").body, "running now")
}

// TestSyncPageChart: the sync page charts its recent runs as server-side
// SVG, one bar per run, failures marked, with no inline script or style.
func TestSyncPageChart(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, id := range []string{b.d.Healthy, b.d.Failing} {
		d, err := b.srv.syncDetail(b.ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		body := b.get("/syncs/" + id).body
		bars := strings.Count(body, `<g class="bar`)
		if want := min(len(d.Runs), chartRuns); want == 0 || bars != want {
			t.Fatalf("sync %s: %d bars for %d runs", id, bars, len(d.Runs))
		}
		failed := 0
		for _, r := range d.Runs[:min(len(d.Runs), chartRuns)] {
			if r.State == "failed" {
				failed++
			}
		}
		if got := strings.Count(body, `<g class="bar failed"`); got != failed {
			t.Fatalf("sync %s: %d bars marked failed, %d runs failed", id, got, failed)
		}
		if strings.Contains(body, "<script") || strings.Contains(body, " style=") {
			t.Fatalf("sync %s: inline script or style", id)
		}
	}
}

// TestTryWithoutWriting: the sync page offers "Test connection" and
// "Preview" when serve provides them; the check page lists each check and
// a failure with its catalog entry; the preview page shows the figures.
func TestTryWithoutWriting(t *testing.T) {
	t.Parallel()
	var (
		checked []string
		b       *bundle
	)
	b = setup(t, func(p *Params) {
		p.Check = func(_ context.Context, id string) ([]string, error) {
			checked = append(checked, id)
			if id == b.d.Failing {
				return []string{"ok  source csv:/x: its first record was read"}, failure.New(failure.DestinationAuth, "brevo refused the api key")
			}
			return []string{"ok  source csv:/x: its first record was read", "ok  brevo: list 2 exists"}, nil
		}
		p.Preview = func(_ context.Context, id string) (PreviewView, error) {
			return PreviewView{From: "the start of the source", Read: 16, Creates: 2, Updates: 3, Unchanged: 7, Settling: 4,
				CreateSample: []string{"501", "502"}, UpdateSample: []string{"1", "2"}, SettlingSample: []string{"9", "10"},
				Rejected: 1, RejectedSample: []string{"77: attribute BIRTHDAY is a date attribute in Brevo"}}, nil
		}
	})
	page := b.get("/syncs/" + b.d.Healthy).body
	mustContain(t, page, "Test connection", b.d.Healthy+"/preview")

	ok := b.post("/syncs/"+b.d.Healthy+"/check", url.Values{})
	if ok.code != 200 {
		t.Fatalf("check: %d", ok.code)
	}
	mustContain(t, ok.body, "brevo: list 2 exists", "Every check passed.")
	bad := b.post("/syncs/"+b.d.Failing+"/check", url.Values{})
	mustContain(t, bad.body, "destination_auth", "brevo refused the api key")
	if strings.Contains(bad.body, "Every check passed.") {
		t.Fatal("a failed check says every check passed")
	}
	if len(checked) != 2 {
		t.Fatalf("checks made: %v", checked)
	}
	pv := b.get("/syncs/" + b.d.Healthy + "/preview")
	mustContain(t, pv.body, "2 never delivered by this sync: 501, 502", "3 changed since their last delivery: 1, 2, …", "nothing was claimed or written",
		"4 sent by an earlier run, outcome not known yet", "settled before anything is sent again: 9, 10, …",
		"1 the destination would refuse before any write", "<li>77: attribute BIRTHDAY is a date attribute in Brevo</li>")
	if got := b.get("/syncs/nope/preview"); got.code != 404 {
		t.Fatalf("preview of an unknown sync: %d", got.code)
	}
}

// "Send everything again": a form on the sync page and "resend": true on the
// API's run; a reason is required, a refusal (a run already queued) is a
// 409 and audits nothing, a queued one is audited as resend_all.
func TestResendAll(t *testing.T) {
	t.Parallel()
	_, router := loadDoc(t)
	var asked []string
	var refuse error
	b := setup(t, func(p *Params) {
		p.Resend = func(_ context.Context, syncID string) error {
			if refuse != nil {
				return refuse
			}
			asked = append(asked, syncID)
			return nil
		}
	})
	id := b.d.Healthy
	mustContain(t, b.get("/syncs/"+id).body, `id="resend-all"`, `name="resend" value="all"`)

	if got := b.post("/syncs/"+id+"/run", url.Values{"resend": {"all"}}); got.code != http.StatusBadRequest {
		t.Errorf("resend without a reason: %d %s", got.code, got.body)
	}
	if got := apiCall(t, b, router, "POST", "/api/v1/syncs/"+id+"/run", `{"resend":true}`); got.code != http.StatusBadRequest {
		t.Errorf("API resend without a reason: %d %s", got.code, got.body)
	}
	if len(asked) != 0 {
		t.Fatalf("queued without a reason: %v", asked)
	}

	refuse = fmt.Errorf("%w: a run of the sync is queued or running", ErrConflict)
	if got := apiCall(t, b, router, "POST", "/api/v1/syncs/"+id+"/run", `{"resend":true,"why":"list emptied"}`); got.code != http.StatusConflict || !strings.Contains(got.body, "queued or running") {
		t.Errorf("refused resend: %d %s", got.code, got.body)
	}
	if a, _ := b.st.ListAudit(b.ctx, id, 1); len(a) == 1 && a[0].Action == AuditResendAll {
		t.Error("a resend that was not queued was audited")
	}
	refuse = nil

	if got := b.post("/syncs/"+id+"/run", url.Values{"resend": {"all"}, "why": {"contacts deleted by hand"}}); got.code != http.StatusSeeOther || !strings.Contains(got.hdr.Get("Location"), "done=resend_all") {
		t.Fatalf("form resend: %d %v %s", got.code, got.hdr, got.body)
	}
	if got := apiCall(t, b, router, "POST", "/api/v1/syncs/"+id+"/run", `{"resend":true,"why":"list emptied"}`); got.code != http.StatusAccepted {
		t.Fatalf("API resend: %d %s", got.code, got.body)
	}
	if len(asked) != 2 || asked[0] != id || len(b.enqueued) != 0 {
		t.Errorf("resends asked %v, ordinary runs %v; want 2 resends and no ordinary run", asked, b.enqueued)
	}
	a, err := b.st.ListAudit(b.ctx, id, 2)
	if err != nil || len(a) != 2 || a[0].Action != AuditResendAll || a[0].Why != "list emptied" || a[1].Why != "contacts deleted by hand" {
		t.Errorf("audit %+v, %v", a, err)
	}

	off := setup(t)
	mustNotContain(t, off.get("/syncs/"+off.d.Healthy).body, `id="resend-all"`)
	if got := off.post("/syncs/"+off.d.Healthy+"/run", url.Values{"resend": {"all"}, "why": {"x"}}); got.code != http.StatusNotFound || len(off.enqueued) != 0 {
		t.Errorf("resend where it is not enabled: %d, ordinary runs %v", got.code, off.enqueued)
	}
}
