package fakeshopify_test

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
	"github.com/oncesync/oncesync/internal/fakeshopify"
)

const token = "shpat_test"

type answer struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

func post(t *testing.T, url, tok, query string, vars map[string]any) answer {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"query": query, "variables": vars})
	req, _ := http.NewRequest(http.MethodPost, url+"/admin/api/2025-07/graphql.json", bytes.NewReader(b))
	req.Header.Set("Content-Type", "application/json")
	if tok != "" {
		req.Header.Set("X-Shopify-Access-Token", tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	_ = json.Unmarshal(raw, &a.body)
	return a
}

func (a answer) errCode(t *testing.T) (string, string) {
	t.Helper()
	errs, ok := a.body["errors"].([]any)
	if !ok || len(errs) == 0 {
		t.Fatalf("no errors in %s", a.raw)
	}
	e := errs[0].(map[string]any)
	code := ""
	if ext, ok := e["extensions"].(map[string]any); ok {
		code, _ = ext["code"].(string)
	}
	return code, e["message"].(string)
}

func newFake(t *testing.T, o fakeshopify.Options) (*fakeshopify.Server, string) {
	o.Token = token
	f := fakeshopify.New(o)
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	return f, srv.URL
}

const page = `query($first: Int!, $after: String, $query: String) {
  customers(first: $first, after: $after, query: $query, sortKey: UPDATED_AT) {
    edges { cursor node { id email firstName updatedAt defaultEmailAddress { emailAddress } } }
    pageInfo { hasNextPage endCursor }
  }
}`

func TestAuth(t *testing.T) {
	_, url := newFake(t, fakeshopify.Options{})
	for _, tok := range []string{"", "wrong"} {
		a := post(t, url, tok, page, map[string]any{"first": 1})
		if a.status != 401 || a.body["errors"] != "[API] Invalid API key or access token (unrecognized login or wrong password)" {
			t.Fatalf("token %q: %d %s", tok, a.status, a.raw)
		}
	}
}

func TestValidation(t *testing.T) {
	_, url := newFake(t, fakeshopify.Options{})
	for _, tc := range []struct {
		name, query string
		vars        map[string]any
		code, msg   string
	}{
		{"unknown argument", `{ customers(first: 5, foo: 1) { nodes { id } } }`, nil, "argumentNotAccepted", "Field 'customers' doesn't accept argument 'foo'"},
		{"first above 250", page, map[string]any{"first": 251}, "BAD_REQUEST", "at most 250"},
		{"no first", `{ customers { nodes { id } } }`, nil, "BAD_REQUEST", "you must provide one of first or last"},
		{"unknown field", `{ customers(first: 1) { nodes { id bogus } } }`, nil, "undefinedField", "Field 'bogus' doesn't exist on type 'Customer'"},
		{"unknown root", `{ orders(first: 1) { nodes { id } } }`, nil, "undefinedField", "Field 'orders' doesn't exist on type 'QueryRoot'"},
		{"object without selection", `{ customers(first: 1) { nodes { defaultEmailAddress } } }`, nil, "selectionMismatch", "must have selections"},
		{"bad sort key", `{ customers(first: 1, sortKey: NOPE) { nodes { id } } }`, nil, "argumentLiteralsIncompatible", "sortKey"},
		{"wrong type", `{ customers(first: "5") { nodes { id } } }`, nil, "argumentLiteralsIncompatible", "first"},
		{"undeclared variable", `{ customers(first: $n) { nodes { id } } }`, nil, "variableNotDefined", "$n"},
		{"missing variable", page, nil, "INVALID_VARIABLE", "$first"},
		{"backward pagination", `{ customers(last: 5) { nodes { id } } }`, nil, "UNSUPPORTED_BY_FAKE", "forward"},
		{"named fragment", `{ customers(first: 1) { nodes { ...F } } }`, nil, "", "named fragments"},
		{"mutation", `mutation { customerDelete(input: {id: "x"}) { deletedCustomerId } }`, nil, "", "mutation"},
		{"syntax", `{ customers(first: 1) { nodes { id }`, nil, "", "Parse error"},
		{"too costly", `{ a: customers(first: 250) { nodes { id defaultEmailAddress { emailAddress } defaultPhoneNumber { phoneNumber } amountSpent { amount } } } }`, nil, "MAX_COST_EXCEEDED", "exceeds the single query max cost"},
		{"OR search", `{ customers(first: 1, query: "id:1 OR id:2") { nodes { id } } }`, nil, "UNSUPPORTED_BY_FAKE", "AND only"},
		{"bad gid", `{ nodes(ids: ["42"]) { id } }`, nil, "argumentLiteralsIncompatible", "Invalid global id '42'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := post(t, url, token, tc.query, tc.vars)
			if a.status != 200 {
				t.Fatalf("status %d: %s", a.status, a.raw)
			}
			if _, ok := a.body["data"]; ok {
				t.Fatalf("data with a refused document: %s", a.raw)
			}
			code, msg := a.errCode(t)
			if code != tc.code || !strings.Contains(msg, tc.msg) {
				t.Fatalf("got %q %q; want %q containing %q", code, msg, tc.code, tc.msg)
			}
		})
	}
}

