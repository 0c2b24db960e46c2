package cli

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/store"
)

// TestStatusCommand: `status` without an id lists the syncs; an id the
// config does not have is named as a typo with the config's ids; one it
// has but the store has not seen is "not run yet" with the command to run
// it; a lease whose holder process is gone says so.
func TestStatusCommand(t *testing.T) {
	t.Parallel()
	b := setupDeadmanCLI(t)
	status := func(args ...string) (string, string, int) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(t.Context(), append([]string{"status", "--config", b.config}, args...),
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }, Clock: b.clk})
		return out.String(), errOut.String(), code
	}

	out, errOut, code := status()
	if code != ExitOK || !strings.Contains(out, "quiet") || !strings.Contains(out, "busy") || strings.Count(out, "never run") != 2 {
		t.Fatalf("overview: exit %d\n%s%s", code, out, errOut)
	}
	if _, errOut, code = status("qiet"); code != ExitUsage || !strings.Contains(errOut, `no sync with id "qiet" (syncs: quiet, busy)`) {
		t.Fatalf("unknown id: exit %d, %q", code, errOut)
	}
	if _, errOut, code = status("quiet"); code != ExitUsage || !strings.Contains(errOut, "has not run on this store yet") ||
		!strings.Contains(errOut, "oncesync run --config "+b.config+" quiet") {
		t.Fatalf("never run: exit %d, %q", code, errOut)
	}

	// A run of "busy" whose process died holding the lease.
	ctx := context.Background()
	st := b.openStore(t)
	if _, err := st.PutSync(ctx, store.PutSyncParams{ID: "busy", Workspace: "acme"}); err != nil {
		t.Fatal(err)
	}
	r, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: "busy", State: store.RunRunning})
	if err != nil {
		t.Fatal(err)
	}
	dead := lease.ThisProcess()
	dead.PID = 1 << 30 // above any pid_max: no such process
	if _, err := st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "busy", Token: "t", Holder: dead.String(), RunID: r.ID, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	out, errOut, code = status("busy")
	if code != ExitOK || !strings.Contains(out, "its process is no longer running") {
		t.Fatalf("dead holder: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = status()
	if !strings.Contains(out, "1 running") {
		t.Fatalf("overview after a run:\n%s", out)
	}
}
