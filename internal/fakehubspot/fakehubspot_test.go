package fakehubspot_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/fakehubspot"
)

const tok = "pat-na1-fake-test"

type client struct {
	t   *testing.T
	url string
	s   *fakehubspot.Server
}

func start(t *testing.T, o fakehubspot.Options) *client {
	t.Helper()
	if o.Token == "" {
		o.Token = tok
	}
	s := fakehubspot.New(o)
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return &client{t: t, url: srv.URL, s: s}
}

// post sends body to path and returns the status, headers and decoded body.
func (c *client) post(path, body string) (int, http.Header, map[string]any) {
	c.t.Helper()
	return c.do(http.MethodPost, path, body, "Bearer "+tok)
}

func (c *client) do(method, path, body, auth string) (int, http.Header, map[string]any) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.url+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return res.StatusCode, res.Header, m
}

const (
	upsert  = "/crm/v3/objects/contacts/batch/upsert"
	create  = "/crm/v3/objects/contacts/batch/create"
	update  = "/crm/v3/objects/contacts/batch/update"
	read    = "/crm/v3/objects/contacts/batch/read"
	archive = "/crm/v3/objects/contacts/batch/archive"
)

func TestAuthIsABearerToken(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{})
	for _, auth := range []string{"", "Bearer wrong", tok, "Basic " + tok} {
		code, _, body := c.do(http.MethodPost, upsert, `{"inputs":[]}`, auth)
		if code != http.StatusUnauthorized || body["category"] != "INVALID_AUTHENTICATION" || body["status"] != "error" {
			t.Errorf("auth %q: %d %v, want 401 INVALID_AUTHENTICATION", auth, code, body)
		}
	}
	if c.s.Stats().ContactsWritten != 0 {
		t.Error("an unauthorized request wrote")
	}
}

func TestRequestShapesAreChecked(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{})
	many := make([]string, 101)
	for i := range many {
		many[i] = fmt.Sprintf(`{"idProperty":"email","id":"u%d@example.com","properties":{}}`, i)
	}
	for name, body := range map[string]string{
		"more than 100":        `{"inputs":[` + strings.Join(many, ",") + `]}`,
		"unknown top field":    `{"inputs":[],"limit":5}`,
		"unknown input field":  `{"inputs":[{"idProperty":"email","id":"a@example.com","properties":{},"email":"x"}]}`,
		"number value":         `{"inputs":[{"idProperty":"email","id":"a@example.com","properties":{"firstname":5}}]}`,
		"no inputs":            `{}`,
		"no id":                `{"inputs":[{"idProperty":"email","properties":{}}]}`,
		"not unique idProp":    `{"inputs":[{"idProperty":"firstname","id":"Ada","properties":{}}]}`,
		"unknown property":     `{"inputs":[{"idProperty":"email","id":"a@example.com","properties":{"shoe_size":"42"}}]}`,
		"duplicate ids":        `{"inputs":[{"idProperty":"email","id":"a@example.com","properties":{}},{"idProperty":"email","id":"A@example.com","properties":{}}]}`,
		"trailing data":        `{"inputs":[]} {}`,
		"inputs not an array":  `{"inputs":{}}`,
		"properties not a map": `{"inputs":[{"idProperty":"email","id":"a@example.com","properties":[]}]}`,
	} {
		code, _, b := c.post(upsert, body)
		if code != http.StatusBadRequest || b["category"] != "VALIDATION_ERROR" {
			t.Errorf("%s: %d %v, want 400 VALIDATION_ERROR", name, code, b)
		}
	}
	st := c.s.Stats()
	if st.ContactsWritten != 0 || st.Invalid != 12 {
		t.Errorf("stats %+v: want nothing written, 12 invalid", st)
	}
}

