package fakeklaviyo_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

const key = "pk_fake_test_key"

type client struct {
	t   *testing.T
	url string
}

func start(t *testing.T, o fakeklaviyo.Options) (*fakeklaviyo.Server, client) {
	t.Helper()
	o.APIKey = key
	o.Validate, o.ValidateResponses = true, true
	s := fakeklaviyo.New(o)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		for _, err := range s.SpecErrors() {
			t.Errorf("answer off the spec: %v", err)
		}
	})
	return s, client{t, srv.URL}
}

// do sends a request with Klaviyo's headers; mut may change them.
func (c client) do(method, path, body string, mut ...func(h http.Header)) (int, http.Header, map[string]any) {
	c.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, _ := http.NewRequest(method, c.url+path, rd)
	req.Header.Set("Authorization", "Klaviyo-API-Key "+key)
	req.Header.Set("revision", fakeklaviyo.SpecRevision)
	req.Header.Set("Accept", "application/vnd.api+json")
	if body != "" {
		req.Header.Set("Content-Type", "application/vnd.api+json")
	}
	for _, m := range mut {
		m(req.Header)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var doc map[string]any
	_ = json.Unmarshal(b, &doc)
	return res.StatusCode, res.Header, doc
}

func importBody(email, first string) string {
	return `{"data":{"type":"profile","attributes":{"email":"` + email + `","first_name":"` + first + `","properties":{"plan":"pro"}}}}`
}

func TestRequestsAreCheckedAgainstTheSpec(t *testing.T) {
	s, c := start(t, fakeklaviyo.Options{})
	cases := []struct {
		name string
		mut  func(h http.Header)
		body string
	}{
		{"no revision header", func(h http.Header) { h.Del("revision") }, importBody("a@example.com", "A")},
		{"wrong authorization scheme", func(h http.Header) { h.Set("Authorization", "Bearer "+key) }, importBody("a@example.com", "A")},
		{"not JSON:API", nil, `{"email":"a@example.com"}`},
		{"wrong resource type", nil, `{"data":{"type":"contact","attributes":{"email":"a@example.com"}}}`},
		{"a number where the spec wants a string", nil, `{"data":{"type":"profile","attributes":{"email":"a@example.com","first_name":7}}}`},
	}
	for _, tc := range cases {
		muts := []func(http.Header){}
		if tc.mut != nil {
			muts = append(muts, tc.mut)
		}
		status, _, _ := c.do(http.MethodPost, "/api/profile-import", tc.body, muts...)
		if status != http.StatusBadRequest && status != http.StatusUnauthorized {
			t.Errorf("%s: status %d, want 400 or 401", tc.name, status)
		}
	}
	if got := s.Stats().Profiles; got != 0 {
		t.Errorf("%d profiles stored from invalid requests", got)
	}
	if got := s.Stats().Invalid; got < 3 {
		t.Errorf("invalid_requests = %d, want at least 3", got)
	}
	if status, _, _ := c.do(http.MethodGet, "/api/lists", ""); status != http.StatusBadRequest {
		t.Errorf("a route neither in the spec nor modelled: status %d, want 400", status)
	}
}

// TestGetList: GET /api/lists/{id} (modelled on Klaviyo's "Get List")
// answers a list of the account as a JSON:API resource, and 404 for one it
// does not have.
func TestGetList(t *testing.T) {
	_, c := start(t, fakeklaviyo.Options{Lists: []string{"L1"}})
	status, _, doc := c.do(http.MethodGet, "/api/lists/L1", "")
	data, _ := doc["data"].(map[string]any)
	if status != http.StatusOK || data["type"] != "list" || data["id"] != "L1" {
		t.Errorf("GET /api/lists/L1: %d %v", status, doc)
	}
	if status, _, _ := c.do(http.MethodGet, "/api/lists/L2", ""); status != http.StatusNotFound {
		t.Errorf("a list the account does not have: status %d, want 404", status)
	}
}

func TestProfileImportCreatesThenUpdatesAndCountsDuplicates(t *testing.T) {
	s, c := start(t, fakeklaviyo.Options{})
	status, _, doc := c.do(http.MethodPost, "/api/profile-import", importBody("Ann@Example.com", "Ann"))
	if status != http.StatusCreated {
		t.Fatalf("first import: %d %v", status, doc)
	}
	id := doc["data"].(map[string]any)["id"].(string)
	status, _, doc = c.do(http.MethodPost, "/api/profile-import", importBody("ann@example.com", "Anne"))
	if status != http.StatusOK || doc["data"].(map[string]any)["id"] != id {
		t.Fatalf("second import: %d %v, want 200 with id %s", status, doc, id)
	}
	if st := s.Stats(); st.DuplicateWrites != 0 {
		t.Errorf("duplicate_writes = %d after a change", st.DuplicateWrites)
	}
	c.do(http.MethodPost, "/api/profile-import", importBody("ann@example.com", "Anne"))
	st := s.Stats()
	if st.DuplicateWrites != 1 || st.Profiles != 1 {
		t.Errorf("stats %+v: want 1 duplicate write, 1 profile", st)
	}
	p, ok := s.Profile("ANN@example.com")
	if !ok || p.Attributes["first_name"] != "Anne" || p.Properties["plan"] != "pro" {
		t.Errorf("profile %+v", p)
	}
	// create: 409 with the existing id.
	status, _, doc = c.do(http.MethodPost, "/api/profiles", importBody("ann@example.com", "X"))
	errs, _ := doc["errors"].([]any)
	if status != http.StatusConflict || len(errs) != 1 || errs[0].(map[string]any)["meta"].(map[string]any)["duplicate_profile_id"] != id {
		t.Errorf("create of an existing profile: %d %v", status, doc)
	}
	// filter by e-mail, any of several.
	status, _, doc = c.do(http.MethodGet, `/api/profiles?filter=any(email,["nobody@example.com","ANN@example.com"])`, "")
	if data, _ := doc["data"].([]any); status != http.StatusOK || len(data) != 1 {
		t.Errorf("filter: %d %v", status, doc)
	}
}

func TestBulkJobRunsAfterItsDelayAndListsImportErrors(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, c := start(t, fakeklaviyo.Options{Clock: clk, JobDelay: 10 * time.Second, RefuseEmails: []string{"bad@example.com"}})
	body := `{"data":{"type":"profile-bulk-import-job","attributes":{"profiles":{"data":[` +
		`{"type":"profile","attributes":{"email":"a@example.com","first_name":"A"}},` +
		`{"type":"profile","attributes":{"email":"bad@example.com"}},` +
		`{"type":"profile","attributes":{"email":"not-an-email"}}]}},` +
		`"relationships":{"lists":{"data":[{"type":"list","id":"L1"}]}}}}`
	status, _, doc := c.do(http.MethodPost, "/api/profile-bulk-import-jobs", body)
	if status != http.StatusAccepted {
		t.Fatalf("job: %d %v", status, doc)
	}
	id := doc["data"].(map[string]any)["id"].(string)
	jobStatus := func() string {
		_, _, d := c.do(http.MethodGet, "/api/profile-bulk-import-jobs/"+id, "")
		return d["data"].(map[string]any)["attributes"].(map[string]any)["status"].(string)
	}
	if got := jobStatus(); got != "queued" {
		t.Errorf("status %q, want queued", got)
	}
	clk.Advance(6 * time.Second)
	if got := jobStatus(); got != "processing" {
		t.Errorf("status %q, want processing", got)
	}
	if s.Stats().Profiles != 0 {
		t.Error("profiles written before the job ran")
	}
	clk.Advance(5 * time.Second)
	if got := jobStatus(); got != "complete" {
		t.Errorf("status %q, want complete", got)
	}
	p, ok := s.Profile("a@example.com")
	if !ok || p.Attributes["first_name"] != "A" || len(p.Lists) != 1 || p.Lists[0] != "L1" {
		t.Errorf("profile %+v, want first_name A in list L1", p)
	}
	_, _, doc = c.do(http.MethodGet, "/api/profile-bulk-import-jobs/"+id+"/import-errors?page[size]=1", "")
	data, _ := doc["data"].([]any)
	next, _ := doc["links"].(map[string]any)["next"].(string)
	if len(data) != 1 || next == "" {
		t.Fatalf("import errors page 1: %v", doc)
	}
	e := data[0].(map[string]any)["attributes"].(map[string]any)
	if e["original_payload"].(map[string]any)["email"] != "bad@example.com" || !strings.Contains(e["source"].(map[string]any)["pointer"].(string), "/data/1/") {
		t.Errorf("import error %v", e)
	}
}

func TestFailedJobAppliesNothing(t *testing.T) {
	s, c := start(t, fakeklaviyo.Options{JobFailRate: 1})
	body := `{"data":{"type":"profile-bulk-import-job","attributes":{"profiles":{"data":[{"type":"profile","attributes":{"email":"a@example.com"}}]}}}}`
	status, _, doc := c.do(http.MethodPost, "/api/profile-bulk-import-jobs", body)
	if status != http.StatusAccepted {
		t.Fatalf("%d %v", status, doc)
	}
	st := doc["data"].(map[string]any)["attributes"].(map[string]any)["status"]
	if st != "cancelled" || s.Stats().Profiles != 0 || s.Stats().JobsFailed != 1 {
		t.Errorf("status %v, stats %+v: want cancelled, nothing applied", st, s.Stats())
	}
}

func TestRefusedJobQueuesNothing(t *testing.T) {
	s, c := start(t, fakeklaviyo.Options{JobRefuseRate: 1})
	body := `{"data":{"type":"profile-bulk-import-job","attributes":{"profiles":{"data":[{"type":"profile","attributes":{"email":"a@example.com"}}]}}}}`
	status, _, doc := c.do(http.MethodPost, "/api/profile-bulk-import-jobs", body)
	errs, _ := doc["errors"].([]any)
	if status != http.StatusBadRequest || len(errs) != 1 {
		t.Fatalf("%d %v, want 400 with one error", status, doc)
	}
	if st := s.Stats(); st.JobsRefused != 1 || st.JobsCreated != 0 || st.Profiles != 0 {
		t.Errorf("stats %+v: want one job refused, none created, nothing applied", st)
	}
}

func TestRateLimitsPerAccountBurstAndSteady(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	_, c := start(t, fakeklaviyo.Options{Clock: clk, EnforceRateLimits: true})
	body := `{"data":{"type":"profile-bulk-import-job","attributes":{"profiles":{"data":[{"type":"profile","attributes":{"email":"a@example.com"}}]}}}}`
	// Bulk import jobs: 10/s burst, 150/m steady (the spec's x-klaviyo-ratelimit).
	for i := 0; i < 10; i++ {
		if status, h, _ := c.do(http.MethodPost, "/api/profile-bulk-import-jobs", body); status != http.StatusAccepted || h.Get("RateLimit-Limit") != "150" {
			t.Fatalf("request %d: %d, RateLimit-Limit %q", i, status, h.Get("RateLimit-Limit"))
		}
	}
	status, h, doc := c.do(http.MethodPost, "/api/profile-bulk-import-jobs", body)
	if status != http.StatusTooManyRequests || h.Get("Retry-After") != "1" {
		t.Fatalf("11th request in a second: %d Retry-After %q %v", status, h.Get("Retry-After"), doc)
	}
	// Another endpoint has its own window.
	if status, _, _ := c.do(http.MethodGet, "/api/profiles", ""); status != http.StatusOK {
		t.Errorf("profiles read: %d", status)
	}
	for i := 0; i < 14; i++ { // 140 more over 14 s: 150 in the minute
		clk.Advance(time.Second)
		for j := 0; j < 10; j++ {
			c.do(http.MethodPost, "/api/profile-bulk-import-jobs", body)
		}
	}
	clk.Advance(time.Second)
	status, h, _ = c.do(http.MethodPost, "/api/profile-bulk-import-jobs", body)
	if status != http.StatusTooManyRequests {
		t.Fatalf("past 150 a minute: %d", status)
	}
	if ra := h.Get("Retry-After"); ra == "" || ra == "1" {
		t.Errorf("steady window spent: Retry-After %q, want the minute's rest", ra)
	}
	// Another key is another account.
	status, _, _ = c.do(http.MethodPost, "/api/profile-bulk-import-jobs", body, func(h http.Header) {
		h.Set("Authorization", "Klaviyo-API-Key other")
	})
	if status != http.StatusUnauthorized {
		t.Errorf("a key the fake does not accept: %d, want 401", status)
	}
}

func TestUnsubscribeOnlyFromTheListAndCountsGlobalOnes(t *testing.T) {
	s, c := start(t, fakeklaviyo.Options{})
	s.AddProfile("in@example.com", nil, "L1")
	s.AddProfile("out@example.com", nil)
	body := func(email string) string {
		return `{"data":{"type":"profile-subscription-bulk-delete-job","attributes":{"profiles":{"data":[{"type":"profile","attributes":{"email":"` +
			email + `","subscriptions":{"email":{"marketing":{"consent":"UNSUBSCRIBED"}}}}}]}},"relationships":{"list":{"data":{"type":"list","id":"L1"}}}}}`
	}
	if status, _, _ := c.do(http.MethodPost, "/api/profile-subscription-bulk-delete-jobs", body("in@example.com")); status != http.StatusAccepted {
		t.Fatalf("unsubscribe: %d", status)
	}
	if p, _ := s.Profile("in@example.com"); len(p.Lists) != 0 || !p.Unsubscribed {
		t.Errorf("profile %+v: want out of L1, unsubscribed", p)
	}
	c.do(http.MethodPost, "/api/profile-subscription-bulk-delete-jobs", body("out@example.com"))
	if st := s.Stats(); st.ListRemovals != 1 || st.GlobalUnsubs != 1 {
		t.Errorf("stats %+v: want 1 list removal, 1 global unsubscribe", st)
	}
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(s.Stats())
	if !strings.Contains(buf.String(), `"global_unsubscribes":1`) {
		t.Errorf("stats JSON %s", buf.String())
	}
}

// TestQueuedUnsubscribeSentTwiceUnsubscribesGlobally: Klaviyo queues an
// unsubscribe job; a second one for a profile still in the list (the first
// not applied yet) finds it outside the list when it runs, and unsubscribes
// it globally: the harm a removal sent again too soon does.
func TestQueuedUnsubscribeSentTwiceUnsubscribesGlobally(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC))
	s, c := start(t, fakeklaviyo.Options{UnsubscribeDelay: time.Minute, Clock: clk})
	s.AddProfile("in@example.com", nil, "L1")
	body := `{"data":{"type":"profile-subscription-bulk-delete-job","attributes":{"profiles":{"data":[{"type":"profile","attributes":{"email":"in@example.com",` +
		`"subscriptions":{"email":{"marketing":{"consent":"UNSUBSCRIBED"}}}}}]}},"relationships":{"list":{"data":{"type":"list","id":"L1"}}}}}`
	for range 2 {
		if status, _, _ := c.do(http.MethodPost, "/api/profile-subscription-bulk-delete-jobs", body); status != http.StatusAccepted {
			t.Fatalf("unsubscribe: %d", status)
		}
	}
	if p, _ := s.Profile("in@example.com"); len(p.Lists) != 1 || p.Unsubscribed {
		t.Fatalf("profile %+v before the jobs ran: want still in L1", p)
	}
	clk.Advance(2 * time.Minute)
	if st := s.Stats(); st.ListRemovals != 1 || st.GlobalUnsubs != 1 {
		t.Fatalf("stats %+v: want 1 list removal, then 1 global unsubscribe", st)
	}
}

