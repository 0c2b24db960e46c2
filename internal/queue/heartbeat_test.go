package queue

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

// TestRunEndedSendsHeartbeats: the runs the queue records tell their sync's
// heartbeat_url how they ended (docs/guide.md#telling-silence-from-outside): a worked run that succeeded, one
// that failed, and a run recorded as failed before it could start.
func TestRunEndedSendsHeartbeats(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		pings []string
	)
	monitor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		pings = append(pings, r.URL.Path)
		mu.Unlock()
	}))
	t.Cleanup(monitor.Close)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(hook.Close)

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "c.csv"), []byte("id,email\n1,a@example.com\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dest := func(url string) config.Destination {
		return config.Destination{Type: "webhook", Spec: &webhook.Config{URL: url}, Mode: "single", Concurrency: 1, Timeout: time.Second}
	}
	src := config.Source{Type: "csv", Spec: &file.Config{Path: "c.csv"}, PageSize: 10, Identity: "id"}
	cfg := &config.Config{
		Path: filepath.Join(dir, "oncesync.yaml"), Store: "sqlite://./oncesync.db",
		Settings: config.Settings{LeaseTTL: 30 * time.Second, LeaseRenew: 10 * time.Second, LedgerRetention: time.Hour, BreakerFailures: 5},
		Syncs: []config.Sync{
			{ID: "ok", Workspace: "w", Source: src, Destination: dest(hook.URL + "/hook"), HeartbeatURL: monitor.URL + "/hb/ok"},
			{ID: "down", Workspace: "w", Source: src, Destination: dest("http://127.0.0.1:1/hook"), HeartbeatURL: monitor.URL + "/hb/down"},
			{ID: "broken", Workspace: "w", Source: config.Source{Type: "parquet"}, Destination: dest(hook.URL + "/hook"),
				HeartbeatURL: monitor.URL + "/hb/broken"},
			{ID: "quiet", Workspace: "w", Source: src, Destination: dest(hook.URL + "/hook")},
		},
	}
	clk := clock.NewFake(time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(t.Context(), sqlite.OpenParams{Path: filepath.Join(dir, "oncesync.db"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	beats := deadman.NewHeartbeats(deadman.HeartbeatParams{Attempts: 1})
	svc, err := New(t.Context(), Params{Config: cfg, Store: st, Leases: &lease.SQL{Store: st}, Clock: clk, Heartbeats: beats,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.b.close() })

	if err := svc.runSync(t.Context(), RunSyncArgs{SyncID: "ok"}, 1); err != nil {
		t.Fatalf("run ok: %v", err)
	}
	if err := svc.runSync(t.Context(), RunSyncArgs{SyncID: "down"}, 1); err == nil {
		t.Fatal("run down succeeded")
	}
	if _, err := svc.Enqueue(t.Context(), "broken", ReasonManual); err == nil {
		t.Fatal("enqueue broken succeeded")
	}
	if err := svc.runSync(t.Context(), RunSyncArgs{SyncID: "quiet"}, 1); err != nil {
		t.Fatalf("run quiet: %v", err)
	}
	if err := beats.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	got := map[string]int{}
	for _, p := range pings {
		got[p]++
	}
	want := map[string]int{"/hb/ok": 1, "/hb/down/fail": 1, "/hb/broken/fail": 1}
	if len(got) != len(want) || got["/hb/ok"] != 1 || got["/hb/down/fail"] != 1 || got["/hb/broken/fail"] != 1 {
		t.Fatalf("heartbeats %v, want %v", got, want)
	}
}
