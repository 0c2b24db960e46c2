// Package web is oncesync's sync pages and JSON API (issue 5): an overview of
// every workspace and sync, a page per sync and per run, the audit log, the
// actions a person takes (run now, pause, resume, settle in-doubt records,
// re-queue dead-lettered work) and the same under /api/v1 with an OpenAPI
// document. Everything it serves needs authentication: a session cookie from
// the login form for the pages, a bearer token for the API. serve mounts the
// handler at "/" beside its own /healthz and /readyz.
package web

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

// Sentinel errors of the actions; handlers map them to HTTP statuses.
var (
	// ErrInvalid: the request is malformed or misses a field (400).
	ErrInvalid = errors.New("invalid request")
	// ErrConflict: the action does not apply to the sync's current state (409).
	ErrConflict = errors.New("conflict")
	// ErrDisabled: the action is not available in this deployment (404).
	ErrDisabled = errors.New("action not available")
	// ErrAlreadyQueued: Params.Enqueue queued no run because one of the
	// sync is already queued or running (that run is the one asked for).
	ErrAlreadyQueued = errors.New("a run of the sync is already queued or running")
)

// DefaultDocsBase is where failure codes link when Params.DocsBase is empty.
const DefaultDocsBase = "https://github.com/oncesync/oncesync/blob/main/docs/recovery.md"

// DefaultSessionTTL is how long a UI session lives after sign-in.
const DefaultSessionTTL = 12 * time.Hour

// ReasonManual is the reason passed to Params.Enqueue for "run now"
// (queue.ReasonManual).
const ReasonManual = "manual"

// DeadLetter is one piece of parked partition work (docs/guide.md#the-checkpoint-barrier), as shown and
// re-queued by a person. It holds no personal data.
type DeadLetter struct {
	ID        string    `json:"id"`
	RunID     int64     `json:"run_id"`
	Partition int       `json:"partition"`
	Code      string    `json:"code"`
	Detail    string    `json:"detail,omitempty"`
	At        time.Time `json:"at"`
}

// RequeueParams re-queue one dead letter of a sync.
type RequeueParams struct {
	SyncID string
	ID     string
	By     string
	Why    string
}

// Params configure a Server.
type Params struct {
	// Store is the source of everything shown. Required.
	Store  store.Store
	Logger *slog.Logger
	Clock  clock.Clock
	// APITokens are the named bearer tokens /api/v1 and /metrics accept,
	// each with its role and workspaces.
	APITokens []Token
	// Users maps a sign-in name to a bcrypt ($2a$, $2b$, $2y$) or argon2id
	// (PHC string, $argon2id$v=19$m=..,t=..,p=..$salt$hash) password hash
	// and the user's role and workspaces.
	Users map[string]User
	// Sessions keeps the UI's sessions; nil uses Store when it implements
	// store.Sessions (store/sqlite and store/postgres do).
	Sessions store.Sessions
	// OIDC, when set, offers sign-in with an OpenID Connect provider.
	OIDC *OIDCParams
	// Enqueue queues a run of a sync now ("run now"); nil disables the
	// action. It returns ErrAlreadyQueued when a run of the sync is already
	// queued or running, so it queued none.
	Enqueue func(ctx context.Context, syncID, reason string) error
	// Resend queues a run that writes every record of a sync again ("send
	// everything again": docs/guide.md#sending-everything-again); nil
	// disables the action. Its errors wrapping ErrConflict (a run of the
	// sync queued or running, a partitioned sync) are the person's to read.
	Resend func(ctx context.Context, syncID string) error
	// DeadLetters lists a sync's dead-lettered partition work; nil hides it.
	DeadLetters func(ctx context.Context, syncID string) ([]DeadLetter, error)
	// Requeue re-queues a dead letter; nil hides the action.
	Requeue func(ctx context.Context, p RequeueParams) error
	// Configured reports whether serve's config has the sync; a sync it
	// lacks shows as HealthNotInConfig, with no next run. nil: every sync.
	Configured func(syncID string) bool
	// Silence maps the syncID of each sync the dead-man check finds silent to
	// the silence's kind (runs_without_success, no_runs); nil = unknown.
	Silence func(ctx context.Context) (map[string]string, error)
	// Stats answers the overview's figures; nil reads them from Store
	// (ListSyncs, then ListRuns per sync).
	Stats StatsSource
	// Metrics is served at /metrics (behind authentication) when set.
	Metrics prometheus.Gatherer
	// Extra are handlers mounted behind the same authentication, for
	// admins of every workspace, by pattern (e.g. "/riverui/"). They get the
	// security headers except the CSP.
	Extra map[string]http.Handler
	// DocsBase is the recovery guide's URL (failure.DocsURL); "" = DefaultDocsBase.
	DocsBase string
	// Secure marks cookies Secure (serve behind TLS).
	Secure bool
	// SessionTTL defaults to DefaultSessionTTL.
	SessionTTL time.Duration
	// Check tests a sync's connections, writing nothing (`oncesync
	// check`): one line per check and the first failure; nil hides "Test
	// connection".
	Check checkFunc
	// Preview says what a run of the sync would do, writing nothing
	// (`oncesync run --dry-run`); nil hides "Preview".
	Preview previewFunc
	// DescribeCursor says where a sync's saved cursor is, in words ("after
	// record 2,000 of contacts.csv"); nil, or "", shows the raw cursor.
	DescribeCursor func(syncID, cursor string) string
}