// TestResponsesAreCheckedToo: the validator the fake checks its answers
// with refuses an answer off the spec (a profile without its links, a job
// status the spec does not list).
func TestResponsesAreCheckedToo(t *testing.T) {
	v, err := fakeklaviyo.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, "http://x/api/profile-import", nil)
	req.Header.Set("revision", fakeklaviyo.SpecRevision)
	h := http.Header{"Content-Type": {"application/vnd.api+json"}}
	good := `{"data":{"type":"profile","id":"01P1","attributes":{"email":"a@example.com"},"links":{"self":"http://x/api/profiles/01P1/"}}}`
	if err := v.ValidateResponse(req, http.StatusCreated, h, []byte(good)); err != nil {
		t.Fatalf("a conforming answer: %v", err)
	}
	bad := `{"data":{"type":"profile","id":"01P1","attributes":{"email":"a@example.com"}}}`
	if err := v.ValidateResponse(req, http.StatusCreated, h, []byte(bad)); err == nil {
		t.Error("a profile without links passed")
	}
	jobReq, _ := http.NewRequest(http.MethodGet, "http://x/api/profile-bulk-import-jobs/J1", nil)
	badJob := `{"data":{"type":"profile-bulk-import-job","id":"J1","attributes":{"status":"failed","created_at":"2026-01-01T00:00:00Z","total_count":1},"links":{"self":"http://x/j"}}}`
	if err := v.ValidateResponse(jobReq, http.StatusOK, h, []byte(badJob)); err == nil {
		t.Error(`a job status "failed" passed; the spec lists queued, processing, complete, cancelled`)
	}
	if rl := v.RateLimits()["create_or_update_profile"]; rl.Burst != 75 || rl.Steady != 750 {
		t.Errorf("profile import's documented limit %+v, want 75/s and 750/m", rl)
	}
}

