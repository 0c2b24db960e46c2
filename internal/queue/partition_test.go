package queue_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/source/file"
	pgsource "github.com/oncesync/oncesync/internal/source/postgres"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/testenv"
)

const (
	partitionRows  = 40000
	partitionCount = 4
)

// partitionBundle is a partitioned sync over a PostgreSQL table, worked by
// two in-process queue services (two "workers") on one PostgreSQL store and
// queue, with leases and the barrier in Redis, writing to the fake Brevo.
type partitionBundle struct {
	syncID string
	src    *pgx.Conn
	table  string
	fake   *fakebrevo.Server
	st     store.Store
	svcs   []*queue.Service
}

func setupPartitioned(t *testing.T, afterWrite func(*http.Request)) *partitionBundle {
	t.Helper()
	ctx := t.Context()
	dbURL := testDatabaseURL(t)
	redisURL := testRedisURL(t)
	storeURL, schema := newSchema(t, dbURL)

	// The source table lives in the test's schema too.
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	table := pgx.Identifier{schema, "contacts"}.Sanitize()
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()+`;
		CREATE TABLE `+table+` (id bigint PRIMARY KEY, email text NOT NULL, first_name text NOT NULL,
			updated_at timestamptz NOT NULL DEFAULT clock_timestamp())`); err != nil {
		t.Fatal(err)
	}
	if _, err := conn.CopyFrom(ctx, pgx.Identifier{schema, "contacts"}, []string{"id", "email", "first_name"},
		pgx.CopyFromSlice(partitionRows, func(i int) ([]any, error) {
			return []any{int64(i + 1), fmt.Sprintf("part%06d@example.com", i+1), "F"}, nil
		})); err != nil {
		t.Fatal(err)
	}

	b := &partitionBundle{syncID: "part-" + randHex(3), src: conn, table: table}
	b.fake = fakebrevo.New(fakebrevo.Options{APIKey: apiKey, Validate: true, AfterWrite: afterWrite})
	srv := httptest.NewServer(b.fake)
	t.Cleanup(srv.Close)

	cfg := &config.Config{
		Path:     filepath.Join(t.TempDir(), "oncesync.yaml"),
		Store:    storeURL,
		Redis:    redisURL,
		Settings: config.Defaults(),
		Syncs: []config.Sync{{
			ID: b.syncID, Workspace: "acme", Partitions: partitionCount,
			Source: config.Source{Type: "postgres", Identity: "id", PageSize: 1000,
				Spec: &pgsource.Config{DSN: dbURL, Table: schema + ".contacts", CursorColumn: "id",
					VersionQuery: `SELECT count(*), max(updated_at) FROM ` + table}},
			Destination: config.Destination{Type: "brevo", Mode: "bulk", Concurrency: 1, Timeout: 10 * time.Second, RateLimit: 100000,
				Spec: &brevo.Config{BaseURL: srv.URL + "/v3", APIKey: apiKey, ListIDs: []int64{2},
					Email: "email", Attributes: map[string]string{"FIRSTNAME": "first_name"}}},
		}},
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		st, err := app.OpenStore(ctx, cfg, clock.Real{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		rc := redis.NewClient(opt)
		t.Cleanup(func() { _ = rc.Close() })
		svc, err := queue.New(ctx, queue.Params{
			Config: cfg, Store: st, Leases: redislease.New(redislease.Params{Client: rc, Store: st}),
			Redis: rc, Workers: 2, FetchPollInterval: 20 * time.Millisecond,
			// The barrier's backoff (1 s, 2 s, 4 s) without its waits.
			Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := svc.Start(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			sctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := svc.Shutdown(sctx); err != nil {
				t.Errorf("shutdown: %v", err)
			}
		})
		b.svcs = append(b.svcs, svc)
		b.st = st
	}
	return b
}

// run enqueues a run and waits for the partitioned run to end.
func (b *partitionBundle) run(t *testing.T) store.Run {
	t.Helper()
	if _, err := b.svcs[0].Enqueue(t.Context(), b.syncID, queue.ReasonManual); err != nil {
		t.Fatal(err)
	}
	return b.waitEnd(t)
}

// waitEnd waits for the partitioned run to end and returns it.
func (b *partitionBundle) waitEnd(t *testing.T) store.Run {
	t.Helper()
	var fin store.Run
	// A ceiling, not a timing: a loaded CI machine under -race is slow.
	waitFor(t, 3*time.Minute, "the partitioned run to end", func() bool {
		for _, r := range runsOf(t, b.st, b.syncID) {
			if r.State != store.RunRunning {
				fin = r
				return true
			}
		}
		return false
	})
	return fin
}

// TestPartitionedSyncDelivers: a 4-partition sync of 40,000 PostgreSQL rows
// worked by two queue services delivers every row once; each partition has
// its own runs, cursor and lease; the run's counters are the partitions'.
func TestPartitionedSyncDelivers(t *testing.T) {
	t.Parallel()
	b := setupPartitioned(t, nil)
	fin := b.run(t)
	if fin.State != store.RunSucceeded || fin.Read != partitionRows || fin.Written != partitionRows {
		t.Fatalf("run: %+v", fin)
	}
	st := b.fake.Stats()
	if st.Contacts != partitionRows || st.ContactsWritten != partitionRows || st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("fake: want %d contacts written once; got %+v", partitionRows, st)
	}
	var read int64
	for k := 1; k <= partitionCount; k++ {
		runs := runsOf(t, b.st, partition.SyncID(b.syncID, k))
		if len(runs) != 1 || runs[0].State != store.RunSucceeded || runs[0].ID <= fin.ID {
			t.Fatalf("partition %d runs: %+v", k, runs)
		}
		read += runs[0].Read
		// Each partition holds about a quarter of the rows.
		if runs[0].Read < partitionRows/partitionCount*8/10 || runs[0].Read > partitionRows/partitionCount*12/10 {
			t.Fatalf("partition %d read %d rows", k, runs[0].Read)
		}
		// The PostgreSQL source reads a partition's rows only
		// (source.Slicer): its pages are full, not a quarter full.
		if full := (runs[0].Read + 999) / 1000; runs[0].Pages > full+1 {
			t.Fatalf("partition %d read %d rows in %d pages: it read other partitions' rows", k, runs[0].Read, runs[0].Pages)
		}
		cur, err := b.st.GetCursor(t.Context(), partition.SyncID(b.syncID, k))
		if err != nil || cur.Value == "" {
			t.Fatalf("partition %d cursor %+v, %v", k, cur, err)
		}
	}
	if read != partitionRows {
		t.Fatalf("partitions read %d rows in all", read)
	}
	if dl, err := b.st.(barrier.DeadLetters).ListDeadLetters(t.Context(), barrier.ListDeadLettersParams{SyncID: b.syncID}); err != nil || len(dl) != 0 {
		t.Fatalf("dead letters %+v, %v", dl, err)
	}
}

// TestPartitionedSyncSourceChanged: the source is updated after the first
// partition pages were written. Every partition sees the mismatch before its
// next write: the run fails source_changed_during_run, the partitions are
// dead-lettered, and no updated value reaches the destination.
func TestPartitionedSyncSourceChanged(t *testing.T) {
	t.Parallel()
	var (
		b       *partitionBundle
		writes  atomic.Int64
		mutated atomic.Bool
	)
	b = setupPartitioned(t, func(*http.Request) {
		if writes.Add(1) == 3 && mutated.CompareAndSwap(false, true) {
			// Synchronous: no partition writes again before it is committed.
			if _, err := b.src.Exec(context.Background(), `UPDATE `+b.table+
				` SET first_name = 'Mutated', updated_at = clock_timestamp() WHERE id % 10 = 0`); err != nil {
				t.Errorf("mutate the source: %v", err)
			}
		}
	})
	fin := b.run(t)
	if !mutated.Load() {
		t.Fatal("the source was never mutated")
	}
	if fin.State != store.RunFailed || fin.FailureCode != string(failure.SourceChangedDuringRun) {
		t.Fatalf("run: %+v", fin)
	}
	// Every partition ends dead-lettered (none could finish: each has about 10 pages).
	var dl []barrier.DeadLetter
	waitFor(t, 30*time.Second, "every partition to be dead-lettered", func() bool {
		var err error
		dl, err = b.st.(barrier.DeadLetters).ListDeadLetters(t.Context(), barrier.ListDeadLettersParams{SyncID: b.syncID})
		if err != nil {
			t.Fatal(err)
		}
		return len(dl) == partitionCount
	})
	seen := map[int]bool{}
	for _, d := range dl {
		if d.Reason != barrier.ReasonSourceChanged || d.RunID != fin.ID || d.Snapshot == d.HolderSnapshot || d.Attempts != barrier.DefaultRetries+1 {
			t.Fatalf("dead letter %+v", d)
		}
		seen[d.Partition] = true
	}
	if len(seen) != partitionCount {
		t.Fatalf("dead-lettered partitions %v", seen)
	}
	for k := 1; k <= partitionCount; k++ {
		var last store.Run
		waitFor(t, 10*time.Second, "the partition's run to end", func() bool {
			runs := runsOf(t, b.st, partition.SyncID(b.syncID, k))
			last = runs[len(runs)-1]
			return last.State != store.RunRunning
		})
		if last.State != store.RunFailed || last.FailureCode != string(failure.SourceChangedDuringRun) {
			t.Fatalf("partition %d's run: %+v", k, last)
		}
	}
	st := b.fake.Stats()
	if st.ContactsWritten == 0 || st.ContactsWritten >= partitionRows || st.DuplicateWrites != 0 {
		t.Fatalf("fake: %+v", st)
	}
	// The failed run's figures are its partitions' (they said 0 read, 0
	// written beside the contacts its partitions delivered).
	var got, want store.Counters
	waitFor(t, 10*time.Second, "the failed run's figures to be its partitions'", func() bool {
		want = store.Counters{}
		for k := 1; k <= partitionCount; k++ {
			for _, r := range runsOf(t, b.st, partition.SyncID(b.syncID, k)) {
				if r.ID > fin.ID {
					want.Add(r.Counters)
				}
			}
		}
		r, err := b.st.GetRun(t.Context(), fin.ID)
		if err != nil {
			t.Fatal(err)
		}
		got = r.Counters
		return got == want && want.Pages > 0
	})
	// Nothing from the changed view: no contact carries a mutated value.
	for id := 10; id <= partitionRows; id += 10 {
		if c, ok := b.fake.Contact(fmt.Sprintf("part%06d@example.com", id)); ok && fmt.Sprint(c.Attributes["FIRSTNAME"]) == "Mutated" {
			t.Fatalf("row %d was written from the changed view", id)
		}
	}
}

// TestPartitionedCSVSync: a 2-partition CSV sync in embedded mode (SQLite
// store and queue) with the barrier in Redis: the file's content hash is the
// snapshot; every row arrives once.
func TestPartitionedCSVSync(t *testing.T) {
	t.Parallel()
	redisURL := testRedisURL(t)
	dir := t.TempDir()
	var rows strings.Builder
	rows.WriteString("id,email,first_name\n")
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&rows, "%d,csvpart%05d@example.com,F%d\n", i, i, i)
	}
	if err := os.WriteFile(filepath.Join(dir, "people.csv"), []byte(rows.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	fake := fakebrevo.New(fakebrevo.Options{APIKey: apiKey, Validate: true})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	syncID := "csvpart-" + randHex(3)
	cfg := &config.Config{
		Path: filepath.Join(dir, "oncesync.yaml"), Store: "sqlite://./oncesync.db", Redis: redisURL,
		Settings: config.Defaults(),
		Syncs: []config.Sync{{
			ID: syncID, Workspace: "acme", Partitions: 2,
			Source: config.Source{Type: "csv", Spec: &file.Config{Path: "people.csv"}, PageSize: 500, Identity: "id"},
			Destination: config.Destination{Type: "brevo", Mode: "bulk", Concurrency: 1, Timeout: 10 * time.Second, RateLimit: 100000,
				Spec: &brevo.Config{BaseURL: srv.URL + "/v3", APIKey: apiKey, ListIDs: []int64{2},
					Email: "email", Attributes: map[string]string{"FIRSTNAME": "first_name"}}},
		}},
	}
	st, err := app.OpenStore(t.Context(), cfg, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	// The service's log is shown if the test fails: a run that never ended
	// once under a loaded CI machine, and the test had nothing to say why.
	logs := testenv.LogOnFailure(t)
	// No Redis client given: the service opens one from cfg.Redis.
	svc, err := queue.New(t.Context(), queue.Params{Config: cfg, Store: st, Leases: &lease.SQL{Store: st},
		Workers: 3, FetchPollInterval: 20 * time.Millisecond, Logger: logs})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := svc.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	if _, err := svc.Enqueue(t.Context(), syncID, queue.ReasonManual); err != nil {
		t.Fatal(err)
	}
	var fin store.Run
	waitFor(t, 2*time.Minute, "the partitioned run to end", func() bool { // a ceiling, not a timing
		for _, r := range runsOf(t, st, syncID) {
			if r.State != store.RunRunning {
				fin = r
				return true
			}
		}
		return false
	})
	if fin.State != store.RunSucceeded || fin.Written != 3000 || fin.Read != 3000 {
		t.Fatalf("run: %+v", fin)
	}
	if s := fake.Stats(); s.Contacts != 3000 || s.ContactsWritten != 3000 || s.DuplicateWrites != 0 {
		t.Fatalf("fake: %+v", s)
	}
}

// TestRunNowDuringAPartitionedRun: a person's "run now" while a partitioned
// run's partitions work answered "queued" (the coordinator's job had ended
// once it queued them) and recorded a skipped run. It is told a run is
// already going, and nothing is queued or recorded.
func TestRunNowDuringAPartitionedRun(t *testing.T) {
	t.Parallel()
	hold, started := make(chan struct{}), make(chan struct{})
	var once sync.Once
	b := setupPartitioned(t, func(*http.Request) {
		once.Do(func() { close(started) })
		<-hold
	})
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
		}
	}
	t.Cleanup(release)
	if e, err := b.svcs[0].Enqueue(t.Context(), b.syncID, queue.ReasonManual); err != nil || e.Duplicate {
		t.Fatalf("first run now: %+v, %v", e, err)
	}
	select {
	case <-started:
	case <-time.After(2 * time.Minute): // a ceiling, not a timing
		t.Fatal("no partition wrote")
	}
	e, err := b.svcs[1].Enqueue(t.Context(), b.syncID, queue.ReasonManual)
	release()
	if err != nil || !e.Duplicate {
		t.Fatalf("run now while the partitions work: %+v, %v; want a duplicate", e, err)
	}
	if fin := b.waitEnd(t); fin.State != store.RunSucceeded {
		t.Fatalf("run: %+v", fin)
	}
	time.Sleep(500 * time.Millisecond) // a coordinator queued by mistake would record its skipped run by now
	if runs := runsOf(t, b.st, b.syncID); len(runs) != 1 {
		t.Fatalf("runs of the sync: %+v; want the one run", runs)
	}
}
