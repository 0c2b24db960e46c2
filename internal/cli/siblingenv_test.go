package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestAnotherSyncsUnsetVariable: a sync run on its own (from cron) is not
// stopped by another sync's unset ${VAR}: run, its dry run, check and
// records of crm pass while BREVO_API_KEY and CRM_DB_PASSWORD, which only
// the sync brevo needs, are unset. The sync that needs them, validate, and
// serve and worker (they run every sync) still name them, by file, line and
// field (docs/config.md#environment-variables).
func TestAnotherSyncsUnsetVariable(t *testing.T) {
	t.Parallel()
	posts := new(atomic.Int64)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hook.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: crm
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: `+hook.URL+`, secret: "${HOOK_SECRET:-plain}"}
    mapping: {fields: {email: email}}
  - id: brevo
    source: {type: postgres, dsn: "postgres://reader:${CRM_DB_PASSWORD}@127.0.0.1:1/crm", table: people, identity: id}
    destination: {type: brevo, api_key: ${BREVO_API_KEY}, mode: single}
    mapping: {email: email}
`)
	cmd := func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), append(args[:1:1], append([]string{"--config", cfg}, args[1:]...)...),
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		return out.String() + errOut.String(), code
	}
	for _, args := range [][]string{{"check", "crm"}, {"run", "crm", "--dry-run"}, {"run", "crm"}, {"records", "crm"}} {
		if out, code := cmd(args...); code != ExitOK || strings.Contains(out, "not set") {
			t.Fatalf("%v: exit %d, want %d\n%s", args, code, ExitOK, out)
		}
	}
	if posts.Load() != 1 {
		t.Fatalf("the webhook got %d requests, want the run's 1", posts.Load())
	}
	for _, args := range [][]string{{"run", "brevo"}, {"run", "brevo", "--dry-run"}, {"check", "brevo"}, {"validate"}, {"serve"}, {"worker"}} {
		out, code := cmd(args...)
		if code != ExitUsage ||
			!strings.Contains(out, cfg+":8: syncs[1].source.dsn: environment variable CRM_DB_PASSWORD is not set") ||
			!strings.Contains(out, cfg+":9: syncs[1].destination.api_key: environment variable BREVO_API_KEY is not set") {
			t.Errorf("%v: exit %d, want %d and both variables named by file, line and field\n%s", args, code, ExitUsage, out)
		}
	}
	// A sync that is not in the file is named as a typo, not as another
	// sync's variables.
	if out, code := cmd("run", "crn"); code != ExitUsage || !strings.Contains(out, `no sync with id "crn" (syncs: crm, brevo)`) {
		t.Errorf("run crn: exit %d\n%s", code, out)
	}
}
