package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/rediskey"
)

// The SIGTERM points of workers-sigterm, chosen per hit with the seed.
const (
	// termAnywhere: a seeded moment, to a worker holding at least one lease.
	termAnywhere = "anywhere"
	// termOnTheWire: a write of one of the worker's syncs has reached the
	// fake and not been applied yet; the drain must finish that page.
	termOnTheWire = "on-the-wire"
	// termInDoubt: the fake applied a write of the worker's and has not
	// answered yet (the in-doubt window).
	termInDoubt = "in-doubt"
	// termPastDeadline: as in-doubt, but the fake holds its answer past the
	// shared 15 s drain deadline (docs/guide.md#running-on-a-schedule-serve-and-worker): the run is cancelled mid-page,
	// its page stays in doubt, and the next run settles it by reading the
	// fake back. The worker must still exit by the 25 s exit deadline.
	termPastDeadline = "past-drain-deadline"
)

// Shutdown timings of `oncesync worker` (docs/guide.md#running-on-a-schedule-serve-and-worker; internal/queue): in-flight
// runs drain under one shared 15 s deadline, the process exits by 25 s.
const (
	workerDrainDeadline = 15 * time.Second
	workerExitDeadline  = 25 * time.Second
	// holdPastDeadline is how long the past-drain-deadline point holds the
	// fake's answer: past the drain deadline, short of the exit deadline.
	holdPastDeadline = workerDrainDeadline + 3*time.Second
)

// sigtermParams configure runWorkersSigterm.
type sigtermParams struct {
	Cluster clusterParams
	// Duration is how long the nemesis runs; Lo and Hi bound the pause
	// between one restarted worker and the next SIGTERM.
	Duration, Lo, Hi time.Duration
	// Points, when set, are the SIGTERM points in order (a test's fixed
	// sequence; the nemesis stops after the last). Else seeded, until Duration.
	Points []string
}

// workersSigterm: serve + 3 workers on PostgreSQL + Redis, 12 syncs every 5 s
// on growing sources; a worker holding leases is sent SIGTERM at a seeded
// point every 5-12 s, must exit 0 within its shutdown grace having released
// its leases and handed its runs back, and is restarted.
func workersSigterm(ctx context.Context, e *env) (*Row, error) {
	row := &Row{resumeGoal: 10 * time.Second}
	if err := needPG(ctx, e); err != nil {
		return row, err
	}
	p := sigtermParams{
		Cluster: clusterParams{Syncs: 12, SingleEvery: 4, InitialRows: 1500, AppendRows: 100, PageSize: 100,
			Workers: 3, Fake: fakebrevo.Options{Latency: 30 * time.Millisecond}},
		Duration: 3 * time.Minute, Lo: 5 * time.Second, Hi: 12 * time.Second,
	}
	if e.o.Short {
		p.Duration = 90 * time.Second
		p.Cluster.InitialRows, p.Cluster.AppendRows = 1000, 60
	}
	return row, runWorkersSigterm(ctx, e, row, p)
}

// termRecord is one SIGTERM and what came of it.
type termRecord struct {
	Point  string
	Worker string
	PID    int
	At     time.Time
	Exited time.Time
	Code   int
	// Runs are the victim's runs at the SIGTERM, by sync (from the leases).
	Runs map[string]int64
	// Held is the sync whose write triggered the SIGTERM ("" for anywhere).
	Held string
}

// runWorkersSigterm is workers-sigterm with any parameters (the test runs a
// small one).
func runWorkersSigterm(ctx context.Context, e *env, row *Row, p sigtermParams) error {
	c, err := e.newCluster(ctx, p.Cluster)
	if err != nil {
		return err
	}
	var terms []termRecord
	points := map[string]int{}
	next := 0
	hit := func() error {
		point := ""
		switch {
		case p.Points != nil && next < len(p.Points):
			point = p.Points[next]
			next++
		case p.Points != nil:
			return nil
		default:
			point = []string{termAnywhere, termOnTheWire, termInDoubt, termPastDeadline}[e.intN(4)]
		}
		t, err := sigtermWorker(ctx, e, c, row, point)
		if err != nil {
			return err
		}
		terms = append(terms, t)
		points[t.Point]++
		row.Kills++
		if err := sleep(ctx, e.between(0, 2*time.Second)); err != nil {
			return err
		}
		return c.restartWorker(slices.IndexFunc(c.workers, func(w *proc) bool { return w.name == t.Worker }))
	}
	if p.Points != nil {
		for range p.Points {
			if err := sleep(ctx, e.between(p.Lo, p.Hi)); err != nil {
				return err
			}
			if err := hit(); err != nil {
				return err
			}
		}
	} else if err := nemesisUntil(ctx, e, p.Duration, p.Lo, p.Hi, hit); err != nil {
		return err
	}
	if err := settleDrained(ctx, c, row, terms, 5*time.Minute); err != nil {
		return err
	}
	c.check(row)
	sigtermSummary(ctx, c, row, terms, points)
	return nil
}

