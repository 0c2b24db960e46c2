package web

import (
	"context"
	"crypto/sha256"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncesync/oncesync/internal/store"
)

// The teams of these tests: the demo's syncs are in workspaces "marketing"
// and "data".
const (
	viewerMkt    = "vera" // viewer of marketing
	operatorMkt  = "otto" // operator of marketing
	operatorAll  = "opal" // operator of every workspace
	adminAll     = "ana"  // testUser: admin of every workspace
	adminMkt     = "amir" // admin of marketing only: not River's UI
	operatorData = "dora" // operator of data

	viewerToken = "viewer-token-0123456789" // viewer of every workspace
	mktToken    = "mkt-token-0123456789"    // operator of marketing
)

// withTeams adds the users and tokens above, River's UI, a metrics
// registry and every optional action.
func withTeams(t *testing.T) option {
	return func(p *Params) {
		h := passwordHash(t)
		p.Users[viewerMkt] = User{Hash: h, Access: Access{Role: RoleViewer, Workspaces: []string{"marketing"}}}
		p.Users[operatorMkt] = User{Hash: h, Access: Access{Role: RoleOperator, Workspaces: []string{"marketing"}}}
		p.Users[operatorAll] = User{Hash: h, Access: Access{Role: RoleOperator}}
		p.Users[operatorData] = User{Hash: h, Access: Access{Role: RoleOperator, Workspaces: []string{"data"}}}
		p.Users[adminMkt] = User{Hash: h, Access: Access{Role: RoleAdmin, Workspaces: []string{"marketing"}}}
		p.APITokens = append(p.APITokens,
			Token{Name: "dashboard", Secret: viewerToken, Access: Access{Role: RoleViewer}},
			Token{Name: "mkt-ci", Secret: mktToken, Access: Access{Role: RoleOperator, Workspaces: []string{"marketing"}}})
		p.Extra = map[string]http.Handler{"/riverui/": http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("river ui"))
		})}
		reg := prometheus.NewRegistry()
		runs := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "oncesync_runs_total", Help: "runs"}, []string{"sync", "workspace"})
		runs.WithLabelValues("newsletter-contacts", "marketing").Add(3)
		runs.WithLabelValues("churn-scores", "data").Add(5)
		reg.MustRegister(runs)
		p.Metrics = reg
		p.Check = func(context.Context, string) ([]string, error) { return []string{"credentials: ok"}, nil }
		p.Preview = func(context.Context, string) (PreviewView, error) { return PreviewView{Read: 1}, nil }
		p.Requeue = func(context.Context, RequeueParams) error { return nil }
		p.DeadLetters = func(context.Context, string) ([]DeadLetter, error) { return nil, nil }
	}
}

// wantRules is every route's rule, written out: a route added without an
// entry here fails TestEveryRouteHasARule.
var wantRules = map[string]rule{
	"GET /login":              rPublic,
	"POST /login":             rPublic,
	"GET /static/":            rPublic,
	"GET /auth/oidc/start":    rPublic,
	"GET /auth/oidc/callback": rPublic,

	"POST /logout":                                      rRead,
	"POST /logout/everywhere":                           rRead,
	"GET /{$}":                                          rRead,
	"GET /syncs/{id}":                                   rSync,
	"GET /syncs/{id}/records":                           rSync,
	"GET /syncs/{id}/records.csv":                       rSync,
	"GET /syncs/{id}/preview":                           rOpSync,
	"POST /syncs/{id}/check":                            rOpSync,
	"GET /runs/{id}":                                    rRun,
	"GET /audit":                                        rRead,
	"POST /syncs/{id}/run":                              rOpSync,
	"POST /syncs/{id}/pause":                            rOpSync,
	"POST /syncs/{id}/resume":                           rOpSync,
	"POST /syncs/{id}/dead-letters/{dl}/requeue":        rOpSync,
	"POST /runs/{id}/settle":                            rOpRun,
	" /":                                                rRead,
	"GET /metrics":                                      rRead,
	" /riverui/":                                        rAdmin,
	"GET /api/v1/openapi.json":                          rRead,
	"GET /api/v1/syncs":                                 rRead,
	"GET /api/v1/syncs/{id}":                            rSync,
	"GET /api/v1/syncs/{id}/runs":                       rSync,
	"GET /api/v1/syncs/{id}/records":                    rSync,
	"GET /api/v1/runs/{id}":                             rRun,
	"GET /api/v1/audit":                                 rRead,
	"POST /api/v1/syncs/{id}/run":                       rOpSync,
	"POST /api/v1/syncs/{id}/pause":                     rOpSync,
	"POST /api/v1/syncs/{id}/resume":                    rOpSync,
	"POST /api/v1/syncs/{id}/dead-letters/{dl}/requeue": rOpSync,
	"POST /api/v1/runs/{id}/settle":                     rOpRun,
	" /api/":                                            rRead,
}

