package web

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/oauth2-proxy/mockoidc"

	"github.com/oncesync/oncesync/internal/testenv"
)

// oidcProvider starts a local OpenID Connect provider (mockoidc: discovery,
// authorization with PKCE and nonce, token, JWKS) whose clock is the
// bundle's, and a test server of b configured to sign in with it.
func oidcProvider(t *testing.T, opts ...option) (*bundle, *mockoidc.MockOIDC, *httptest.Server) {
	t.Helper()
	m, err := mockoidc.Run()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.Shutdown() })
	var b *bundle
	b = setup(t, append(opts, func(p *Params) {
		p.OIDC = &OIDCParams{Issuer: m.Issuer(), ClientID: m.ClientID, ClientSecret: m.ClientSecret, RolesClaim: "groups"}
	})...)
	m.FastForward(b.clk.Now().Sub(time.Now())) // tokens issued at the server's (fake) time
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	return b, m, ts
}

func browserClient(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 10 * time.Second}
}

// TestOIDCSignInEndToEnd: the authorization-code flow with state, nonce
// and PKCE against a local provider; the groups claim
// "oncesync:operator:marketing" makes an operator of marketing, whose
// session is in the store, who reaches marketing's syncs and not data's,
// and whose actions are audited as oidc:NAME#DIGEST.
func TestOIDCSignInEndToEnd(t *testing.T) {
	t.Parallel()
	b, m, ts := oidcProvider(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "u-1", PreferredUsername: "olga", Email: "olga@example.com",
		Groups: []string{"staff", "oncesync:operator:marketing", "oncesync:viewer:nowhere"}})
	c := browserClient(t)

	login, err := c.Get(ts.URL + "/login")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(login.Body)
	login.Body.Close()
	if !strings.Contains(string(body), `href="/auth/oidc/start`) {
		t.Fatal("the sign-in page offers no single sign-on")
	}

	res, err := c.Get(ts.URL + "/auth/oidc/start?next=" + url.QueryEscape("/syncs/"+b.d.Healthy))
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/syncs/"+b.d.Healthy {
		t.Fatalf("after sign-in: %d at %s: %.300s", res.StatusCode, res.Request.URL, body)
	}
	olga := oidcName("u-1", map[string]any{"preferred_username": "olga"})
	if !strings.Contains(string(body), olga) || !strings.Contains(string(body), `action="/syncs/`+b.d.Healthy+`/pause"`) {
		t.Errorf("the operator's sync page lacks the name or the pause form")
	}
	if strings.Contains(string(body), "olga@example.com") {
		t.Error("the e-mail address is shown")
	}

	// The session is in the store, hashed, with the claim's access.
	var secret string
	u, _ := url.Parse(ts.URL)
	for _, ck := range c.Jar.Cookies(u) {
		if ck.Name == b.srv.cookieName() {
			secret = ck.Value
		}
	}
	sum := sha256.Sum256([]byte(secret))
	se, err := b.st.GetSession(b.ctx, hex.EncodeToString(sum[:]))
	if err != nil || se.User != olga || se.Provider != providerOIDC || se.Access != "operator:marketing viewer:nowhere" {
		t.Fatalf("stored session %+v: %v", se, err)
	}

	if res, err := c.Get(ts.URL + "/syncs/" + b.d.Failing); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("data's sync for marketing's operator: %v %v", res.StatusCode, err)
	}
	form := url.Values{"csrf": {csrfOf(secret)}, "why": {"maintenance"}, "by": {"someone else"}}
	req, _ := http.NewRequest("POST", ts.URL+"/syncs/"+b.d.Healthy+"/pause", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", ts.URL)
	if res, err := c.Do(req); err != nil || res.StatusCode != http.StatusOK {
		t.Fatalf("pause: %v %v", res, err)
	}
	a, _ := b.st.ListAudit(b.ctx, b.d.Healthy, 1)
	if len(a) != 1 || a[0].Action != "pause" || a[0].By != olga {
		t.Errorf("audit %+v, want a pause by %s", a, olga)
	}
}

