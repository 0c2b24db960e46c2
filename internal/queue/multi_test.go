package queue_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/store"
)

// daemonArgs are the serve/worker flags of the multi-machine tests: a 2 s
// first retry (instead of 60 s) so that retries fit in a test.
var daemonArgs = []string{"--retry-backoff", "2s"}

func (e *env) startDaemon(name, cmd string, workers int) *proc {
	e.t.Helper()
	args := append([]string{cmd, "--workers", fmt.Sprint(workers)}, daemonArgs...)
	if cmd == "serve" {
		args = append(args, "--listen", "127.0.0.1:0")
	}
	p := e.start(name, args...)
	started(e.t, p)
	return p
}

// redisLeases returns a reader of the env's Redis leases.
func redisLeases(t *testing.T, redisURL string, st store.Store) *redislease.Manager {
	t.Helper()
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(opt)
	t.Cleanup(func() { _ = c.Close() })
	return redislease.New(redislease.Params{Client: c, Store: st})
}

// leftRunning returns the runs of the env's syncs still recorded running.
func (e *env) leftRunning(t *testing.T, st store.Store) []store.Run {
	t.Helper()
	runs, err := st.ListRunsByState(t.Context(), store.RunRunning, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []store.Run
	for _, r := range runs {
		if strings.HasPrefix(r.SyncID, e.prefix) {
			out = append(out, r)
		}
	}
	return out
}

// stopAll sends SIGTERM to every process still running and waits.
func (e *env) stopAll(t *testing.T, procs ...*proc) {
	t.Helper()
	for _, p := range procs {
		select {
		case <-p.Done:
		default:
			_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		p.Wait(t, 30*time.Second)
	}
}

// TestPostgresRedisServeAndWorkers is the several-machines setup on one
// machine: the store and River on PostgreSQL (one random schema), leases in
// Redis, one serve and two worker processes, 5 syncs on @every 2s. A worker
// is SIGKILLed while it runs a sync: lease-expiry recovery (reading Redis)
// hands the run to another process. Every record arrives exactly once and no
// run is left running.
func TestPostgresRedisServeAndWorkers(t *testing.T) {
	t.Parallel()
	dbURL := testDatabaseURL(t)
	redisURL := testRedisURL(t)
	storeURL, schema := newSchema(t, dbURL)
	e := setupEnv(t, envParams{syncs: 5, records: 3000, pageSize: 100, schedule: "@every 2s",
		settings: "{lease_ttl: 2s, lease_renew: 500ms}", latency: 60 * time.Millisecond,
		store: storeURL, redis: redisURL, prefix: "mq" + randHex(3) + "-"})

	s := e.startDaemon("serve", "serve", 1)
	w1 := e.startDaemon("worker-1", "worker", 2)
	w2 := e.startDaemon("worker-2", "worker", 2)
	for _, p := range []*proc{s, w1, w2} {
		if out := p.Out.String(); !strings.Contains(out, "queue postgres ") || !strings.Contains(out, "leases redis ") {
			t.Fatalf("%s's start line does not name PostgreSQL and Redis:\n%s", p.Name, out)
		}
	}
	st := e.store()
	leases := redisLeases(t, redisURL, st)

	// Kill a worker while it holds a sync's lease in Redis.
	var (
		victim *proc
		synced string
		deadID int64
	)
	waitFor(t, 40*time.Second, "a worker process to hold a lease mid-run", func() bool {
		if e.fake.Stats().Contacts < 1500 {
			return false
		}
		for i := range 5 {
			l, err := leases.Get(t.Context(), e.syncID(i))
			if err != nil {
				continue
			}
			for _, w := range []*proc{w1, w2} {
				if strings.Contains(l.Holder, fmt.Sprintf("pid=%d", w.Cmd.Process.Pid)) {
					victim, synced, deadID = w, e.syncID(i), l.RunID
					return true
				}
			}
		}
		return false
	})
	killed := time.Now()
	_ = victim.Cmd.Process.Signal(syscall.SIGKILL)
	victim.Wait(t, 10*time.Second)
	if e.fake.Stats().Contacts >= int64(e.total) {
		t.Fatal("every record was delivered before the kill; the test proves nothing")
	}

	var resumed store.Run
	waitFor(t, 30*time.Second, "the killed worker's run to be resumed", func() bool {
		for _, r := range runsOf(t, st, synced) {
			if r.ID > deadID && r.State != store.RunSkipped {
				resumed = r
				return true
			}
		}
		return false
	})
	latency := resumed.StartedAt.Sub(killed)
	waitFor(t, 60*time.Second, "every record delivered", func() bool { return e.fake.Stats().Contacts >= int64(e.total) })
	waitFor(t, 20*time.Second, "every sync's latest run to succeed", func() bool {
		for i := range 5 {
			runs := runsOf(t, st, e.syncID(i))
			if len(runs) == 0 || !slices.ContainsFunc(runs, func(r store.Run) bool { return r.State == store.RunSucceeded }) {
				return false
			}
		}
		return true
	})
	dead, err := st.GetRun(t.Context(), deadID)
	if err != nil {
		t.Fatal(err)
	}
	if dead.State != store.RunInterrupted {
		t.Fatalf("the killed worker's run %d is %s (%q), want interrupted", dead.ID, dead.State, dead.FailureDetail)
	}
	survivor := w1
	if victim == w1 {
		survivor = w2
	}
	e.stopAll(t, s, survivor)
	if left := e.leftRunning(t, st); len(left) != 0 {
		t.Fatalf("runs left running after shutdown: %+v", left)
	}
	// River's jobs live in the store's schema, not in public.
	var n int
	if err := pgxQueryRow(t, dbURL, `SELECT count(*) FROM `+pgx.Identifier{schema, "river_job"}.Sanitize(), &n); err != nil || n == 0 {
		t.Fatalf("river_job in schema %s: %d rows, %v", schema, n, err)
	}
	stats := e.checkDelivered(t)
	e.checkNoSecrets(t)
	t.Logf("SIGKILL of %s (sync %s, run %d) to resumed run %d: resume latency %s (lease TTL 2 s, 10 s sweep); %d requests, 0 duplicates",
		victim.Name, synced, deadID, resumed.ID, latency.Round(time.Millisecond), stats.Requests)
	if latency > 2*time.Second+10*time.Second+5*time.Second {
		t.Fatalf("resume latency %s: want within lease TTL + one sweep + fetch", latency)
	}
}

func pgxQueryRow(t *testing.T, dbURL, sql string, dst ...any) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	return conn.QueryRow(ctx, sql).Scan(dst...)
}

// runCovering returns the run of syncID that was running at t.
func runCovering(t *testing.T, st store.Store, syncID string, at time.Time) (store.Run, bool) {
	t.Helper()
	for _, r := range runsOf(t, st, syncID) {
		if r.StartedAt.Before(at) && (r.FinishedAt.IsZero() || r.FinishedAt.After(at)) && r.State != store.RunSkipped {
			return r, true
		}
	}
	return store.Run{}, false
}

// firstRunAfter returns the first run of syncID started after t that got
// the lease (not skipped).
func firstRunAfter(t *testing.T, st store.Store, syncID string, at time.Time) (store.Run, bool) {
	t.Helper()
	for _, r := range runsOf(t, st, syncID) {
		if r.StartedAt.After(at) && r.Fence > 0 {
			return r, true
		}
	}
	return store.Run{}, false
}

// TestRedisOutageMidRun: Redis (a throwaway server) dies mid-run for 12 s
// and comes back empty. The run stops writing before its lease can have
// expired (no fake write between the lease's last possible expiry and
// Redis's return), ends store_unavailable or lease_lost, and the sync's
// retries resume it once Redis is back: every record once, none lost.
func TestRedisOutageMidRun(t *testing.T) {
	t.Parallel()
	dbURL := testDatabaseURL(t)
	rd := startThrowawayRedis(t)
	storeURL, _ := newSchema(t, dbURL)
	var writes writeLog
	const ttl = 2 * time.Second
	e := setupEnv(t, envParams{syncs: 1, records: 3000, pageSize: 100, schedule: "@every 2s",
		settings: "{lease_ttl: 2s, lease_renew: 500ms}", latency: 60 * time.Millisecond,
		store: storeURL, redis: rd.url(), prefix: "rq" + randHex(3) + "-",
		afterWrite: func(*http.Request) { writes.add() }})
	s := e.startDaemon("serve", "serve", 1)
	w := e.startDaemon("worker", "worker", 1)
	st := e.store()
	syncID := e.syncID(0)

	waitFor(t, 30*time.Second, "the run to make progress", func() bool { return e.fake.Stats().Contacts >= 600 })
	down := time.Now()
	rd.stop()
	time.Sleep(12 * time.Second)
	if e.fake.Stats().Contacts >= int64(e.total) {
		t.Fatal("every record was delivered before Redis went down; the test proves nothing")
	}
	up := time.Now()
	rd.start()

	// No write without a lease: the last renewal was at or before down, so
	// the lease ended by down+TTL; a write checked against it just before
	// may still be in flight (one request, 60 ms latency).
	if late := writes.between(down.Add(ttl+500*time.Millisecond), up); len(late) > 0 {
		t.Fatalf("%d writes while Redis was down and the lease had expired (first %s after Redis died)",
			len(late), late[0].Sub(down).Round(time.Millisecond))
	}
	stopped, ok := runCovering(t, st, syncID, down)
	if !ok {
		t.Fatal("no run was running when Redis died")
	}
	waitFor(t, 10*time.Second, "the interrupted run's record", func() bool {
		r, err := st.GetRun(t.Context(), stopped.ID)
		stopped = r
		return err == nil && r.State.Finished()
	})
	if code := failure.Code(stopped.FailureCode); stopped.State != store.RunFailed ||
		(code != failure.StoreUnavailable && code != failure.LeaseLost) {
		t.Fatalf("the run during the outage is %s %s, want failed store_unavailable or lease_lost", stopped.State, code)
	}
	// It is recorded once its (failing) lease release gave up: up to 5 s.
	if end := stopped.FinishedAt.Sub(down); end > ttl+5*time.Second+time.Second {
		t.Fatalf("the run was recorded %s after Redis died; want within the lease TTL and the release timeout", end)
	}

	// The first run after the stopped one that got a lease: a grant needs
	// Redis, so it got it after Redis returned (it may have been recorded
	// just before, waiting on Redis in Acquire).
	var resumed store.Run
	waitFor(t, 40*time.Second, "a run with a lease after Redis came back", func() bool {
		for _, r := range runsOf(t, st, syncID) {
			if r.ID > stopped.ID && r.Fence > 0 {
				resumed = r
				return true
			}
		}
		return false
	})
	waitFor(t, 40*time.Second, "every record delivered", func() bool { return e.fake.Stats().Contacts >= int64(e.total) })
	if resumed.Fence <= stopped.Fence {
		t.Fatalf("resumed run's fence %d is not above the stopped run's %d (Redis came back empty)", resumed.Fence, stopped.Fence)
	}
	if first := writes.firstAfter(up); first.Before(resumed.StartedAt) {
		t.Fatalf("a write at %s before run %d, the first with a lease after Redis returned, started (%s)", first, resumed.ID, resumed.StartedAt)
	}
	failed := 0
	for _, r := range runsOf(t, st, syncID) {
		if r.State == store.RunFailed {
			failed++
		}
	}
	if row, err := st.GetSync(t.Context(), syncID); err != nil || row.State == store.SyncPaused {
		t.Fatalf("sync %+v (%v): a 12 s outage must not trip the breaker (%d failed runs)", row, err, failed)
	}
	e.stopAll(t, s, w)
	if left := e.leftRunning(t, st); len(left) != 0 {
		t.Fatalf("runs left running: %+v", left)
	}
	e.checkDelivered(t)
	lastBefore := down
	for _, w := range writes.between(down.Add(-time.Hour), up) {
		lastBefore = w
	}
	t.Logf("Redis down %s: last write %s after it died; run %d (fence %d) recorded %s after (%s); %d failed runs; run %d (fence %d) resumed, first write %s after Redis returned",
		up.Sub(down).Round(time.Millisecond), lastBefore.Sub(down).Round(time.Millisecond), stopped.ID, stopped.Fence,
		stopped.FinishedAt.Sub(down).Round(time.Millisecond), stopped.FailureCode, failed, resumed.ID, resumed.Fence,
		writes.firstAfter(up).Sub(up).Round(time.Millisecond))
}

// TestPostgresRestartMidRun: the PostgreSQL holding the store and the queue
// (a throwaway cluster) is stopped mid-run and started again 5 s later.
// Nothing is written while it is down (a write needs a ledger claim), the
// run stops, and the sync resumes when it is back: every record once. Where
// no PostgreSQL server binaries are installed, the outage is simulated by
// terminating the store's and queue's backends for 5 s.
func TestPostgresRestartMidRun(t *testing.T) {
	t.Parallel()
	redisURL := testRedisURL(t)
	pg := startThrowawayPostgres(t)
	var dbURL string
	if pg != nil {
		dbURL = pg.url()
	} else {
		dbURL = testDatabaseURL(t)
	}
	storeURL, schema := newSchema(t, dbURL)
	var writes writeLog
	e := setupEnv(t, envParams{syncs: 1, records: 3000, pageSize: 100, schedule: "@every 2s",
		settings: "{lease_ttl: 2s, lease_renew: 500ms}", latency: 60 * time.Millisecond,
		store: storeURL, redis: redisURL, prefix: "pq" + randHex(3) + "-",
		afterWrite: func(*http.Request) { writes.add() }})
	s := e.startDaemon("serve", "serve", 1)
	w := e.startDaemon("worker", "worker", 1)
	syncID := e.syncID(0)

	waitFor(t, 30*time.Second, "the run to make progress", func() bool { return e.fake.Stats().Contacts >= 600 })
	const outage = 5 * time.Second
	down := time.Now()
	how := "restarted"
	if pg != nil {
		pg.stop()
		time.Sleep(outage)
	} else {
		how = "simulated by pg_terminate_backend"
		for time.Since(down) < outage {
			_ = pgxQueryRow(t, dbURL, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '`+schema+`'`, new(int))
			time.Sleep(50 * time.Millisecond)
		}
	}
	up := time.Now()
	if pg != nil {
		pg.start()
	}
	if e.fake.Stats().Contacts >= int64(e.total) {
		t.Fatal("every record was delivered before PostgreSQL went down; the test proves nothing")
	}
	if pg != nil {
		// Pages claimed before the outage may still be written: the claim
		// is durable. The runner holds at most four of them beyond the
		// store's reach (two imports in flight, one queued for the writer,
		// one the ledger stage is handing on); a fifth would need a claim
		// made while PostgreSQL was down.
		if late := writes.between(down.Add(500*time.Millisecond), up); len(late) > 4 {
			t.Fatalf("%d writes while PostgreSQL was down, more than the 4 pages claimed ahead", len(late))
		}
	}
	st := e.store()
	var resumed store.Run
	waitFor(t, 40*time.Second, "a run after PostgreSQL came back", func() bool {
		var ok bool
		resumed, ok = firstRunAfter(t, st, syncID, up)
		return ok
	})
	waitFor(t, 60*time.Second, "every record delivered", func() bool { return e.fake.Stats().Contacts >= int64(e.total) })
	waitFor(t, 20*time.Second, "a run to succeed", func() bool {
		return slices.ContainsFunc(runsOf(t, st, syncID), func(r store.Run) bool { return r.State == store.RunSucceeded })
	})
	e.stopAll(t, s, w)
	if left := e.leftRunning(t, st); len(left) != 0 {
		t.Fatalf("runs left running: %+v", left)
	}
	e.checkDelivered(t)
	var states []string
	for _, r := range runsOf(t, st, syncID) {
		states = append(states, fmt.Sprintf("%d:%s/%s", r.ID, r.State, r.FailureCode))
	}
	t.Logf("PostgreSQL %s for %s: resumed by run %d %s after it returned; first write %s after; runs %v",
		how, up.Sub(down).Round(time.Millisecond), resumed.ID, resumed.StartedAt.Sub(up).Round(time.Millisecond),
		writes.firstAfter(up).Sub(up).Round(time.Millisecond), states)
}
