package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

// TestRunOfAnEntryThatCannotRunIsRecorded: a run whose own config entry
// cannot be run (an environment variable cron's environment lacks) is a
// failed run the store keeps, so the breaker counts it (the owner's to fix)
// and pauses the sync after breaker_failures of them; before, such runs
// left no trace but the dead-man's silence (an independent check,
// 2026-12-07). A sync the store has never run gets no run, and no store is
// created for it.
func TestRunOfAnEntryThatCannotRunIsRecorded(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath, db := filepath.Join(dir, "oncesync.yaml"), filepath.Join(dir, "s.db")
	writeFile(t, cfgPath, `store: sqlite://`+db+`
settings: {breaker_failures: 3}
syncs:
  - id: hook
    workspace: acme
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: "http://127.0.0.1:1/hook", headers: {Authorization: "Bearer ${HOOK_TOKEN}"}}
`)
	run := func(token string) (string, int) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(t.Context(), []string{"run", "--config", cfgPath, "hook"}, Env{Stdout: &out, Stderr: &errOut,
			LookupEnv: func(k string) (string, bool) { return token, k == "HOOK_TOKEN" && token != "" }})
		return out.String() + errOut.String(), code
	}
	if out, code := run(""); code != ExitUsage || !strings.Contains(out, "failed: invalid_sync_definition") {
		t.Fatalf("first run without the variable: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(db); !os.IsNotExist(err) {
		t.Fatalf("a store was created for a sync that never ran: %v", err)
	}
	// A run with the variable set: the source file is missing (the
	// operator's to fix, not counted), and the store now knows the sync.
	if out, code := run("s3cret-token-value"); code != ExitFailed || !strings.Contains(out, "failed: source_unavailable") {
		t.Fatalf("run with the variable: exit %d\n%s", code, out)
	}
	for i := 1; i <= 3; i++ {
		out, code := run("")
		if code != ExitUsage || !strings.Contains(out, "failed: invalid_sync_definition") {
			t.Fatalf("run %d without the variable: exit %d\n%s", i, code, out)
		}
		if i == 3 && !strings.Contains(out, "sync hook is paused until a person resumes it") {
			t.Fatalf("the third recorded failure did not trip the breaker (breaker_failures 3):\n%s", out)
		}
	}
	st, err := sqlite.Open(context.Background(), sqlite.OpenParams{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, err := st.ListRuns(context.Background(), "hook", 10)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range runs {
		if r.State == store.RunFailed && r.FailureCode == string(failure.InvalidSyncDefinition) {
			n++
			if !strings.Contains(r.FailureDetail, "environment variable HOOK_TOKEN is not set") || strings.Contains(r.FailureDetail, "s3cret") {
				t.Errorf("recorded detail: %q", r.FailureDetail)
			}
		}
	}
	if n != 3 || len(runs) != 4 {
		t.Fatalf("%d runs, %d of them invalid_sync_definition; want 4 and 3", len(runs), n)
	}
	s, err := st.GetSync(context.Background(), "hook")
	if err != nil || s.State != store.SyncPaused || s.PauseReason != "breaker" {
		t.Fatalf("sync after 3 recorded failures: %+v, %v; want paused by the breaker", s, err)
	}
	// Paused, a run records nothing more.
	if _, code := run(""); code != ExitUsage {
		t.Fatalf("run of the paused sync: exit %d", code)
	}
	if runs, _ = st.ListRuns(context.Background(), "hook", 10); len(runs) != 4 {
		t.Fatalf("a paused sync got a run: %d runs", len(runs))
	}
}