// Klaviyo's bulk import guide: "The Bulk Import Profiles API does not
// support setting fields to null to clear them. Only fields explicitly
// provided with non-null values will be updated." A profile import does.
func TestBulkJobNullDoesNotClear(t *testing.T) {
	t.Parallel()
	s, c := start(t, fakeklaviyo.Options{})
	s.AddProfile("ann@example.com", map[string]any{"first_name": "Ann", "last_name": "Lee", "properties": map[string]any{"plan": "pro"}})
	st, _, _ := c.do(http.MethodPost, "/api/profile-bulk-import-jobs", `{"data":{"type":"profile-bulk-import-job","attributes":{"profiles":{"data":[
	  {"type":"profile","attributes":{"email":"ann@example.com","first_name":null,"last_name":"Li","properties":{"plan":null}}}]}}}}`)
	if st != http.StatusAccepted {
		t.Fatalf("job: status %d", st)
	}
	p, _ := s.Profile("ann@example.com")
	if p.Attributes["first_name"] != "Ann" || p.Properties["plan"] != "pro" || p.Attributes["last_name"] != "Li" {
		t.Errorf("after a job with nulls: first_name=%v plan=%v last_name=%v; want Ann, pro (kept) and Li", p.Attributes["first_name"], p.Properties["plan"], p.Attributes["last_name"])
	}
	st, _, _ = c.do(http.MethodPost, "/api/profile-import", `{"data":{"type":"profile","attributes":{"email":"ann@example.com","first_name":null,"properties":{"plan":null}}}}`)
	if st != http.StatusOK {
		t.Fatalf("profile import: status %d", st)
	}
	p, _ = s.Profile("ann@example.com")
	if _, ok := p.Attributes["first_name"]; ok {
		t.Errorf("a profile import's null did not clear first_name: %v", p.Attributes["first_name"])
	}
	if _, ok := p.Properties["plan"]; ok {
		t.Errorf("a profile import's null did not clear properties.plan: %v", p.Properties["plan"])
	}
}