func TestUpsertAppliesValidInputsAnd207sTheOthers(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{Properties: []fakehubspot.Property{{Name: "age", Type: "number"}}, RefuseEmails: []string{"bad@example.com"}})
	code, _, b := c.post(upsert, `{"inputs":[
		{"idProperty":"email","id":"Ada@Example.com","properties":{"firstname":"Ada","age":"36"}},
		{"idProperty":"email","id":"bob@example.com","properties":{"age":"old"}},
		{"idProperty":"email","id":"not-an-email","properties":{}},
		{"idProperty":"email","id":"bad@example.com","properties":{}}]}`)
	if code != http.StatusMultiStatus || b["numErrors"] != float64(3) {
		t.Fatalf("%d %v, want 207 with 3 errors", code, b)
	}
	errs := b["errors"].([]any)
	msgs := ""
	for _, e := range errs {
		em := e.(map[string]any)
		msgs += fmt.Sprint(em["message"], em["context"]) + "\n"
	}
	for _, want := range []string{`"old" was not a valid number`, "Email address not-an-email is invalid", "Email address bad@example.com is invalid", "[bob@example.com]"} {
		if !strings.Contains(msgs, want) {
			t.Errorf("errors %s miss %q", msgs, want)
		}
	}
	ct, ok := c.s.Contact("ada@example.com")
	if !ok || ct.Properties["email"] != "ada@example.com" || ct.Properties["firstname"] != "Ada" || ct.Properties["age"] != "36" {
		t.Fatalf("contact: %v %v", ok, ct.Properties)
	}
	results := b["results"].([]any)
	if len(results) != 1 || results[0].(map[string]any)["new"] != true {
		t.Errorf("results %v, want one new contact", results)
	}
	// The same write again is a duplicate; a changed one is not.
	c.post(upsert, `{"inputs":[{"idProperty":"email","id":"ada@example.com","properties":{"firstname":"Ada"}}]}`)
	c.post(upsert, `{"inputs":[{"idProperty":"email","id":"ada@example.com","properties":{"firstname":"Ada L."}}]}`)
	st := c.s.Stats()
	if st.Contacts != 1 || st.ContactsWritten != 3 || st.DuplicateWrites != 1 {
		t.Errorf("stats %+v: want 1 contact, 3 writes, 1 duplicate", st)
	}
}

func TestCreateConflictRefusesTheWholeBatch(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{})
	id := c.s.Put(map[string]string{"email": "ada@example.com", "firstname": "Ada"})
	code, _, b := c.post(create, `{"inputs":[{"properties":{"email":"new@example.com"}},{"properties":{"email":"ADA@example.com","firstname":"X"}}]}`)
	if code != http.StatusConflict || b["category"] != "CONFLICT" || b["message"] != "Contact already exists. Existing ID: "+id {
		t.Fatalf("%d %v, want 409 naming contact %s", code, b, id)
	}
	if _, ok := c.s.Contact("new@example.com"); ok {
		t.Error("a refused batch created a contact")
	}
	if code, _, _ := c.post(create, `{"inputs":[{"properties":{"email":"new@example.com"}}]}`); code != http.StatusCreated {
		t.Errorf("create: %d, want 201", code)
	}
	if ct, _ := c.s.Contact("ada@example.com"); ct.Properties["firstname"] != "Ada" {
		t.Errorf("the existing contact changed: %v", ct.Properties)
	}
}

func TestUpdateReadArchive(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{Properties: []fakehubspot.Property{{Name: "customer_id", Type: "string", Unique: true}}})
	id := c.s.Put(map[string]string{"email": "ada@example.com", "customer_id": "C1"})
	code, _, b := c.post(update, `{"inputs":[{"idProperty":"customer_id","id":"C1","properties":{"firstname":"Ada"}},{"idProperty":"customer_id","id":"C2","properties":{"firstname":"Bob"}}]}`)
	if code != http.StatusMultiStatus || !strings.Contains(fmt.Sprint(b["errors"]), "OBJECT_NOT_FOUND") || !strings.Contains(fmt.Sprint(b["errors"]), "[C2]") {
		t.Fatalf("update: %d %v, want 207 OBJECT_NOT_FOUND for C2", code, b)
	}
	if _, ok := c.s.Contact("C2"); ok {
		t.Error("update created C2")
	}
	code, _, b = c.post(read, `{"idProperty":"customer_id","inputs":[{"id":"C1"},{"id":"C9"}],"properties":["firstname","email"]}`)
	res := b["results"].([]any)
	if code != http.StatusMultiStatus || len(res) != 1 || res[0].(map[string]any)["id"] != id ||
		res[0].(map[string]any)["properties"].(map[string]any)["firstname"] != "Ada" {
		t.Fatalf("read: %d %v", code, b)
	}
	for range 2 { // archiving twice is harmless
		if code, _, _ := c.post(archive, `{"inputs":[{"id":"`+id+`"},{"id":"999999"}]}`); code != http.StatusNoContent {
			t.Fatalf("archive: %d, want 204", code)
		}
	}
	if st := c.s.Stats(); st.Contacts != 0 || st.Archived != 1 {
		t.Errorf("stats %+v: want 0 live, 1 archived", st)
	}
	if code, _, b = c.post(read+"?archived=true", `{"idProperty":"customer_id","inputs":[{"id":"C1"}]}`); code != 200 || len(b["results"].([]any)) != 1 {
		t.Errorf("read archived: %d %v", code, b)
	}
}

