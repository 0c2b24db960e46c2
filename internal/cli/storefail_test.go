package cli

import (
	"bytes"
	"database/sql"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "modernc.org/sqlite" // the test damages the store through SQLite itself
)

// TestStoreFailureAfterOpenIsAFailure: a store that opens but fails a read
// or write of a command (here a SQLite store whose audit table was dropped
// by hand) ends the command with exit 1 and the docs/guide.md#commands last
// line, `failed: <code>: ...`, not exit 2 and "error: ..." as for a bad
// flag (an independent check, 2026-12-04: `pause` answered exit 2).
func TestStoreFailureAfterOpenIsAFailure(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	cfg, db := filepath.Join(dir, "oncesync.yaml"), filepath.Join(dir, "s.db")
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	writeFile(t, cfg, `store: sqlite://`+db+`
syncs:
  - id: crm
    workspace: acme
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: `+hook.URL+`}
    mapping: {fields: {email: email}}
`)
	cmd := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), append(args[:1:1], append([]string{"--config", cfg}, args[1:]...)...),
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		return out.String(), errOut.String(), code
	}
	if out, errOut, code := cmd("run", "crm"); code != ExitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out, errOut)
	}
	h, err := sql.Open("sqlite", db)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Exec(`DROP TABLE audit`); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	out, errOut, code := cmd("pause", "crm", "--by", "Bo", "--reason", "test")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if code != ExitFailed || !strings.HasPrefix(last, "failed: internal_error: ") || !strings.Contains(last, " Next: ") ||
		!strings.Contains(out, "detail: ") || !strings.Contains(out, "no such table: audit") {
		t.Fatalf("pause on a damaged store: exit %d, stdout %q, stderr %q; want exit %d and a failed: last line with the detail",
			code, out, errOut, ExitFailed)
	}
	// records --format json|csv: stdout is data for a program, so a
	// failure (here the store no longer opens) is told on stderr and
	// stdout stays empty.
	if _, err := h.Exec(`DROP TABLE ledger_log`); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"json", "csv"} {
		out, errOut, code := cmd("records", "crm", "--format", format)
		if code != ExitFailed || out != "" || !strings.Contains(errOut, "failed: ") {
			t.Errorf("records --format %s on a damaged store: exit %d, stdout %q, stderr %q; want exit %d, nothing on stdout, the failed: line on stderr",
				format, code, out, errOut, ExitFailed)
		}
	}
}

// TestUnsetStoreVariableIsNamed: status, runs and records accept unset
// variables (a person reads a sync without its API keys), but not in store,
// which they all open: an unset ${PGPW} in the store URL was
// sent as a placeholder password, and the failure read as a wrong password
// or an unreachable server (an independent check, 2026-12-04). It is a
// usage error naming the variable; an unset destination key still is not.
func TestUnsetStoreVariableIsNamed(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	for _, tc := range []struct{ top, want string }{
		{`store: "postgres://oncesync:${PGPW}@127.0.0.1:1/oncesync"`, "store: environment variable PGPW is not set"},
		{`store: "sqlite://./${DB_NAME}.db"`, "store: environment variable DB_NAME is not set"},
	} {
		writeFile(t, cfg, tc.top+`
syncs:
  - id: crm
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: brevo, api_key: "${BREVO_API_KEY}", mode: single}
    mapping: {email: email}
`)
		for _, args := range [][]string{{"status"}, {"runs", "crm"}, {"records", "crm"}} {
			var out, errOut bytes.Buffer
			code := Main(t.Context(), append(args[:1:1], append([]string{"--config", cfg}, args[1:]...)...),
				Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
			if code != ExitUsage || !strings.Contains(errOut.String(), tc.want) || strings.Contains(out.String()+errOut.String(), "oncesync-unset-variable") {
				t.Errorf("%v with %s: exit %d, stdout %q, stderr %q; want exit %d and %q", args, tc.top, code, out.String(), errOut.String(), ExitUsage, tc.want)
			}
		}
	}
}

// TestUnsetVariableTakesItsDefault: in the commands that tolerate unset
// variables, ${VAR:-default} still takes its default (config.md), in the
// store's URL and in a sync's settings.
func TestUnsetVariableTakesItsDefault(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	writeFile(t, cfg, `store: "sqlite://./${STOREDIR:-store}/oncesync.db"
syncs:
  - id: crm
    source: {type: csv, path: contacts.csv, identity: id, page_size: "${PAGE_SIZE:-500}"}
    destination: {type: brevo, api_key: "${BREVO_API_KEY}", mode: single}
    mapping: {email: email}
`)
	if err := os.MkdirAll(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"status"}, {"runs", "crm"}, {"records", "crm"}} {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), append(args[:1:1], append([]string{"--config", cfg}, args[1:]...)...),
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		// runs and records of a sync that never ran say so; the config
		// itself must pass.
		if (args[0] == "status" && code != ExitOK) || strings.Contains(errOut.String(), "PAGE_SIZE") || strings.Contains(errOut.String(), "STOREDIR") {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
}
