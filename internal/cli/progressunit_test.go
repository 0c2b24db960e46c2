package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/oncesync/oncesync/internal/testenv"
)

// TestRunBarUnitOfParquet: a Parquet source tells its position in rows, not
// bytes, so the bar of `oncesync run` counts records (an independent check,
// 2026-12-04: it printed "30/30 bytes" for 30 rows).
func TestRunBarUnitOfParquet(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	type row struct {
		ID    int64  `parquet:"id"`
		Email string `parquet:"email"`
	}
	rows := []row{{1, "a@example.com"}, {2, "b@example.com"}, {3, "c@example.com"}}
	if err := pq.WriteFile(filepath.Join(dir, "part-1.parquet"), rows); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: exports
    source: {type: parquet, path: `+dir+`/, identity: id}
    destination: {type: webhook, url: `+hook.URL+`}
    mapping: {fields: {email: email}}
`)
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"run", "--config", cfg, "exports"},
		Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
	if code != ExitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "3/3 records") || strings.Contains(out.String(), "bytes") {
		t.Fatalf("the bar should count 3/3 records:\n%s", out.String())
	}
}

// TestRunWarnsOfAnotherConfigsSync: two configs on one store with one sync
// id took turns publishing it, and each run wrote every record again,
// silently (an independent check, 2026-12-06). A run that moves the sync to
// another workspace says so on stderr; a run that does not, says nothing.
func TestRunWarnsOfAnotherConfigsSync(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	run := func(workspace string) string {
		cfg := filepath.Join(dir, workspace+".yaml")
		writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: contacts
    workspace: `+workspace+`
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: `+hook.URL+`}
    mapping: {fields: {email: email}}
`)
		var out, errOut bytes.Buffer
		if code := Main(t.Context(), []string{"run", "--config", cfg, "contacts"},
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }}); code != 0 {
			t.Fatalf("run of %s: exit %d\n%s%s", workspace, code, out.String(), errOut.String())
		}
		return errOut.String()
	}
	// The first run is told the sync never ran on this store (a mistyped
	// store path would make every run a first one).
	const warning, notice = "warning: sync contacts of this store is in workspace", "notice: sync contacts has never run on "
	for i, tc := range []struct {
		workspace string
		warns     bool
	}{{"team-a", false}, {"team-a", false}, {"team-b", true}, {"team-a", true}} {
		got := run(tc.workspace)
		if strings.Contains(got, warning) != tc.warns {
			t.Errorf("run %d (%s): stderr %q; want the warning: %v", i+1, tc.workspace, got, tc.warns)
		}
		if strings.Contains(got, notice+filepath.Join(dir, "s.db")) != (i == 0) {
			t.Errorf("run %d: stderr %q; want the never-run notice on the first run only", i+1, got)
		}
	}
}

// TestFailedLineLastAfterAHeartbeat: with a heartbeat_url whose monitor does
// not answer, the heartbeat's warning came after the failed: line when
// stdout and stderr were read together (an independent check, 2026-12-06);
// the failed: line is the last.
func TestFailedLineLastAfterAHeartbeat(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusBadRequest) }))
	t.Cleanup(hook.Close)
	monitor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNotImplemented) }))
	t.Cleanup(monitor.Close)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: contacts
    heartbeat_url: `+monitor.URL+`/ping
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: `+hook.URL+`}
    mapping: {fields: {email: email}}
`)
	var both testenv.Output // stdout and stderr in one, as a terminal shows them
	code := Main(t.Context(), []string{"run", "--config", cfg, "contacts"},
		Env{Stdout: &both, Stderr: &both, LookupEnv: func(string) (string, bool) { return "", false }})
	lines := strings.Split(strings.TrimSpace(both.String()), "\n")
	if code != ExitFailed || !strings.HasPrefix(lines[len(lines)-1], "failed: ") || !strings.Contains(both.String(), "heartbeat failed") {
		t.Fatalf("exit %d; want the heartbeat's warning, then the failed: line last:\n%s", code, both.String())
	}
}

// TestStoredFailureHidesSecrets: a run that failed before it started keeps
// its detail in the store with the config's secrets hidden, as the printed
// lines hide them: a MySQL password that was also part of its socket's path
// was stored in clear (an independent check, 2026-12-06).
func TestStoredFailureHidesSecrets(t *testing.T) {
	t.Parallel()
	const pw = "S3cretPW9x"
	dir := t.TempDir()
	cfg := filepath.Join(dir, "oncesync.yaml")
	dbPath := filepath.Join(dir, "s.db")
	writeFile(t, cfg, `store: sqlite://`+dbPath+`
syncs:
  - id: people
    source: {type: mysql, dsn: "root:${MYPW}@unix(`+filepath.Join(dir, "nosock-${MYPW}")+`)/crm", table: people, cursor_column: id, identity: id}
    destination: {type: webhook, url: http://127.0.0.1:1/hook}
    mapping: {fields: {email: email}}
`)
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"run", "--config", cfg, "people"}, Env{Stdout: &out, Stderr: &errOut,
		LookupEnv: func(k string) (string, bool) { return pw, k == "MYPW" }})
	if code == 0 || strings.Contains(out.String()+errOut.String(), pw) {
		t.Fatalf("exit %d; the output must not hold the password:\n%s%s", code, out.String(), errOut.String())
	}
	db, err := os.ReadFile(dbPath)
	if err != nil {
		t.Fatal(err)
	}
	wal, _ := os.ReadFile(dbPath + "-wal")
	if strings.Contains(string(db)+string(wal), pw) {
		t.Fatal("the store holds the password")
	}
}
