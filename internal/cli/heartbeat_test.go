package cli

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// pinger records the heartbeats it receives.
type pinger struct {
	mu    sync.Mutex
	paths []string
	srv   *httptest.Server
}

func newPinger(t *testing.T) *pinger {
	t.Helper()
	p := &pinger{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		p.mu.Lock()
		p.paths = append(p.paths, r.Method+" "+r.URL.Path)
		p.mu.Unlock()
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *pinger) take() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.paths
	p.paths = nil
	return out
}

// cliEnv runs Main in process and returns stdout, stderr and the exit code.
func cliRun(t *testing.T, env map[string]string, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), args, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}})
	return out.String(), errOut.String(), code
}

func writeFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRunSendsHeartbeat is docs/guide.md#telling-silence-from-outside's heartbeat on the foreground path
// (`oncesync run` from cron, no serve): a successful run requests the
// sync's heartbeat_url, a failed one heartbeat_url/fail; the URL's token
// shows in no output.
func TestRunSendsHeartbeat(t *testing.T) {
	t.Parallel()
	const token = "3f0c9a1e-hb-s3cret"
	ping := newPinger(t)
	okHook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(okHook.Close)
	authHook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusUnauthorized)
	}))
	t.Cleanup(authHook.Close)

	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n2,b@example.com\n")
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: good
    heartbeat_url: "`+ping.srv.URL+`/ping/${HC_TOKEN}"
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: "`+okHook.URL+`/hook"}
  - id: refused
    heartbeat_url: "`+ping.srv.URL+`/ping/${HC_TOKEN}"
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: "`+authHook.URL+`/hook"}
  - id: quiet
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: "`+okHook.URL+`/hook"}
`)
	env := map[string]string{"HC_TOKEN": token}

	out, errOut, code := cliRun(t, env, "run", "--config", cfg, "good")
	if code != ExitOK {
		t.Fatalf("run good: exit %d\n%s%s", code, out, errOut)
	}
	if got := ping.take(); len(got) != 1 || got[0] != "POST /ping/"+token {
		t.Fatalf("heartbeats after a success: %q, want one POST /ping/TOKEN", got)
	}
	out2, errOut2, code := cliRun(t, env, "run", "--config", cfg, "refused")
	if code != ExitFailed || !strings.Contains(out2, "failed: destination_auth") {
		t.Fatalf("run refused: exit %d\n%s%s", code, out2, errOut2)
	}
	if got := ping.take(); len(got) != 1 || got[0] != "POST /ping/"+token+"/fail" {
		t.Fatalf("heartbeats after a failure: %q, want one POST /ping/TOKEN/fail", got)
	}
	if _, _, code := cliRun(t, env, "run", "--config", cfg, "quiet"); code != ExitOK {
		t.Fatalf("run quiet: exit %d", code)
	}
	if got := ping.take(); len(got) != 0 {
		t.Fatalf("a sync without heartbeat_url sent %q", got)
	}
	for _, s := range []string{out, errOut, out2, errOut2} {
		if strings.Contains(s, token) {
			t.Errorf("output shows the heartbeat token:\n%s", s)
		}
	}
}

// TestRunHeartbeatFailureKeepsExitCode: a monitor that is down changes
// nothing about the run.
func TestRunHeartbeatFailureKeepsExitCode(t *testing.T) {
	t.Parallel()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNotFound) // not retried: the test stays quick
	}))
	t.Cleanup(down.Close)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: good
    heartbeat_url: "`+down.URL+`/ping/tok-s3cret-abcdef"
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: "`+hook.URL+`/hook"}
`)
	out, errOut, code := cliRun(t, nil, "--log-level", "warn", "run", "--config", cfg, "good")
	if code != ExitOK {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if !strings.Contains(errOut, "heartbeat failed") || strings.Contains(errOut, "tok-s3cret-abcdef") {
		t.Errorf("stderr %q: want the failed heartbeat logged without its URL", errOut)
	}
}
