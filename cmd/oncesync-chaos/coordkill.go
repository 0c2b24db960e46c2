package main

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/store"
)

// A partitioned run's coordinator job, or a partition job, whose worker died
// before there was a lease to expire (docs/guide.md#running-on-a-schedule-serve-and-worker, issue 13 finding 6): River
// keeps the job `running` until its own stuck-job rescue (24 h), the job is
// unique per sync while running, so every tick and every "run now" is
// skipped. The product's rule: no job kind waits for River's rescue; the
// sync runs again within a lease TTL plus a recovery sweep.
//
// The kill has to land in a window of milliseconds (between River handing
// the job out and the first lease), so the scenario widens it with
// PostgreSQL locks the processes wait on, and reads in pg_stat_activity
// (application_name is the process's name, see env.oncesync) which process
// is waiting:
//   - coordinator: the runs table is locked (SHARE: reads pass, inserts
//     wait) before "run now"; the coordinator job waits to record its run
//     (it has read the source and has no lease: a coordinator holds none);
//     that process is killed.
//   - partition: the same, then the source table is locked (ACCESS
//     EXCLUSIVE) and the runs table released: the coordinator records its
//     run, pins the snapshot and queues the partitions, which wait in their
//     first read of the source, before their runs and leases. A process
//     holding at least one of them (a worker, when one does) is killed.
// The killed process is restarted 0-2 s later (a fresh River client), the
// locks released.

// coordinatorKill runs both kills, each on a deployment of its own (serve
// with 1 slot + 2 workers with 2, lease 5 s / 2 s, a PostgreSQL table of
// 20,000 rows, partitions: 4, page 1,000). Checks, each: the sync runs again
// within the lease TTL + a 10 s recovery sweep + 10 s (+ 15 s when the
// leader was the victim: a new serve must be elected first); the run
// succeeds; every row at the destination with its values, none twice.
func coordinatorKill(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	if err := needPG(ctx, e); err != nil {
		return row, err
	}
	p := partitionedParams{Rows: 20000, Partitions: 4, PageSize: 1000, Fake: fakebrevo.Options{Latency: 10 * time.Millisecond}}
	if e.o.Short {
		p.Rows = 12000
	}
	var total valueCounts
	for _, what := range []string{killCoordinator, killPartition} {
		v, err := coordinatorKillRun(ctx, e, row, p, what)
		total.add(v)
		if err != nil {
			total.fill(row)
			return row, fmt.Errorf("%s: %w", what, err)
		}
	}
	total.fill(row)
	return row, nil
}

const (
	killCoordinator = "coordinator"
	killPartition   = "partition before its lease"
)

