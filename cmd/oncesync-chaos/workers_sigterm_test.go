package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// TestWorkersSigtermShort is the make-test version of workers-sigterm: serve
// + 2 workers on PostgreSQL + Redis (default 30 s lease, so a lease left to
// expire shows), 6 syncs; one worker gets SIGTERM with a write of its in
// doubt, one with a write on the wire, one at a seeded moment. Each must exit
// 0 at the page boundary having released its leases and handed its runs
// back; every record once. The past-drain-deadline point (15 s each) runs in
// make chaos only.
func TestWorkersSigtermShort(t *testing.T) {
	t.Parallel()
	e := setup(t, "workers-sigterm")
	row := &Row{resumeGoal: 10 * time.Second}
	var err error
	if err = needPG(context.Background(), e); err == nil {
		err = runWorkersSigterm(context.Background(), e, row, sigtermParams{
			Cluster: clusterParams{Syncs: 6, SingleEvery: 3, InitialRows: 600, AppendRows: 40, PageSize: 50, Workers: 2, Slots: 3,
				SettleLimit: 60 * time.Second, Fake: fakebrevo.Options{Latency: 30 * time.Millisecond}},
			Lo: 2 * time.Second, Hi: 3 * time.Second,
			Points: []string{termInDoubt, termOnTheWire, termAnywhere},
		})
	}
	row = finish(t, row, err)
	if row.Kills != 3 {
		t.Fatalf("want 3 SIGTERMs, got %d", row.Kills)
	}
	if len(row.Resume) == 0 {
		t.Fatal("no SIGTERM interrupted a run: the test proves nothing about the hand-back")
	}
	if row.ResumeMax >= 10 {
		t.Fatalf("an interrupted run resumed after %.1f s (want < 10 s, well under the 30 s lease)", row.ResumeMax)
	}
	notes := strings.Join(row.Notes, "\n")
	if !strings.Contains(notes, termInDoubt+":1") || !strings.Contains(notes, termOnTheWire+":1") {
		t.Fatalf("the points did not fire as asked (a fallback to anywhere?):\n%s", notes)
	}
}