// TestAddProfilesToList: POST /api/lists/{id}/relationships/profiles, which
// the fake models on Klaviyo's API reference (not in the embedded spec):
// 204 without a body, idempotent, 1 to 1000 profiles, 404 for a list the
// account does not have, 400 for a body off the documented shape, paced at
// 10/s and 150/m.
func TestAddProfilesToList(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s, c := start(t, fakeklaviyo.Options{Clock: clk, Lists: []string{"L1"}, EnforceRateLimits: true})
	id := s.AddProfile("a@example.com", nil)
	before, _ := s.Profile("a@example.com")
	clk.Advance(time.Minute)
	body := `{"data":[{"type":"profile","id":"` + id + `"}]}`
	for round := 0; round < 2; round++ {
		status, h, doc := c.do(http.MethodPost, "/api/lists/L1/relationships/profiles", body)
		if status != http.StatusNoContent || doc != nil || h.Get("RateLimit-Limit") != "150" {
			t.Fatalf("round %d: %d %v RateLimit-Limit %q, want 204 without a body, paced at 150/m", round, status, doc, h.Get("RateLimit-Limit"))
		}
	}
	p, _ := s.Profile("a@example.com")
	if len(p.Lists) != 1 || p.Lists[0] != "L1" || !p.Updated.Equal(before.Updated) {
		t.Errorf("profile %+v: want in L1 once, updated time unchanged", p)
	}
	if st := s.Stats(); st.ListAdditions != 1 || st.ByRoute["POST /api/lists/{id}/relationships/profiles"] != 2 || st.Invalid != 0 {
		t.Errorf("stats %+v: want one addition over two calls, none invalid", st)
	}
	if status, _, _ := c.do(http.MethodPost, "/api/lists/Nope/relationships/profiles", body); status != http.StatusNotFound {
		t.Errorf("unknown list: %d, want 404", status)
	}
	many := `{"data":[` + strings.Repeat(`{"type":"profile","id":"`+id+`"},`, 1000) + `{"type":"profile","id":"` + id + `"}]}`
	for name, b := range map[string]string{
		"more than 1000":  many,
		"none":            `{"data":[]}`,
		"unknown profile": `{"data":[{"type":"profile","id":"01NOPE"}]}`,
		"no id":           `{"data":[{"type":"profile"}]}`,
		"not an array":    `{"data":{"type":"profile","id":"` + id + `"}}`,
	} {
		if status, _, doc := c.do(http.MethodPost, "/api/lists/L1/relationships/profiles", b); status != http.StatusBadRequest || doc["errors"] == nil {
			t.Errorf("%s: %d %v, want 400 with Klaviyo's error document", name, status, doc)
		}
	}
	if n := s.Stats().Invalid; n != 2 {
		t.Errorf("invalid_requests = %d, want 2 (the bodies off the documented shape)", n)
	}
	for i := 0; i < 10; i++ { // 8 calls so far this second, the refused ones among them
		c.do(http.MethodPost, "/api/lists/L1/relationships/profiles", body)
	}
	if status, h, _ := c.do(http.MethodPost, "/api/lists/L1/relationships/profiles", body); status != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Errorf("past 10 a second: %d, want 429 with Retry-After", status)
	}
}