// Server serves the pages and the API. It is an http.Handler.
type Server struct {
	p        Params
	log      *slog.Logger
	clock    clock.Clock
	stats    StatsSource
	tokens   []apiToken
	users    map[string]User
	sessions store.Sessions
	oidc     *oidcClient
	pages    *pages
	cop      *http.CrossOriginProtection
	handler  http.Handler
	routes   []route
	// methods finds the methods a path is routed for (allowed), so a
	// known path asked with another method answers 405, not 404.
	methods *http.ServeMux

	decoy    string        // checked for unknown names (signin.go)
	checks   chan struct{} // bounds concurrent password checks
	throttle *throttle
}

// apiToken is a configured token: the digest of its secret and its
// principal.
type apiToken struct {
	digest    [sha256.Size]byte
	principal *Principal
}

// routeKind says how a route authenticates.
type routeKind int

const (
	kindPublic  routeKind = iota // login form and static assets
	kindPage                     // session cookie; POSTs also need the CSRF token
	kindAPI                      // bearer token
	kindMetrics                  // bearer token or session
	kindExtra                    // session; POSTs pass the cross-origin check (no form token: SPAs)
)

type route struct {
	method, path string // path as registered (ServeMux pattern syntax)
	kind         routeKind
	rule         rule // who may use it (access.go)
	h            http.HandlerFunc
}

// New builds a Server.
func New(p Params) (*Server, error) {
	if p.Store == nil {
		return nil, errors.New("web: Store is required")
	}
	if p.Logger == nil {
		p.Logger = slog.New(slog.DiscardHandler)
	}
	if p.Clock == nil {
		p.Clock = clock.Real{}
	}
	if p.DocsBase == "" {
		p.DocsBase = DefaultDocsBase
	}
	if p.SessionTTL <= 0 {
		p.SessionTTL = DefaultSessionTTL
	}
	hashes := map[string]string{}
	for name, u := range p.Users {
		if !supportedHash(u.Hash) {
			return nil, fmt.Errorf("web: user %q: password hash is neither bcrypt nor argon2id", name)
		}
		if u.Role < RoleViewer || u.Role > RoleAdmin {
			return nil, fmt.Errorf("web: user %q: no role", name)
		}
		hashes[name] = u.Hash
	}
	if p.Sessions == nil {
		ss, ok := p.Store.(store.Sessions)
		if !ok {
			return nil, errors.New("web: the store keeps no sessions; pass Params.Sessions")
		}
		p.Sessions = ss
	}
	s := &Server{
		p: p, log: p.Logger, clock: p.Clock, stats: p.Stats,
		users:    p.Users,
		sessions: p.Sessions,
		cop:      http.NewCrossOriginProtection(),
		checks:   make(chan struct{}, passwordChecks),
		throttle: newThrottle(p.Clock),
	}
	var err error
	if s.decoy, err = decoyFor(hashes); err != nil {
		return nil, fmt.Errorf("web: sign-in decoy: %w", err)
	}
	if s.stats == nil {
		s.stats = StoreStats{Store: p.Store}
	}
	names := map[string]bool{}
	for _, t := range p.APITokens {
		if t.Secret == "" {
			continue
		}
		if t.Name == "" || names[t.Name] {
			return nil, fmt.Errorf("web: API token %q: every token needs a name of its own", t.Name)
		}
		if t.Role < RoleViewer || t.Role > RoleAdmin {
			return nil, fmt.Errorf("web: API token %q: no role", t.Name)
		}
		names[t.Name] = true
		s.tokens = append(s.tokens, apiToken{digest: sha256.Sum256([]byte(t.Secret)), principal: principalOf(t.Name, t.Access)})
	}
	if p.OIDC != nil {
		if s.oidc, err = newOIDC(context.Background(), *p.OIDC); err != nil {
			return nil, err
		}
	}

	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.routes = s.routeTable()
	for pattern, h := range p.Extra {
		if strings.HasPrefix(pattern, "/api/") || pattern == "/" {
			return nil, fmt.Errorf("web: extra handler pattern %q collides with the UI or the API", pattern)
		}
		s.routes = append(s.routes, route{"", pattern, kindExtra, rAdmin, h.ServeHTTP})
	}
	mux := http.NewServeMux()
	s.methods = methodMux(s.routes)
	for _, r := range s.routes {
		if !r.rule.set() {
			return nil, fmt.Errorf("web: route %s %s has no access rule", r.method, r.path)
		}
		pattern := r.path
		if r.method != "" {
			pattern = r.method + " " + r.path
		}
		mux.Handle(pattern, s.guard(r))
	}
	s.handler = securityHeaders(mux, p.Extra, p.Secure)
	return s, nil
}

