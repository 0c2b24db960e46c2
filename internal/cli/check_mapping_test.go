package cli

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
)

// TestCheckNamesAMissingColumn: `oncesync check` fails, as the run would,
// when the identity or a mapped column is not in the source's first record
// (an independent check, 2026-12-04: check said "every check passed" and
// the run then failed with invalid_sync_definition).
func TestCheckNamesAMissingColumn(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) }))
	t.Cleanup(hook.Close)
	const rows = "id,email\n1,a@example.com\n"
	for _, tc := range []struct{ name, body, source, mapping, want string }{
		{"identity", rows, "identity: idd", "{fields: {email: email}}", `"idd"`},
		{"field", rows, "identity: id", "{fields: {email: emial}}", `"emial"`},
		{"fine", rows, "identity: id", "{fields: {email: email}}", ""},
		// No rows: the header is checked, as a run checks it.
		{"header only", "foo,bar\n", "identity: id", "{fields: {email: email}}", `"email"`},
		{"header only, fine", "id,email\n", "identity: id", "{fields: {email: email}}", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			writeFile(t, filepath.Join(dir, "contacts.csv"), tc.body)
			cfg := filepath.Join(dir, "oncesync.yaml")
			writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: crm
    source: {type: csv, path: contacts.csv, `+tc.source+`}
    destination: {type: webhook, url: `+hook.URL+`}
    mapping: `+tc.mapping+`
`)
			var out, errOut bytes.Buffer
			code := Main(t.Context(), []string{"check", "--config", cfg, "crm"},
				Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			last := lines[len(lines)-1]
			if tc.want == "" {
				if code != ExitOK {
					t.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
				}
				return
			}
			if code != ExitFailed || !strings.HasPrefix(last, "failed: invalid_sync_definition: ") || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("exit %d, want %d, a last line failed: invalid_sync_definition and %s named:\n%s%s", code, ExitFailed, tc.want, out.String(), errOut.String())
			}
		})
	}
}