func TestTenSecondRollingLimit(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Now())
	c := start(t, fakehubspot.Options{RateLimit: 3, Clock: clk})
	for i := range 3 {
		code, h, _ := c.post(read, `{"inputs":[]}`)
		if code != 200 || h.Get("X-HubSpot-RateLimit-Max") != "3" || h.Get("X-HubSpot-RateLimit-Remaining") != fmt.Sprint(2-i) ||
			h.Get("X-HubSpot-RateLimit-Interval-Milliseconds") != "10000" {
			t.Fatalf("request %d: %d %v", i, code, h)
		}
		clk.Advance(time.Second)
	}
	code, h, b := c.post(read, `{"inputs":[]}`)
	if code != http.StatusTooManyRequests || b["policyName"] != "TEN_SECONDLY_ROLLING" || b["errorType"] != "RATE_LIMIT" || h.Get("Retry-After") != "7" {
		t.Fatalf("past the limit: %d %v %v, want 429 TEN_SECONDLY_ROLLING, Retry-After 7", code, h, b)
	}
	clk.Advance(7 * time.Second) // the first request leaves the window
	if code, _, _ := c.post(read, `{"inputs":[]}`); code != 200 {
		t.Errorf("after the window rolled: %d", code)
	}
}

func TestDroppedAnswerIsApplied(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{DropFirst: 1})
	req, _ := http.NewRequest(http.MethodPost, c.url+upsert, strings.NewReader(`{"inputs":[{"idProperty":"email","id":"ada@example.com","properties":{}}]}`))
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("got an answer (%d), want the connection cut", res.StatusCode)
	}
	if _, ok := c.s.Contact("ada@example.com"); !ok {
		t.Error("the write whose answer was dropped was not applied")
	}
	if st := c.s.Stats(); st.Dropped != 1 {
		t.Errorf("dropped %d, want 1", st.Dropped)
	}
}