// TestOIDCRefusals: a person without an oncesync group is refused (and
// gets no session); a callback whose state is not the browser's is
// refused; a code cannot be used without the PKCE verifier of its flow.
func TestOIDCRefusals(t *testing.T) {
	t.Parallel()
	b, m, ts := oidcProvider(t)
	m.QueueUser(&mockoidc.MockUser{Subject: "u-2", PreferredUsername: "nora", Groups: []string{"staff"}})
	c := browserClient(t)
	res, err := c.Get(ts.URL + "/auth/oidc/start")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden || !strings.Contains(string(body), "no oncesync role") {
		t.Errorf("no role: %d %.300s", res.StatusCode, body)
	}
	if n, _ := b.st.DeleteUserSessions(b.ctx, oidcName("u-2", map[string]any{"preferred_username": "nora"})); n != 0 {
		t.Error("a session was created for a person without a role")
	}

	// A forged callback: the attacker's code and state in the victim's
	// browser, whose flow cookie holds another state.
	c2 := browserClient(t)
	nf := &http.Client{Jar: c2.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	start, err := nf.Get(ts.URL + "/auth/oidc/start")
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := url.Parse(start.Header.Get("Location"))
	q := loc.Query()
	if q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("nonce") == "" || q.Get("state") == "" {
		t.Fatalf("authorization request without PKCE, nonce or state: %s", loc)
	}
	res, err = nf.Get(ts.URL + "/auth/oidc/callback?code=stolen&state=not-the-browsers")
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusBadRequest {
		t.Errorf("callback with another state: %d", res.StatusCode)
	}
}

// TestOIDCName: the name is the username and a digest of the subject; a
// username that is an e-mail address is not kept whole.
func TestOIDCName(t *testing.T) {
	t.Parallel()
	if got := oidcName("s", map[string]any{"preferred_username": "olga"}); !strings.HasPrefix(got, "oidc:olga#") || len(got) != len("oidc:olga#")+8 {
		t.Errorf("plain name: %q", got)
	}
	if got := oidcName("sub-1", map[string]any{}); !strings.HasPrefix(got, "oidc:sub-1#") {
		t.Errorf("no username: %q", got)
	}
	if a, b := oidcName("s1", map[string]any{"preferred_username": "olga"}), oidcName("s2", map[string]any{"preferred_username": "olga"}); a == b {
		t.Errorf("two subjects, one name %q", a)
	}
	// A name that imitates another principal, or reverses the text after it.
	if got := oidcName("s", map[string]any{"preferred_username": "jane#fcdec6df"}); !strings.HasPrefix(got, "oidc:janefcdec6df#") {
		t.Errorf("name with '#': %q", got)
	}
	if got := oidcName("s", map[string]any{"preferred_username": "ev\u202eil\x07"}); !strings.HasPrefix(got, "oidc:evil#") {
		t.Errorf("name with control and format characters: %q", got)
	}
	if got := oidcName("s", map[string]any{"preferred_username": "#"}); !strings.HasPrefix(got, "oidc:-#") {
		t.Errorf("name of nothing usable: %q", got)
	}
	a := oidcName("s", map[string]any{"preferred_username": "jane@example.com"})
	if !strings.HasPrefix(a, "oidc:jane#") || strings.Contains(a, "example") {
		t.Errorf("e-mail username: %q", a)
	}
}

// TestMapClaims: how claim values become a role and workspaces.
func TestMapClaims(t *testing.T) {
	t.Parallel()
	cases := []struct {
		claims     map[string]any
		roles, wsc string
		want       string
	}{
		{map[string]any{"groups": []any{"oncesync:admin"}}, "groups", "", "admin"},
		{map[string]any{"groups": []any{"oncesync:viewer", "oncesync:operator:acme"}}, "groups", "", "viewer operator:acme"},
		{map[string]any{"groups": []any{"oncesync:operator", "x"}, "teams": []any{"acme", "shop"}}, "groups", "teams", "operator:acme operator:shop"},
		{map[string]any{"groups": "oncesync:viewer:acme oncesync:admin:acme"}, "groups", "", "admin:acme"},
		{map[string]any{"realm_access": map[string]any{"roles": []any{"oncesync:operator:*"}}}, "realm_access.roles", "", "operator"},
		{map[string]any{"groups": []any{"oncesync:root", "admin", "oncesync:"}}, "groups", "", "none"},
		{map[string]any{}, "groups", "", "none"},
		// A workspace that is empty or not a workspace name grants nothing.
		{map[string]any{"groups": []any{"oncesync:operator:"}}, "groups", "", "none"},
		{map[string]any{"groups": []any{"oncesync:viewer:acme", "oncesync:operator:"}}, "groups", "", "viewer:acme"},
		{map[string]any{"groups": []any{"oncesync:superuser", "admin", "oncesync:root:*", "oncesync:admin:acme:extra"}}, "groups", "", "none"},
		{map[string]any{"groups": []any{"oncesync:operator"}, "teams": []any{"", "*", "acme", "a b"}}, "groups", "teams", "operator:acme"},
	}
	for _, tc := range cases {
		if got := mapClaims("x", tc.claims, tc.roles, tc.wsc).encode(); got != tc.want {
			t.Errorf("%v (%s, %s) = %q, want %q", tc.claims, tc.roles, tc.wsc, got, tc.want)
		}
	}
}

// TestOIDCSameUsernameTwoPeople: preferred_username is not unique and
// often editable by its owner (OpenID Connect Core 5.1: "MUST NOT rely
// upon this value being unique"), so two people (two subjects) who share
// one must stay two principals: neither acts in the audit log as the
// other, and one's "sign out everywhere" leaves the other's sessions alone.
func TestOIDCSameUsernameTwoPeople(t *testing.T) {
	t.Parallel()
	b, m, ts := oidcProvider(t)
	signIn := func(sub string) (*http.Client, string) {
		m.QueueUser(&mockoidc.MockUser{Subject: sub, PreferredUsername: "olga", Groups: []string{"oncesync:operator:marketing"}})
		c := browserClient(t)
		res, err := c.Get(ts.URL + "/auth/oidc/start")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("sign-in of %s: %d", sub, res.StatusCode)
		}
		u, _ := url.Parse(ts.URL)
		for _, ck := range c.Jar.Cookies(u) {
			if ck.Name == b.srv.cookieName() {
				return c, ck.Value
			}
		}
		t.Fatalf("no session cookie for %s", sub)
		return nil, ""
	}
	_, realSecret := signIn("u-real-olga")
	impostor, impSecret := signIn("u-impostor")

	real, err := b.srv.sessionFor(b.ctx, realSecret)
	if err != nil || real == nil {
		t.Fatalf("real session: %v", err)
	}
	imp, err := b.srv.sessionFor(b.ctx, impSecret)
	if err != nil || imp == nil {
		t.Fatalf("impostor session: %v", err)
	}
	if real.principal.Name == imp.principal.Name {
		t.Errorf("two subjects are one principal %q: the audit log cannot tell them apart", real.principal.Name)
	}

	req, _ := http.NewRequest("POST", ts.URL+"/logout/everywhere", strings.NewReader(url.Values{"csrf": {csrfOf(impSecret)}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", ts.URL)
	res, err := impostor.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if s, _ := b.srv.sessionFor(b.ctx, impSecret); s != nil {
		t.Error("sign out everywhere left the impostor signed in")
	}
	if s, _ := b.srv.sessionFor(b.ctx, realSecret); s == nil {
		t.Error("another person's sign out everywhere ended this person's session")
	}
}

// TestOIDCRefusedCodeLogsNoSecret: a token endpoint whose refusal echoes
// the request (as some providers' error descriptions do) must not put the
// client secret, the code or its PKCE verifier in the log.
func TestOIDCRefusedCodeLogsNoSecret(t *testing.T) {
	t.Parallel()
	const clientSecret = "client-SECRET-0123456789"
	var idp *httptest.Server
	idp = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.URL.Path == "/.well-known/openid-configuration" {
			fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":"%[1]s/auth","token_endpoint":"%[1]s/token","jwks_uri":"%[1]s/jwks"}`, idp.URL)
			return
		}
		_ = r.ParseForm()
		w.WriteHeader(http.StatusUnauthorized)
		desc := "bad client: " + r.PostForm.Encode() + " " + r.Header.Get("Authorization")
		_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": desc})
	}))
	t.Cleanup(idp.Close)
	logs := &testenv.Output{}
	setupOIDC := func(p *Params) {
		p.OIDC = &OIDCParams{Issuer: idp.URL, ClientID: "oncesync", ClientSecret: clientSecret, RolesClaim: "groups"}
		p.Logger = slog.New(slog.NewTextHandler(logs, nil))
	}
	b := setup(t, setupOIDC)
	ts := httptest.NewServer(b.srv)
	t.Cleanup(ts.Close)
	c := browserClient(t)
	nf := &http.Client{Jar: c.Jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	start, err := nf.Get(ts.URL + "/auth/oidc/start")
	if err != nil {
		t.Fatal(err)
	}
	loc, _ := url.Parse(start.Header.Get("Location"))
	res, err := nf.Get(ts.URL + "/auth/oidc/callback?code=the-code-42&state=" + loc.Query().Get("state"))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("refused code: %d", res.StatusCode)
	}
	got := logs.String()
	if !strings.Contains(got, "invalid_client") {
		t.Errorf("the log does not say why: %s", got)
	}
	basic := base64.StdEncoding.EncodeToString([]byte("oncesync:" + clientSecret))
	for _, leak := range []string{clientSecret, basic, "the-code-42", "code_verifier"} {
		if strings.Contains(got, leak) {
			t.Errorf("the log shows %q: %s", leak, got)
		}
	}
}
