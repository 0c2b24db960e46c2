package web

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/oncesync/oncesync/internal/apiclient"
	"golang.org/x/oauth2"

	"github.com/oncesync/oncesync/internal/config"
)

// Sign-in with an OpenID Connect provider (docs/guide.md#running-oncesync-for-several-teams): the
// authorization-code flow with state, nonce and PKCE (S256). The person's
// role and workspaces come from a claim of the ID token (mapClaims).

// OIDCParams configure sign-in with an OpenID Connect provider.
type OIDCParams struct {
	Issuer       string
	ClientID     string
	ClientSecret string
	// RolesClaim names the claim (a string or a list of strings; a dotted
	// path reads a nested one, e.g. realm_access.roles) whose values give
	// the role: "oncesync:ROLE" or "oncesync:ROLE:WORKSPACE".
	RolesClaim string
	// WorkspacesClaim optionally names a claim listing the workspaces that
	// the "oncesync:ROLE" values (without a workspace) apply to.
	WorkspacesClaim string
	// RedirectURL is the callback registered at the provider; "" derives
	// it from the request (/auth/oidc/callback on the request's host).
	RedirectURL string
	// Scopes requested; nil means openid, profile and groups.
	Scopes []string
	// HTTPClient talks to the provider; nil: a client with a 10 s timeout.
	HTTPClient *http.Client
}

// oidcClaimPrefix starts every claim value oncesync reads.
const oidcClaimPrefix = "oncesync:"

const (
	oidcCookie       = "oncesync_oidc"
	secureOIDCCookie = "__Host-oncesync_oidc"
	oidcFlowTTL      = 10 * time.Minute
)

// oidcClient discovers the provider on first use (so that serve starts
// while the provider is down) and keeps it once found.
type oidcClient struct {
	p        OIDCParams
	mu       sync.Mutex
	provider *oidc.Provider
}

func newOIDC(_ context.Context, p OIDCParams) (*oidcClient, error) {
	if p.Issuer == "" || p.ClientID == "" || p.RolesClaim == "" {
		return nil, errors.New("web: OIDC needs an issuer, a client id and a roles claim")
	}
	if p.Scopes == nil {
		p.Scopes = []string{oidc.ScopeOpenID, "profile", "groups"}
	}
	if p.HTTPClient == nil {
		// Its own pool: see apiclient.NewHTTPClient.
		p.HTTPClient = apiclient.NewHTTPClient()
		p.HTTPClient.Timeout = 10 * time.Second
	}
	return &oidcClient{p: p}, nil
}

func (c *oidcClient) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, c.p.HTTPClient)
}

// discover returns the provider, reading its discovery document once.
func (c *oidcClient) discover(ctx context.Context) (*oidc.Provider, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.provider != nil {
		return c.provider, nil
	}
	pr, err := oidc.NewProvider(c.ctx(ctx), c.p.Issuer)
	if err != nil {
		return nil, fmt.Errorf("OIDC discovery: %w", err)
	}
	c.provider = pr
	return pr, nil
}

func (s *Server) oidcConfig(ctx context.Context, r *http.Request) (*oauth2.Config, *oidc.Provider, error) {
	pr, err := s.oidc.discover(ctx)
	if err != nil {
		return nil, nil, err
	}
	redirect := s.oidc.p.RedirectURL
	if redirect == "" {
		scheme := "http"
		if s.p.Secure || r.TLS != nil {
			scheme = "https"
		}
		redirect = scheme + "://" + r.Host + "/auth/oidc/callback"
	}
	return &oauth2.Config{
		ClientID: s.oidc.p.ClientID, ClientSecret: s.oidc.p.ClientSecret,
		Endpoint: pr.Endpoint(), RedirectURL: redirect, Scopes: s.oidc.p.Scopes,
	}, pr, nil
}

func (s *Server) oidcCookieName() string {
	if s.p.Secure {
		return secureOIDCCookie
	}
	return oidcCookie
}

