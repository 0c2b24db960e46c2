package e2e

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// TestCheckCommand: `oncesync check` reads one source record and the Brevo
// account and lists, writes nothing, and names what is wrong: a list the
// account lacks, an attribute it lacks (a run refuses it too), a refused key.
func TestCheckCommand(t *testing.T) {
	t.Parallel()
	check := func(tb *testBundle, key string) (string, int) {
		t.Helper()
		cmd := exec.Command(binary, "check", "--config", tb.config, "contacts")
		cmd.Dir = tb.dir
		cmd.Env = append(os.Environ(), "BREVO_API_KEY="+key)
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}

	ok := setup(t, setupParams{records: 10, pageSize: 10, mode: "bulk"})
	out, code := check(ok, apiKey)
	if code != 0 || !strings.Contains(out, "its first record was read") || !strings.Contains(out, "list 2 exists") ||
		!strings.Contains(out, "every check passed; nothing was written") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	st := ok.stats()
	if st.ContactsWritten != 0 || st.ByRoute["GET /v3/account"] != 1 || st.Invalid != 0 {
		t.Fatalf("fake after check: %+v", st)
	}

	noList := setup(t, setupParams{records: 10, pageSize: 10, mode: "bulk", opts: fakebrevo.Options{Lists: []int64{5}}})
	out, code = check(noList, apiKey)
	if code != 1 || !strings.Contains(out, "failed: invalid_sync_definition:") || !strings.Contains(out, "brevo list 2 does not exist") {
		t.Fatalf("missing list: exit %d:\n%s", code, out)
	}

	// An account without LASTNAME: Brevo would drop every last name without
	// an error, so check names it and a run sends nothing.
	noAttr := setup(t, setupParams{records: 10, pageSize: 10, mode: "bulk",
		opts: fakebrevo.Options{Attributes: []fakebrevo.Attribute{{Name: "FIRSTNAME", Category: "normal", Type: "text"}}}})
	out, code = check(noAttr, apiKey)
	if code != 1 || !strings.Contains(out, "failed: invalid_sync_definition:") || !strings.Contains(out, "brevo: attribute LASTNAME does not exist in this account") {
		t.Fatalf("missing attribute: exit %d:\n%s", code, out)
	}
	run := noAttr.startRun()
	if code := run.Wait(t, time.Minute); code != 1 || !strings.HasPrefix(run.LastLine(), "failed: invalid_sync_definition:") ||
		!strings.Contains(run.Out.String(), "brevo: attribute LASTNAME does not exist") {
		t.Fatalf("run with a missing attribute: exit %d:\n%s", code, run.Out.String())
	}
	if st := noAttr.stats(); st.ContactsWritten != 0 || st.ByRoute["POST /v3/contacts/import"] != 0 {
		t.Fatalf("the run wrote: %+v", st)
	}

	out, code = check(ok, "wrong-key")
	if code != 1 || !strings.Contains(out, "failed: destination_auth:") || strings.Contains(out, "wrong-key") {
		t.Fatalf("bad key: exit %d:\n%s", code, out)
	}
}
