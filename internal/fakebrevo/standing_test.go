package fakebrevo

import (
	"net/http"
	"testing"
)

// TestStandingChangesMidRun: an account whose key is revoked, whose credits
// run out or whose permissions are removed after a sync started answers
// every call with Brevo's error (standing.go) and applies nothing; restored,
// it works again with the contacts it had.
func TestStandingChangesMidRun(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	b.mustStatus(b.do(http.MethodPost, "/v3/contacts", map[string]any{"email": "a@example.com"}), http.StatusCreated)
	for _, tt := range []struct {
		state  string
		status int
		code   string
	}{
		{StandingRevoked, http.StatusUnauthorized, CodeUnauthorized},
		{StandingNoCredits, http.StatusPaymentRequired, "not_enough_credits"},
		{StandingForbidden, http.StatusForbidden, "permission_denied"},
		{StandingUnvalidated, http.StatusForbidden, "account_under_validation"},
	} {
		b.mustStatus(b.send(b.raw, http.MethodPost, "/_standing?state="+tt.state, nil, nil), http.StatusNoContent)
		for _, r := range []resp{
			b.do(http.MethodPost, "/v3/contacts", map[string]any{"email": "b@example.com"}),
			b.do(http.MethodGet, "/v3/contacts/a%40example.com", nil),
		} {
			if r.status != tt.status || r.errCode(t).Code != tt.code {
				t.Errorf("%s: answered %d %s, want %d %s", tt.state, r.status, r.body, tt.status, tt.code)
			}
		}
	}
	if st := b.srv.Stats(); st.Contacts != 1 || st.ContactsWritten != 1 {
		t.Errorf("stats %+v: a refused account applied a write", st)
	}
	b.mustStatus(b.send(b.raw, http.MethodPost, "/_standing?state=nonsense", nil, nil), http.StatusBadRequest)
	b.mustStatus(b.send(b.raw, http.MethodPost, "/_standing?state=ok", nil, nil), http.StatusNoContent)
	b.mustStatus(b.do(http.MethodPost, "/v3/contacts", map[string]any{"email": "b@example.com"}), http.StatusCreated)
	if err := (Options{Standing: "suspended-ish"}).Check(); err == nil {
		t.Error("Check accepted an unknown standing")
	}
}