// TestStandingChangesMidRun: a key deleted, or a scope removed, after a
// sync started: every call is answered with Klaviyo's error document
// (checked against the spec) and nothing is applied; restored, it works.
func TestStandingChangesMidRun(t *testing.T) {
	s, c := start(t, fakeklaviyo.Options{})
	if status, _, doc := c.do(http.MethodPost, "/api/profile-import", importBody("ann@example.com", "Ann")); status != http.StatusCreated {
		t.Fatalf("import: %d %v", status, doc)
	}
	for _, tt := range []struct {
		state, code string
		status      int
	}{
		{fakeklaviyo.StandingRevoked, "authentication_failed", http.StatusUnauthorized},
		{fakeklaviyo.StandingForbidden, "permission_denied", http.StatusForbidden},
	} {
		if err := s.SetStanding(tt.state); err != nil {
			t.Fatal(err)
		}
		status, _, doc := c.do(http.MethodPost, "/api/profile-import", importBody("bob@example.com", "Bob"))
		errs, _ := doc["errors"].([]any)
		if status != tt.status || len(errs) != 1 || errs[0].(map[string]any)["code"] != tt.code {
			t.Errorf("%s: %d %v, want %d %s", tt.state, status, doc, tt.status, tt.code)
		}
	}
	if err := s.SetStanding("broke"); err == nil {
		t.Error("SetStanding accepted an unknown standing")
	}
	if err := s.SetStanding("ok"); err != nil {
		t.Fatal(err)
	}
	if status, _, doc := c.do(http.MethodPost, "/api/profile-import", importBody("bob@example.com", "Bob")); status != http.StatusCreated {
		t.Fatalf("import after the account was restored: %d %v", status, doc)
	}
	if st := s.Stats(); st.Profiles != 2 || st.ProfilesWritten != 2 {
		t.Errorf("stats %+v: want the two accepted writes only", st)
	}
}

