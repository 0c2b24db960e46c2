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
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
	// APITokens are the bearer tokens /api/v1 and /metrics accept.
	APITokens []string
	// Users maps a sign-in name to a bcrypt ($2a$, $2b$, $2y$) or argon2id
	// (PHC string, $argon2id$v=19$m=..,t=..,p=..$salt$hash) password hash.
	Users map[string]string
	// Enqueue queues a run of a sync now ("run now"); nil disables the action.
	Enqueue func(ctx context.Context, syncID, reason string) error
	// DeadLetters lists a sync's dead-lettered partition work; nil hides it.
	DeadLetters func(ctx context.Context, syncID string) ([]DeadLetter, error)
	// Requeue re-queues a dead letter; nil hides the action.
	Requeue func(ctx context.Context, p RequeueParams) error
	// Silence maps the syncID of each sync the dead-man check finds silent to
	// the silence's kind (runs_without_success, no_runs); nil = unknown.
	Silence func(ctx context.Context) (map[string]string, error)
	// Stats answers the overview's figures; nil reads them from Store
	// (ListSyncs, then ListRuns per sync).
	Stats StatsSource
	// Metrics is served at /metrics (behind authentication) when set.
	Metrics prometheus.Gatherer
	// Extra are handlers mounted behind the same authentication, by pattern
	// (e.g. "/riverui/"). They get the security headers except the CSP.
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
	tokens   [][sha256.Size]byte
	sessions *sessions
	pages    *pages
	cop      *http.CrossOriginProtection
	handler  http.Handler
	routes   []route

	decoy    string        // checked for unknown names (signin.go)
	checks   chan struct{} // bounds concurrent password checks
	throttle *throttle
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
	for name, h := range p.Users {
		if !supportedHash(h) {
			return nil, fmt.Errorf("web: user %q: password hash is neither bcrypt nor argon2id", name)
		}
	}
	s := &Server{
		p: p, log: p.Logger, clock: p.Clock, stats: p.Stats,
		sessions: newSessions(p.Clock, p.SessionTTL),
		cop:      http.NewCrossOriginProtection(),
		checks:   make(chan struct{}, passwordChecks),
		throttle: newThrottle(p.Clock),
	}
	var err error
	if s.decoy, err = decoyFor(p.Users); err != nil {
		return nil, fmt.Errorf("web: sign-in decoy: %w", err)
	}
	if s.stats == nil {
		s.stats = StoreStats{Store: p.Store}
	}
	for _, t := range p.APITokens {
		if t == "" {
			continue
		}
		s.tokens = append(s.tokens, sha256.Sum256([]byte(t)))
	}

	if s.pages, err = parsePages(); err != nil {
		return nil, err
	}
	s.routes = s.routeTable()
	mux := http.NewServeMux()
	for _, r := range s.routes {
		pattern := r.path
		if r.method != "" {
			pattern = r.method + " " + r.path
		}
		mux.Handle(pattern, s.guard(r.kind, r.h))
	}
	for pattern, h := range p.Extra {
		if strings.HasPrefix(pattern, "/api/") || pattern == "/" {
			return nil, fmt.Errorf("web: extra handler pattern %q collides with the UI or the API", pattern)
		}
		mux.Handle(pattern, s.guard(kindExtra, h.ServeHTTP))
	}
	s.handler = securityHeaders(mux, p.Extra, p.Secure)
	return s, nil
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.handler.ServeHTTP(w, r) }

