package web

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/crypto/argon2"
	"golang.org/x/crypto/bcrypt"

	"github.com/oncesync/oncesync/internal/store"
)

const (
	sessionCookie       = "oncesync_session"
	secureSessionCookie = "__Host-oncesync_session"
	loginCookie         = "oncesync_login"
	secureLoginCookie   = "__Host-oncesync_login"
)

// session is one signed-in browser.
type session struct {
	id        string // hex SHA-256 of the cookie's secret (the store's key)
	user      string
	csrf      string
	principal *Principal
}

func (s *session) validCSRF(tok string) bool {
	return tok != "" && subtle.ConstantTimeCompare([]byte(tok), []byte(s.csrf)) == 1
}

// Session providers (store.Session.Provider).
const (
	providerPassword = "password"
	providerOIDC     = "oidc"
)

// touchEvery is how stale a session's "last seen" may get before a request
// writes it again (one write a minute per session, not one per request).
const touchEvery = time.Minute

func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sessionID is the store's key of a cookie's secret.
func sessionID(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

// csrfOf is a session's form token: derived from the cookie's secret, so
// the store keeps nothing that could forge one.
func csrfOf(secret string) string {
	h := sha256.Sum256([]byte("oncesync csrf\x00" + secret))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// createSession starts a session in the store and returns its cookie value.
func (s *Server) createSession(ctx context.Context, p *Principal, provider string) (string, error) {
	secret := randomToken()
	now := s.clock.Now()
	// Expired sessions are swept at each sign-in, so the table stays small.
	if _, err := s.sessions.PruneSessions(ctx); err != nil {
		return "", err
	}
	err := s.sessions.CreateSession(ctx, store.Session{
		ID: sessionID(secret), User: p.Name, Provider: provider, Access: p.encode(),
		CreatedAt: now, LastSeenAt: now, ExpiresAt: now.Add(s.p.SessionTTL),
	})
	if err != nil {
		return "", err
	}
	return secret, nil
}

// sessionFor reads the session of a cookie's secret: nil when there is
// none, it expired, or its user's access changed since sign-in (a user
// removed from web.users or given another role or other workspaces loses
// every session at once; an OIDC session ends when web.oidc is removed).
func (s *Server) sessionFor(ctx context.Context, secret string) (*session, error) {
	if secret == "" {
		return nil, nil
	}
	id := sessionID(secret)
	se, err := s.sessions.GetSession(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p *Principal
	switch se.Provider {
	case providerPassword:
		u, ok := s.users[se.User]
		if ok && principalOf(se.User, u.Access).encode() == se.Access {
			p = principalOf(se.User, u.Access)
		}
	case providerOIDC:
		if s.oidc != nil {
			p, _ = decodePrincipal(se.User, se.Access)
		}
	}
	if p == nil {
		if se.Provider == providerPassword {
			_, err = s.sessions.DeleteUserSessions(ctx, se.User)
		} else {
			err = s.sessions.DeleteSession(ctx, id)
		}
		s.log.Info("web: session ended: access changed in the configuration", "user", se.User)
		return nil, err
	}
	if s.clock.Now().Sub(se.LastSeenAt) >= touchEvery {
		if err := s.sessions.TouchSession(ctx, id); err != nil {
			return nil, err
		}
	}
	return &session{id: id, user: se.User, csrf: csrfOf(secret), principal: p}, nil
}

type sessionKey struct{}

func withSession(ctx context.Context, s *session) context.Context {
	return context.WithValue(ctx, sessionKey{}, s)
}

func sessionFrom(ctx context.Context) *session {
	s, _ := ctx.Value(sessionKey{}).(*session)
	return s
}

func (s *Server) cookieName() string {
	if s.p.Secure {
		return secureSessionCookie
	}
	return sessionCookie
}

func (s *Server) loginCookieName() string {
	if s.p.Secure {
		return secureLoginCookie
	}
	return loginCookie
}

func (s *Server) sessionOf(r *http.Request) (*session, error) {
	c, err := r.Cookie(s.cookieName())
	if err != nil {
		return nil, nil
	}
	return s.sessionFor(r.Context(), c.Value)
}

// toLogin answers an unauthenticated page request: a redirect to the login
// form for GET, 401 otherwise. Neither carries any data.
func (s *Server) toLogin(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		http.Error(w, "sign in first", http.StatusUnauthorized)
		return
	}
	// No body: the redirect carries nothing but the way to the login form.
	w.Header().Set("Location", "/login?next="+url.QueryEscape(r.URL.RequestURI()))
	w.WriteHeader(http.StatusSeeOther)
}

// safeNext keeps a post-login redirect on this site.
func safeNext(next string) string {
	if next == "" || !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") ||
		strings.HasPrefix(next, "/\\") || strings.HasPrefix(next, "/login") {
		return "/"
	}
	if u, err := url.Parse(next); err != nil || u.Host != "" || u.Scheme != "" {
		return "/"
	}
	return next
}

type loginData struct {
	Next  string
	CSRF  string
	Error string
	User  string
	OIDC  bool
	// NoOne: the config names no user and no single sign-on, so nobody
	// can sign in; the page says how to add one (README's config has none).
	NoOne bool
}

// loginForm shows the sign-in form with a login CSRF token (double submit:
// the same random value in a cookie and in the form).
func (s *Server) loginForm(w http.ResponseWriter, r *http.Request) {
	s.renderLogin(w, r, http.StatusOK, loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

func (s *Server) renderLogin(w http.ResponseWriter, r *http.Request, status int, d loginData) {
	// Reuse the browser's token: a second login form (another tab, a
	// favicon request sent to sign in) must not invalidate the first.
	if c, err := r.Cookie(s.loginCookieName()); err == nil && len(c.Value) == 43 {
		d.CSRF = c.Value
	} else {
		d.CSRF = randomToken()
	}
	http.SetCookie(w, &http.Cookie{
		Name: s.loginCookieName(), Value: d.CSRF, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: s.p.Secure, MaxAge: 3600,
	})
	d.OIDC = s.oidc != nil
	d.NoOne = len(s.users) == 0 && s.oidc == nil
	s.render(w, r, status, "login", page{Title: "Sign in", Body: d})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, 16<<10)
	if err := r.ParseForm(); err != nil {
		s.renderLogin(w, r, http.StatusBadRequest, loginData{Error: "The form could not be read."})
		return
	}
	next := safeNext(r.PostFormValue("next"))
	c, err := r.Cookie(s.loginCookieName())
	form := r.PostFormValue("csrf")
	if err != nil || form == "" || subtle.ConstantTimeCompare([]byte(c.Value), []byte(form)) != 1 {
		s.renderLogin(w, r, http.StatusForbidden, loginData{Next: next, Error: "The form expired; please sign in again."})
		return
	}
	user := strings.TrimSpace(r.PostFormValue("user"))
	keys := signInKeys(user, r)
	if until, blocked := s.throttle.blocked(keys...); blocked {
		s.log.Warn("web: sign-in throttled", "user_len", len(user), "remote", r.RemoteAddr, "until", until)
		w.Header().Set("Retry-After", fmt.Sprint(int(until.Sub(s.clock.Now()).Seconds())+1))
		s.renderLogin(w, r, http.StatusTooManyRequests, loginData{Next: next, User: user,
			Error: "Too many failed sign-ins for this name or from this address; try again in a few minutes."})
		return
	}
	select {
	case s.checks <- struct{}{}:
	case <-r.Context().Done():
		return
	}
	ok := s.checkUser(user, r.PostFormValue("password"))
	<-s.checks
	if !ok {
		s.throttle.failed(keys...)
		s.log.Warn("web: sign-in refused", "user_len", len(user), "remote", r.RemoteAddr)
		s.renderLogin(w, r, http.StatusUnauthorized, loginData{Next: next, User: user, Error: "Wrong name or password."})
		return
	}
	s.throttle.succeeded(keys...)
	if err := s.signIn(w, r, principalOf(user, s.users[user].Access), providerPassword); err != nil {
		s.errorPage(w, r, err)
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// signIn starts a session for p and sets its cookie.
func (s *Server) signIn(w http.ResponseWriter, r *http.Request, p *Principal, provider string) error {
	secret, err := s.createSession(r.Context(), p, provider)
	if err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{
		Name: s.cookieName(), Value: secret, Path: "/", HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: s.p.Secure, MaxAge: int(s.p.SessionTTL / time.Second),
	})
	http.SetCookie(w, &http.Cookie{Name: s.loginCookieName(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.p.Secure})
	s.log.Info("web: signed in", "user", p.Name, "provider", provider)
	return nil
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if sess := sessionFrom(r.Context()); sess != nil {
		if err := s.sessions.DeleteSession(r.Context(), sess.id); err != nil {
			s.errorPage(w, r, err)
			return
		}
	}
	s.signedOut(w, r)
}

// logoutEverywhere ends every session of the signed-in user, on every
// device.
func (s *Server) logoutEverywhere(w http.ResponseWriter, r *http.Request) {
	sess := sessionFrom(r.Context())
	n, err := s.sessions.DeleteUserSessions(r.Context(), sess.user)
	if err != nil {
		s.errorPage(w, r, err)
		return
	}
	s.log.Info("web: signed out everywhere", "user", sess.user, "sessions", n)
	s.signedOut(w, r)
}

func (s *Server) signedOut(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: s.cookieName(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: s.p.Secure})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

// checkUser verifies a name and password. An unknown name is checked against
// a dummy hash so that it takes as long as a known one.
func (s *Server) checkUser(user, password string) bool {
	u, ok := s.users[user]
	if !ok || user == "" {
		_ = checkPassword(s.decoy, password)
		return false
	}
	return checkPassword(u.Hash, password)
}

func supportedHash(h string) bool {
	if strings.HasPrefix(h, "$argon2id$") {
		_, err := parseArgon2id(h)
		return err == nil
	}
	_, err := bcrypt.Cost([]byte(h))
	return err == nil
}

func checkPassword(hash, password string) bool {
	if strings.HasPrefix(hash, "$argon2id$") {
		a, err := parseArgon2id(hash)
		if err != nil {
			return false
		}
		got := argon2.IDKey([]byte(password), a.salt, a.time, a.memory, a.threads, uint32(len(a.key)))
		return subtle.ConstantTimeCompare(got, a.key) == 1
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), []byte(password)) == nil
}

type argon2Hash struct {
	memory, time uint32
	threads      uint8
	salt, key    []byte
}

// parseArgon2id reads a PHC string: $argon2id$v=19$m=65536,t=3,p=4$SALT$KEY
// (SALT and KEY in unpadded standard base64).
func parseArgon2id(h string) (argon2Hash, error) {
	var a argon2Hash
	parts := strings.Split(h, "$")
	if len(parts) != 6 || parts[1] != "argon2id" || parts[2] != "v=19" {
		return a, fmt.Errorf("%w: not an argon2id v=19 PHC string", ErrInvalid)
	}
	for _, kv := range strings.Split(parts[3], ",") {
		k, v, _ := strings.Cut(kv, "=")
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return a, fmt.Errorf("%w: argon2id parameter %q", ErrInvalid, k)
		}
		switch k {
		case "m":
			a.memory = uint32(n)
		case "t":
			a.time = uint32(n)
		case "p":
			if n > 255 {
				return a, fmt.Errorf("%w: argon2id parallelism %d", ErrInvalid, n)
			}
			a.threads = uint8(n)
		}
	}
	var err error
	if a.salt, err = base64.RawStdEncoding.DecodeString(parts[4]); err != nil {
		return a, fmt.Errorf("%w: argon2id salt", ErrInvalid)
	}
	if a.key, err = base64.RawStdEncoding.DecodeString(parts[5]); err != nil || len(a.key) == 0 {
		return a, fmt.Errorf("%w: argon2id key", ErrInvalid)
	}
	if a.memory == 0 || a.time == 0 || a.threads == 0 {
		return a, fmt.Errorf("%w: argon2id parameters missing", ErrInvalid)
	}
	return a, nil
}