// oidcStart sends the browser to the provider. State, nonce, the PKCE
// verifier and where to go next wait in a short-lived cookie (SameSite=Lax:
// the provider's redirect back is a top-level navigation from its site).
func (s *Server) oidcStart(w http.ResponseWriter, r *http.Request) {
	conf, _, err := s.oidcConfig(r.Context(), r)
	if err != nil {
		s.log.Warn("web: OIDC provider unavailable", "err", err)
		s.renderLogin(w, r, http.StatusServiceUnavailable, loginData{Error: "The sign-in provider cannot be reached; try again later."})
		return
	}
	state, nonce, verifier := randomToken(), randomToken(), oauth2.GenerateVerifier()
	next := safeNext(r.URL.Query().Get("next"))
	http.SetCookie(w, &http.Cookie{
		Name: s.oidcCookieName(), Value: strings.Join([]string{state, nonce, verifier, url.QueryEscape(next)}, "."),
		Path: "/", HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.p.Secure, MaxAge: int(oidcFlowTTL / time.Second),
	})
	http.Redirect(w, r, conf.AuthCodeURL(state, oidc.Nonce(nonce), oauth2.S256ChallengeOption(verifier)), http.StatusFound)
}

// oidcCallback finishes the flow: the state must match the cookie's, the
// code is exchanged with the PKCE verifier, the ID token is verified
// (signature, issuer, audience, expiry) and must carry the nonce.
func (s *Server) oidcCallback(w http.ResponseWriter, r *http.Request) {
	fail := func(status int, msg string, err error) {
		if err != nil {
			s.log.Warn("web: OIDC sign-in refused", "err", s.oidcLogErr(err))
		}
		s.renderLogin(w, r, status, loginData{Error: msg})
	}
	c, err := r.Cookie(s.oidcCookieName())
	http.SetCookie(w, &http.Cookie{Name: s.oidcCookieName(), Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.p.Secure})
	if err != nil {
		fail(http.StatusBadRequest, "The sign-in expired; please sign in again.", nil)
		return
	}
	parts := strings.Split(c.Value, ".")
	q := r.URL.Query()
	if len(parts) != 4 || subtle.ConstantTimeCompare([]byte(parts[0]), []byte(q.Get("state"))) != 1 {
		fail(http.StatusBadRequest, "The sign-in expired or did not start here; please sign in again.", nil)
		return
	}
	nonce, verifier := parts[1], parts[2]
	next, _ := url.QueryUnescape(parts[3])
	if e := q.Get("error"); e != "" {
		fail(http.StatusForbidden, "The sign-in provider refused the sign-in.", fmt.Errorf("provider error %.100q", e))
		return
	}
	conf, pr, err := s.oidcConfig(r.Context(), r)
	if err != nil {
		fail(http.StatusServiceUnavailable, "The sign-in provider cannot be reached; try again later.", err)
		return
	}
	ctx := s.oidc.ctx(r.Context())
	tok, err := conf.Exchange(ctx, q.Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		fail(http.StatusForbidden, "The sign-in provider did not confirm the sign-in; please try again.", err)
		return
	}
	raw, _ := tok.Extra("id_token").(string)
	idt, err := pr.Verifier(&oidc.Config{ClientID: s.oidc.p.ClientID, Now: s.clock.Now}).Verify(ctx, raw)
	if err != nil {
		fail(http.StatusForbidden, "The sign-in provider's answer could not be verified.", err)
		return
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		fail(http.StatusForbidden, "The sign-in provider's answer could not be verified.", errors.New("nonce mismatch"))
		return
	}
	var claims map[string]any
	if err := idt.Claims(&claims); err != nil {
		fail(http.StatusForbidden, "The sign-in provider's answer could not be read.", err)
		return
	}
	name := oidcName(idt.Subject, claims)
	p := mapClaims(name, claims, s.oidc.p.RolesClaim, s.oidc.p.WorkspacesClaim)
	if p.Top() < RoleViewer {
		s.log.Warn("web: OIDC sign-in without an oncesync role", "user", name)
		fail(http.StatusForbidden, "Your account has no oncesync role; ask an administrator to add you to an oncesync group.", nil)
		return
	}
	if err := s.signIn(w, r, p, providerOIDC); err != nil {
		s.errorPage(w, r, err)
		return
	}
	http.Redirect(w, r, safeNext(next), http.StatusSeeOther)
}

