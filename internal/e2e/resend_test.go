package e2e

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"testing"
)

// TestResend: a person deletes five contacts in Brevo and edits a sixth by
// hand. An ordinary run sends nothing (the ledger says Brevo holds every
// value); `run --resend --dry-run` says it would write all 30, and `run
// --resend` does, so every contact holds the source's values again; the run
// after it sends nothing.
func TestResend(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 30, pageSize: 10, mode: "bulk"})
	tb.runOK(t)
	byHand := func(method, email, body string) {
		t.Helper()
		req, err := http.NewRequest(method, tb.srv.URL+"/v3/contacts/"+url.PathEscape(email), strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("api-key", apiKey)
		req.Header.Set("content-type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			t.Fatalf("%s %s: HTTP %d", method, email, resp.StatusCode)
		}
	}
	for _, email := range tb.emails[:5] {
		byHand(http.MethodDelete, email, "")
	}
	byHand(http.MethodPut, tb.emails[5], `{"attributes":{"FIRSTNAME":"EditedByHand"}}`)
	if out := tb.runOK(t); !strings.Contains(out, "written 0, replayed from ledger 30") {
		t.Fatalf("an ordinary run after the deletes:\n%s", out)
	}
	if st := tb.stats(); st.Contacts != 25 {
		t.Fatalf("contacts %d, want 25 before the resend", st.Contacts)
	}
	if out := tb.runOK(t, "--resend", "--dry-run"); !strings.Contains(out, "update     30") || !strings.Contains(out, "from the start of the source") {
		t.Fatalf("resend dry run:\n%s", out)
	}
	if out := tb.runOK(t, "--resend"); !strings.Contains(out, "written 30, replayed from ledger 0") {
		t.Fatalf("resend:\n%s", out)
	}
	for i, email := range tb.emails {
		c, ok := tb.fake.Contact(email)
		if want := "First" + strconv.Itoa(i+1); !ok || c.Attributes["FIRSTNAME"] != want {
			t.Errorf("%s: %v %v, want FIRSTNAME %s", email, ok, c.Attributes, want)
		}
	}
	if st := tb.stats(); st.Invalid != 0 {
		t.Fatalf("%d requests did not conform to Brevo's spec", st.Invalid)
	}
	if out := tb.runOK(t); !strings.Contains(out, "written 0, replayed from ledger 30") {
		t.Fatalf("the run after the resend:\n%s", out)
	}
}
