package cli

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

func TestScrubber(t *testing.T) {
	t.Parallel()
	var s scrubber
	s.add([]string{"short", "tok-12345678", "Bearer tok-12345678"})
	s.add([]string{"second-secret-9"}) // a later load adds; the first load's stay
	var out bytes.Buffer
	w := scrubWriter{w: &out, s: &s}
	line := []byte("a Bearer tok-12345678 b tok-12345678 c second-secret-9 short\n")
	n, err := w.Write(line)
	if err != nil || n != len(line) {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(line))
	}
	if got, want := out.String(), "a [redacted] b [redacted] c [redacted] short\n"; got != want {
		t.Errorf("scrubbed %q, want %q", got, want)
	}
	if (scrubWriter{w: io.Discard, s: &s}).Unwrap() != io.Discard {
		t.Error("Unwrap does not give the stream written to")
	}
}

// TestOutputHidesEverySecretOfTheConfig: a secret of one part of the config
// (the alert webhook's signing secret) that a destination's refusal quotes
// back is stored in the record's message as [redacted] (the connector hides
// only its own secrets) and reaches neither stdout nor stderr, even in the
// debug log.
func TestOutputHidesEverySecretOfTheConfig(t *testing.T) {
	t.Parallel()
	const secret = "whsec-alerts-3f0c9a1e77"
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusUnprocessableEntity)
		_, _ = io.WriteString(w, `{"error":"signature must use `+secret+`"}`)
	}))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	db := filepath.Join(dir, "s.db")
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, cfg, `store: sqlite://`+db+`
alerts:
  webhook: {url: "http://127.0.0.1:1/alerts", secret: "${ALERT_SECRET}"}
syncs:
  - id: crm
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: "`+hook.URL+`/hook"}
    mapping: {fields: {email: email}}
`)
	env := map[string]string{"ALERT_SECRET": secret}
	out, errOut, code := cliRun(t, env, "--log-level", "debug", "run", "--config", cfg, "crm")
	if !strings.Contains(out, "rejected 1") {
		t.Fatalf("exit %d, want the record rejected\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	listed, listErr, _ := cliRun(t, env, "records", "--config", cfg, "crm", "--rejected")
	if !strings.Contains(listed, "[redacted]") || strings.Contains(out+errOut+listed+listErr, secret) {
		t.Errorf("the alert webhook's secret is in the output:\nrun:\n%s%s\nrecords:\n%s%s", out, errOut, listed, listErr)
	}
	st, err := sqlite.Open(t.Context(), sqlite.OpenParams{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	es, err := st.LedgerList(t.Context(), "crm", store.LedgerRejected, 0)
	if err != nil || len(es) != 1 || strings.Contains(es[0].Message, secret) || !strings.Contains(es[0].Message, "[redacted]") {
		t.Fatalf("stored refusals %+v, %v: want one, its message with the secret [redacted]", es, err)
	}
}