// sigtermWorker sends SIGTERM to a worker at point, waits for it to exit and
// checks the exit: code 0 with the stopped line, within the drain deadline
// (the exit deadline for past-drain-deadline), no lease left held by it, none
// of its runs left running, none of its River jobs left running.
func sigtermWorker(ctx context.Context, e *env, c *cluster, row *Row, point string) (termRecord, error) {
	victim, at, runs, point, held := armSigterm(ctx, e, c, point)
	if victim == nil {
		return termRecord{}, fmt.Errorf("no worker to send SIGTERM to")
	}
	t := termRecord{Point: point, Worker: victim.name, PID: victim.pid(), At: at, Runs: runs, Held: held}
	code, ok := victim.wait(ctx, workerExitDeadline+15*time.Second)
	if !ok {
		if ctx.Err() != nil {
			return t, ctx.Err()
		}
		row.problemf("%s (pid %d, SIGTERM %s) did not exit within %s", victim.name, t.PID, point, workerExitDeadline+15*time.Second)
		victim.stop()
		code = victim.exitCode()
	}
	t.Exited, t.Code = victim.exited, code
	took := t.Exited.Sub(t.At)
	e.logf("kill %d: SIGTERM %s (pid %d) %s, holding %d syncs: exit %d after %s", row.Kills+1, victim.name, t.PID, point,
		len(runs), code, took.Round(time.Millisecond))
	switch {
	case code != 0:
		row.problemf("%s (SIGTERM %s) exited %d, want 0: %s", victim.name, point, code, victim.lastLine())
	case !strings.Contains(victim.output(), "worker: stopped"):
		row.problemf("%s (SIGTERM %s) exited 0 without its stopped line: %s", victim.name, point, victim.lastLine())
	}
	limit := workerDrainDeadline
	if point == termPastDeadline {
		limit = workerExitDeadline
	}
	if took > limit {
		row.problemf("%s (SIGTERM %s) took %s to exit (limit %s)", victim.name, point, took.Round(time.Millisecond), limit)
	}

	// Right after the exit: the victim's leases were released (not left to
	// expire), its runs ended, and its River jobs were handed back.
	ids := make([]string, 0, len(runs))
	for id := range runs {
		ids = append(ids, id)
	}
	sortStrings(ids)
	if still := c.probe.heldBy(ctx, c.ids, t.PID); len(still) > 0 {
		row.problemf("%s exited on SIGTERM still holding the lease of %v (the sync waits for the TTL)", victim.name, still)
	}
	states, err := runStates(ctx, c.probe, runs)
	if err != nil {
		return t, fmt.Errorf("read the victim's runs: %w", err)
	}
	for _, id := range ids {
		if states[id].State == "running" {
			row.problemf("%s exited on SIGTERM with run %d of %s still recorded running", victim.name, runs[id], id)
		}
	}
	if jobs, err := c.probe.runningJobs(ctx); err != nil {
		row.problemf("read River's running jobs after %s exited: %v", victim.name, err)
	} else {
		for _, id := range ids {
			for _, ja := range jobs[id] {
				if ja.Before(t.At) {
					row.problemf("%s exited on SIGTERM leaving the River job of %s running (attempted %s before the SIGTERM)",
						victim.name, id, t.At.Sub(ja).Round(time.Millisecond))
				}
			}
		}
	}
	c.mu.Lock()
	c.lastHit = t.Exited
	c.mu.Unlock()
	return t, nil
}

