package web

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

func (b *bundle) api(token, method, path, body string) resp {
	b.t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	return b.do(req)
}

// TestViewerTokenRefusedEveryAction: a viewer token reads, and gets 403 on
// every API action (every POST route), with nothing changed or audited.
func TestViewerTokenRefusedEveryAction(t *testing.T) {
	t.Parallel()
	b := setup(t, withTeams(t))
	before, _ := b.st.ListAudit(b.ctx, "", 500)
	n := 0
	for _, rt := range b.srv.routes {
		if rt.kind != kindAPI || rt.method != "POST" {
			continue
		}
		n++
		for _, id := range []string{b.d.Healthy, b.d.Breaker} {
			path := strings.NewReplacer("{id}", id, "{dl}", "dl-1").Replace(rt.path)
			if strings.HasPrefix(rt.path, "/api/v1/runs/") {
				path = strings.Replace(rt.path, "{id}", fmt.Sprint(b.d.RecordsRun.ID), 1)
			}
			body := fmt.Sprintf(`{"by":"someone","why":"try","keys":[%q],"outcome":"delivered"}`, b.d.InDoubt[0])
			if strings.HasSuffix(path, "/run") || strings.HasSuffix(path, "/requeue") {
				body = `{"why":"try"}`
			}
			got := b.api(viewerToken, "POST", path, body)
			if got.code != http.StatusForbidden || !strings.Contains(got.body, `"forbidden"`) {
				t.Errorf("viewer token POST %s: %d %s", path, got.code, got.body)
			}
		}
	}
	if n != 5 {
		t.Errorf("%d API actions, want 5 (run, pause, resume, requeue, settle)", n)
	}
	if got := b.api(viewerToken, "GET", "/api/v1/syncs/"+b.d.Healthy, ""); got.code != http.StatusOK {
		t.Errorf("viewer token read: %d", got.code)
	}
	after, _ := b.st.ListAudit(b.ctx, "", 500)
	if len(after) != len(before) || len(b.enqueued) != 0 {
		t.Errorf("refused actions left traces: audit %d -> %d, enqueued %v", len(before), len(after), b.enqueued)
	}
	if sy, _ := b.st.GetSync(b.ctx, b.d.Healthy); sy.State != store.SyncActive {
		t.Errorf("sync paused by a viewer: %+v", sy)
	}
}

