package queue_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/store"
)

// TestPauseStopsRunsInFlight: PostgreSQL and Redis, a serve with two
// workers, an ordinary sync and a partitioned one (3 partitions, so that
// some wait in the queue) both mid-run when a person pauses them. Each run
// stops at a page boundary within a few seconds, ends interrupted saying
// the sync was paused, the waiting partitions do not start, and nothing
// more is written. After a resume the next runs go on from their
// checkpoints: every contact holds the source's values, written once.
// Before the fix a pause only kept the next runs from starting: both runs
// went on writing to their end.
func TestPauseStopsRunsInFlight(t *testing.T) {
	t.Parallel()
	// 150 pages of 100 ms: the flat sync's run must outlast the partitioned
	// sync's start, which took 6 s under a CI clone's load (2026-12-06: the
	// flat run had written its 60 pages of 1,200 rows by then and succeeded).
	const records = 3000
	dbURL := testDatabaseURL(t)
	redisURL := testRedisURL(t)
	storeURL, _ := newSchema(t, dbURL)
	e := setupEnv(t, envParams{syncs: 2, records: records, pageSize: 20, schedule: "", latency: 100 * time.Millisecond,
		settings: "{lease_ttl: 5s, lease_renew: 1s}", store: storeURL, redis: redisURL, prefix: "op" + randHex(3) + "-"})
	flat, parted := e.syncID(0), e.syncID(1)
	b, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(string(b), "  - id: "+parted+"\n    workspace: acme\n", "  - id: "+parted+"\n    workspace: acme\n    partitions: 3\n", 1)
	if cfg == string(b) {
		t.Fatal("could not make the second sync partitioned")
	}
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	st, svc := e.enqueuer(t)
	s := e.startDaemon("serve", "serve", 2)

	for _, id := range []string{flat, parted} {
		if _, err := svc.Enqueue(t.Context(), id, queue.ReasonManual); err != nil {
			t.Fatal(err)
		}
	}
	// The runs must still be writing when the pause comes, which a worker
	// sees within PauseCheck: at 40 ms a request, the flat sync's run had
	// finished all its 60 pages by then under CI's load (2026-12-05).
	waitFor(t, 30*time.Second, "both syncs to be writing", func() bool {
		return e.fake.Stats().Contacts >= 200 && hasRuns(runsOf(t, st, flat)) && hasRuns(runsOf(t, st, parted+"#p1"))
	})
	for _, id := range []string{flat, parted} {
		if _, err := st.SetSyncState(t.Context(), store.SetSyncStateParams{ID: id, State: store.SyncPaused, Reason: "person", By: "ops", Why: "bad data"}); err != nil {
			t.Fatal(err)
		}
	}
	paused := time.Now()
	ended := func(id string) (store.Run, bool) {
		runs := runsOf(t, st, id)
		if len(runs) == 0 {
			return store.Run{}, false
		}
		r := runs[len(runs)-1]
		return r, r.State != store.RunRunning
	}
	waitFor(t, 20*time.Second, "both runs to stop", func() bool {
		_, a := ended(flat)
		_, b := ended(parted)
		return a && b
	})
	took := time.Since(paused)
	for _, id := range []string{flat, parted} {
		r, _ := ended(id)
		if r.State != store.RunInterrupted || !strings.Contains(r.FailureDetail, "paused (person by ops: bad data)") {
			t.Fatalf("run %d of %s after the pause: %s (%s: %q), want interrupted, saying the sync was paused\n%s", r.ID, id, r.State, r.FailureCode, r.FailureDetail, s.Out.String())
		}
	}
	// No partition runs any more, and nothing more is written.
	waitFor(t, 10*time.Second, "every partition run to stop", func() bool {
		for k := 1; k <= 3; k++ {
			if _, ok := ended(fmt.Sprintf("%s#p%d", parted, k)); !ok {
				runs := runsOf(t, st, fmt.Sprintf("%s#p%d", parted, k))
				if len(runs) > 0 {
					return false
				}
			}
		}
		return true
	})
	written := e.fake.Stats().ContactsWritten
	time.Sleep(2 * queue.PauseCheck) // a waiting partition job would start within this
	e.fake.SetLatency(0)             // the rest is written by the runs after the resume
	if now := e.fake.Stats().ContactsWritten; now != written || now >= int64(e.total) {
		t.Fatalf("after the runs stopped: %d contacts written, then %d (of %d)", written, now, e.total)
	}
	t.Logf("paused at %d of %d contacts; both runs stopped %s after the pause", written, e.total, took.Round(time.Millisecond))

	for _, id := range []string{flat, parted} {
		if _, err := st.SetSyncState(t.Context(), store.SetSyncStateParams{ID: id, State: store.SyncActive, By: "ops", Why: "fixed"}); err != nil {
			t.Fatal(err)
		}
		if r := e.runNow(t, st, svc, id); r.State != store.RunSucceeded {
			t.Fatalf("the run of %s after the resume: %s (%s: %q)", id, r.State, r.FailureCode, r.FailureDetail)
		}
	}
	e.stopAll(t, s)
	e.checkDelivered(t)
	for _, id := range []string{flat, parted} {
		for i := 1; i <= records; i++ {
			c, ok := e.fake.Contact(fmt.Sprintf("%s-person%06d@example.com", id, i))
			if !ok || c.Attributes["FIRSTNAME"] != fmt.Sprintf("First%d", i) {
				t.Fatalf("%s contact %d: %v %+v", id, i, ok, c.Attributes)
			}
		}
	}
}

func hasRuns(runs []store.Run) bool { return len(runs) > 0 }