// armSigterm picks the victim and sends SIGTERM at point; it returns the
// victim, when the signal went, the victim's runs by sync (read from their
// leases just before the signal), the point used (a point whose hook does
// not fire within 30 s falls back to anywhere) and the sync whose write
// triggered it.
func armSigterm(ctx context.Context, e *env, c *cluster, point string) (*proc, time.Time, map[string]int64, string, string) {
	var (
		mu     sync.Mutex
		victim *proc
		at     time.Time
		runs   map[string]int64
		held   string
	)
	fired := make(chan struct{})
	// term sends SIGTERM to the running worker holding syncID's lease, once.
	term := func(syncID string) bool {
		mu.Lock()
		defer mu.Unlock()
		if victim != nil {
			return false
		}
		pid := holderPID(c.probe.holders(ctx, []string{syncID})[syncID])
		c.mu.Lock()
		workers := append([]*proc(nil), c.workers...)
		c.mu.Unlock()
		for _, w := range workers {
			if pid != 0 && w.pid() == pid && w.running() {
				runs = leaseRuns(ctx, c.probe, c.probe.heldBy(ctx, c.ids, pid))
				at = time.Now()
				_ = w.signal(syscall.SIGTERM)
				victim, held = w, syncID
				close(fired)
				return true
			}
		}
		return false // serve holds it: wait for another write
	}
	switch point {
	case termOnTheWire:
		c.dest.setIntercept(func(syncID string, _ http.ResponseWriter, r *http.Request) bool {
			if isWrite(r, r.URL.Path) {
				term(syncID)
			}
			return false // the fake applies it; the draining worker must hear back and checkpoint
		})
	case termInDoubt, termPastDeadline:
		c.dest.setAfterWrite(func(syncID string) {
			if term(syncID) && point == termPastDeadline {
				// Hold the answer past the drain deadline: the run is
				// cancelled with its page in doubt.
				_ = sleep(ctx, holdPastDeadline)
			}
		})
	}
	if point != termAnywhere {
		select {
		case <-fired:
		case <-time.After(30 * time.Second):
		case <-ctx.Done():
		}
		c.dest.setIntercept(nil)
		c.dest.setAfterWrite(nil)
		mu.Lock()
		defer mu.Unlock()
		if victim != nil {
			return victim, at, runs, point, held
		}
		e.logf("no worker wrote within 30 s for a SIGTERM %s: falling back to anywhere", point)
		victim = &proc{} // disarm term
		point = termAnywhere
	}
	i := c.busyWorker(ctx)
	c.mu.Lock()
	w := c.workers[i]
	c.mu.Unlock()
	runs = leaseRuns(ctx, c.probe, c.probe.heldBy(ctx, c.ids, w.pid()))
	at = time.Now()
	_ = w.signal(syscall.SIGTERM)
	return w, at, runs, point, ""
}

// leaseRuns reads the run id recorded in each sync's Redis lease.
func leaseRuns(ctx context.Context, p *probe, syncIDs []string) map[string]int64 {
	out := map[string]int64{}
	keys := rediskey.Default()
	for _, id := range syncIDs {
		out[id] = 0
		if p.redis == nil {
			continue
		}
		if v, err := p.redis.HGet(ctx, keys.Lease(id), "run_id").Result(); err == nil {
			out[id], _ = strconv.ParseInt(v, 10, 64)
		}
	}
	return out
}

// runEnd is a run's state and, once it ended, when.
type runEnd struct {
	State    string
	Finished time.Time
	Detail   string
}

// runStates reads the state of each run (by sync; run id 0 is skipped).
func runStates(ctx context.Context, p *probe, runs map[string]int64) (map[string]runEnd, error) {
	out := map[string]runEnd{}
	for id, run := range runs {
		if run == 0 {
			continue
		}
		var e runEnd
		var fin *int64
		if err := p.db.QueryRowContext(ctx, "SELECT state, finished_at, failure_detail FROM "+p.prefix+"runs WHERE id = $1", run).
			Scan(&e.State, &fin, &e.Detail); err != nil {
			return nil, fmt.Errorf("run %d of %s: %w", run, id, err)
		}
		if fin != nil {
			e.Finished = time.Unix(0, *fin)
		}
		out[id] = e
	}
	return out, nil
}

// nextRunStart is the start of syncID's first run (not skipped) after t.
func nextRunStart(ctx context.Context, p *probe, syncID string, t time.Time) (time.Time, bool) {
	var ns *int64
	err := p.db.QueryRowContext(ctx, "SELECT min(started_at) FROM "+p.prefix+"runs WHERE sync_id = $1 AND state <> 'skipped' AND started_at > $2",
		syncID, t.UnixNano()).Scan(&ns)
	if err != nil || ns == nil {
		return time.Time{}, false
	}
	return time.Unix(0, *ns), true
}

// nextRunSettled is n_settled of syncID's first run (not skipped) after t,
// -1 when there is none.
func nextRunSettled(ctx context.Context, p *probe, syncID string, t time.Time) int64 {
	var n int64
	err := p.db.QueryRowContext(ctx, "SELECT n_settled FROM "+p.prefix+"runs WHERE sync_id = $1 AND state <> 'skipped' AND started_at > $2 ORDER BY started_at LIMIT 1",
		syncID, t.UnixNano()).Scan(&n)
	if err != nil {
		return -1
	}
	return n
}