// TestEveryRouteHasARule enumerates the router's routes (OIDC, metrics and
// River's UI mounted) and checks each against wantRules: a new route needs
// a rule here, and a changed rule shows.
func TestEveryRouteHasARule(t *testing.T) {
	t.Parallel()
	b := setup(t, withTeams(t), func(p *Params) {
		p.OIDC = &OIDCParams{Issuer: "http://127.0.0.1:1", ClientID: "c", ClientSecret: "s", RolesClaim: "groups"}
	})
	seen := map[string]bool{}
	for _, rt := range b.srv.routes {
		k := rt.method + " " + rt.path
		seen[k] = true
		want, ok := wantRules[k]
		if !ok {
			t.Errorf("route %q has no entry in wantRules: decide who may use it", k)
			continue
		}
		if rt.rule != want {
			t.Errorf("route %q: rule %+v, want %+v", k, rt.rule, want)
		}
	}
	for k := range wantRules {
		if !seen[k] {
			t.Errorf("wantRules names %q, which the router does not have", k)
		}
	}
	// A route without a rule is refused at New.
	if (route{}).rule.set() {
		t.Fatal("the zero rule must not count as a rule")
	}
}

// TestAuthorizeEveryRoute calls every authenticated route as principals of
// each role, in and out of the sync's workspace: out of it the answer is
// 404 (nothing revealed), with too weak a role 403, otherwise the handler
// runs (neither 401, 403 nor a 404 for the sync).
func TestAuthorizeEveryRoute(t *testing.T) {
	t.Parallel()
	b := setup(t, withTeams(t))
	run := strconv.FormatInt(b.d.RecordsRun.ID, 10) // a run of Healthy (marketing)
	dataRun := b.seedRun(b.d.Failing)               // a run of Failing (data)
	type who struct {
		name string
		role Role
		mkt  bool // sees marketing
		data bool // sees data
		all  bool // admin of every workspace
	}
	people := []who{
		{viewerMkt, RoleViewer, true, false, false},
		{operatorMkt, RoleOperator, true, false, false},
		{adminMkt, RoleAdmin, true, false, false},
		{operatorAll, RoleOperator, true, true, false},
		{adminAll, RoleAdmin, true, true, true},
	}
	for _, rt := range b.srv.routes {
		// The expectation comes from wantRules, not from the route itself.
		ru := wantRules[rt.method+" "+rt.path]
		if ru.public {
			continue
		}
		for _, inData := range []bool{false, true} {
			if ru.scope == scopeNone && inData {
				continue
			}
			for _, p := range people {
				path := strings.NewReplacer("{$}", "", "{dl}", "dl-1").Replace(rt.path)
				sees := p.mkt
				switch ru.scope {
				case scopeSync:
					id := b.d.Healthy
					if inData {
						id, sees = b.d.Failing, p.data
					}
					path = strings.Replace(path, "{id}", url.PathEscape(id), 1)
				case scopeRun:
					id := run
					if inData {
						id, sees = dataRun, p.data
					}
					path = strings.Replace(path, "{id}", id, 1)
				}
				if strings.HasSuffix(path, "/") && rt.method == "" && path != "/riverui/" {
					path += "no-such-page"
				}
				method := rt.method
				if method == "" {
					method = "GET"
				}
				got := b.as(p.name, method, path, rt.kind == kindAPI)
				need := ru.need
				var want string
				switch {
				case ru.scope != scopeNone && !sees:
					want = "404"
				case ru.scope == scopeNone && need == RoleAdmin && !p.all:
					want = "403"
				case p.role < need:
					want = "403"
				default:
					want = "allowed"
				}
				ok := false
				switch want {
				case "404":
					ok = got.code == http.StatusNotFound
				case "403":
					ok = got.code == http.StatusForbidden
				default:
					ok = got.code != http.StatusUnauthorized && got.code != http.StatusForbidden &&
						(ru.scope == scopeNone || got.code != http.StatusNotFound)
				}
				if !ok {
					t.Errorf("%s %s as %s (%s): got %d, want %s: %.200s", method, path, p.name, p.role, got.code, want, got.body)
				}
			}
		}
	}
}

// seedRun records a finished run of syncID and returns its id.
func (b *bundle) seedRun(syncID string) string {
	b.t.Helper()
	r, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: syncID, State: store.RunSucceeded, Attempt: 1})
	if err != nil {
		b.t.Fatal(err)
	}
	return strconv.FormatInt(r.ID, 10)
}

// as requests path as a user (a session), or, for the API, with the
// token of the same role and reach when there is one, else a session
// principal's token made for the test.
func (b *bundle) as(user, method, path string, api bool) resp {
	b.t.Helper()
	req := httptest.NewRequest(method, path, nil)
	if api {
		req.Header.Set("Authorization", "Bearer "+b.tokenOf(user))
		if method == "POST" {
			req.Header.Set("Content-Type", "application/json")
		}
		return b.do(req)
	}
	c, csrf := b.signInAs(user)
	if method == "POST" {
		req = httptest.NewRequest(method, path, strings.NewReader(url.Values{"csrf": {csrf}, "why": {"test"}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.AddCookie(c)
	return b.do(req)
}

// tokenOf adds (once) an API token with user's access and returns it.
func (b *bundle) tokenOf(user string) string {
	b.t.Helper()
	secret := "tok-of-" + user
	for _, t := range b.srv.tokens {
		if t.principal.Name == "token-of-"+user {
			return secret
		}
	}
	u := b.srv.users[user]
	p := principalOf("token-of-"+user, u.Access)
	b.srv.tokens = append(b.srv.tokens, apiToken{digest: sha256.Sum256([]byte(secret)), principal: p})
	return secret
}
