package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
	"github.com/oncesync/oncesync/internal/testenv"
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
	st, r := busyRun(t, b)
	dead := lease.ThisProcess()
	dead.PID = 1 << 30 // above any pid_max: no such process
	if _, err := st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "busy", Token: "t", Holder: dead.String(), RunID: r.ID, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	out, errOut, code = status("busy")
	if code != ExitOK || !strings.Contains(out, "its process is no longer running") || !strings.Contains(out, "next run:   none scheduled") {
		t.Fatalf("dead holder: exit %d\n%s%s", code, out, errOut)
	}
	out, _, _ = status()
	if !strings.Contains(out, "1 running") {
		t.Fatalf("overview after a run:\n%s", out)
	}
}

// TestStatusShowsARedisLease: with `redis` set the lease lives in Redis, and
// `status SYNC` reads it there (it showed no lease line at all).
func TestStatusShowsARedisLease(t *testing.T) {
	t.Parallel()
	u := checkpointRedisURL(t)
	dir := t.TempDir()
	id := "status-lease-" + testenv.RandHex(6)
	db := filepath.Join(dir, "s.db")
	config := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	writeFile(t, config, `store: sqlite://`+db+`
redis: `+u+`
syncs:
  - id: `+id+`
    workspace: acme
    source: {type: csv, path: contacts.csv}
    destination: {type: webhook, url: "http://127.0.0.1:1/hook"}
`)
	ctx := context.Background()
	st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: db})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.PutSync(ctx, store.PutSyncParams{ID: id, Workspace: "acme"}); err != nil {
		t.Fatal(err)
	}
	r, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: id, State: store.RunRunning})
	if err != nil {
		t.Fatal(err)
	}
	opt, err := redis.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	keys := rediskey.Default()
	t.Cleanup(func() {
		_ = rdb.Del(context.Background(), keys.Lease(id), keys.Fence(id), keys.LeaseEnd(id), keys.LeaseLoss(id)).Err()
	})
	rl := redislease.New(redislease.Params{Client: rdb, Store: st, TTL: 30 * time.Second})
	g, err := rl.Acquire(ctx, lease.AcquireParams{SyncID: id, RunID: r.ID, TTL: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	status := func() string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := Main(t.Context(), []string{"status", "--config", config, id},
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }}); code != ExitOK {
			t.Fatalf("status: exit %d\n%s%s", code, out.String(), errOut.String())
		}
		return out.String()
	}
	want := fmt.Sprintf("lease:      fence %d, run %d (%s)", g.Fence, r.ID, lease.ThisProcess())
	if out := status(); !strings.Contains(out, want) {
		t.Fatalf("held in Redis: want %q in\n%s", want, out)
	}
	if err := rl.Release(ctx, g); err != nil {
		t.Fatal(err)
	}
	if out := status(); strings.Contains(out, "lease:") {
		t.Fatalf("released: still a lease line in\n%s", out)
	}
}

// TestStatusSaysARunsWorkerIsGone: a run recorded running whose worker died
// while no serve led (no recovery sweep) holds no lease. `status SYNC`
// showed nothing of it; it now names the run and says that its worker is
// gone and who closes it, but only once the run is older than a lease TTL
// (a run that just started may not hold its lease yet).
func TestStatusSaysARunsWorkerIsGone(t *testing.T) {
	t.Parallel()
	b := setupDeadmanCLI(t)
	st, r := busyRun(t, b)
	_ = st.Close()
	status := func() string {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := Main(t.Context(), []string{"status", "--config", b.config, "busy"},
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }, Clock: b.clk}); code != ExitOK {
			t.Fatalf("status: exit %d\n%s%s", code, out.String(), errOut.String())
		}
		return out.String()
	}
	running := fmt.Sprintf("running:    run %d since ", r.ID)
	if out := status(); !strings.Contains(out, running) || strings.Contains(out, "no live process") {
		t.Fatalf("a run just started: want %q without a verdict in\n%s", running, out)
	}
	b.clk.Advance(time.Minute)
	if out := status(); !strings.Contains(out, running) || !strings.Contains(out, "no live process holds the sync's lease for it") ||
		!strings.Contains(out, "no serve is running: start one") {
		t.Fatalf("a run without a lease for a minute: want the verdict in\n%s", out)
	}
}

