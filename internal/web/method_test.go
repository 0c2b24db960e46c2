package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
)

// TestWrongMethod: a route that exists, asked with a method it does not
// take, answers 405 with Allow (a JSON error under /api/), not "no such
// route": a client that sent PUT where POST was meant learns what to fix.
// Paths that exist under no method still answer 404.
func TestWrongMethod(t *testing.T) {
	t.Parallel()
	b := setup(t)
	for _, tc := range []struct {
		method, path, allow string
	}{
		{"GET", "/api/v1/syncs/" + b.d.Healthy + "/run", "POST"},
		{"PUT", "/api/v1/syncs/" + b.d.Healthy + "/pause", "POST"},
		{"DELETE", "/api/v1/syncs/" + b.d.Healthy, "GET, HEAD"},
		{"POST", "/api/v1/syncs", "GET, HEAD"},
	} {
		got := b.api(testToken, tc.method, tc.path, "")
		if got.code != http.StatusMethodNotAllowed || got.hdr.Get("Allow") != tc.allow ||
			!strings.Contains(got.body, `"error":"method_not_allowed"`) || got.hdr.Get("Content-Type") != "application/json" {
			t.Errorf("%s %s: %d Allow %q %s", tc.method, tc.path, got.code, got.hdr.Get("Allow"), got.body)
		}
	}
	if got := b.api(testToken, "GET", "/api/v1/nope", ""); got.code != http.StatusNotFound {
		t.Errorf("unknown API route: %d", got.code)
	}
	// Without a token, the API says nothing about its routes.
	req := httptest.NewRequest("PUT", "/api/v1/syncs/"+b.d.Healthy+"/pause", nil)
	if got := b.do(req); got.code != http.StatusUnauthorized {
		t.Errorf("wrong method without a token: %d", got.code)
	}
	// Pages: a GET of a form's action.
	got := b.get("/syncs/" + b.d.Healthy + "/pause")
	if got.code != http.StatusMethodNotAllowed || got.hdr.Get("Allow") != "POST" {
		t.Errorf("GET of a page action: %d Allow %q", got.code, got.hdr.Get("Allow"))
	}
	for _, p := range []string{"/nope", "/runs/0", "/runs/abc"} {
		if got := b.get(p); got.code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", p, got.code)
		}
	}
}

// TestForbiddenMatchesOpenAPI: a role too weak for an action answers 403
// with the error code "forbidden", which the document's Error lists (a
// client generated from it refused the body).
func TestForbiddenMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	_, router := loadDoc(t)
	b := setup(t, withTeams(t))
	got := apiCallAs(t, b, router, viewerToken, "POST", "/api/v1/syncs/"+b.d.Healthy+"/pause", `{"why":"try"}`)
	if got.code != http.StatusForbidden {
		t.Errorf("viewer pause: %d %s", got.code, got.body)
	}
}

// TestRunNowConflictSaysWhy: a run the server refuses as a conflict (a sync
// the store shows that is not in this server's config) answers 409 with
// the reason, not "the run could not be queued".
func TestRunNowConflictSaysWhy(t *testing.T) {
	t.Parallel()
	b := setup(t, func(p *Params) {
		p.Enqueue = func(_ context.Context, id, _ string) error {
			return fmt.Errorf("%w: sync %s is not in this server's config", ErrConflict, id)
		}
	})
	got := b.api(testToken, "POST", "/api/v1/syncs/"+b.d.Healthy+"/run", "")
	if got.code != http.StatusConflict || !strings.Contains(got.body, "not in this server's config") {
		t.Errorf("run now: %d %s", got.code, got.body)
	}
	if a, _ := b.st.ListAudit(b.ctx, b.d.Healthy, 1); len(a) == 1 && a[0].Action == AuditRunNow {
		t.Errorf("a refused run was audited: %+v", a[0])
	}
}

// TestRunNowTwice: "run now" while a run of the sync is queued or running
// queues none (the queue deduplicates) and says so, in the API's answer,
// on the page and in the audit log, rather than "queued" each time with
// one audit entry per click for one run.
func TestRunNowTwice(t *testing.T) {
	t.Parallel()
	_, router := loadDoc(t)
	queued := false
	b := setup(t, func(p *Params) {
		p.Enqueue = func(context.Context, string, string) error {
			if queued {
				return ErrAlreadyQueued
			}
			queued = true
			return nil
		}
	})
	path := "/api/v1/syncs/" + b.d.Healthy + "/run"
	for i, want := range []string{`"status":"queued"`, `"status":"already_queued"`} {
		got := apiCall(t, b, router, "POST", path, `{"why":"try"}`)
		if got.code != http.StatusAccepted || !strings.Contains(got.body, want) {
			t.Errorf("run now %d: %d %s, want %s", i+1, got.code, got.body, want)
		}
	}
	a, _ := b.st.ListAudit(b.ctx, b.d.Healthy, 2)
	if len(a) != 2 || a[0].Why != "try (a run was already queued or running: none added)" || a[1].Why != "try" {
		t.Errorf("audit %+v", a)
	}
	got := b.post("/syncs/"+b.d.Healthy+"/run", url.Values{})
	if loc := got.hdr.Get("Location"); got.code != http.StatusSeeOther || !strings.HasSuffix(loc, "?done=run_joined") {
		t.Errorf("page run now: %d %s", got.code, loc)
	}
	mustContain(t, b.get("/syncs/"+b.d.Healthy+"?done=run_joined").body, "already queued or running")
}