// TestHoldWrite: a held write is handled HoldWrite after it arrived, even
// though its client gave up meanwhile, and counted as abandoned; a read is
// never held; a client that waits gets its answer.
func TestHoldWrite(t *testing.T) {
	t.Parallel()
	const hold = time.Second
	c := start(t, fakehubspot.Options{HoldWriteRate: 1, HoldWrite: hold})
	// The client gives up once the fake holds its write (a fixed timeout
	// could end before the request reached the fake on a loaded machine).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+upsert,
		strings.NewReader(`{"inputs":[{"idProperty":"email","id":"late@example.com","properties":{"firstname":"Late"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	answered := make(chan int, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		res.Body.Close()
		answered <- res.StatusCode
	}()
	for wait := time.Now().Add(5 * time.Second); c.s.Stats().Held == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(wait) {
			t.Fatal("the write was not held")
		}
	}
	cancel()
	if code := <-answered; code != 0 {
		t.Fatalf("the held write answered %d before its client gave up", code)
	}
	if _, ok := c.s.Contact("late@example.com"); ok {
		t.Fatal("the held write was applied before HoldWrite passed")
	}
	if st := c.s.Stats(); st.HeldPending != 1 {
		t.Fatalf("pending held writes = %d, want 1", st.HeldPending)
	}
	deadline := time.Now().Add(5 * time.Second)
	for c.s.Stats().HeldPending > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if ct, ok := c.s.Contact("late@example.com"); !ok || ct.Properties["firstname"] != "Late" {
		t.Fatalf("the held write was not applied after its client gave up (%v)", ct.Properties)
	}
	st := c.s.Stats()
	if st.Held != 1 || st.HeldAbandoned != 1 || st.HeldPending != 0 {
		t.Fatalf("held %d, abandoned %d, pending %d; want 1, 1, 0", st.Held, st.HeldAbandoned, st.HeldPending)
	}
	if code, _, _ := c.post(read, `{"idProperty":"email","inputs":[{"id":"late@example.com"}]}`); code != http.StatusOK {
		t.Fatalf("read: %d", code)
	}
	if got := c.s.Stats().Held; got != 1 {
		t.Fatalf("a read was held (held %d)", got)
	}
	start := time.Now()
	code, _, _ := c.post(upsert, `{"inputs":[{"idProperty":"email","id":"wait@example.com","properties":{}}]}`)
	if code != http.StatusOK || time.Since(start) < hold {
		t.Fatalf("a waiting client: %d after %v, want 200 after the hold", code, time.Since(start))
	}
	if st := c.s.Stats(); st.Held != 2 || st.HeldAbandoned != 1 || st.HeldPending != 0 {
		t.Fatalf("held %d, abandoned %d, pending %d; want 2, 1, 0", st.Held, st.HeldAbandoned, st.HeldPending)
	}
}

// TestWriteLatencyIsNotAHold: WriteLatency still applies a write its client
// gave up on, without counting it held.
func TestWriteLatencyIsNotAHold(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{WriteLatency: 200 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+upsert,
		strings.NewReader(`{"inputs":[{"idProperty":"email","id":"slow@example.com","properties":{}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Content-Type", "application/json")
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the slow write answered %d before its client's timeout", res.StatusCode)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, ok := c.s.Contact("slow@example.com"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the slow write was not applied after its client gave up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if st := c.s.Stats(); st.Held != 0 || st.HeldAbandoned != 0 {
		t.Fatalf("held %d, abandoned %d; want 0, 0", st.Held, st.HeldAbandoned)
	}
}

func TestPropertiesAndStats(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{Properties: []fakehubspot.Property{{Name: "customer_id", Type: "string", Unique: true}}})
	code, _, b := c.do(http.MethodGet, "/crm/v3/properties/contacts", "", "Bearer "+tok)
	if code != 200 || !strings.Contains(fmt.Sprint(b["results"]), "name:customer_id") {
		t.Fatalf("%d %v", code, b)
	}
	code, _, b = c.do(http.MethodGet, "/crm/v3/properties/contacts/customer_id", "", "Bearer "+tok)
	if code != 200 || b["hasUniqueValue"] != true {
		t.Fatalf("%d %v", code, b)
	}
	if code, _, _ = c.do(http.MethodGet, "/crm/v3/properties/contacts/nope", "", "Bearer "+tok); code != 404 {
		t.Errorf("unknown property: %d", code)
	}
	code, _, b = c.do(http.MethodGet, "/_stats", "", "")
	if code != 200 || b["requests"] != float64(3) {
		t.Errorf("stats: %d %v", code, b)
	}
}

// TestTypedValues: HubSpot keeps a date as YYYY-MM-DD and a datetime as an
// ISO 8601 instant whichever accepted form they were written in, refuses a
// date that is not midnight UTC, and refuses numbers it cannot read (NaN,
// hex) that strconv would take.
func TestTypedValues(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{Properties: []fakehubspot.Property{
		{Name: "renewal", Type: "date"}, {Name: "seen", Type: "datetime"}, {Name: "score", Type: "number"}}})
	upsert := func(props string) int {
		st, _, _ := c.post("/crm/v3/objects/contacts/batch/upsert",
			`{"inputs":[{"idProperty":"email","id":"ann@example.com","properties":`+props+`}]}`)
		return st
	}
	if st := upsert(`{"renewal":"1430438400000","seen":"2015-05-01T12:30:00+02:00","score":"-150.50"}`); st != http.StatusOK {
		t.Fatalf("valid values: HTTP %d", st)
	}
	ct, _ := c.s.Contact("ann@example.com")
	if ct.Properties["renewal"] != "2015-05-01" || ct.Properties["seen"] != "2015-05-01T10:30:00.000Z" {
		t.Errorf("stored renewal %q, seen %q; want 2015-05-01 and 2015-05-01T10:30:00.000Z", ct.Properties["renewal"], ct.Properties["seen"])
	}
	for _, bad := range []string{`{"renewal":"2015-05-01T10:30:00Z"}`, `{"score":"NaN"}`, `{"score":"0x1p-2"}`, `{"score":"Inf"}`,
		`{"score":"1.5e2"}`, `{"score":"1E-05"}`, `{"score":"+5"}`, `{"score":"1,5"}`, `{"score":"1.2.3"}`} {
		if st := upsert(bad); st == http.StatusOK {
			t.Errorf("%s: HTTP 200, want refused", bad)
		}
	}
}

// TestMergedContactsAndSecondaryEmails: after a merge, the merged-away
// contact's address is a secondary one of the primary contact, and finds it
// as its primary address does: a read answers the primary contact, an upsert
// writes to it, a create is refused; a read by the merged-away id answers
// the primary contact.
func TestMergedContactsAndSecondaryEmails(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{})
	keep := c.s.Put(map[string]string{"email": "ann@example.com", "firstname": "Ann"})
	gone := c.s.Put(map[string]string{"email": "ann.old@example.com", "lastname": "Smith"})
	code, _, b := c.post("/crm/v3/objects/contacts/merge", `{"primaryObjectId":"`+keep+`","objectIdToMerge":"`+gone+`"}`)
	if code != http.StatusOK || b["id"] != keep {
		t.Fatalf("merge: %d %v", code, b)
	}
	props := b["properties"].(map[string]any)
	if props["email"] != "ann@example.com" || props["hs_additional_emails"] != "ann.old@example.com" || props["lastname"] != "Smith" {
		t.Fatalf("merged contact %v", props)
	}
	code, _, b = c.post(read, `{"idProperty":"email","inputs":[{"id":"Ann.Old@example.com"}],"properties":["email","firstname"]}`)
	res := b["results"].([]any)
	if code != http.StatusOK || len(res) != 1 || res[0].(map[string]any)["id"] != keep ||
		res[0].(map[string]any)["properties"].(map[string]any)["email"] != "ann@example.com" {
		t.Fatalf("read by the secondary address: %d %v", code, b)
	}
	code, _, b = c.post(read, `{"inputs":[{"id":"`+gone+`"}]}`)
	if res := b["results"].([]any); code != http.StatusOK || len(res) != 1 || res[0].(map[string]any)["id"] != keep {
		t.Fatalf("read by the merged-away id: %d %v", code, b)
	}
	if code, _, b = c.post(upsert, `{"inputs":[{"idProperty":"email","id":"ann.old@example.com","properties":{"firstname":"Annie"}}]}`); code != http.StatusOK {
		t.Fatalf("upsert: %d %v", code, b)
	}
	if code, _, _ = c.post(create, `{"inputs":[{"properties":{"email":"ann.old@example.com"}}]}`); code != http.StatusConflict {
		t.Errorf("create of a secondary address: %d, want 409", code)
	}
	st := c.s.Stats()
	if got, _ := c.s.Contact("ann@example.com"); got.Properties["firstname"] != "Annie" || st.Contacts != 1 || st.Merged != 1 {
		t.Errorf("after the upsert by the secondary address: %v, %+v; want one contact, firstname Annie", got.Properties, st)
	}
}