func TestPaginationFilterAndCost(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f, url := newFake(t, fakeshopify.Options{Clock: fc})
	first := f.Seed(3)
	fc.Advance(time.Hour)
	later := f.Seed(2)
	var got []string
	after := any(nil)
	for range 10 {
		a := post(t, url, token, page, map[string]any{"first": 2, "after": after})
		conn := a.body["data"].(map[string]any)["customers"].(map[string]any)
		for _, e := range conn["edges"].([]any) {
			n := e.(map[string]any)["node"].(map[string]any)
			got = append(got, n["id"].(string))
			if n["email"] != n["defaultEmailAddress"].(map[string]any)["emailAddress"] {
				t.Fatalf("email and defaultEmailAddress differ: %v", n)
			}
		}
		cost := a.body["extensions"].(map[string]any)["cost"].(map[string]any)
		if cost["requestedQueryCost"].(float64) != 2+2*2 {
			t.Fatalf("requested cost %v, want 6 (2 + 2 customers of 2)", cost["requestedQueryCost"])
		}
		ts := cost["throttleStatus"].(map[string]any)
		if ts["maximumAvailable"].(float64) != 1000 || ts["restoreRate"].(float64) != 50 {
			t.Fatalf("throttleStatus %v", ts)
		}
		pi := conn["pageInfo"].(map[string]any)
		if pi["hasNextPage"] != true {
			break
		}
		after = pi["endCursor"]
	}
	var want []string
	for _, c := range append(first, later...) {
		want = append(want, c.GID())
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("pages read %v, want %v", got, want)
	}
	// The filter matches whole days by default, as Shopify documents
	// updated_at: ">=" a time starts at its midnight, ">" at the next day.
	filtered := func(url, q string) []any {
		a := post(t, url, token, page, map[string]any{"first": 10, "query": q})
		return a.body["data"].(map[string]any)["customers"].(map[string]any)["edges"].([]any)
	}
	if got := filtered(url, "updated_at:>='2026-01-01T00:30:00Z'"); len(got) != 5 {
		t.Fatalf("a whole day, >=: %d customers, want the day's 5", len(got))
	}
	if got := filtered(url, "updated_at:>'2026-01-01T00:30:00Z'"); len(got) != 0 {
		t.Fatalf("a whole day, >: %d customers, want none (the next day on)", len(got))
	}
	if got := filtered(url, "updated_at:'2026-01-01T23:00:00Z'"); len(got) != 5 {
		t.Fatalf("a whole day, =: %d customers, want the day's 5", len(got))
	}
	// To the second: only the later ones.
	fs, surl := newFake(t, fakeshopify.Options{Clock: fc, SearchGranularity: time.Second})
	fs.Put(first...)
	fs.Put(later...)
	edges := filtered(surl, "updated_at:>='2026-01-01T00:30:00Z'")
	if len(edges) != 2 || edges[0].(map[string]any)["node"].(map[string]any)["id"] != later[0].GID() {
		t.Fatalf("filtered to the second: %v", edges)
	}
	if got := filtered(surl, "updated_at:>'"+later[0].UpdatedAt.Format(time.RFC3339)+"'"); len(got) != 0 {
		t.Fatalf("to the second, >: %d customers, want none", len(got))
	}
}

func TestThrottledAndFaults(t *testing.T) {
	fc := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	f, url := newFake(t, fakeshopify.Options{Clock: fc})
	f.Seed(1)
	f.SetBucket(1000, 50, 5)
	a := post(t, url, token, page, map[string]any{"first": 10})
	code, _ := a.errCode(t)
	cost := a.body["extensions"].(map[string]any)["cost"].(map[string]any)
	if code != "THROTTLED" || a.status != 200 || cost["actualQueryCost"] != nil || cost["throttleStatus"].(map[string]any)["currentlyAvailable"].(float64) != 5 {
		t.Fatalf("got %d %s", a.status, a.raw)
	}
	fc.Advance(time.Second) // 55 points: enough for 22
	if a := post(t, url, token, page, map[string]any{"first": 10}); a.body["data"] == nil {
		t.Fatalf("after the restore: %s", a.raw)
	}
	f.Inject(fakeshopify.Fault{Status: 429, RetryAfter: "2.0"}, fakeshopify.Fault{Status: 503})
	if a := post(t, url, token, page, map[string]any{"first": 1}); a.status != 429 || a.header.Get("Retry-After") != "2.0" {
		t.Fatalf("429: %d %v", a.status, a.header)
	}
	if a := post(t, url, token, page, map[string]any{"first": 1}); a.status != 503 {
		t.Fatalf("503: %d", a.status)
	}
	if st := f.Stats(); st.Throttled != 1 || st.ByStatus["429"] != 1 || st.ByStatus["503"] != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestControlEndpoints(t *testing.T) {
	f, url := newFake(t, fakeshopify.Options{})
	resp, err := http.Post(url+"/_customers", "application/json", strings.NewReader(`{"seed": 5}`))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("seed: %v %v", resp, err)
	}
	resp.Body.Close()
	c := f.Seed(1)[0]
	body := `{"customers":[{"id":` + strings.TrimPrefix(c.GID(), "gid://shopify/Customer/") + `,"email":"changed@example.com","firstName":"Z"}]}`
	resp, err = http.Post(url+"/_customers", "application/json", strings.NewReader(body))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("upsert: %v %v", resp, err)
	}
	resp.Body.Close()
	got, ok := f.Customer(c.ID)
	if !ok || got.Email != "changed@example.com" || got.FirstName != "Z" {
		t.Fatalf("customer after upsert: %+v", got)
	}
	resp, err = http.Get(url + "/_stats")
	if err != nil {
		t.Fatal(err)
	}
	var st fakeshopify.Stats
	_ = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.Customers != 6 {
		t.Fatalf("stats customers %d, want 6", st.Customers)
	}
}
