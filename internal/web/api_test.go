package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

func loadDoc(t *testing.T) (*openapi3.T, routers.Router) {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(openapiJSON)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI 3 document: %v", err)
	}
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, router
}

// apiCall sends a request with the token, validates request and response
// against the OpenAPI document, and returns the response.
func apiCall(t *testing.T, b *bundle, router routers.Router, method, path, body string) resp {
	t.Helper()
	return apiCallAs(t, b, router, testToken, method, path, body)
}

// apiCallAs is apiCall with another token.
func apiCallAs(t *testing.T, b *bundle, router routers.Router, token, method, path, body string) resp {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, "http://oncesync.test"+path, rd)
	req.Header.Set("Authorization", "Bearer "+token)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatalf("%s %s: not in the OpenAPI document: %v", method, path, err)
	}
	opts := &openapi3filter.Options{AuthenticationFunc: func(_ context.Context, in *openapi3filter.AuthenticationInput) error {
		if !strings.HasPrefix(in.RequestValidationInput.Request.Header.Get("Authorization"), "Bearer ") {
			return fmt.Errorf("no bearer token")
		}
		return nil
	}}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route, Options: opts}
	reqErr := openapi3filter.ValidateRequest(context.Background(), in)
	// The handler sees the body the validator read.
	if body != "" {
		req.Body = io.NopCloser(strings.NewReader(body))
	}
	rec := httptest.NewRecorder()
	b.srv.ServeHTTP(rec, req)
	out := resp{code: rec.Code, hdr: rec.Result().Header, body: rec.Body.String()}
	if reqErr != nil && out.code != http.StatusBadRequest {
		t.Errorf("%s %s: request invalid per the document (%v) but the handler answered %d", method, path, reqErr, out.code)
	}
	if err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: out.code, Header: out.hdr,
		Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: &openapi3filter.Options{IncludeResponseStatus: true},
	}); err != nil {
		t.Errorf("%s %s: response %d does not match the document: %v\n%s", method, path, out.code, err, out.body)
	}
	return out
}

func TestAPIMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	_, router := loadDoc(t)
	b := setup(t, func(p *Params) {
		p.DeadLetters = func(context.Context, string) ([]DeadLetter, error) {
			return []DeadLetter{{ID: "dl-1", RunID: 1, Partition: 2, Code: string(failure.SourceChangedDuringRun), At: t0}}, nil
		}
		p.Requeue = func(context.Context, RequeueParams) error { return nil }
	})
	run := b.d.RecordsRun.ID
	failedRun := mustRuns(t, b, b.d.Breaker)[0].ID
	cases := []struct {
		method, path, body string
		want               int
		check              func(t *testing.T, body string)
	}{
		{"GET", "/api/v1/openapi.json", "", 200, nil},
		{"GET", "/api/v1/syncs", "", 200, func(t *testing.T, body string) {
			var l SyncList
			mustJSON(t, body, &l)
			if len(l.Syncs) != 6 || l.Syncs[0].Workspace != "data" {
				t.Errorf("syncs %+v", l.Syncs)
			}
			healths := map[string]Health{}
			for _, s := range l.Syncs {
				healths[s.ID] = s.Health
			}
			if healths[b.d.Breaker] != HealthPausedBreaker || healths[b.d.Silent] != HealthSilent || healths[b.d.Healthy] != HealthHealthy {
				t.Errorf("healths %v", healths)
			}
			// The dead-man judges a sync the breaker paused, not one a
			// person paused.
			for _, s := range l.Syncs {
				if want := map[string]string{b.d.Breaker: "runs_without_success", b.d.Silent: "runs_without_success", b.d.NoRuns: "no_runs"}[s.ID]; s.Silence != want {
					t.Errorf("sync %s: silence %q, want %q", s.ID, s.Silence, want)
				}
			}
		}},
		{"GET", "/api/v1/syncs/" + b.d.Breaker, "", 200, func(t *testing.T, body string) {
			var d SyncDetail
			mustJSON(t, body, &d)
			if d.Paused == nil || d.Paused.Reason != "breaker" || d.LastError == nil || d.LastError.Code != "destination_auth" ||
				d.LastError.Owner != "you" || !strings.HasSuffix(d.LastError.DocsURL, "#destination_auth") {
				t.Errorf("detail %+v %+v", d.Paused, d.LastError)
			}
			if strings.Contains(body, secretValue) {
				t.Error("secret in the API response")
			}
		}},
		{"GET", "/api/v1/syncs/" + b.d.Healthy, "", 200, nil},
		{"GET", "/api/v1/syncs/" + b.d.NoRuns, "", 200, nil},
		{"GET", "/api/v1/syncs/nope", "", 404, nil},
		{"GET", "/api/v1/syncs/" + b.d.Healthy + "/runs?limit=2", "", 200, func(t *testing.T, body string) {
			var l RunList
			mustJSON(t, body, &l)
			if len(l.Runs) != 2 || l.Runs[0].ID != run {
				t.Errorf("runs %+v", l.Runs)
			}
		}},
		{"GET", "/api/v1/syncs/" + b.d.Healthy + "/runs?limit=0", "", 400, nil},
		{"GET", "/api/v1/syncs/nope/runs", "", 404, nil},
		{"GET", fmt.Sprintf("/api/v1/runs/%d", run), "", 200, func(t *testing.T, body string) {
			var d RunDetail
			mustJSON(t, body, &d)
			if d.RejectedTotal != 2 || d.InDoubtTotal != 2 || d.Rejected[0].Message == "" || d.Run.Read != 12000 ||
				!strings.HasPrefix(d.Rejected[0].Identity, "id-") || !strings.HasPrefix(d.InDoubt[0].Identity, "id-") {
				t.Errorf("run detail %+v", d)
			}
			if d.PagesTotal != 24 || len(d.Pages) != 24 || d.Pages[0].Page != 1 || d.Pages[23].Sent != 456 || d.Pages[23].CheckpointedAt.IsZero() {
				t.Errorf("run timeline %d %+v", d.PagesTotal, d.Pages)
			}
		}},
		{"GET", fmt.Sprintf("/api/v1/runs/%d", failedRun), "", 200, nil},
		{"GET", "/api/v1/runs/999999", "", 404, nil},
		{"GET", "/api/v1/runs/abc", "", 400, nil},
		{"GET", "/api/v1/audit?limit=3", "", 200, func(t *testing.T, body string) {
			var l AuditList
			mustJSON(t, body, &l)
			if len(l.Entries) != 3 {
				t.Errorf("audit %+v", l)
			}
		}},
		{"GET", "/api/v1/audit?sync=" + b.d.Person, "", 200, nil},
		{"GET", "/api/v1/syncs/" + b.d.Healthy + "/records", "", 200, func(t *testing.T, body string) {
			var l RecordList
			mustJSON(t, body, &l)
			if l.Total != 4 || len(l.Records) != 4 || l.Records[0].State != "rejected" || l.Records[3].State != "in doubt" ||
				!strings.HasPrefix(l.Records[0].Identity, "id-") || l.Records[0].Reason != "Invalid phone number (attribute SMS)" {
				t.Errorf("records %+v", l)
			}
		}},
		{"GET", "/api/v1/syncs/" + b.d.Healthy + "/records?state=in_doubt&q=ID-3", "", 200, func(t *testing.T, body string) {
			var l RecordList
			mustJSON(t, body, &l)
			if l.Total != 1 || l.Records[0].Identity != "id-3" {
				t.Errorf("search: %+v", l)
			}
		}},
		{"GET", "/api/v1/syncs/" + b.d.Healthy + "/records?state=maybe", "", 400, nil},
		{"GET", "/api/v1/syncs/nope/records", "", 404, nil},
		{"POST", "/api/v1/syncs/" + b.d.Healthy + "/run", `{"by":"ci"}`, 202, nil},
		{"POST", "/api/v1/syncs/" + b.d.Healthy + "/run", ``, 202, nil},
		{"POST", "/api/v1/syncs/" + b.d.Healthy + "/run", `{}`, 202, nil},
		{"GET", "/api/v1/audit?sync=" + b.d.Healthy + "&limit=1", "", 200, func(t *testing.T, body string) {
			var l AuditList
			mustJSON(t, body, &l)
			if len(l.Entries) != 1 || l.Entries[0].By != testTokenName || l.Entries[0].Why != "run now" {
				t.Errorf("audit of a run queued without a body: %+v", l)
			}
		}},
		// The principal is the token, whatever the body says.
		{"POST", "/api/v1/syncs/" + b.d.Healthy + "/run", `{"by":"ceo@example.com (forged)","why":"forged"}`, 202, nil},
		{"GET", "/api/v1/audit?sync=" + b.d.Healthy + "&limit=1", "", 200, func(t *testing.T, body string) {
			var l AuditList
			mustJSON(t, body, &l)
			if len(l.Entries) != 1 || l.Entries[0].By != testTokenName || l.Entries[0].Why != "forged" {
				t.Errorf("audit of a run with a forged by: %+v", l)
			}
		}},
		{"POST", "/api/v1/syncs/" + b.d.Healthy + "/run", `{"by":"ci","extra":1}`, 400, func(t *testing.T, body string) {
			// Valid JSON with a key the action does not take: named.
			if !strings.Contains(body, `this action takes no field \"extra\"`) {
				t.Errorf("unknown field: %s", body)
			}
		}},
		{"POST", "/api/v1/syncs/" + b.d.Breaker + "/run", `{"by":"ci"}`, 409, nil},
		{"POST", "/api/v1/syncs/nope/run", `{"by":"ci"}`, 404, nil},
		{"POST", "/api/v1/syncs/" + b.d.Failing + "/pause", `{"by":"ci","why":"investigating"}`, 200, func(t *testing.T, body string) {
			var d SyncDetail
			mustJSON(t, body, &d)
			if d.Health != HealthPausedPerson || d.Paused == nil || d.Paused.By != testTokenName || d.Paused.At == nil {
				t.Errorf("paused %+v", d.Paused)
			}
		}},
		{"POST", "/api/v1/syncs/" + b.d.Failing + "/pause", `{"by":"ci","why":"again"}`, 409, nil},
		{"POST", "/api/v1/syncs/" + b.d.Failing + "/resume", `{"by":"ci"}`, 400, nil},
		{"POST", "/api/v1/syncs/" + b.d.Failing + "/resume", `{"by":"ci","why":"checked"}`, 200, func(t *testing.T, body string) {
			var d SyncDetail
			mustJSON(t, body, &d)
			// Its last run failed: not "no runs yet" (the resume reset the
			// streak, no failure was left to count, and health fell through).
			if d.Health != HealthFailing {
				t.Errorf("resumed sync whose last run failed: health %s, want failing", d.Health)
			}
		}},
		{"POST", "/api/v1/syncs/" + b.d.Failing + "/pause", `{"by":"ci","why":"again, after the resume"}`, 200, nil},
		{"POST", "/api/v1/syncs/" + b.d.Breaker + "/resume", `{"by":"ci","why":"key rotated"}`, 200, func(t *testing.T, body string) {
			var d SyncDetail
			mustJSON(t, body, &d)
			// Resuming re-arms the breaker: the old failures no longer count.
			if d.State != "active" || d.Paused != nil || d.FailureStreak != 0 {
				t.Errorf("resumed %+v", d.SyncSummary)
			}

		}},
		{"POST", "/api/v1/syncs/" + b.d.Healthy + "/dead-letters/dl-1/requeue", `{"by":"ci"}`, 202, nil},
		{"POST", fmt.Sprintf("/api/v1/runs/%d/settle", run), fmt.Sprintf(`{"by":"ci","why":"checked","keys":[%q],"outcome":"delivered"}`, b.d.InDoubt[0]), 200,
			func(t *testing.T, body string) {
				var s Settled
				mustJSON(t, body, &s)
				if s.Settled != 1 {
					t.Errorf("settled %+v", s)
				}
			}},
		{"POST", fmt.Sprintf("/api/v1/runs/%d/settle", run), fmt.Sprintf(`{"by":"ci","why":"checked","keys":[%q],"outcome":"maybe"}`, b.d.InDoubt[1]), 400, nil},
		{"POST", fmt.Sprintf("/api/v1/runs/%d/settle", run), fmt.Sprintf(`{"by":"ci","why":"checked","keys":[%q],"outcome":"resend"}`, b.d.Rejected[0]), 409, nil},
	}
	for _, tc := range cases {
		got := apiCall(t, b, router, tc.method, tc.path, tc.body)
		if got.code != tc.want {
			t.Errorf("%s %s: got %d, want %d: %s", tc.method, tc.path, got.code, tc.want, got.body)
			continue
		}
		if tc.check != nil {
			tc.check(t, got.body)
		}
	}
	req := httptest.NewRequest("GET", "/api/v1/nothing", nil)
	req.Header.Set("Authorization", "Bearer "+testToken)
	if got := b.do(req); got.code != 404 || !strings.Contains(got.body, `"not_found"`) {
		t.Errorf("unknown API route: %d %s", got.code, got.body)
	}
	if a, _ := b.st.ListAudit(b.ctx, b.d.Breaker, 1); len(a) != 1 || a[0].Action != "resume" || a[0].By != testTokenName || a[0].Why != "key rotated" {
		t.Errorf("resume audit %+v", a)
	}
	if s, _ := b.st.GetSync(b.ctx, b.d.Failing); s.State != store.SyncPaused {
		t.Errorf("pause did not stick: %+v", s)
	}
}

