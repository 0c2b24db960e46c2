package fakebrevo

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestValidatorRequests(t *testing.T) {
	t.Parallel()
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	if p := v.SpecPatches(); len(p) != 4 {
		t.Errorf("spec patches = %q, want the four documented ones", p)
	}
	tests := []struct {
		name, method, path, body string
		noKey                    bool
		wantOp                   string
		wantErr                  error
		wantMsg                  string
	}{
		{name: "createContact", method: "POST", path: "/v3/contacts", body: `{"email":"ann@example.com","attributes":{"A":1},"listIds":[1],"updateEnabled":true}`, wantOp: "createContact"},
		{name: "createContact bad email", method: "POST", path: "/v3/contacts", body: `{"email":"ann.example.com"}`, wantOp: "createContact", wantErr: ErrInvalidRequest, wantMsg: "email"},
		{name: "createContact list ids", method: "POST", path: "/v3/contacts", body: `{"email":"ann@example.com","listIds":"1"}`, wantOp: "createContact", wantErr: ErrInvalidRequest, wantMsg: "listIds"},
		{name: "createContact without body", method: "POST", path: "/v3/contacts", wantOp: "createContact", wantErr: ErrInvalidRequest, wantMsg: "body"},
		{name: "no api-key", method: "GET", path: "/v3/contacts", noKey: true, wantOp: "getContacts", wantErr: ErrInvalidRequest, wantMsg: "api-key"},
		{name: "getContacts", method: "GET", path: "/v3/contacts?limit=1000&offset=5&sort=asc&modifiedSince=2025-01-01T00%3A00%3A00.000Z", wantOp: "getContacts"},
		{name: "getContacts sort", method: "GET", path: "/v3/contacts?sort=up", wantOp: "getContacts", wantErr: ErrInvalidRequest, wantMsg: "sort"},
		{name: "getContactInfo", method: "GET", path: "/v3/contacts/ann%40example.com", wantOp: "getContactInfo"},
		{name: "updateContact", method: "PUT", path: "/v3/contacts/ann%40example.com", body: `{"attributes":{"A":"b"},"unlinkListIds":[3]}`, wantOp: "updateContact"},
		{name: "importContacts", method: "POST", path: "/v3/contacts/import", body: `{"jsonBody":[{"email":"ann@example.com","attributes":{"A":"b"}}],"listIds":[2],"updateExistingContacts":true}`, wantOp: "importContacts"},
		{name: "importContacts rows", method: "POST", path: "/v3/contacts/import", body: `{"jsonBody":[{"email":1}],"listIds":[2]}`, wantOp: "importContacts", wantErr: ErrInvalidRequest, wantMsg: "jsonBody"},
		{name: "getProcess", method: "GET", path: "/v3/processes/12", wantOp: "getProcess"},
		{name: "getProcess id", method: "GET", path: "/v3/processes/x", wantOp: "getProcess", wantErr: ErrInvalidRequest, wantMsg: "processId"},
		{name: "getProcesses", method: "GET", path: "/v3/processes?limit=50", wantOp: "getProcesses"},
		{name: "getProcesses limit", method: "GET", path: "/v3/processes?limit=51", wantOp: "getProcesses", wantErr: ErrInvalidRequest, wantMsg: "limit"},
		{name: "unknown path", method: "GET", path: "/v3/nothing/here", wantErr: ErrNotInSpec},
		{name: "unknown method", method: "PATCH", path: "/v3/contacts", body: `{}`, wantErr: ErrNotInSpec},
		{name: "outside the base path", method: "GET", path: "/contacts", wantErr: ErrNotInSpec},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := httptest.NewRequest(tt.method, tt.path, nil)
			if !tt.noKey {
				r.Header.Set("api-key", "k")
			}
			var body []byte
			if tt.body != "" {
				body = []byte(tt.body)
				r.Header.Set("Content-Type", "application/json")
			}
			op, opErr := v.Operation(r)
			if op != tt.wantOp {
				t.Errorf("operation = %q (%v), want %q", op, opErr, tt.wantOp)
			}
			err := v.ValidateRequest(r, body)
			if !errors.Is(err, tt.wantErr) || (err != nil && !strings.Contains(err.Error(), tt.wantMsg)) {
				t.Errorf("ValidateRequest = %v, want %v ~%q", err, tt.wantErr, tt.wantMsg)
			}
			if err != nil && strings.Contains(err.Error(), "ann@") {
				t.Errorf("error carries an e-mail address: %v", err)
			}
		})
	}
}

func TestValidatorResponses(t *testing.T) {
	t.Parallel()
	v, err := NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	get := httptest.NewRequest("GET", "/v3/contacts/ann%40example.com", nil)
	get.Header.Set("api-key", "k")
	jsonHeader := http.Header{"Content-Type": {"application/json"}}
	tests := []struct {
		name   string
		status int
		body   string
		ok     bool
	}{
		{"contact", 200, `{"id":1,"email":"ann@example.com","emailBlacklisted":false,"smsBlacklisted":false,"createdAt":"x","modifiedAt":"y","listIds":[],"attributes":{},"statistics":{}}`, true},
		{"contact without statistics", 200, `{"id":1,"email":"ann@example.com","emailBlacklisted":false,"smsBlacklisted":false,"createdAt":"x","modifiedAt":"y","listIds":[],"attributes":{}}`, false},
		{"not found", 404, `{"code":"document_not_found","message":"Contact does not exist"}`, true},
		{"unknown error code", 404, `{"code":"nope","message":"x"}`, false},
		{"undocumented status", 429, `{"code":"too_many_requests","message":"x"}`, true},
	}
	for _, tt := range tests {
		err := v.ValidateResponse(get, tt.status, jsonHeader, []byte(tt.body))
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalidResponse)) {
			t.Errorf("%s: ValidateResponse = %v", tt.name, err)
		}
	}
}

// TestProxyRejectsInvalidRequests checks that a request breaking the spec is
// answered 400 by the proxy, recorded, and never reaches the fake.
func TestProxyRejectsInvalidRequests(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{}, true)
	r := b.do("POST", "/v3/contacts", m{"email": "ann@example.com", "listIds": []string{"x"}})
	b.mustStatus(r, http.StatusBadRequest)
	if e := r.errCode(t); e.Code != CodeInvalidParameter || !strings.Contains(e.Message, "listIds") {
		t.Errorf("error = %+v", e)
	}
	if st := b.srv.Stats(); st.Requests != 0 {
		t.Errorf("the invalid request reached the fake: %+v", st)
	}
	b.mustStatus(b.do("GET", "/v3/contacts", nil), http.StatusOK)
	if errs := b.proxy.Errors(); len(errs) != 1 || !errors.Is(errs[0], ErrInvalidRequest) || b.proxy.Checked() != 2 {
		t.Errorf("proxy errors = %v, checked %d", errs, b.proxy.Checked())
	}
}