// settleDrained stops the sources growing, waits for every row to be
// delivered, then stops every process with SIGTERM (shutdown's checks). No
// lease-expiry horizon: a SIGTERM leaves nothing for recovery to find, and
// sigtermWorker checked that after every exit.
func settleDrained(ctx context.Context, c *cluster, row *Row, terms []termRecord, limit time.Duration) error {
	if c.p.SettleLimit > 0 {
		limit = c.p.SettleLimit
	}
	c.stopAppending()
	c.e.logf("settling: sources frozen at %d rows after %d SIGTERMs; waiting for delivery", c.totalRows(), len(terms))
	deadline := time.Now().Add(limit)
	for !c.caughtUp(ctx) {
		if time.Now().After(deadline) {
			row.problemf("not every row was delivered %s after the sources stopped growing", limit)
			c.diagnose(ctx, row)
			break
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return err
		}
	}
	c.e.logf("settled: stopping every process with SIGTERM")
	return c.shutdown(ctx, row)
}

// sigtermSummary adds the resume times (exit to the next run of every sync
// whose run the SIGTERM interrupted) and the notes.
func sigtermSummary(ctx context.Context, c *cluster, row *Row, terms []termRecord, points map[string]int) {
	var drains, deadlineDrains []time.Duration
	outcomes := map[string]int{}
	slow := 0
	for _, t := range terms {
		d := t.Exited.Sub(t.At)
		if t.Point == termPastDeadline {
			deadlineDrains = append(deadlineDrains, d)
		} else {
			drains = append(drains, d)
		}
		states, err := runStates(ctx, c.probe, t.Runs)
		if err != nil {
			row.problemf("read the runs of %s: %v", t.Worker, err)
			continue
		}
		if t.Point == termPastDeadline && t.Held != "" {
			// The run whose answer was held must have been cancelled at
			// the drain deadline, mid-page, and ended interrupted.
			h := states[t.Held]
			settled := int64(-1)
			if !h.Finished.IsZero() {
				settled = nextRunSettled(ctx, c.probe, t.Held, h.Finished)
			}
			row.notef("%s past the drain deadline: its run of %s (answer held) ended %s after %s (%s); the next run settled %d in-doubt records by reading back",
				t.Worker, t.Held, h.State, h.Finished.Sub(t.At).Round(time.Millisecond), h.Detail, settled)
			if h.State != "interrupted" {
				row.problemf("%s's run of %s, cancelled at the drain deadline, ended %s, want interrupted", t.Worker, t.Held, h.State)
			}
		}
		for id, run := range t.Runs {
			st := states[id].State
			if run == 0 {
				st = "lease gone before the signal"
			}
			outcomes[st]++
			if st != "interrupted" {
				continue // it finished its run while draining: nothing to resume
			}
			// From the moment the interrupted run ended (it released the
			// lease and handed its job back then), not from the exit: in a
			// past-drain-deadline stop the other runs end at once.
			from := states[id].Finished
			if from.IsZero() || from.After(t.Exited) {
				from = t.Exited
			}
			next, ok := nextRunStart(ctx, c.probe, id, from)
			if !ok {
				row.problemf("%s's run of %s was interrupted by SIGTERM and never resumed", t.Worker, id)
				continue
			}
			r := next.Sub(from)
			c.e.vlogf("resume of %s after %s's run ended (SIGTERM %s): %s", id, t.Worker, t.Point, r.Round(time.Millisecond))
			row.Resume = append(row.Resume, r)
			if r >= c.p.LeaseTTL {
				slow++
			}
		}
	}
	if slow > 0 {
		row.problemf("%d interrupted runs resumed only after a lease TTL (%s) or more: a lease was left to expire", slow, c.p.LeaseTTL)
	}
	row.notef("SIGTERM points: %v; the victims' runs at the signal ended: %v", points, outcomes)
	if len(drains) > 0 {
		slices.Sort(drains)
		row.notef("SIGTERM to exit (page-boundary drains): %d, p50 %s, max %s (limit %s)", len(drains),
			pct(drains, 0.5).Round(time.Millisecond), drains[len(drains)-1].Round(time.Millisecond), workerDrainDeadline)
	}
	if len(deadlineDrains) > 0 {
		slices.Sort(deadlineDrains)
		row.notef("SIGTERM to exit past the drain deadline (answer held %s): %d, min %s, max %s (limit %s)", holdPastDeadline,
			len(deadlineDrains), deadlineDrains[0].Round(time.Millisecond), deadlineDrains[len(deadlineDrains)-1].Round(time.Millisecond), workerExitDeadline)
	}
	row.notef("resume is measured from the end of each run the SIGTERM interrupted (its lease released, its job handed back) to the next run of its sync")
}