// TestLifecycleStageOnlyMovesForward: a write of an earlier stage is
// ignored (a success, the rest applied); clearing it first lets it move.
func TestLifecycleStageOnlyMovesForward(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{})
	c.s.Put(map[string]string{"email": "ann@example.com", "lifecyclestage": "customer"})
	if code, _, b := c.post(upsert, `{"inputs":[{"idProperty":"email","id":"ann@example.com","properties":{"lifecyclestage":"lead","firstname":"Ann"}}]}`); code != http.StatusOK {
		t.Fatalf("upsert: %d %v", code, b)
	}
	if got, _ := c.s.Contact("ann@example.com"); got.Properties["lifecyclestage"] != "customer" || got.Properties["firstname"] != "Ann" {
		t.Fatalf("after a backward write: %v, want customer kept and firstname Ann", got.Properties)
	}
	for _, v := range []string{"", "lead"} {
		if code, _, b := c.post(upsert, `{"inputs":[{"idProperty":"email","id":"ann@example.com","properties":{"lifecyclestage":"`+v+`"}}]}`); code != http.StatusOK {
			t.Fatalf("upsert %q: %d %v", v, code, b)
		}
	}
	if got, _ := c.s.Contact("ann@example.com"); got.Properties["lifecyclestage"] != "lead" || c.s.Stats().StagesKept != 1 {
		t.Errorf("after clearing then lead: %v (%d kept), want lead", got.Properties, c.s.Stats().StagesKept)
	}
	if code, _, _ := c.post(upsert, `{"inputs":[{"idProperty":"email","id":"ann@example.com","properties":{"lifecyclestage":"nope"}}]}`); code != http.StatusMultiStatus {
		t.Errorf("an unknown stage: %d, want 207 with an error", code)
	}
}

