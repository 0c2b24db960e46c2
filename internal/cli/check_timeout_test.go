package cli

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestCheckOfADestinationThatNeverAnswers: `oncesync check` against a
// destination that takes the connection and never answers ends, with exit 1
// and the destination_unavailable line, once one request has gone
// destination.timeout without an answer (here 300ms); it used to retry it
// with backoff like a run, silent for minutes with the default 30s.
func TestCheckOfADestinationThatNeverAnswers(t *testing.T) {
	t.Parallel()
	requests := new(atomic.Int64)
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		<-r.Context().Done() // the client gave up
	}))
	t.Cleanup(silent.Close)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: crm
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: brevo, base_url: `+silent.URL+`/v3, api_key: xkeysib-test, mode: single, timeout: 300ms}
    mapping: {email: email}
`)
	// The bound of the test itself: without one, a check that retries
	// would hold it for as long as its backoff draws.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var out, errOut bytes.Buffer
	start := time.Now()
	code := Main(ctx, []string{"check", "--config", cfg, "crm"},
		Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
	took := time.Since(start)
	all := out.String() + errOut.String()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != ExitFailed || !strings.HasPrefix(lines[len(lines)-1], "failed: destination_unavailable: ") ||
		!strings.Contains(all, "brevo did not answer GET /account within 300ms") {
		t.Fatalf("exit %d, want %d, the destination_unavailable line and that brevo did not answer within 300ms:\n%s", code, ExitFailed, all)
	}
	if n := requests.Load(); n != 1 || took > 5*time.Second {
		t.Errorf("%d requests in %s; want one, then the check's end\n%s", n, took, all)
	}
}
