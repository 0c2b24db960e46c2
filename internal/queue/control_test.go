package queue_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/queue"
	pgsource "github.com/oncesync/oncesync/internal/source/postgres"
)

// TestSweepsRunBesideRunsThatNeverEnd: a run waits on its source as long
// as the source takes (a run has no time limit of its own). Runs whose
// source never answered held every slot of the runs' queue, and the
// recovery sweep and the dead-man check, queued there too, never ran: a
// killed run was never resumed, and serve's own dead-man check never told
// anyone (an independent check, 2026-12-06). They now have a queue of their
// own: here the one run slot is held by a run whose source query sleeps on
// every row, and sweeps still complete.
func TestSweepsRunBesideRunsThatNeverEnd(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dbURL := testDatabaseURL(t)
	storeURL, schema := newSchema(t, dbURL)
	table := pgx.Identifier{schema, "people"}.Sanitize()
	stall := pgx.Identifier{schema, "stall"}.Sanitize()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	if _, err := conn.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()+`;
		CREATE TABLE `+table+` (id int PRIMARY KEY, email text); INSERT INTO `+table+` VALUES (1, 'a@example.com');
		CREATE TABLE `+stall+` (on_ boolean); INSERT INTO `+stall+` VALUES (true)`); err != nil {
		t.Fatal(err)
	}
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(hook.Close)
	prefix := "ctl" + randHex(3) + "-"
	cfg := &config.Config{
		Path: filepath.Join(t.TempDir(), "oncesync.yaml"), Store: storeURL, Settings: config.Defaults(),
		Syncs: []config.Sync{{ID: prefix + "stalled", Workspace: "acme",
			Source: config.Source{Type: "postgres", Identity: "id", PageSize: 100,
				Spec: &pgsource.Config{DSN: dbURL, CursorColumn: "id",
					// Its check (a page of LIMIT 0) reads no row, so it does not sleep.
					Query: `SELECT p.id, p.email FROM ` + table + ` p CROSS JOIN LATERAL (SELECT pg_sleep(CASE WHEN (SELECT on_ FROM ` + stall + `) THEN 3600 ELSE 0 END)) s`}},
			Destination: config.Destination{Type: "webhook", Spec: &webhook.Config{URL: hook.URL},
				Mode: "single", Concurrency: 1, Timeout: time.Second}}},
	}
	st, err := app.OpenStore(ctx, cfg, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := queue.New(ctx, queue.Params{
		Config: cfg, Store: st, Leases: &lease.SQL{Store: st}, Workers: 1, Scheduler: true,
		FetchPollInterval: 20 * time.Millisecond, RecoveryInterval: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// The stall ends and the sleeping query is cancelled: the run's
		// retry reads the row, and the stalled run ends.
		var n int
		_ = pgxQueryRow(t, dbURL, `WITH u AS (UPDATE `+stall+` SET on_ = false RETURNING 1) SELECT count(*) FROM u`, &n)
		_ = pgxQueryRow(t, dbURL, `SELECT count(pg_cancel_backend(pid)) FROM pg_stat_activity WHERE query LIKE '%pg_sleep(CASE%' AND pid <> pg_backend_pid()`, &n)
		sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := svc.Shutdown(sctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	if _, err := svc.Enqueue(ctx, prefix+"stalled", "test"); err != nil {
		t.Fatal(err)
	}
	river := pgx.Identifier{schema, "river_job"}.Sanitize()
	count := func(where string) (n int) {
		if err := pgxQueryRow(t, dbURL, `SELECT count(*) FROM `+river+` WHERE `+where, &n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, 20*time.Second, "the stalled sync's run to hold the only run slot", func() bool {
		return count(`kind = '`+queue.KindRunSync+`' AND state = 'running'`) == 1
	})
	since := time.Now()
	swept := func() int {
		return count(`kind = '` + queue.KindRecover + `' AND state = 'completed' AND finalized_at > '` + since.UTC().Format(time.RFC3339Nano) + `'`)
	}
	waitFor(t, 20*time.Second, "three sweeps beside the stalled run", func() bool { return swept() >= 3 })
	if n := count(`kind = '` + queue.KindRunSync + `' AND state = 'running'`); n != 1 {
		t.Fatalf("%d runs running, want the stalled one still", n)
	}
}