// oidcLogErr is err as logged: a token endpoint's refusal by its HTTP
// status and OAuth error code only, since its description and body may
// echo the request (the client secret, the code and its PKCE verifier), and
// any other error without the client secret.
func (s *Server) oidcLogErr(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		status := 0
		if re.Response != nil {
			status = re.Response.StatusCode
		}
		return fmt.Errorf("the provider's token endpoint refused the code: HTTP %d, error %.60q", status, re.ErrorCode)
	}
	if sec := s.oidc.p.ClientSecret; sec != "" && strings.Contains(err.Error(), sec) {
		return errors.New(strings.ReplaceAll(err.Error(), sec, "[redacted]"))
	}
	return err
}

// oidcName is who a person signed in with OIDC is in sessions, the audit
// log and the pages: "oidc:", the preferred_username (else the subject),
// "#" and a short digest of the subject. The username alone would not do:
// it is not unique and often its owner's to edit (docs/guide.md#running-oncesync-for-several-teams),
// so one person could act in the audit log, or sign out everywhere, as
// another; the subject is the provider's own stable id. A username that is
// an e-mail address (Azure AD's UPN, many others) keeps only its local
// part, so that no e-mail address is stored or shown.
func oidcName(subject string, claims map[string]any) string {
	u, _ := claims["preferred_username"].(string)
	if u == "" {
		u = subject
	}
	if local, _, ok := strings.Cut(u, "@"); ok {
		u = local
	}
	u = principalText(u)
	sum := sha256.Sum256([]byte(subject))
	return "oidc:" + u + "#" + hex.EncodeToString(sum[:4])
}

// principalText is a username as a principal shows it: without "#" (a
// name "jane#fcdec6df" read as the real jane's whole principal in the audit
// log), control or format characters (U+202E reverses what follows), at
// most 64 characters, "-" when nothing is left.
func principalText(u string) string {
	u = strings.Map(func(r rune) rune {
		if r == '#' || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			return -1
		}
		return r
	}, u)
	if r := []rune(u); len(r) > 64 {
		u = string(r[:64])
	}
	return cmp.Or(u, "-")
}

// mapClaims reads a principal from ID-token claims: each value of the
// roles claim "oncesync:ROLE:WORKSPACE" gives ROLE in WORKSPACE
// ("oncesync:ROLE:*" in every one); "oncesync:ROLE" gives ROLE in every
// workspace, or, when a workspaces claim is configured, in each workspace
// it lists. Other values are ignored; the strongest role wins. A workspace
// must be a valid workspace name (config.IsName), or "*" in a role value:
// "oncesync:operator:" (a group template whose team came out empty) once
// made an operator of every workspace, and "oncesync:admin:acme:extra" a
// session for a workspace that cannot exist (an independent check,
// 2026-12-06). A workspaces claim's values never mean every workspace.
func mapClaims(name string, claims map[string]any, rolesClaim, workspacesClaim string) *Principal {
	p := &Principal{Name: name}
	grant := func(ws string, r Role) {
		if ws == "*" {
			p.All = max(p.All, r)
			return
		}
		if p.In == nil {
			p.In = map[string]Role{}
		}
		p.In[ws] = max(p.In[ws], r)
	}
	var wss []string
	if workspacesClaim != "" {
		wss = claimStrings(claims, workspacesClaim)
	}
	for _, v := range claimStrings(claims, rolesClaim) {
		rest, ok := strings.CutPrefix(v, oidcClaimPrefix)
		if !ok {
			continue
		}
		role, ws, scoped := strings.Cut(rest, ":")
		r, err := ParseRole(role)
		if err != nil {
			continue
		}
		switch {
		case scoped && ws != "*" && !config.IsName(ws):
			continue
		case scoped:
			grant(ws, r)
		case workspacesClaim != "":
			for _, w := range wss {
				if config.IsName(w) {
					grant(w, r)
				}
			}
		default:
			grant("*", r)
		}
	}
	return p
}

// claimStrings reads a claim (a dotted path for a nested one) as strings.
func claimStrings(claims map[string]any, path string) []string {
	var v any = claims
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	switch x := v.(type) {
	case string:
		return strings.Fields(strings.ReplaceAll(x, ",", " "))
	case []any:
		var out []string
		for _, e := range x {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
