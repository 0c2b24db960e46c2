package cli

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestRunRecordsASourceThatRefusesAtTheStart: a database source that does
// not answer when `oncesync run` sets it up is a failed run, recorded as
// serve's workers record it, with its /fail heartbeat (it left no trace:
// no run, a breaker that never counted and a dead-man that said no run had
// ever been recorded, blaming the scheduler).
func TestRunRecordsASourceThatRefusesAtTheStart(t *testing.T) {
	t.Parallel()
	ping := newPinger(t)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(hook.Close)
	// A port nothing listens on: the connection is refused.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	dir := t.TempDir()
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: pg
    heartbeat_url: "`+ping.srv.URL+`/ping/pg"
    source: {type: postgres, dsn: "postgres://oncesync@`+addr+`/app?connect_timeout=5", table: contacts, cursor_column: id, identity: id}
    destination: {type: webhook, url: "`+hook.URL+`/hook"}
    mapping: {fields: {id: id}}
`)
	for i := 1; i <= 2; i++ {
		out, errOut, code := cliRun(t, nil, "run", "--config", cfg, "pg")
		if code != ExitFailed || !strings.Contains(out, "failed: source_unavailable") {
			t.Fatalf("run %d: exit %d\n%s%s", i, code, out, errOut)
		}
		if got := ping.take(); len(got) != 1 || got[0] != "POST /ping/pg/fail" {
			t.Fatalf("heartbeats after run %d: %q, want one POST /ping/pg/fail", i, got)
		}
	}
	out, errOut, code := cliRun(t, nil, "runs", "--config", cfg, "pg")
	if code != ExitOK || strings.Count(out, "source_unavailable") != 2 {
		t.Fatalf("runs: exit %d, want both failed runs listed with their code:\n%s%s", code, out, errOut)
	}
}