// TestScopedTokenSeesOnlyItsWorkspace: a token of workspace marketing lists
// only marketing's syncs and audit entries, gets 404 (not 403) for a sync
// or run of another workspace, and its actions are audited under its name
// whatever the body says.
func TestScopedTokenSeesOnlyItsWorkspace(t *testing.T) {
	t.Parallel()
	b := setup(t, withTeams(t))
	var l SyncList
	mustJSON(t, b.api(mktToken, "GET", "/api/v1/syncs", "").body, &l)
	var ids []string
	for _, s := range l.Syncs {
		ids = append(ids, s.ID)
		if s.Workspace != "marketing" {
			t.Errorf("sync %s of %s listed", s.ID, s.Workspace)
		}
	}
	if len(l.Syncs) != 3 {
		t.Errorf("marketing token lists %v, want its 3 syncs", ids)
	}
	dataRun := b.seedRun(b.d.Failing)
	for _, path := range []string{"/api/v1/syncs/" + b.d.Failing, "/api/v1/syncs/" + b.d.Failing + "/runs",
		"/api/v1/syncs/" + b.d.Failing + "/records", "/api/v1/runs/" + dataRun} {
		got := b.api(mktToken, "GET", path, "")
		if got.code != http.StatusNotFound || strings.Contains(got.body, b.d.Failing) {
			t.Errorf("GET %s with a marketing token: %d %s", path, got.code, got.body)
		}
	}
	// Not even a refusal tells the sync exists: the same answer as a sync
	// that does not.
	other := b.api(mktToken, "POST", "/api/v1/syncs/"+b.d.Failing+"/pause", `{"why":"x"}`)
	none := b.api(mktToken, "POST", "/api/v1/syncs/no-such-sync/pause", `{"why":"x"}`)
	if other.code != http.StatusNotFound || other.body != none.body {
		t.Errorf("action on another workspace's sync: %d %s (none: %d %s)", other.code, other.body, none.code, none.body)
	}

	got := b.api(mktToken, "POST", "/api/v1/syncs/"+b.d.Healthy+"/pause", `{"by":"ceo@example.com (forged)","why":"maintenance"}`)
	if got.code != http.StatusOK {
		t.Fatalf("pause with the marketing token: %d %s", got.code, got.body)
	}
	a, _ := b.st.ListAudit(b.ctx, b.d.Healthy, 1)
	if len(a) != 1 || a[0].Action != "pause" || a[0].By != "mkt-ci" || a[0].Why != "maintenance" {
		t.Errorf("audit entry %+v, want pause by mkt-ci", a)
	}
	if sy, _ := b.st.GetSync(b.ctx, b.d.Healthy); sy.PausedBy != "mkt-ci" {
		t.Errorf("paused by %q", sy.PausedBy)
	}

	// The audit log: only marketing's entries.
	if err := b.st.InsertAudit(b.ctx, store.AuditEntry{SyncID: b.d.Failing, Action: "pause", By: "x", Why: "data-secret-reason"}); err != nil {
		t.Fatal(err)
	}
	var al AuditList
	mustJSON(t, b.api(mktToken, "GET", "/api/v1/audit", "").body, &al)
	if len(al.Entries) == 0 {
		t.Fatal("no audit entries for marketing")
	}
	for _, e := range al.Entries {
		if e.SyncID == b.d.Failing || e.SyncID == b.d.Silent || e.SyncID == b.d.NoRuns {
			t.Errorf("audit entry of data shown to marketing: %+v", e)
		}
	}
	var all AuditList
	mustJSON(t, b.api(testToken, "GET", "/api/v1/audit", "").body, &all)
	if len(all.Entries) <= len(al.Entries) {
		t.Errorf("an admin sees %d entries, marketing %d", len(all.Entries), len(al.Entries))
	}
}

// TestListsAndMetricsFiltered: the overview and /metrics of a viewer of
// marketing show none of data's syncs.
func TestListsAndMetricsFiltered(t *testing.T) {
	t.Parallel()
	b := setup(t, withTeams(t))
	c, _ := b.signInAs(viewerMkt)
	get := func(path string) resp {
		req := httptest.NewRequest("GET", path, nil)
		req.AddCookie(c)
		return b.do(req)
	}
	ov := get("/")
	mustContain(t, ov.body, b.d.Healthy, b.d.Breaker, b.d.Person)
	mustNotContain(t, ov.body, b.d.Failing, b.d.Silent, b.d.NoRuns, `href="/riverui/"`)
	m := get("/metrics")
	if m.code != http.StatusOK || !strings.Contains(m.body, `sync="newsletter-contacts"`) || strings.Contains(m.body, "churn-scores") {
		t.Errorf("metrics of a marketing viewer: %d\n%s", m.code, m.body)
	}
	if got := get("/riverui/"); got.code != http.StatusForbidden {
		t.Errorf("River's UI for a viewer: %d", got.code)
	}
	ca, _ := b.signInAs(adminMkt)
	req := httptest.NewRequest("GET", "/riverui/", nil)
	req.AddCookie(ca)
	if got := b.do(req); got.code != http.StatusForbidden {
		t.Errorf("River's UI for an admin of one workspace: %d", got.code)
	}
	all := b.get("/metrics")
	if !strings.Contains(all.body, "churn-scores") {
		t.Errorf("an admin's metrics lack data's sync:\n%s", all.body)
	}
	if got := b.get("/riverui/"); got.code != http.StatusOK || got.body != "river ui" {
		t.Errorf("River's UI for an admin of every workspace: %d", got.code)
	}
}