// TestStandingChangesMidRun: the token revoked, a scope removed and the
// daily limit spent after a sync started: every call is answered as
// HubSpot does (standing.go) and nothing is applied; restored, writes work.
func TestStandingChangesMidRun(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{})
	one := `{"inputs":[{"idProperty":"email","id":"a@example.com","properties":{"email":"a@example.com"}}]}`
	if code, _, body := c.post(upsert, one); code != http.StatusOK {
		t.Fatalf("upsert: %d %v", code, body)
	}
	for _, tt := range []struct {
		state, key, want string
		status           int
	}{
		{fakehubspot.StandingRevoked, "category", "INVALID_AUTHENTICATION", http.StatusUnauthorized},
		{fakehubspot.StandingForbidden, "category", "MISSING_SCOPES", http.StatusForbidden},
		{fakehubspot.StandingDaily, "policyName", "DAILY", http.StatusTooManyRequests},
	} {
		if code, _, _ := c.do(http.MethodPost, "/_standing?state="+tt.state, "", ""); code != http.StatusNoContent {
			t.Fatalf("POST /_standing?state=%s: %d", tt.state, code)
		}
		code, h, body := c.post(upsert, one)
		if code != tt.status || body[tt.key] != tt.want {
			t.Errorf("%s: %d %v, want %d with %s %s", tt.state, code, body, tt.status, tt.key, tt.want)
		}
		if tt.state == fakehubspot.StandingDaily && h.Get("Retry-After") != "" {
			t.Errorf("daily: Retry-After %q; HubSpot sends none for the daily limit", h.Get("Retry-After"))
		}
	}
	if code, _, _ := c.do(http.MethodPost, "/_standing?state=broke", "", ""); code != http.StatusBadRequest {
		t.Errorf("an unknown standing: %d, want 400", code)
	}
	if err := c.s.SetStanding("ok"); err != nil {
		t.Fatal(err)
	}
	if code, _, body := c.post(upsert, one); code != http.StatusOK {
		t.Fatalf("upsert after the account was restored: %d %v", code, body)
	}
	if st := c.s.Stats(); st.ContactsWritten != 2 || st.Contacts != 1 {
		t.Errorf("stats %+v: want the two accepted writes only", st)
	}
}

// TestOverlongValueIsRefused: a property value of more than 65,536
// characters is a validation error of its input, as HubSpot documents the
// limit; one of exactly 65,536 (in two-byte characters) is stored.
func TestOverlongValueIsRefused(t *testing.T) {
	t.Parallel()
	c := start(t, fakehubspot.Options{})
	long := strings.Repeat("é", fakehubspot.MaxValueChars)
	code, _, b := c.post(upsert, `{"inputs":[
		{"idProperty":"email","id":"ada@example.com","properties":{"firstname":"`+long+`"}},
		{"idProperty":"email","id":"bob@example.com","properties":{"firstname":"`+long+`x"}}]}`)
	if code != http.StatusMultiStatus || b["numErrors"] != float64(1) {
		t.Fatalf("%d %v, want 207 with 1 error", code, b["numErrors"])
	}
	if msg := fmt.Sprint(b["errors"]); !strings.Contains(msg, "65537 characters long") {
		t.Errorf("errors %.300s: want the value's length", msg)
	}
	if _, ok := c.s.Contact("bob@example.com"); ok {
		t.Error("the overlong value was stored")
	}
	if ct, ok := c.s.Contact("ada@example.com"); !ok || ct.Properties["firstname"] != long {
		t.Error("a value of exactly the limit was not stored")
	}
	code, _, _ = c.post(create, `{"inputs":[{"properties":{"email":"cy@example.com","firstname":"`+long+`x"}}]}`)
	if code != http.StatusBadRequest {
		t.Errorf("create with an overlong value: %d, want 400", code)
	}
}