func (s *Server) routeTable() []route {
	rt := []route{
		{"GET", "/login", kindPublic, s.loginForm},
		{"POST", "/login", kindPublic, s.login},
		{"GET", "/static/", kindPublic, staticHandler().ServeHTTP},

		{"POST", "/logout", kindPage, s.logout},
		{"GET", "/{$}", kindPage, s.overviewPage},
		{"GET", "/syncs/{id}", kindPage, s.syncPage},
		{"GET", "/syncs/{id}/records", kindPage, s.recordsPage},
		{"GET", "/syncs/{id}/records.csv", kindPage, s.recordsCSV},
		{"GET", "/syncs/{id}/preview", kindPage, s.previewPage},
		{"POST", "/syncs/{id}/check", kindPage, s.checkForm},
		{"GET", "/runs/{id}", kindPage, s.runPage},
		{"GET", "/audit", kindPage, s.auditPage},
		{"POST", "/syncs/{id}/run", kindPage, s.runNowForm},
		{"POST", "/syncs/{id}/pause", kindPage, s.pauseForm},
		{"POST", "/syncs/{id}/resume", kindPage, s.resumeForm},
		{"POST", "/syncs/{id}/dead-letters/{dl}/requeue", kindPage, s.requeueForm},
		{"POST", "/runs/{id}/settle", kindPage, s.settleForm},
		{"", "/", kindPage, s.notFoundPage},

		{"GET", "/api/v1/openapi.json", kindAPI, s.openapiDoc},
		{"GET", "/api/v1/syncs", kindAPI, s.apiSyncs},
		{"GET", "/api/v1/syncs/{id}", kindAPI, s.apiSync},
		{"GET", "/api/v1/syncs/{id}/runs", kindAPI, s.apiSyncRuns},
		{"GET", "/api/v1/syncs/{id}/records", kindAPI, s.apiRecords},
		{"GET", "/api/v1/runs/{id}", kindAPI, s.apiRun},
		{"GET", "/api/v1/audit", kindAPI, s.apiAudit},
		{"POST", "/api/v1/syncs/{id}/run", kindAPI, s.apiRunNow},
		{"POST", "/api/v1/syncs/{id}/pause", kindAPI, s.apiPause},
		{"POST", "/api/v1/syncs/{id}/resume", kindAPI, s.apiResume},
		{"POST", "/api/v1/syncs/{id}/dead-letters/{dl}/requeue", kindAPI, s.apiRequeue},
		{"POST", "/api/v1/runs/{id}/settle", kindAPI, s.apiSettle},
		{"", "/api/", kindAPI, s.apiNotFound},
	}
	if s.p.Metrics != nil {
		rt = append(rt, route{"GET", "/metrics", kindMetrics,
			promhttp.HandlerFor(s.p.Metrics, promhttp.HandlerOpts{}).ServeHTTP})
	}
	return rt
}

// guard wraps h with the authentication (and, for page POSTs, the CSRF
// checks) of kind.
func (s *Server) guard(kind routeKind, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch kind {
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
			if !s.validToken(r) {
				w.Header().Set("WWW-Authenticate", `Bearer realm="oncesync"`)
				writeAPIError(w, http.StatusUnauthorized, "unauthorized", "a valid bearer token is required")
				return
			}
			h(w, r)
		case kindMetrics:
			if s.validToken(r) || s.sessionOf(r) != nil {
				h(w, r)
				return
			}
			w.Header().Set("WWW-Authenticate", `Bearer realm="oncesync"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
		case kindExtra:
			if s.sessionOf(r) == nil {
				s.toLogin(w, r)
				return
			}
			if !safeMethod(r.Method) {
				if err := s.cop.Check(r); err != nil {
					s.forbidden(w, r, "cross-site request refused")
					return
				}
			}
			h(w, r)
		case kindPage:
			sess := s.sessionOf(r)
			if sess == nil {
				s.toLogin(w, r)
				return
			}
			if !safeMethod(r.Method) {
				r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
				if err := s.cop.Check(r); err != nil {
					s.forbidden(w, r, "cross-site request refused")
					return
				}
				if !sess.validCSRF(r.PostFormValue("csrf")) && !sess.validCSRF(r.Header.Get("X-CSRF-Token")) {
					s.forbidden(w, r, "the form expired or did not come from this site; reload the page and try again")
					return
				}
			}
			h(w, r.WithContext(withSession(r.Context(), sess)))
		}
	})
}

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

// validToken compares the request's bearer token with every configured
// token in constant time (over SHA-256 digests, so lengths do not leak).
func (s *Server) validToken(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" || len(s.tokens) == 0 {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	match := 0
	for i := range s.tokens {
		match |= subtle.ConstantTimeCompare(got[:], s.tokens[i][:])
	}
	return match == 1
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
