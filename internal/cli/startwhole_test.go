package cli

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

// TestWholeRunStoppedWhileRecordedIsNotLeftRunning: a partitioned sync's
// run by hand stopped while its row is written ends recorded interrupted,
// not running with no process behind it (status said "running" for good).
func TestWholeRunStoppedWhileRecordedIsNotLeftRunning(t *testing.T) {
	t.Parallel()
	st, err := sqlite.Open(t.Context(), sqlite.OpenParams{Path: filepath.Join(t.TempDir(), "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.PutSync(t.Context(), store.PutSyncParams{ID: "crm", Workspace: "acme"}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cfg := &config.Config{}
	cfg.Settings.LeaseTTL = 30 * time.Second
	_, _, err = startWhole(ctx, storetest.CancelOnInsert{Store: st, Cancel: cancel}, &lease.SQL{Store: st}, cfg, &config.Sync{ID: "crm"}, clock.Real{})
	if failure.CodeOf(err) != failure.Interrupted {
		t.Fatalf("startWhole = %v, want interrupted", err)
	}
	runs, err := st.ListRuns(t.Context(), "crm", 10)
	if err != nil || len(runs) != 1 || runs[0].State != store.RunInterrupted {
		t.Fatalf("runs %+v, %v: want one, interrupted", runs, err)
	}
	// Stopped before it is recorded: nothing recorded.
	if _, _, err = startWhole(ctx, st, &lease.SQL{Store: st}, cfg, &config.Sync{ID: "crm"}, clock.Real{}); failure.CodeOf(err) != failure.Interrupted {
		t.Fatalf("startWhole after the stop = %v, want interrupted", err)
	}
	if runs, _ = st.ListRuns(t.Context(), "crm", 10); len(runs) != 1 {
		t.Fatalf("%d runs recorded, want still 1", len(runs))
	}
}
