package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/oncesync/oncesync/internal/testenv"
)

// TestServeRestartKeepsSession: a person signs in to `oncesync serve`
// (web.users with a role), serve is stopped and started again over the
// same store, and the browser's session still works. On the way, a named
// operator token pauses the sync with a forged "by" and the audit log
// names the token; a viewer token is refused.
func TestServeRestartKeepsSession(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 10, pageSize: 10, mode: "bulk"})
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret-pass"), bcrypt.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	web := fmt.Sprintf(`web:
  users:
    alice: {hash: %q, role: operator, workspaces: [acme]}
  api_tokens:
    - {name: ci, token: ci-token-0123456789, role: operator, workspaces: [acme]}
    - {name: dash, token: dash-token-0123456789, role: viewer}
`, hash)
	f, err := os.OpenFile(tb.config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(web); err != nil {
		t.Fatal(err)
	}
	f.Close()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	base := "http://" + addr
	serve := func() *proc {
		p := tb.start("serve", "--config", tb.config, "--listen", addr)
		testenv.WaitFor(t, 30*time.Second, "serve to listen", func() bool {
			res, err := http.Get(base + "/healthz")
			if err != nil {
				return false
			}
			res.Body.Close()
			return res.StatusCode == http.StatusOK
		})
		return p
	}
	stop := func(p *proc) {
		if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if code := p.Wait(t, 40*time.Second); code != 0 {
			t.Fatalf("serve exited %d:\n%s", code, p.Out)
		}
	}

	p := serve()
	jar, _ := cookiejar.New(nil)
	c := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	res, err := c.Get(base + "/login")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	u, _ := url.Parse(base)
	var csrf string
	for _, ck := range jar.Cookies(u) {
		if ck.Name == "oncesync_login" {
			csrf = ck.Value
		}
	}
	res, err = c.PostForm(base+"/login", url.Values{"user": {"alice"}, "password": {"s3cret-pass"}, "csrf": {csrf}, "next": {"/syncs/contacts"}})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || !strings.Contains(string(body), "alice") || res.Request.URL.Path != "/syncs/contacts" {
		t.Fatalf("sign-in: %d at %s", res.StatusCode, res.Request.URL)
	}

	api := func(token, method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	if code, _ := api("dash-token-0123456789", "POST", "/api/v1/syncs/contacts/pause", `{"why":"x"}`); code != http.StatusForbidden {
		t.Errorf("viewer token pause: %d", code)
	}
	if code, b := api("ci-token-0123456789", "POST", "/api/v1/syncs/contacts/pause", `{"by":"ceo@example.com (forged)","why":"maintenance"}`); code != http.StatusOK {
		t.Fatalf("operator token pause: %d %s", code, b)
	}
	_, b := api("dash-token-0123456789", "GET", "/api/v1/audit?sync=contacts&limit=1", "")
	var audit struct {
		Entries []struct{ Action, By, Why string }
	}
	if err := json.Unmarshal([]byte(b), &audit); err != nil || len(audit.Entries) != 1 || audit.Entries[0].By != "ci" || audit.Entries[0].Action != "pause" {
		t.Errorf("audit %s: %v", b, err)
	}

	stop(p)
	p = serve()
	defer stop(p)
	res, err = c.Get(base + "/syncs/contacts")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != "/syncs/contacts" || !strings.Contains(string(body), "alice") {
		t.Fatalf("after a restart: %d at %s", res.StatusCode, res.Request.URL)
	}
	if !strings.Contains(string(body), "Paused by ci") {
		t.Errorf("the sync page does not say the token paused it")
	}
}