// methodMux maps each path routed for some methods to a handler whose
// pattern names them (allowed reads it).
func methodMux(routes []route) *http.ServeMux {
	byPath := map[string][]string{}
	var paths []string
	for _, r := range routes {
		if r.method == "" {
			continue
		}
		if byPath[r.path] == nil {
			paths = append(paths, r.path)
		}
		byPath[r.path] = append(byPath[r.path], r.method)
		if r.method == http.MethodGet {
			byPath[r.path] = append(byPath[r.path], http.MethodHead)
		}
	}
	m := http.NewServeMux()
	for _, p := range paths {
		allow := strings.Join(byPath[p], ", ")
		m.Handle(p, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Header().Set("Allow", allow) }))
	}
	return m
}

// allowed is the Allow header for a request whose path is routed for other
// methods than its own; "" when no route has its path, or has it for the
// request's method.
func (s *Server) allowed(r *http.Request) string {
	h, pattern := s.methods.Handler(r)
	if pattern == "" {
		return ""
	}
	rec := http.Header{}
	h.ServeHTTP(headerOnly{rec}, r)
	allow := rec.Get("Allow")
	for _, m := range strings.Split(allow, ", ") {
		if m == r.Method {
			// The route takes the method and its handler found nothing
			// (a run id that is no run's): not found, not 405.
			return ""
		}
	}
	return allow
}

// headerOnly is a ResponseWriter that keeps headers and drops the rest.
type headerOnly struct{ h http.Header }

func (w headerOnly) Header() http.Header         { return w.h }
func (w headerOnly) Write(b []byte) (int, error) { return len(b), nil }
func (w headerOnly) WriteHeader(int)             {}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *Server) routeTable() []route {
	rt := []route{
		{"GET", "/login", kindPublic, rPublic, s.loginForm},
		{"POST", "/login", kindPublic, rPublic, s.login},
		{"GET", "/static/", kindPublic, rPublic, staticHandler().ServeHTTP},

		{"POST", "/logout", kindPage, rRead, s.logout},
		{"POST", "/logout/everywhere", kindPage, rRead, s.logoutEverywhere},
		{"GET", "/{$}", kindPage, rRead, s.overviewPage},
		{"GET", "/syncs/{id}", kindPage, rSync, s.syncPage},
		{"GET", "/syncs/{id}/records", kindPage, rSync, s.recordsPage},
		{"GET", "/syncs/{id}/records.csv", kindPage, rSync, s.recordsCSV},
		{"GET", "/syncs/{id}/preview", kindPage, rOpSync, s.previewPage},
		{"POST", "/syncs/{id}/check", kindPage, rOpSync, s.checkForm},
		{"GET", "/runs/{id}", kindPage, rRun, s.runPage},
		{"GET", "/audit", kindPage, rRead, s.auditPage},
		{"POST", "/syncs/{id}/run", kindPage, rOpSync, s.runNowForm},
		{"POST", "/syncs/{id}/pause", kindPage, rOpSync, s.pauseForm},
		{"POST", "/syncs/{id}/resume", kindPage, rOpSync, s.resumeForm},
		{"POST", "/syncs/{id}/dead-letters/{dl}/requeue", kindPage, rOpSync, s.requeueForm},
		{"POST", "/runs/{id}/settle", kindPage, rOpRun, s.settleForm},
		{"", "/", kindPage, rRead, s.notFoundPage},

		{"GET", "/api/v1/openapi.json", kindAPI, rRead, s.openapiDoc},
		{"GET", "/api/v1/syncs", kindAPI, rRead, s.apiSyncs},
		{"GET", "/api/v1/syncs/{id}", kindAPI, rSync, s.apiSync},
		{"GET", "/api/v1/syncs/{id}/runs", kindAPI, rSync, s.apiSyncRuns},
		{"GET", "/api/v1/syncs/{id}/records", kindAPI, rSync, s.apiRecords},
		{"GET", "/api/v1/runs/{id}", kindAPI, rRun, s.apiRun},
		{"GET", "/api/v1/audit", kindAPI, rRead, s.apiAudit},
		{"POST", "/api/v1/syncs/{id}/run", kindAPI, rOpSync, s.apiRunNow},
		{"POST", "/api/v1/syncs/{id}/pause", kindAPI, rOpSync, s.apiPause},
		{"POST", "/api/v1/syncs/{id}/resume", kindAPI, rOpSync, s.apiResume},
		{"POST", "/api/v1/syncs/{id}/dead-letters/{dl}/requeue", kindAPI, rOpSync, s.apiRequeue},
		{"POST", "/api/v1/runs/{id}/settle", kindAPI, rOpRun, s.apiSettle},
		{"", "/api/", kindAPI, rRead, s.apiNotFound},
	}
	if s.p.Metrics != nil {
		rt = append(rt, route{"GET", "/metrics", kindMetrics, rRead, s.metrics})
	}
	if s.oidc != nil {
		rt = append(rt,
			route{"GET", "/auth/oidc/start", kindPublic, rPublic, s.oidcStart},
			route{"GET", "/auth/oidc/callback", kindPublic, rPublic, s.oidcCallback})
	}
	return rt
}