// TestNoticeNewStore: a command about to create the config's SQLite store
// says so, naming the file (a typo in its path made a new, empty store,
// and the next run wrote every record again, silently); an existing store
// or a PostgreSQL one is opened without a word.
func TestNoticeNewStore(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "oncesync.yaml")
	for _, tc := range []struct {
		store, file string
		want        bool
	}{
		{"sqlite://./oncesyn.db", "", true},
		{"sqlite://./oncesync.db", "oncesync.db", false},
		{"postgres://postgres@127.0.0.1:5432/postgres", "", false},
	} {
		if tc.file != "" {
			if err := os.WriteFile(filepath.Join(dir, tc.file), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var errOut bytes.Buffer
		noticeNewStore(Env{Stderr: &errOut}, &config.Config{Path: cfgPath, Store: tc.store})
		got := errOut.String()
		if said := strings.Contains(got, "a new, empty store is created there"); said != tc.want {
			t.Errorf("%s: notice %q, want one: %v", tc.store, got, tc.want)
		}
		if tc.want && !strings.Contains(got, filepath.Join(dir, "oncesyn.db")) {
			t.Errorf("%s: the notice %q does not name the file", tc.store, got)
		}
	}
}

// TestStatusCountsRecordsLeftAccepted: records a run left accepted when it
// stopped waiting for the destination's processes were in no figure of
// `runs` and no line of `status` (an independent check, 2026-12-06: 196 of
// 1,000); `status SYNC` counts them.
func TestStatusCountsRecordsLeftAccepted(t *testing.T) {
	t.Parallel()
	b := setupDeadmanCLI(t)
	ctx := context.Background()
	st, r := busyRun(t, b)
	if err := st.RaiseFence(ctx, "busy", 1); err != nil {
		t.Fatal(err)
	}
	keys := []string{strings.Repeat("a", 64), strings.Repeat("b", 64), strings.Repeat("c", 64)}
	if err := st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "busy", Fence: 1, RunID: r.ID, Keys: keys}); err != nil {
		t.Fatal(err)
	}
	marks := []store.LedgerFinish{{Key: keys[0], State: store.LedgerComplete}}
	for _, k := range keys[1:] {
		marks = append(marks, store.LedgerFinish{Key: k, State: store.LedgerAccepted, Result: "42"})
	}
	if err := st.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "busy", Fence: 1, RunID: r.ID, Entries: marks}); err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	var out, errOut bytes.Buffer
	if code := Main(t.Context(), []string{"status", "--config", b.config, "busy"},
		Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }, Clock: b.clk}); code != ExitOK {
		t.Fatalf("status: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	if want := "accepted:   2 record(s) accepted by the destination"; !strings.Contains(out.String(), want) {
		t.Errorf("status of a sync with 2 records accepted: want %q in\n%s", want, out.String())
	}
}

// busyRun opens b's store, with sync "busy" and a run of it recorded
// running.
func busyRun(t *testing.T, b *deadmanBundle) (*sqlite.Store, store.Run) {
	t.Helper()
	ctx := context.Background()
	st := b.openStore(t)
	if _, err := st.PutSync(ctx, store.PutSyncParams{ID: "busy", Workspace: "acme"}); err != nil {
		t.Fatal(err)
	}
	r, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: "busy", State: store.RunRunning})
	if err != nil {
		t.Fatal(err)
	}
	return st, r
}

// TestNextRunLine: status says when the schedule starts a sync next, and
// why nothing will when it is paused or has no schedule.
func TestNextRunLine(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 3, 52, 10, 0, time.UTC)
	tests := []struct {
		schedule string
		state    store.SyncState
		want     string
	}{
		{"*/15 * * * *", store.SyncActive, `2026-12-07T04:00:00Z (schedule "*/15 * * * *"), if an oncesync serve is running`},
		{"CRON_TZ=Asia/Kolkata 0 9 * * *", store.SyncActive, `2026-12-08T03:30:00Z`},
		{"@every 90m", store.SyncActive, `every 1h30m0s (schedule "@every 90m"), counted from when a running oncesync serve became the leader`},
		{"*/15 * * * *", store.SyncPaused, "none while paused"},
		{"", store.SyncActive, "none scheduled (no schedule:"},
	}
	for _, tt := range tests {
		if got := nextRunLine(tt.schedule, tt.state, now); !strings.HasPrefix(got, tt.want) {
			t.Errorf("nextRunLine(%q, %s) = %q, want it to start %q", tt.schedule, tt.state, got, tt.want)
		}
	}
}

// TestRunsByState: `runs --state failed` finds failures that the default
// view of the last 20 runs no longer shows (a 30 s schedule scrolls them
// off within minutes), newest first, at most --limit; a state that is not
// one is a usage error.
func TestRunsByState(t *testing.T) {
	t.Parallel()
	b := setupDeadmanCLI(t)
	ctx := context.Background()
	st := b.openStore(t)
	if _, err := st.PutSync(ctx, store.PutSyncParams{ID: "busy", Workspace: "acme"}); err != nil {
		t.Fatal(err)
	}
	var failed []int64
	for i := range 33 {
		p := store.InsertRunParams{SyncID: "busy", State: store.RunSucceeded}
		if i < 3 {
			p.State, p.FailureCode = store.RunFailed, "store_unavailable"
		}
		r, err := st.InsertRun(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			failed = append(failed, r.ID)
		}
	}
	_ = st.Close()
	runs := func(args ...string) (string, int) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := Main(t.Context(), append([]string{"runs", "--config", b.config, "busy"}, args...),
			Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }, Clock: b.clk})
		return out.String() + errOut.String(), code
	}
	if out, code := runs(); code != ExitOK || strings.Contains(out, "store_unavailable") {
		t.Fatalf("default view: exit %d, want the 20 newest (all succeeded):\n%s", code, out)
	}
	out, code := runs("--state", "failed", "--limit", "2")
	if code != ExitOK || strings.Count(out, "store_unavailable") != 2 ||
		!strings.Contains(out, fmt.Sprintf("\n%d ", failed[2])) || strings.Contains(out, fmt.Sprintf("\n%d ", failed[0])) {
		t.Fatalf("--state failed --limit 2: exit %d, want runs %d and %d:\n%s", code, failed[2], failed[1], out)
	}
	if out, code := runs("--state", "broken"); code != ExitUsage || !strings.Contains(out, `--state "broken"`) {
		t.Fatalf("--state broken: exit %d\n%s", code, out)
	}
}
