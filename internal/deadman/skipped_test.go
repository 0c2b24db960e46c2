package deadman_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// TestSkippedRunsAreToldAsAHeldLease: a run that never ends keeps its lease
// (its process renews it), so every run cron or serve starts after it is
// skipped (already_running) at once. A window later the sync is silent, and
// its alert must say what holds it and what to do. Before, it read "the
// latest run failed with already_running" with that code's next step,
// "Nothing to do: the next scheduled run starts normally", in a critical
// alert about a day of runs that all did nothing; and its workspace's alert
// named the sync's owner, not the operator.
func TestSkippedRunsAreToldAsAHeldLease(t *testing.T) {
	t.Parallel()
	forEachFlavour(t, func(t *testing.T, tb *bundle) {
		tb.sync(t, "s1", "acme")
		tb.clk.Advance(time.Hour)
		tb.run(t, "s1", store.RunSucceeded, "")
		tb.clk.Advance(time.Hour)
		hung := tb.run(t, "s1", store.RunRunning, "")
		var last store.Run
		for range 24 {
			tb.clk.Advance(time.Hour)
			last = tb.run(t, "s1", store.RunSkipped, string(failure.AlreadyRunning))
		}
		tb.clk.Advance(time.Hour)
		rep := tb.check(t)
		if v := tb.verdict(t, rep, deadman.ScopeSync, "s1"); v.Status != deadman.StatusSilent || !v.Alerted {
			t.Fatalf("verdict %+v, want silent and alerted", v)
		}
		got := tb.rec.take()
		if len(got) != 2 {
			t.Fatalf("alerts %+v, want the workspace's and s1's", got)
		}
		for _, a := range got {
			if a.Owner != failure.OwnerOperator {
				t.Errorf("%s/%s alert owner %q, want operator (a run that holds the lease)", a.Workspace, a.SyncID, a.Owner)
			}
			if strings.Contains(a.NextStep, "Nothing to do") || strings.Contains(a.NextStep, "each failed run") {
				t.Errorf("%s/%s alert next step %q: nothing failed, and something is to be done", a.Workspace, a.SyncID, a.NextStep)
			}
			if a.SyncID != "s1" {
				continue
			}
			if strings.Contains(a.WhatHappened, "failed with") ||
				!strings.Contains(a.WhatHappened, fmt.Sprintf("the latest run (#%d) was skipped", last.ID)) ||
				!strings.Contains(a.WhatHappened, "another run of the sync holds its lease") {
				t.Errorf("s1's alert says %q, want the skipped run and the lease held by another run (#%d hangs)", a.WhatHappened, hung.ID)
			}
			if !strings.Contains(a.NextStep, "oncesync status") || !strings.Contains(a.NextStep, "stop its process") {
				t.Errorf("s1's next step %q, want how to find and stop the run that holds the lease", a.NextStep)
			}
		}
	})
}
