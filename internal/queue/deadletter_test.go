package queue_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/store"
)

// TestRequeueDeadLetterPostgres: on a PostgreSQL store, re-queueing a
// partitioned sync's dead letter through an enqueue-only service inserts one
// coordinator job in River's table of the store's schema, marks the entry,
// and leaves a paused sync's entry parked.
func TestRequeueDeadLetterPostgres(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := testDatabaseURL(t)
	storeURL, schema := newSchema(t, dbURL)
	dir := t.TempDir()
	sync := func(id string) config.Sync {
		return config.Sync{ID: id, Workspace: "acme", Partitions: 3,
			Source:      config.Source{Type: "csv", Spec: &file.Config{Path: "c.csv"}, PageSize: 10, Identity: "id"},
			Destination: config.Destination{Type: "webhook", Spec: &webhook.Config{URL: "http://127.0.0.1:1/hook"}, Mode: "single", Concurrency: 1, Timeout: time.Second}}
	}
	cfg := &config.Config{
		Path: filepath.Join(dir, "oncesync.yaml"), Store: storeURL, Settings: config.Defaults(),
		// No Redis is reachable at this address: an enqueue-only service
		// must not need it.
		Redis: "redis://127.0.0.1:1/0",
		Syncs: []config.Sync{sync("split"), sync("held")},
	}
	st, err := app.OpenStore(ctx, cfg, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	dls, ok := st.(barrier.DeadLetters)
	if !ok {
		t.Fatalf("%T keeps no dead letters", st)
	}
	svc, err := queue.New(ctx, queue.Params{Config: cfg, Store: st, EnqueueOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	if err := svc.Start(ctx); err == nil {
		t.Fatal("an enqueue-only service started working jobs")
	}

	park := func(syncID string) int64 {
		t.Helper()
		d, err := dls.AddDeadLetter(ctx, barrier.DeadLetter{SyncID: syncID, RunID: 3, Partition: 2, Key: "k",
			Reason: barrier.ReasonSourceChanged, Token: "p2", Snapshot: "s", Attempts: 4})
		if err != nil {
			t.Fatal(err)
		}
		return d.ID
	}
	jobs := func() (n int, kind, syncID string) {
		t.Helper()
		if err := pgxQueryRow(t, dbURL, `SELECT count(*), coalesce(min(kind), ''), coalesce(min(args->>'sync_id'), '') FROM `+
			pgx.Identifier{schema, "river_job"}.Sanitize()+` WHERE state = 'available'`, &n, &kind, &syncID); err != nil {
			t.Fatal(err)
		}
		return n, kind, syncID
	}

	r, err := queue.RequeueDeadLetter(ctx, queue.RequeueParams{DeadLetters: dls, Store: st, Enqueue: svc.Enqueue, ID: park("split"), By: "ada"})
	if err != nil || !r.Queued || r.Run.JobID == 0 || r.Run.Duplicate || !r.DeadLetter.Requeued() || r.DeadLetter.RequeuedBy != "ada" {
		t.Fatalf("RequeueDeadLetter = %+v, %v", r, err)
	}
	if n, kind, syncID := jobs(); n != 1 || kind != queue.KindRunPartitioned || syncID != "split" {
		t.Fatalf("River's available jobs: %d (%s of %q), want one %s of split", n, kind, syncID, queue.KindRunPartitioned)
	}

	// A run of split newer than the parked one (3) is working, its
	// coordinator's job done: re-queueing another entry queues nothing (a
	// second run would end skipped, already_running), and says which run
	// redoes the work.
	if _, err := st.PutSync(ctx, store.PutSyncParams{ID: "split", Workspace: "acme", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	var working store.Run
	for working.ID <= 3 { // the parked run is 3: this one is newer
		if working, err = st.InsertRun(ctx, store.InsertRunParams{SyncID: "split", State: store.RunRunning}); err != nil {
			t.Fatal(err)
		}
	}
	// The first requeue's job done (as a coordinator's ends), none waits.
	var deleted int
	if err := pgxQueryRow(t, dbURL, `WITH d AS (DELETE FROM `+pgx.Identifier{schema, "river_job"}.Sanitize()+
		` RETURNING 1) SELECT count(*) FROM d`, &deleted); err != nil || deleted != 1 {
		t.Fatalf("clear the queue: %d jobs, %v", deleted, err)
	}
	r, err = queue.RequeueDeadLetter(ctx, queue.RequeueParams{DeadLetters: dls, Store: st, Enqueue: svc.Enqueue, ID: park("split"), By: "ada"})
	if err != nil || !r.Queued || r.Working != working.ID || r.Run.JobID != 0 || !r.DeadLetter.Requeued() {
		t.Fatalf("RequeueDeadLetter beside a working run = %+v, %v; want run %d named, nothing queued", r, err, working.ID)
	}
	if n, _, _ := jobs(); n != 0 {
		t.Fatalf("%d available jobs, want none (the working run redoes the work)", n)
	}

	if _, err := st.PutSync(ctx, store.PutSyncParams{ID: "held", Workspace: "acme", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetSyncState(ctx, store.SetSyncStateParams{ID: "held", State: store.SyncPaused, Reason: "person", By: "bob", Why: "x"}); err != nil {
		t.Fatal(err)
	}
	held := park("held")
	if _, err := queue.RequeueDeadLetter(ctx, queue.RequeueParams{DeadLetters: dls, Store: st, Enqueue: svc.Enqueue, ID: held, By: "ada"}); !errors.Is(err, queue.ErrSyncPaused) {
		t.Fatalf("paused sync: %v, want ErrSyncPaused", err)
	}
	if d, err := dls.GetDeadLetter(ctx, held); err != nil || d.Requeued() {
		t.Fatalf("the paused sync's entry: %+v, %v; want still parked", d, err)
	}
	if n, _, _ := jobs(); n != 0 {
		t.Fatalf("%d available jobs, want still none", n)
	}
}