// coordinatorKillRun is one kill on a deployment of its own; it adds to
// row's runs, kills, duplicates and notes and returns the value checker's
// verdict.
func coordinatorKillRun(ctx context.Context, e *env, row *Row, p partitionedParams, what string) (valueCounts, error) {
	var v valueCounts
	c, err := e.newPartitioned(ctx, p)
	if err != nil {
		return v, err
	}
	gate, err := pgx.Connect(ctx, c.dbURL)
	if err != nil {
		return v, err
	}
	defer gate.Close(context.WithoutCancel(ctx))
	lockSrc := func(conn *pgx.Conn) (pgx.Tx, error) {
		tx, err := conn.Begin(ctx)
		if err != nil {
			return nil, err
		}
		if _, err := tx.Exec(ctx, "SET LOCAL lock_timeout = '10s'; LOCK TABLE "+c.table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
			_ = tx.Rollback(ctx)
			return nil, fmt.Errorf("lock the source table: %w", err)
		}
		return tx, nil
	}

	// Both kills start with the runs table locked (SHARE: reads pass,
	// inserts wait), so the coordinator waits to record its run. ("Run now"
	// builds the sync, source included, before it queues the job: the
	// source cannot be locked yet.)
	runsTx, err := gate.Begin(ctx)
	if err != nil {
		return v, err
	}
	defer func() { _ = runsTx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := runsTx.Exec(ctx, "SET LOCAL lock_timeout = '10s'; LOCK TABLE oncesync.runs IN SHARE MODE"); err != nil {
		return v, fmt.Errorf("lock the runs table: %w", err)
	}
	if err := c.runNow(ctx); err != nil {
		return v, err
	}
	coordinator, err := c.lockWaiters(ctx, 1, time.Second)
	if err != nil {
		return v, fmt.Errorf("the coordinator did not wait to record its run: %w", err)
	}
	switch what {
	case killCoordinator:
		killedAt, leader, err := c.killAndRestart(ctx, e, coordinator[:1])
		if err != nil {
			return v, err
		}
		_ = runsTx.Rollback(ctx)
		row.Kills++
		row.notef("%s: %s SIGKILLed while its coordinator job waited to record its run, restarted", what, coordinator[0])
		bound := p.leaseTTL() + recoverySweep + 10*time.Second
		if leader {
			bound += 15 * time.Second
		}
		again, ok := c.waitRunAfter(ctx, killedAt, bound)
		if !ok {
			row.problemf("%s: the sync did not run again within %s of the kill (lease TTL + recovery sweep + slack): %s", what, bound, c.stuckJobs(ctx))
			c.shutdown(ctx, row)
			return c.settledValues(ctx, row), nil
		}
		row.Resume = append(row.Resume, again.Sub(killedAt))
		row.notef("%s: the sync ran again %s after the kill", what, again.Sub(killedAt).Round(100*time.Millisecond))
	case killPartition:
		gate2, err := pgx.Connect(ctx, c.dbURL)
		if err != nil {
			return v, err
		}
		defer gate2.Close(context.WithoutCancel(ctx))
		srcTx, err := lockSrc(gate2)
		if err != nil {
			return v, err
		}
		defer func() { _ = srcTx.Rollback(context.WithoutCancel(ctx)) }()
		if err := runsTx.Commit(ctx); err != nil {
			return v, err
		}
		// Let every partition that gets a slot reach the lock.
		waiters, err := c.lockWaiters(ctx, p.Partitions, 3*time.Second)
		if err != nil {
			return v, fmt.Errorf("no partition job waited on the source: %w", err)
		}
		victim := pickVictim(e, waiters)
		n := 0
		for _, w := range waiters {
			if w == victim {
				n++
			}
		}
		killedAt, leader, err := c.killAndRestart(ctx, e, []string{victim})
		if err != nil {
			return v, err
		}
		_ = srcTx.Rollback(ctx)
		row.Kills++
		row.notef("%s: partition jobs waited on the source in %v; %s (holding %d of them) SIGKILLed before their runs and leases, restarted", what, waiters, victim, n)
		bound := p.leaseTTL() + recoverySweep + 10*time.Second
		if leader {
			bound += 15 * time.Second
		}
		again, ok := c.waitPartitionsStarted(ctx, bound)
		if !ok {
			row.problemf("%s: not every partition ran within %s of the kill (lease TTL + recovery sweep + slack): %s", what, bound, c.stuckJobs(ctx))
			c.shutdown(ctx, row)
			return c.settledValues(ctx, row), nil
		}
		row.Resume = append(row.Resume, again.Sub(killedAt))
		row.notef("%s: every partition had run %s after the kill", what, again.Sub(killedAt).Round(100*time.Millisecond))
	}
	fin, err := c.waitRunEnd(ctx, 0)
	if err != nil {
		row.problemf("%s: %v; %s", what, err, c.stuckJobs(ctx))
	} else if fin.State != store.RunSucceeded {
		row.problemf("%s: the partitioned run ended %s (%s: %s), want succeeded", what, fin.State, fin.FailureCode, fin.FailureDetail)
	} else {
		row.notef("%s: run %d succeeded, partitions per process %v", what, fin.ID, c.partitionsByProcess())
	}
	c.shutdown(ctx, row)
	return c.settledValues(ctx, row), nil
}

// leaseTTL is the lease TTL of the params' settings (the default 5 s unless
// set otherwise).
func (p partitionedParams) leaseTTL() time.Duration {
	if m := regexp.MustCompile(`lease_ttl: *([0-9a-z.]+)`).FindStringSubmatch(p.Settings); m != nil {
		if d, err := time.ParseDuration(m[1]); err == nil {
			return d
		}
	}
	return 5 * time.Second
}

// settledValues adds the deployment's runs and duplicates to row and returns
// the value checker's verdict.
func (c *partitioned) settledValues(ctx context.Context, row *Row) valueCounts {
	var sub Row
	c.finishRow(ctx, &sub, c.p.Rows)
	row.Runs += sub.Runs
	row.DuplicateWrites += sub.DuplicateWrites
	row.InDoubtSettled += sub.InDoubtSettled
	row.Notes = append(row.Notes, sub.Notes...)
	row.Problems = append(row.Problems, sub.Problems...)
	return c.check(c.p.Rows)
}

// lockWaiters waits until at least n backends of the deployment's processes
// wait on a lock (or, once one does, until settle passed) and returns their
// processes' names, one per waiting backend.
func (c *partitioned) lockWaiters(ctx context.Context, n int, settle time.Duration) ([]string, error) {
	deadline := time.Now().Add(30 * time.Second)
	var first time.Time
	for {
		rows, err := c.src.Query(ctx, `SELECT application_name FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock' AND application_name LIKE 'chaos-%'
			ORDER BY application_name`)
		if err != nil {
			return nil, err
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return nil, err
		}
		if len(names) > 0 && first.IsZero() {
			first = time.Now()
		}
		if len(names) >= n || !first.IsZero() && time.Since(first) > settle {
			out := make([]string, len(names))
			for i, a := range names {
				out[i] = strings.TrimPrefix(a, "chaos-")
			}
			return out, nil
		}
		if time.Now().After(deadline) {
			return nil, errors.New("no process waited on the lock within 30 s")
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// pickVictim picks, seeded, one of the waiting processes, a worker when
// one waits (killing serve, the leader, also delays recovery by an
// election).
func pickVictim(e *env, waiters []string) string {
	var workers []string
	for _, w := range waiters {
		if w != "serve" && !slices.Contains(workers, w) {
			workers = append(workers, w)
		}
	}
	if len(workers) == 0 {
		return waiters[0]
	}
	return workers[e.intN(len(workers))]
}

// killAndRestart SIGKILLs the named processes and starts each again with
// the same arguments 0-2 s later; it reports when the kill happened and
// whether serve (the leader) was among them.
func (c *partitioned) killAndRestart(ctx context.Context, e *env, names []string) (time.Time, bool, error) {
	var killedAt time.Time
	leader := false
	for _, name := range names {
		i := slices.IndexFunc(c.procs, func(p *proc) bool { return p.name == name })
		if i < 0 {
			return killedAt, leader, fmt.Errorf("no process named %s", name)
		}
		p := c.procs[i]
		if err := p.signal(syscall.SIGKILL); err != nil {
			return killedAt, leader, err
		}
		if _, ok := p.wait(ctx, 10*time.Second); !ok {
			return killedAt, leader, fmt.Errorf("%s survived SIGKILL", name)
		}
		killedAt = time.Now()
		leader = leader || name == "serve"
		e.logf("SIGKILLed %s (pid %d)", name, p.pid())
		if err := sleep(ctx, e.between(0, 2*time.Second)); err != nil {
			return killedAt, leader, err
		}
		np, err := e.oncesync(p.name, p.cmd.Args[1:]...)
		if err != nil {
			return killedAt, leader, err
		}
		line, err := startLine(ctx, np)
		if err != nil {
			return killedAt, leader, err
		}
		if name == "serve" {
			m := regexp.MustCompile(`http://(\S+) \(`).FindStringSubmatch(line)
			if m == nil {
				return killedAt, leader, fmt.Errorf("serve's start line names no address: %s", line)
			}
			c.api = "http://" + m[1]
		}
		c.procs[i] = np
	}
	return killedAt, leader, nil
}

// waitRunAfter waits up to bound for a run of the sync started after t and
// returns its start.
func (c *partitioned) waitRunAfter(ctx context.Context, t time.Time, bound time.Duration) (time.Time, bool) {
	deadline := t.Add(bound)
	for time.Now().Before(deadline) {
		if r, ok, err := c.run(ctx); err == nil && ok && r.StartedAt.After(t) {
			return r.StartedAt, true
		}
		if sleep(ctx, 100*time.Millisecond) != nil {
			break
		}
	}
	return time.Time{}, false
}

// waitPartitionsStarted waits up to bound for every partition to have a
// run, and returns when the last one started.
func (c *partitioned) waitPartitionsStarted(ctx context.Context, bound time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) {
		var last time.Time
		all := true
		for k := 1; k <= c.p.Partitions; k++ {
			runs, err := c.partitionRuns(ctx, k)
			if err != nil || len(runs) == 0 {
				all = false
				break
			}
			first := runs[len(runs)-1].StartedAt
			if first.After(last) {
				last = first
			}
		}
		if all {
			return last, true
		}
		if sleep(ctx, 100*time.Millisecond) != nil {
			break
		}
	}
	return time.Time{}, false
}

// stuckJobs describes the sync's River jobs still running (coordinator and
// partitions), for a problem line.
func (c *partitioned) stuckJobs(ctx context.Context) string {
	rows, err := c.src.Query(ctx, `SELECT kind, coalesce((args->>'partition')::int, 0), extract(epoch FROM now() - attempted_at)::int
		FROM oncesync.river_job WHERE state = 'running' AND kind IN ($1, $2) ORDER BY id`, queue.KindRunPartitioned, queue.KindRunPartition)
	if err != nil {
		return "could not read River's jobs: " + err.Error()
	}
	defer rows.Close()
	var parts []string
	for rows.Next() {
		var kind string
		var part, age int
		if rows.Scan(&kind, &part, &age) != nil {
			continue
		}
		if part > 0 {
			kind += fmt.Sprintf(" %d", part)
		}
		parts = append(parts, fmt.Sprintf("%s attempted %d s ago", kind, age))
	}
	if len(parts) == 0 {
		return "no River job of the sync left running"
	}
	return "River jobs still running: " + strings.Join(parts, ", ") + " (only River's 24 h rescue frees them)"
}
