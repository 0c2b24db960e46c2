package cli

import (
	"bytes"
	"errors"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestRunOfAPausedSync: `oncesync run` of a sync a person paused exits 1 with
// the contract's last line, `failed: sync_paused: ... Next: ... (owner:
// you)`, naming who paused it and why; nothing is read or sent.
func TestRunOfAPausedSync(t *testing.T) {
	t.Parallel()
	posts, cmd := webhookSync(t)
	if out, code := cmd("run", "crm"); code != ExitOK {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	sent := posts.Load()
	if out, code := cmd("pause", "crm", "--by", "Bo", "--reason", "campaign over"); code != ExitOK {
		t.Fatalf("pause: exit %d\n%s", code, out)
	}
	out, code := cmd("run", "crm")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	last := lines[len(lines)-1]
	if code != ExitFailed || !strings.HasPrefix(last, "failed: sync_paused: ") || !strings.Contains(last, "Next: ") ||
		!strings.HasSuffix(last, "(owner: you)") || !strings.Contains(out, "person by Bo: campaign over") {
		t.Fatalf("run of a paused sync: exit %d, last line %q\n%s", code, last, out)
	}
	if posts.Load() != sent {
		t.Error("the paused sync sent a request")
	}
}

// TestPauseBeforeTheFirstRun: a sync of the config that never ran can be
// paused (before the cron line that would start it). It answered "has not
// run on this store yet; start it with `oncesync run`", exit 2: the one
// thing the person meant to prevent. The run that follows is refused.
func TestPauseBeforeTheFirstRun(t *testing.T) {
	t.Parallel()
	posts, cmd := webhookSync(t)
	if out, code := cmd("resume", "crm", "--by", "Bo", "--reason", "x"); code != ExitUsage {
		t.Errorf("resume of a sync that never ran: exit %d, want %d\n%s", code, ExitUsage, out)
	}
	if out, code := cmd("pause", "nosuch", "--by", "Bo", "--reason", "x"); code != ExitUsage || !strings.Contains(out, `no sync with id "nosuch"`) {
		t.Errorf("pause of a sync not in the config: exit %d\n%s", code, out)
	}
	if out, code := cmd("pause", "crm", "--by", "Bo", "--reason", "not before Monday"); code != ExitOK {
		t.Fatalf("pause before the first run: exit %d\n%s", code, out)
	}
	if out, code := cmd("run", "crm"); code != ExitFailed || !strings.Contains(out, "failed: sync_paused: ") {
		t.Fatalf("run after the pause: exit %d\n%s", code, out)
	}
	if out, code := cmd("status", "crm"); code != ExitOK || !strings.Contains(out, "paused (person, by Bo: not before Monday)") {
		t.Errorf("status after the pause: exit %d\n%s", code, out)
	}
	if posts.Load() != 0 {
		t.Error("the paused sync sent a request")
	}
	if out, code := cmd("resume", "crm", "--by", "Bo", "--reason", "Monday"); code != ExitOK {
		t.Fatalf("resume: exit %d\n%s", code, out)
	}
	if out, code := cmd("run", "crm"); code != ExitOK || posts.Load() != 1 {
		t.Fatalf("run after the resume: exit %d, %d requests\n%s", code, posts.Load(), out)
	}
}

// webhookSync writes a config of one sync, crm, from a one-row CSV into a
// webhook that answers 200; it returns the count of requests the webhook got
// and a command runner (args[0] is the command, --config is added).
func webhookSync(t *testing.T) (*atomic.Int64, func(args ...string) (string, int)) {
	t.Helper()
	return webhookSyncIn(t, t.TempDir())
}

// webhookSyncIn is webhookSync with its files (the store s.db among them) in dir.
func webhookSyncIn(t *testing.T, dir string) (*atomic.Int64, func(args ...string) (string, int)) {
	t.Helper()
	posts := new(atomic.Int64)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(hook.Close)
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: crm
    workspace: acme
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: `+hook.URL+`}
    mapping: {fields: {email: email}}
`)
	return posts, func(args ...string) (string, int) {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), append(args[:1:1], append([]string{"--config", cfg}, args[1:]...)...),
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		return out.String() + errOut.String(), code
	}
}

// TestResumeOfAnActiveSync: `oncesync resume` of a sync that was not paused
// answered "now active" and restarted its dead-man window, hiding its
// silence for a whole window (an independent check, 2026-12-06); a pause of
// a paused sync would turn the breaker's pause into a person's, which the
// dead-man check no longer watches. Both are refused, as the API refuses
// them, and change nothing.
func TestResumeOfAnActiveSync(t *testing.T) {
	t.Parallel()
	_, cmd := webhookSync(t)
	if out, code := cmd("run", "crm"); code != ExitOK {
		t.Fatalf("first run: exit %d\n%s", code, out)
	}
	before, _ := cmd("status", "crm")
	out, code := cmd("resume", "crm", "--by", "Bo", "--reason", "x")
	if code != ExitFailed || !strings.Contains(out, "sync crm is not paused (it is active)") {
		t.Fatalf("resume of an active sync: exit %d\n%s", code, out)
	}
	if after, _ := cmd("status", "crm"); after != before {
		t.Errorf("resume of an active sync changed its status:\n%s\nthen\n%s", before, after)
	}
	if out, code := cmd("pause", "crm", "--by", "Bo", "--reason", "campaign over"); code != ExitOK {
		t.Fatalf("pause: exit %d\n%s", code, out)
	}
	out, code = cmd("pause", "crm", "--by", "Al", "--reason", "again")
	if code != ExitFailed || !strings.Contains(out, "sync crm is already paused (by Bo)") {
		t.Fatalf("pause of a paused sync: exit %d\n%s", code, out)
	}
	if out, _ := cmd("status", "crm"); !strings.Contains(out, "by Bo: campaign over") {
		t.Errorf("the second pause changed who paused it:\n%s", out)
	}
}

// TestRunOfABadConfigEndsWithTheFailedLine: docs/guide.md#commands says a run that does
// not succeed ends with `failed: <code>: ...`; a config that cannot be run
// (a key misspelt, a sync id not in it) printed its FILE:LINE problems and
// exited 2 without it. The problems are still printed, then that line.
func TestRunOfABadConfigEndsWithTheFailedLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "s.db")+`
syncs:
  - id: crm
    workspace: acme
    source: {type: csv, path: contacts.csv, identity: id, page_sise: 10}
    destination: {type: webhook, url: http://127.0.0.1:1}
    mapping: {fields: {email: email}}
`)
	for _, args := range [][]string{{"run", "--config", cfg, "crm"}, {"run", "--config", filepath.Join(dir, "nosuch.yaml"), "crm"}} {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), args, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		last := lines[len(lines)-1]
		if code != ExitUsage || !strings.HasPrefix(last, "failed: invalid_sync_definition: ") || !strings.HasSuffix(last, "(owner: you)") || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, stdout %q, stderr %q", args, code, out.String(), errOut.String())
		}
	}
}

// TestDryRunCreatesNoStore: docs/guide.md#commands, a dry run writes nothing: it created
// the SQLite store file when none existed (an independent check,
// 2026-12-06). It reads an empty scratch store instead, counts every record
// as a create, and leaves no file at the store's path.
func TestDryRunCreatesNoStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	posts, cmd := webhookSyncIn(t, dir)
	out, code := cmd("run", "crm", "--dry-run")
	if code != ExitOK || !strings.Contains(out, "create     1") || !strings.Contains(out, "does not create it") {
		t.Fatalf("dry run without a store: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "s.db")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the dry run left a store file: %v", err)
	}
	if posts.Load() != 0 {
		t.Error("the dry run sent a request")
	}
}
