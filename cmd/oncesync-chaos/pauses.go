package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// pauses: faults the other cluster scenarios do not model, together. A
// worker holding leases is frozen (SIGSTOP) at a seeded moment when none of
// its syncs has a request at the fake (so inside a store transaction, a
// lease renewal, a source read, a claim or a checkpoint, never half-way
// through sending a body: that is the gap of docs/RELIABILITY.md no client
// can close), kept frozen until every sync it held progressed elsewhere,
// then thawed (SIGCONT). Meanwhile a second `serve` runs beside the first
// (two candidates for leader), `oncesync run` is started by hand on a sync
// the workers also run, and once another session holds an ACCESS EXCLUSIVE
// lock on the store's cursors table for longer than a lease TTL. Every
// worker writes with an API key of its own, so a write a thawed worker lands
// after its thaw is seen: it would be a write that outlived its lease.
func pauses(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	if err := needPG(ctx, e); err != nil {
		return row, err
	}
	const ttl = 3 * time.Second
	d := 3 * time.Minute
	p := clusterParams{Syncs: 4, SingleEvery: 4, InitialRows: 3000, AppendRows: 100, PageSize: 100,
		Workers: 2, Slots: 2, Settings: "{lease_ttl: 3s, lease_renew: 1s}", LeaseTTL: ttl,
		Fake: fakebrevo.Options{Latency: 30 * time.Millisecond}, TagWorkers: true}
	if e.o.Short {
		d = 90 * time.Second
		p.SettleLimit = 2 * time.Minute
	}
	c, err := e.newCluster(ctx, p)
	if err != nil {
		return row, err
	}
	serve2, err := e.oncesync("serve2", "serve", "--config", c.config, "--listen", "127.0.0.1:0",
		"--workers", "1", "--log-level", "info")
	if err != nil {
		return row, err
	}
	defer serve2.stop()
	if err := c.waitStarted(ctx, serve2); err != nil {
		return row, err
	}
	end := time.Now().Add(d)
	locked := false
	var byHand []*proc
	for time.Now().Before(end) {
		if err := sleep(ctx, e.between(3*time.Second, 6*time.Second)); err != nil {
			return row, err
		}
		switch {
		case !locked && time.Now().After(end.Add(-d/2)):
			locked = true
			hold := ttl + e.between(time.Second, 3*time.Second)
			if err := lockCursors(ctx, c.dbURL, hold); err != nil {
				row.problemf("lock the cursors table: %v", err)
			} else {
				row.Kills++
				c.noteHit(time.Now())
				e.logf("held an ACCESS EXCLUSIVE lock on cursors for %s", hold.Round(time.Millisecond))
			}
		case e.intN(3) == 0:
			id := c.ids[e.intN(len(c.ids))]
			h, err := e.oncesync("byhand-"+id, "run", "--config", c.config, id, "--log-level", "info")
			if err != nil {
				return row, err
			}
			byHand = append(byHand, h)
			e.logf("oncesync run %s by hand", id)
		default:
			if err := freezeIdleWorker(ctx, c, row, ttl); err != nil {
				return row, err
			}
		}
	}
	for _, h := range byHand {
		code, ok := h.wait(ctx, 2*time.Minute)
		switch {
		case !ok:
			row.problemf("%s did not exit within 2 minutes", h.name)
			h.stop()
		case code != 0 && code != 3:
			// A run by hand may meet the workers' lease (exit 3, another
			// run in progress); anything else is a failure a person would
			// see.
			row.problemf("%s exited %d: %s", h.name, code, h.lastLine())
		default:
			row.notef("%s exited %d", h.name, code)
		}
	}
	if !serve2.running() {
		row.problemf("the second serve exited %d: %s", serve2.exitCode(), serve2.lastLine())
	}
	if err := c.settle(ctx, row, 4*time.Minute); err != nil {
		return row, err
	}
	_ = serve2.signal(syscall.SIGTERM)
	if _, ok := serve2.wait(ctx, 30*time.Second); !ok {
		row.problemf("the second serve did not exit within 30 s of SIGTERM")
	}
	c.check(row)
	return row, nil
}

