package fakeshopify

import (
	"encoding/json"
	"testing"
)

// FuzzExecute: no document or variables make the fake panic; it answers
// data or errors, never both missing.
func FuzzExecute(f *testing.F) {
	for _, q := range []string{
		`{ customers(first: 2) { nodes { id email } pageInfo { hasNextPage endCursor } } }`,
		`query Q($f: Int!, $a: String) { customers(first: $f, after: $a, sortKey: UPDATED_AT, query: "updated_at:>='2024-01-01T00:00:00Z'") { edges { cursor node { id defaultEmailAddress { emailAddress } } } } }`,
		`{ nodes(ids: ["gid://shopify/Customer/1"]) { ... on Customer { id tags } } customersCount(limit: null) { count precision } }`,
		`{ customers(first: 1, after: "eyJsYXN0X2lkIjoxLCJsYXN0X3ZhbHVlIjoiMSJ9") { nodes { id } } }`,
		"{ a: customers(first: -1) { nodes { id } } }",
		`{ customers(first: 1, query: "id:>=1 AND bogus:2 free") { nodes { id } } }`,
	} {
		f.Add(q, `{"f": 2, "a": null}`)
	}
	s := New(Options{BucketSize: 1 << 30, RestoreRate: 1 << 30})
	s.Seed(5)
	f.Fuzz(func(t *testing.T, query, vars string) {
		var raw map[string]json.RawMessage
		_ = json.Unmarshal([]byte(vars), &raw)
		_, body := s.execute("2025-07", query, raw, false)
		var out map[string]json.RawMessage
		if err := json.Unmarshal(body, &out); err != nil {
			t.Fatalf("answer is not JSON: %s", body)
		}
		if out["data"] == nil && out["errors"] == nil {
			t.Fatalf("answer without data or errors: %s", body)
		}
	})
}