func TestEnumerationTakesSeveralOptions(t *testing.T) {
	t.Parallel()
	p, err := fakehubspot.ParseProperty("Interests:checkbox=golf|tennis|chess")
	if err != nil {
		t.Fatal(err)
	}
	if p.Name != "interests" || p.Type != "enumeration" || p.FieldType != "checkbox" || strings.Join(p.Options, "|") != "golf|tennis|chess" {
		t.Fatalf("ParseProperty: %+v", p)
	}
	for _, bad := range []string{"x:checkbox=a||b", "x:enumeration=a;b|c"} {
		if _, err := fakehubspot.ParseProperty(bad); err == nil {
			t.Errorf("ParseProperty(%q) took it", bad)
		}
	}
	c := start(t, fakehubspot.Options{Properties: []fakehubspot.Property{p}})
	code, _, b := c.post(upsert, `{"inputs":[
		{"idProperty":"email","id":"ada@example.com","properties":{"interests":"chess;golf"}},
		{"idProperty":"email","id":"bob@example.com","properties":{"interests":"golf;polo"}}]}`)
	if code != http.StatusMultiStatus || b["numErrors"] != float64(1) || !strings.Contains(fmt.Sprint(b["errors"]), "polo was not one of the allowed options for property interests") {
		t.Fatalf("%d %v, want 207 refusing polo", code, b)
	}
	// Kept in the options' order: what was sent does not read back as sent.
	if ct, _ := c.s.Contact("ada@example.com"); ct.Properties["interests"] != "golf;chess" {
		t.Errorf("interests %q, want golf;chess", ct.Properties["interests"])
	}
	c.post(upsert, `{"inputs":[{"idProperty":"email","id":"ada@example.com","properties":{"interests":"golf;chess"}}]}`)
	if st := c.s.Stats(); st.DuplicateWrites != 1 {
		t.Errorf("the same options in another order: %d duplicate writes, want 1", st.DuplicateWrites)
	}
	code, _, b = c.do(http.MethodGet, "/crm/v3/properties/contacts/interests", "", "Bearer "+tok)
	if code != http.StatusOK || b["fieldType"] != "checkbox" || len(b["options"].([]any)) != 3 {
		t.Errorf("GET property: %d %v", code, b)
	}
}

// TestSurroundingWhitespaceRefusesTheBatch: HubSpot refuses a non-string
// value (or an option of one) that begins or ends with white space or an
// invisible character with a 400 for the whole batch
// (LEADING_TRAILING_WHITESPACE, its 2025 changelog); a text value keeps its
// spaces.
func TestSurroundingWhitespaceRefusesTheBatch(t *testing.T) {
	t.Parallel()
	p, err := fakehubspot.ParseProperty("interests:checkbox=golf|tennis")
	if err != nil {
		t.Fatal(err)
	}
	c := start(t, fakehubspot.Options{Properties: []fakehubspot.Property{p,
		{Name: "score", Type: "number"}, {Name: "vip", Type: "bool"}, {Name: "renewal", Type: "date"}}})
	for _, bad := range []string{`{"score":" 42"}`, `{"vip":"true\n"}`, `{"renewal":"2015-05-01\u00a0"}`,
		`{"interests":"golf; tennis"}`, `{"interests":"\u200bgolf"}`} {
		code, _, b := c.post(upsert, `{"inputs":[
			{"idProperty":"email","id":"ok@example.com","properties":{"firstname":"Ok"}},
			{"idProperty":"email","id":"ann@example.com","properties":`+bad+`}]}`)
		if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(b["message"]), "LEADING_TRAILING_WHITESPACE") {
			t.Errorf("%s: %d %v, want 400 LEADING_TRAILING_WHITESPACE", bad, code, b)
		}
		code, _, _ = c.post("/crm/v3/objects/contacts/batch/create", `{"inputs":[{"properties":`+strings.Replace(bad, "{", `{"email":"cy@example.com",`, 1)+`}]}`)
		if code != http.StatusBadRequest {
			t.Errorf("create %s: %d, want 400", bad, code)
		}
	}
	if _, ok := c.s.Contact("ok@example.com"); ok {
		t.Error("a batch refused whole applied one of its inputs")
	}
	code, _, _ := c.post(upsert, `{"inputs":[{"idProperty":"email","id":"ann@example.com","properties":{"firstname":" Ann ","score":"42"}}]}`)
	if ct, _ := c.s.Contact("ann@example.com"); code != http.StatusOK || ct.Properties["firstname"] != " Ann " {
		t.Errorf("%d, firstname %q: a text value keeps its spaces", code, ct.Properties["firstname"])
	}
}