// guard wraps a route's handler with its authentication (and, for page
// POSTs, the CSRF checks), then its authorization (authorize): the handler
// finds the principal in the request's context.
func (s *Server) guard(rt route) http.Handler {
	h := rt.h
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch rt.kind {
		case kindPublic:
			if r.Method == http.MethodPost {
				if err := s.cop.Check(r); err != nil {
					s.forbidden(w, r, "cross-site request refused")
					return
				}
			}
			h(w, r)
		case kindAPI:
			r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
			p := s.tokenPrincipal(r)
			if p == nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="oncesync"`)
				writeAPIError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
				return
			}
			r = r.WithContext(withPrincipal(r.Context(), p))
			if err := s.authorize(r, p, rt.rule); err != nil {
				s.apiFail(w, r, err)
				return
			}
			h(w, r)
		case kindMetrics:
			p := s.tokenPrincipal(r)
			if p == nil {
				sess, err := s.sessionOf(r)
				if err != nil {
					s.errorPage(w, r, err)
					return
				}
				if sess != nil {
					p = sess.principal
				}
			}
			if p == nil {
				w.Header().Set("WWW-Authenticate", `Bearer realm="oncesync"`)
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
			r = r.WithContext(withPrincipal(r.Context(), p))
			if err := s.authorize(r, p, rt.rule); err != nil {
				status, msg := s.classify(r, err)
				http.Error(w, msg, status)
				return
			}
			h(w, r)
		case kindExtra, kindPage:
			sess, err := s.sessionOf(r)
			if err != nil {
				s.errorPage(w, r, err)
				return
			}
			if sess == nil {
				s.toLogin(w, r)
				return
			}
			r = r.WithContext(withPrincipal(withSession(r.Context(), sess), sess.principal))
			if !safeMethod(r.Method) {
				if err := s.cop.Check(r); err != nil {
					s.forbidden(w, r, "cross-site request refused")
					return
				}
				// Extra handlers (SPAs) send no form token: the
				// cross-origin check is their CSRF defence.
				if rt.kind == kindPage {
					r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
					if !sess.validCSRF(r.PostFormValue("csrf")) && !sess.validCSRF(r.Header.Get("X-CSRF-Token")) {
						s.forbidden(w, r, "the form expired or did not come from this site; reload the page and try again")
						return
					}
				}
			}
			if err := s.authorize(r, sess.principal, rt.rule); err != nil {
				s.errorPage(w, r, err)
				return
			}
			h(w, r)
		}
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// tokenPrincipal is the principal of the request's bearer token, or nil.
// The token is compared with every configured one in constant time (over
// SHA-256 digests, so lengths do not leak).
func (s *Server) tokenPrincipal(r *http.Request) *Principal {
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" || len(s.tokens) == 0 {
		return nil
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	var p *Principal
	for i := range s.tokens {
		if subtle.ConstantTimeCompare(got[:], s.tokens[i].digest[:]) == 1 {
			p = s.tokens[i].principal
		}
	}
	return p
}

// securityHeaders sets the headers every response carries; the CSP is left
// to extra handlers (River's UI brings its own assets).
func securityHeaders(next http.Handler, extra map[string]http.Handler, secure bool) http.Handler {
	var prefixes []string
	for p := range extra {
		_, path, _ := strings.Cut(p, " ")
		if path == "" {
			path = p
		}
		prefixes = append(prefixes, path)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Cross-Origin-Opener-Policy", "same-origin")
		if secure {
			// Served over TLS (web.secure): browsers keep to HTTPS for a year.
			h.Set("Strict-Transport-Security", "max-age=31536000")
		}
		own := true
		for _, p := range prefixes {
			if strings.HasPrefix(r.URL.Path, p) {
				own = false
			}
		}
		if own {
			h.Set("Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'")
			if !strings.HasPrefix(r.URL.Path, "/static/") {
				h.Set("Cache-Control", "no-store")
			}
		}
		next.ServeHTTP(w, r)
	})
}