// TestSessionsInTheStore: the store holds the SHA-256 of the cookie, not
// the cookie; a session survives a restart of the web server over the same
// store file; sign out everywhere ends every session of the user; a user
// whose role changes or who is removed loses their sessions at the next
// request.
func TestSessionsInTheStore(t *testing.T) {
	t.Parallel()
	b := setup(t, withTeams(t))
	signIn := func(srv *Server, user string) *http.Cookie {
		t.Helper()
		v := url.Values{"user": {user}, "password": {testPassword}, "csrf": {"c"}, "next": {"/"}}
		req := httptest.NewRequest("POST", "/login", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.AddCookie(&http.Cookie{Name: srv.loginCookieName(), Value: "c"})
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		for _, c := range rec.Result().Cookies() {
			if c.Name == srv.cookieName() && c.Value != "" {
				return c
			}
		}
		t.Fatalf("sign-in of %s: %d", user, rec.Code)
		return nil
	}
	get := func(srv *Server, c *http.Cookie, path string) int {
		t.Helper()
		req := httptest.NewRequest("GET", path, nil)
		req.AddCookie(c)
		rec := httptest.NewRecorder()
		srv.ServeHTTP(rec, req)
		return rec.Code
	}
	c := signIn(b.srv, operatorMkt)
	if get(b.srv, c, "/") != http.StatusOK {
		t.Fatal("signed-in session refused")
	}
	sum := sha256.Sum256([]byte(c.Value))
	se, err := b.st.GetSession(b.ctx, hex.EncodeToString(sum[:]))
	if err != nil || se.User != operatorMkt || se.Provider != providerPassword || se.Access != "operator:marketing" {
		t.Fatalf("stored session %+v: %v", se, err)
	}
	if _, err := b.st.GetSession(b.ctx, c.Value); err == nil {
		t.Fatal("the cookie's secret is a key of the store")
	}

	// Restart: close the store, open the file again, a new server.
	path := b.path
	params := b.srv.p
	if err := b.st.Close(); err != nil {
		t.Fatal(err)
	}
	st2, err := sqlite.Open(context.Background(), sqlite.OpenParams{Path: path, Clock: b.clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	params.Store, params.Sessions = st2, nil
	srv2, err := New(params)
	if err != nil {
		t.Fatal(err)
	}
	if code := get(srv2, c, "/syncs/"+b.d.Healthy); code != http.StatusOK {
		t.Fatalf("session after a restart: %d", code)
	}
	b.clk.Advance(2 * time.Minute)
	get(srv2, c, "/")
	if se, _ := st2.GetSession(b.ctx, hex.EncodeToString(sum[:])); !se.LastSeenAt.Equal(b.clk.Now()) {
		t.Errorf("last seen %v, want %v", se.LastSeenAt, b.clk.Now())
	}

	// Sign out everywhere: both of otto's sessions end, vera's stays.
	c2 := signIn(srv2, operatorMkt)
	cv := signIn(srv2, viewerMkt)
	csrf := csrfOf(c2.Value)
	req := httptest.NewRequest("POST", "/logout/everywhere", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(c2)
	rec := httptest.NewRecorder()
	srv2.ServeHTTP(rec, req)
	if rec.Code != http.StatusSeeOther {
		t.Fatalf("sign out everywhere: %d", rec.Code)
	}
	for _, ck := range []*http.Cookie{c, c2} {
		if code := get(srv2, ck, "/"); code != http.StatusSeeOther {
			t.Errorf("a session signed out everywhere still works: %d", code)
		}
	}
	if code := get(srv2, cv, "/"); code != http.StatusOK {
		t.Errorf("another user's session ended: %d", code)
	}

	// A changed role ends the sessions at the next request; so does removal.
	c3 := signIn(srv2, operatorMkt)
	params.Users[operatorMkt] = User{Hash: passwordHash(t), Access: Access{Role: RoleViewer, Workspaces: []string{"marketing"}}}
	delete(params.Users, viewerMkt)
	params.Store = st2
	srv3, err := New(params)
	if err != nil {
		t.Fatal(err)
	}
	for _, ck := range []*http.Cookie{c3, cv} {
		if code := get(srv3, ck, "/"); code != http.StatusSeeOther {
			t.Errorf("a session whose user changed or left still works: %d", code)
		}
	}
	if n, _ := st2.DeleteUserSessions(b.ctx, operatorMkt); n != 0 {
		t.Errorf("%d sessions of the changed user left in the store", n)
	}
	if code := get(srv3, signIn(srv3, operatorMkt), "/"); code != http.StatusOK {
		t.Errorf("signing in again with the new role: %d", code)
	}
}

// TestTwentyWrongSignIns: of 20 wrong passwords in a row for one name,
// the first five are checked (401) and the other fifteen refused at once
// (429, Retry-After); the right password is refused too until the pause
// ends.
func TestTwentyWrongSignIns(t *testing.T) {
	t.Parallel()
	b := setup(t)
	submit := func(pw string, i int) resp {
		v := url.Values{"user": {testUser}, "password": {pw}, "csrf": {"c"}, "next": {"/"}}
		req := httptest.NewRequest("POST", "/login", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.RemoteAddr = fmt.Sprintf("192.0.2.%d:4000", i+1) // a new address each time: the name is what is throttled
		req.AddCookie(&http.Cookie{Name: b.srv.loginCookieName(), Value: "c"})
		return b.do(req)
	}
	codes := map[int]int{}
	for i := range 20 {
		got := submit("wrong", i)
		codes[got.code]++
		if got.code == http.StatusTooManyRequests && got.hdr.Get("Retry-After") == "" {
			t.Errorf("429 without Retry-After")
		}
	}
	if codes[http.StatusUnauthorized] != throttleFailures || codes[http.StatusTooManyRequests] != 20-throttleFailures {
		t.Errorf("20 wrong sign-ins answered %v, want %d x 401 then %d x 429", codes, throttleFailures, 20-throttleFailures)
	}
	if got := submit(testPassword, 30); got.code != http.StatusTooManyRequests {
		t.Errorf("right password while throttled: %d", got.code)
	}
	b.clk.Advance(throttleMax)
	if got := submit(testPassword, 31); got.code != http.StatusSeeOther {
		t.Errorf("right password after the pause: %d", got.code)
	}
}

// TestScopedAuditNotCrowdedOut: a principal of one workspace sees its
// workspace's audit entries even when another workspace wrote many more
// since (the list is not the newest entries of every workspace, filtered
// afterwards).
func TestScopedAuditNotCrowdedOut(t *testing.T) {
	t.Parallel()
	b := setup(t, withTeams(t))
	for i := range 2 * listLimit {
		if err := b.st.InsertAudit(b.ctx, store.AuditEntry{SyncID: b.d.Failing, Action: AuditRunNow, By: "dora", Why: fmt.Sprint("busy ", i)}); err != nil {
			t.Fatal(err)
		}
	}
	r := b.api(mktToken, "GET", "/api/v1/audit", "")
	var got AuditList
	if err := json.Unmarshal([]byte(r.body), &got); err != nil || r.code != http.StatusOK {
		t.Fatalf("audit: %d %v %.200s", r.code, err, r.body)
	}
	if len(got.Entries) == 0 {
		t.Error("marketing's operator sees no audit entry: data's newer ones crowded marketing's out")
	}
	for _, e := range got.Entries {
		if e.SyncID == b.d.Failing {
			t.Fatalf("data's entry shown to marketing: %+v", e)
		}
	}
	page := b.as(viewerMkt, "GET", "/audit", false)
	if !strings.Contains(page.body, b.d.Person) {
		t.Error("the audit page of marketing's viewer lacks marketing's entries")
	}
}