func TestAPIUnauthorizedMatchesOpenAPI(t *testing.T) {
	t.Parallel()
	_, router := loadDoc(t)
	b := setup(t)
	req := httptest.NewRequest("GET", "http://oncesync.test/api/v1/syncs", nil)
	route, params, err := router.FindRoute(req)
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	b.srv.ServeHTTP(rec, req)
	if rec.Code != 401 || rec.Header().Get("WWW-Authenticate") == "" {
		t.Fatalf("got %d", rec.Code)
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if err := openapi3filter.ValidateResponse(context.Background(), &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in, Status: rec.Code, Header: rec.Header(), Body: io.NopCloser(rec.Body),
	}); err != nil {
		t.Errorf("401 does not match the document: %v", err)
	}
}

// TestOpenAPICoversRoutes keeps the document and the route table in step.
func TestOpenAPICoversRoutes(t *testing.T) {
	t.Parallel()
	doc, _ := loadDoc(t)
	b := setup(t)
	var inTable, inDoc []string
	for _, r := range b.srv.routes {
		if r.kind == kindAPI && r.method != "" {
			inTable = append(inTable, r.method+" "+r.path)
		}
	}
	for path, item := range doc.Paths.Map() {
		for m := range item.Operations() {
			inDoc = append(inDoc, m+" "+path)
		}
	}
	sort.Strings(inTable)
	sort.Strings(inDoc)
	if fmt.Sprint(inTable) != fmt.Sprint(inDoc) {
		t.Errorf("routes and document differ\nroutes %v\ndoc    %v", inTable, inDoc)
	}
}

func mustJSON(t *testing.T, body string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
}
