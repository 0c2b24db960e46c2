package main

import (
	"context"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// A source table locked by another session mid-run (a migration's ALTER
// TABLE, a LOCK TABLE, a transaction left open) made every page read wait
// for as long as the lock lasted: the run held its sync's lease, and every
// later run was skipped as already running. source.timeout bounds one read
// (docs/guide.md, "A table another session holds locked").

const (
	// lockedSourceTimeout is the scenario's source.timeout.
	lockedSourceTimeout = 5 * time.Second
	// sourceLockHeld is how long the other session holds the lock: far
	// longer than the timeout, so a run that waits it out is told apart.
	sourceLockHeld = 40 * time.Second
)

// sourceLocked: `oncesync run` on a PostgreSQL store, source a PostgreSQL
// table of 2,000 rows (keyset on updated_at, identity id), single path,
// source.timeout 5s. Once a seeded share of the rows is at the destination,
// another session takes LOCK TABLE ... ACCESS EXCLUSIVE on the source table
// and holds it 40 s. Checks: the run fails with source_unavailable within
// the timeout and a margin of the lock (not after the lock ends), and the
// runs after it deliver every row with its values, none written twice.
func sourceLocked(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	dbURL, src, err := e.newPGSourceDB(ctx, "fg-locked", 2000)
	if err != nil {
		return row, err
	}
	src.timeout = lockedSourceTimeout.String()
	f, err := e.newForeground(foregroundParams{PageSize: 50, Mode: "single", Source: src, Store: dbURL,
		Fake: fakebrevo.Options{Latency: 20 * time.Millisecond}})
	if err != nil {
		return row, err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go f.pollCursor(pctx)

	p, err := f.start()
	if err != nil {
		return row, err
	}
	at := int64(200 + e.intN(1001)) // rows at the destination when the lock is taken
	for f.dest.fake.Stats().Contacts < at && p.running() {
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return row, err
		}
	}
	if !p.running() {
		row.problemf("%s ended before the lock (%d rows at the destination): %s", p.name, f.dest.fake.Stats().Contacts, p.lastLine())
		return row, nil
	}
	lockConn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return row, err
	}
	defer lockConn.Close(context.WithoutCancel(ctx))
	tx, err := lockConn.Begin(ctx)
	if err != nil {
		return row, err
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE "+src.table+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		return row, err
	}
	locked := time.Now()
	row.Kills++
	e.logf("source table locked with %d rows at the destination", f.dest.fake.Stats().Contacts)
	code, ok := p.wait(ctx, sourceLockHeld)
	took := time.Since(locked)
	switch {
	case !ok:
		p.stop()
		row.problemf("%s still waited on the locked source after %s (source.timeout %s)", p.name, sourceLockHeld, lockedSourceTimeout)
	case code != 1 || !strings.Contains(p.output(), "source_unavailable") || !strings.Contains(p.output(), "no answer within "+lockedSourceTimeout.String()):
		row.problemf("%s under the lock exited %d after %s, want 1 with source_unavailable (no answer within %s): %s",
			p.name, code, took.Round(time.Millisecond), lockedSourceTimeout, p.tail(3))
	case took > lockedSourceTimeout+10*time.Second:
		row.problemf("%s gave up %s after the lock, want within %s and a margin", p.name, took.Round(time.Millisecond), lockedSourceTimeout)
	default:
		row.notef("%s gave up %s after the lock: %s", p.name, took.Round(100*time.Millisecond), p.lastLine())
	}
	if err := sleep(ctx, time.Until(locked.Add(sourceLockHeld))); err != nil {
		return row, err
	}
	if err := tx.Rollback(ctx); err != nil {
		return row, err
	}
	released := time.Now()
	for _, what := range []string{"after the lock", "again"} {
		p, ok, err := f.runToSuccess(ctx, row, what, 3*time.Minute)
		if err != nil {
			return row, err
		}
		if ok {
			row.notef("%s (%s): %s", p.name, what, summaryLine(p))
		}
	}
	cancel()
	f.finish(ctx, row, []killRecord{{At: released, Proc: "lock released", Syncs: []string{f.syncID}}})
	return row, nil
}
