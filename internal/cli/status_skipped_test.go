package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/store"
)

// TestStatusRunningPastASkippedRun: a run by hand while serve runs the sync
// is recorded skipped, newer than the run in progress; `oncesync status`
// then said nothing of the run in progress (an independent check,
// 2026-12-06, saw the same on the pages).
func TestStatusRunningPastASkippedRun(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	runs := []store.Run{
		{ID: 10, State: store.RunSkipped, FailureCode: "already_running", StartedAt: now},
		{ID: 9, State: store.RunRunning, StartedAt: now.Add(-time.Minute)},
	}
	var b strings.Builder
	cfg := &config.Config{Settings: config.Settings{LeaseTTL: 30 * time.Second}}
	printRunning(&b, cfg, "s1", runs, store.Lease{}, false, false, now)
	if !strings.Contains(b.String(), "running:    run 9 since") {
		t.Errorf("status says %q, want run 9 running", b.String())
	}
}
