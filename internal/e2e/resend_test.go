package e2e

import (
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/testenv"
)

// byHand is a person changing Brevo directly: method on one contact.
func (tb *testBundle) byHand(t *testing.T, method, email, body string) {
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

// TestResend: a person deletes five contacts in Brevo and edits a sixth by
// hand. An ordinary run sends nothing (the ledger says Brevo holds every
// value); `run --resend --dry-run` says it would write all 30, and `run
// --resend` does, so every contact holds the source's values again; the run
// after it sends nothing.
func TestResend(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 30, pageSize: 10, mode: "bulk"})
	tb.runOK(t)
	for _, email := range tb.emails[:5] {
		tb.byHand(t, http.MethodDelete, email, "")
	}
	tb.byHand(t, http.MethodPut, tb.emails[5], `{"attributes":{"FIRSTNAME":"EditedByHand"}}`)
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

// TestResendFromTheAPI: the same story through `oncesync serve`: an
// operator's token asks for a run that sends everything again
// (POST /api/v1/syncs/contacts/run {"resend": true}); the queued run
// restores the deleted contacts, and the run after it sends nothing.
func TestResendFromTheAPI(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 30, pageSize: 10, mode: "bulk"})
	tb.runOK(t)
	for _, email := range tb.emails[:5] {
		tb.byHand(t, http.MethodDelete, email, "")
	}
	f, err := os.OpenFile(tb.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("web:\n  api_tokens:\n    - {name: ci, token: ci-token-0123456789, role: operator, workspaces: [acme]}\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + ln.Addr().String()
	ln.Close()
	p := tb.start("serve", "--config", tb.config, "--listen", strings.TrimPrefix(base, "http://"))
	t.Cleanup(func() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		p.Wait(t, 40*time.Second)
	})
	testenv.WaitFor(t, 30*time.Second, "serve to listen", func() bool {
		res, err := http.Get(base + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	call := func(method, path, body string, out any) int {
		t.Helper()
		req, err := http.NewRequest(method, base+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer ci-token-0123456789")
		if body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		if out != nil {
			if err := json.NewDecoder(res.Body).Decode(out); err != nil {
				t.Fatalf("%s %s: %v", method, path, err)
			}
		}
		return res.StatusCode
	}
	if code := call(http.MethodPost, "/api/v1/syncs/contacts/run", `{"resend":true}`, nil); code != http.StatusBadRequest {
		t.Fatalf("a resend without a reason: HTTP %d, want 400", code)
	}
	if code := call(http.MethodPost, "/api/v1/syncs/contacts/run", `{"resend":true,"why":"five contacts deleted in Brevo"}`, nil); code != http.StatusAccepted {
		t.Fatalf("resend: HTTP %d, want 202", code)
	}
	type runs struct {
		Runs []struct {
			State   string `json:"state"`
			Written int64  `json:"written"`
		} `json:"runs"`
	}
	testenv.WaitFor(t, 60*time.Second, "the queued resend to succeed", func() bool {
		var r runs
		call(http.MethodGet, "/api/v1/syncs/contacts/runs", "", &r)
		return len(r.Runs) == 2 && r.Runs[0].State == "succeeded"
	})
	var r runs
	call(http.MethodGet, "/api/v1/syncs/contacts/runs", "", &r)
	if r.Runs[0].Written != 30 {
		t.Fatalf("the resend wrote %d records, want 30", r.Runs[0].Written)
	}
	for i, email := range tb.emails {
		c, ok := tb.fake.Contact(email)
		if want := "First" + strconv.Itoa(i+1); !ok || c.Attributes["FIRSTNAME"] != want {
			t.Errorf("%s: %v %v, want FIRSTNAME %s", email, ok, c.Attributes, want)
		}
	}
	// Each contact once per run: the 25 Brevo still held are rewritten with
	// what they had (the fake counts those as duplicate writes), no more.
	if st := tb.stats(); st.Contacts != 30 || st.ContactsWritten != 60 || st.DuplicateWrites != 25 || st.Invalid != 0 {
		t.Fatalf("fake after the resend: %d contacts, %d written, %d rewritten as they were, %d invalid requests; want 30, 60, 25, 0",
			st.Contacts, st.ContactsWritten, st.DuplicateWrites, st.Invalid)
	}
}
