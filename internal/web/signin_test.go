package web

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"
)

// TestSignInThrottle: five wrong passwords for a name refuse it, even with
// the right password, without a password check, until the pause ends; the
// right password then signs in and forgets the failures. Another address
// trying many names is refused the same way.
func TestSignInThrottle(t *testing.T) {
	t.Parallel()
	b := setup(t)
	submit := func(user, pw, addr string) resp {
		t.Helper()
		v := url.Values{"user": {user}, "password": {pw}, "csrf": {"c"}, "next": {"/"}}
		req := httptest.NewRequest("POST", "/login", strings.NewReader(v.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Sec-Fetch-Site", "same-origin")
		req.RemoteAddr = addr
		req.AddCookie(&http.Cookie{Name: b.srv.loginCookieName(), Value: "c"})
		return b.do(req)
	}
	for i := range throttleFailures {
		if got := submit(testUser, "wrong", "192.0.2.1:1000"); got.code != http.StatusUnauthorized {
			t.Fatalf("wrong password %d: %d", i+1, got.code)
		}
	}
	got := submit(testUser, testPassword, "198.51.100.7:2000")
	if got.code != http.StatusTooManyRequests || got.hdr.Get("Retry-After") == "" || !strings.Contains(got.body, "Too many failed sign-ins") {
		t.Fatalf("right password right after five wrong ones: %d %q", got.code, got.hdr.Get("Retry-After"))
	}
	b.clk.Advance(throttleFor + time.Second)
	if got := submit(testUser, testPassword, "198.51.100.7:2000"); got.code != http.StatusSeeOther {
		t.Fatalf("right password after the pause: %d", got.code)
	}
	if _, blocked := b.srv.throttle.blocked("user:" + testUser); blocked {
		t.Fatal("a success left the name throttled")
	}
	// One address, many names.
	for i := range throttleFailures {
		submit("name"+string(rune('a'+i)), "x", "203.0.113.9:3000")
	}
	if got := submit(testUser, testPassword, "203.0.113.9:3000"); got.code != http.StatusTooManyRequests {
		t.Fatalf("an address that tried five names: %d", got.code)
	}
}

// TestDecoyHashMatchesUsers: the hash checked for an unknown name has the
// users' bcrypt cost, so it takes as long as a known name's.
func TestDecoyHashMatchesUsers(t *testing.T) {
	t.Parallel()
	h, err := bcrypt.GenerateFromPassword([]byte("pw"), 11)
	if err != nil {
		t.Fatal(err)
	}
	low, _ := bcrypt.GenerateFromPassword([]byte("pw"), bcrypt.MinCost)
	d, err := decoyFor(map[string]string{"a": string(h), "b": string(low)})
	if err != nil {
		t.Fatal(err)
	}
	if c, err := bcrypt.Cost([]byte(d)); err != nil || c != 11 {
		t.Fatalf("decoy cost %d (%v), want 11", c, err)
	}
	a, err := decoyFor(map[string]string{"a": "$argon2id$v=19$m=65536,t=3,p=2$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2U"})
	if err != nil || !strings.HasPrefix(a, "$argon2id$v=19$m=65536,t=3,p=2$") || !supportedHash(a) {
		t.Fatalf("argon2id decoy %q, %v", a, err)
	}
}

// TestSecureCookiesAndHSTS: with Secure (web.secure), the session cookie is
// Secure with a __Host- name and every response carries HSTS; without it,
// neither.
func TestSecureCookiesAndHSTS(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{false, true} {
		b := setup(t, func(p *Params) { p.Secure = secure })
		got := b.do(httptest.NewRequest("GET", "/login", nil))
		hsts := got.hdr.Get("Strict-Transport-Security")
		if secure != (hsts != "") {
			t.Fatalf("secure %v: HSTS %q", secure, hsts)
		}
		var login *http.Cookie
		for _, c := range (&http.Response{Header: got.hdr}).Cookies() {
			login = c
		}
		if login == nil || login.Secure != secure || secure != strings.HasPrefix(login.Name, "__Host-") {
			t.Fatalf("secure %v: login cookie %+v", secure, login)
		}
	}
}

// TestSignInWithNoUsers: serve started with README's config (no web.users,
// no web.oidc) showed a sign-in form nobody could pass, with no word on
// why. The page now says how to add a user.
func TestSignInWithNoUsers(t *testing.T) {
	t.Parallel()
	b := setup(t, func(p *Params) { p.Users = nil })
	got := b.do(httptest.NewRequest("GET", "/login", nil))
	if !strings.Contains(got.body, `id="no-users"`) || !strings.Contains(got.body, "htpasswd -nbBC 12 NAME PASSWORD") {
		t.Errorf("the sign-in page of a config without users does not say how to add one:\n%s", got.body)
	}
	b = setup(t)
	if got := b.do(httptest.NewRequest("GET", "/login", nil)); strings.Contains(got.body, `id="no-users"`) {
		t.Errorf("the sign-in page says no one can sign in though web.users has a user")
	}
}