// TestFollowsItsOwnNextLink: Klaviyo's links end in "/" (".../api/profiles/?
// page[cursor]=..."), and a client that follows links.next as it is (as
// Klaviyo documents pagination) gets the next page. The fake answered its own
// link 400, as a path off the spec.
func TestFollowsItsOwnNextLink(t *testing.T) {
	t.Parallel()
	_, c := start(t, fakeklaviyo.Options{})
	for _, e := range []string{"a@example.com", "b@example.com", "c@example.com"} {
		if st, _, doc := c.do(http.MethodPost, "/api/profile-import", importBody(e, "X")); st/100 != 2 {
			t.Fatalf("import %s: %d %v", e, st, doc)
		}
	}
	seen := 0
	path := "/api/profiles?page[size]=1"
	for range 5 {
		st, _, doc := c.do(http.MethodGet, path, "")
		if st != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, st, doc)
		}
		seen += len(doc["data"].([]any))
		next, _ := doc["links"].(map[string]any)["next"].(string)
		if next == "" {
			break
		}
		path = strings.TrimPrefix(next, c.url)
	}
	if seen != 3 {
		t.Fatalf("followed links.next over %d profiles, want 3", seen)
	}
}

// jobOf posts a bulk import job of profiles (JSON attributes objects) and
// returns its id.
func (c client) jobOf(profiles ...string) string {
	c.t.Helper()
	items := make([]string, len(profiles))
	for i, p := range profiles {
		items[i] = `{"type":"profile","attributes":` + p + `}`
	}
	status, _, doc := c.do(http.MethodPost, "/api/profile-bulk-import-jobs",
		`{"data":{"type":"profile-bulk-import-job","attributes":{"profiles":{"data":[`+strings.Join(items, ",")+`]}}}}`)
	if status != http.StatusAccepted {
		c.t.Fatalf("job: %d %v", status, doc)
	}
	return doc["data"].(map[string]any)["id"].(string)
}

