package e2e

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeSaysNobodyCanSignIn: a first `oncesync serve` of a config
// without web.users, web.oidc or web.api_tokens announced a web UI and then
// showed a sign-in form that no name passes, with no word why (an
// independent check, 2026-12-04). Next to its start line it now says so,
// and what to set.
func TestServeSaysNobodyCanSignIn(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 1, pageSize: 10, mode: "single"})
	s := tb.start("serve", "--config", tb.config, "--listen", "127.0.0.1:0", "--workers", "1")
	waitFor(t, 30*time.Second, "serve's start line", func() bool { return strings.Contains(s.Out.String(), "oncesync serve: ") })
	want := "notice: nobody can sign in to the web UI or call /api/v1 and /metrics: set web.users (or web.oidc) and web.api_tokens"
	waitFor(t, 5*time.Second, "the sign-in notice", func() bool { return strings.Contains(s.Out.String(), want) })
	if err := s.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := s.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("serve exited %d:\n%s", code, s.Out)
	}
}