// freezeIdleWorker freezes a worker holding leases at a moment none of its
// syncs has a request at the fake, waits until its syncs progressed
// elsewhere, thaws it, and checks that it lands no write after the thaw.
func freezeIdleWorker(ctx context.Context, c *cluster, row *Row, ttl time.Duration) error {
	i := c.busyWorker(ctx)
	c.mu.Lock()
	w := c.workers[i]
	c.mu.Unlock()
	if !w.running() {
		return nil
	}
	var held []string
	froze := false
	for try := 0; try < 100 && !froze; try++ {
		held = c.probe.heldBy(ctx, c.ids, w.pid())
		if len(held) == 0 {
			if err := sleep(ctx, 50*time.Millisecond); err != nil {
				return err
			}
			continue
		}
		if err := w.signal(syscall.SIGSTOP); err != nil {
			return nil
		}
		// A request whose headers had left before the freeze reaches the
		// fake within this: then thaw and try again.
		if err := sleep(ctx, 150*time.Millisecond); err != nil {
			return err
		}
		if c.dest.activeFor(held) == 0 {
			froze = true
			break
		}
		_ = w.signal(syscall.SIGCONT)
		if err := sleep(ctx, c.e.between(10*time.Millisecond, 200*time.Millisecond)); err != nil {
			return err
		}
	}
	if !froze {
		c.e.logf("no idle moment of %s found to freeze it", w.name)
		return nil
	}
	at := time.Now()
	c.mu.Lock()
	c.kills = append(c.kills, killRecord{At: at, Sig: syscall.SIGSTOP, Proc: w.name, Syncs: held})
	c.lastHit = at
	c.mu.Unlock()
	row.Kills++
	c.e.logf("froze %s (SIGSTOP) with no request at the fake; it held %v", w.name, held)
	deadline := at.Add(45 * time.Second)
	for {
		all := time.Since(at) > ttl
		for _, id := range held {
			if _, ok := c.progressAfter(id, at); !ok {
				all = false
			}
		}
		if all {
			break
		}
		if time.Now().After(deadline) {
			row.problemf("the syncs %v of the frozen %s made no progress elsewhere within 45 s", held, w.name)
			break
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	thawed := time.Now()
	c.e.logf("taken over after %s; SIGCONT %s", thawed.Sub(at).Round(100*time.Millisecond), w.name)
	_ = w.signal(syscall.SIGCONT)
	c.noteHit(thawed)
	if err := sleep(ctx, 3*time.Second); err != nil {
		return err
	}
	log := w.output()
	for _, l := range c.dest.landings(w.name, thawed) {
		for _, id := range held {
			// A run the thawed worker starts afterwards takes a lease of
			// its own (a new fence): its writes are not the frozen run's.
			if next, ok := runStartedAfter(log, id, thawed); ok && !l.Arrived.Before(next) {
				continue
			}
			if l.SyncID == id && l.Arrived.After(thawed) {
				row.problemf("%s landed a write of %s %s after its thaw (its lease ended while it was frozen)",
					w.name, id, l.Arrived.Sub(thawed).Round(time.Millisecond))
			}
		}
	}
	if !w.running() {
		row.notef("%s exited %d after its thaw: %s", w.name, w.exitCode(), w.lastLine())
		return c.restartWorker(i)
	}
	return nil
}

// lockCursors holds an ACCESS EXCLUSIVE lock on the store's cursors table
// from another session for hold (every checkpoint waits behind it).
func lockCursors(ctx context.Context, dbURL string, hold time.Duration) error {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	tx, err := conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.WithoutCancel(ctx))
	if _, err := tx.Exec(ctx, "LOCK TABLE oncesync.cursors IN ACCESS EXCLUSIVE MODE"); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	return sleep(ctx, hold)
}

// runStartedAfter is when the first run of syncID that a process's log
// (slog text) says started after t started.
func runStartedAfter(log, syncID string, t time.Time) (time.Time, bool) {
	for _, line := range strings.Split(log, "\n") {
		if !strings.Contains(line, `msg="run started"`) || !strings.Contains(line+" ", " sync="+syncID+" ") {
			continue
		}
		ts, ok := strings.CutPrefix(line, "time=")
		if !ok {
			continue
		}
		ts, _, _ = strings.Cut(ts, " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if err == nil && at.After(t) {
			return at, true
		}
	}
	return time.Time{}, false
}