// list reads one page of a job's sub-resource and returns its data.
func (c client) list(path string) []any {
	c.t.Helper()
	status, _, doc := c.do(http.MethodGet, path, "")
	if status != http.StatusOK {
		c.t.Fatalf("GET %s: %d %v", path, status, doc)
	}
	data, _ := doc["data"].([]any)
	return data
}

// TestCancelledJobNamesAMergedProfileOnce: two profiles of one job whose
// e-mails differ only in case are one profile. A job cancelled after its
// first one lists that profile among those it wrote, once, although the
// second was never applied (JobFailFirst: only the first job fails).
func TestCancelledJobNamesAMergedProfileOnce(t *testing.T) {
	s, c := start(t, fakeklaviyo.Options{JobFailFirst: 1, JobFailApplies: 0.5})
	id := c.jobOf(`{"email":"user5@example.com","first_name":"Five"}`, `{"email":"other@example.com"}`,
		`{"email":"User5@Example.com","first_name":"Twenty"}`, `{"email":"more@example.com"}`)
	st, total, completed, _, _ := s.Job(id)
	if st != "cancelled" || total != 4 || completed != 2 {
		t.Fatalf("job %s total %d completed %d; want cancelled, 2 of 4", st, total, completed)
	}
	if got := c.list("/api/profile-bulk-import-jobs/" + id + "/relationships/profiles"); len(got) != 2 {
		t.Errorf("the job names %d profiles, want 2", len(got))
	}
	if p, _ := s.Profile("user5@example.com"); p.Attributes["first_name"] != "Five" {
		t.Errorf("first_name %v: the cancelled job applied its third profile", p.Attributes["first_name"])
	}
	again := c.jobOf(`{"email":"User5@Example.com","first_name":"Twenty"}`)
	if st, _, _, _, _ := s.Job(again); st != "complete" {
		t.Errorf("second job %s, want complete (JobFailFirst 1)", st)
	}
}

// TestImportErrorsListedLateOrNever: failed_count counts a refused profile
// at once; its import error is listed ErrorsListedAfter later, or never.
func TestImportErrorsListedLateOrNever(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, o := range []fakeklaviyo.Options{{ErrorsListedAfter: time.Minute}, {ErrorsNeverListed: true}} {
		o.Clock = clk
		s, c := start(t, o)
		id := c.jobOf(`{"email":"a@example.com"}`, `{"email":"b@example.com","phone_number":"06 12 34 56 78"}`)
		if _, _, _, failed, _ := s.Job(id); failed != 1 {
			t.Fatalf("failed_count %d, want 1", failed)
		}
		if got := c.list("/api/profile-bulk-import-jobs/" + id + "/import-errors"); len(got) != 0 {
			t.Errorf("%+v: %d errors listed at once, want none", o, len(got))
		}
		clk.Advance(time.Minute)
		want := 1
		if o.ErrorsNeverListed {
			want = 0
		}
		if got := c.list("/api/profile-bulk-import-jobs/" + id + "/import-errors"); len(got) != want {
			t.Errorf("%+v: %d errors listed a minute later, want %d", o, len(got), want)
		}
	}
}
