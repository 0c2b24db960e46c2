package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// nemesisUntil runs hit at seeded intervals in [lo, hi] until d has passed.
func nemesisUntil(ctx context.Context, e *env, d, lo, hi time.Duration, hit func() error) error {
	end := time.Now().Add(d)
	for {
		wait := e.between(lo, hi)
		if time.Now().Add(wait).After(end) {
			return sleep(ctx, time.Until(end))
		}
		if err := sleep(ctx, wait); err != nil {
			return err
		}
		if err := hit(); err != nil {
			return err
		}
	}
}

// workersKill9: serve + 3 workers on PostgreSQL + Redis, 20 syncs every 5 s
// on sources that keep growing, a busy worker SIGKILLed every ~20 s
// (seeded jitter) and restarted.
func workersKill9(ctx context.Context, e *env) (*Row, error) {
	return kill9Workers(ctx, e, false)
}

// workersKill9Machines is workersKill9 with every worker in a PID
// namespace of its own: the leader's process check (lease.DeadHere) never
// sees one die, so every takeover waits for the lease to expire, as when
// the workers run on other machines (docs/RELIABILITY.md#resume-after-a-kill).
func workersKill9Machines(ctx context.Context, e *env) (*Row, error) {
	if os.Geteuid() != 0 {
		return &Row{}, errors.New("workers-kill9-machines needs root (a PID namespace per worker)")
	}
	return kill9Workers(ctx, e, true)
}

func kill9Workers(ctx context.Context, e *env, machines bool) (*Row, error) {
	row := &Row{resumeGoal: 45 * time.Second}
	if err := needPG(ctx, e); err != nil {
		return row, err
	}
	p := clusterParams{Syncs: 20, SingleEvery: 4, InitialRows: 1500, AppendRows: 150, PageSize: 100,
		Workers: 3, Fake: fakebrevo.Options{Latency: 30 * time.Millisecond}, VendorSyncs: true, Machines: machines}
	if e.o.Short {
		p.InitialRows, p.AppendRows = 1000, 100
	}
	return row, runKillCluster(ctx, e, row, p, e.o.Duration, 15*time.Second, 25*time.Second)
}

// runKillCluster is workers-kill9 with any parameters (the test runs a small one).
func runKillCluster(ctx context.Context, e *env, row *Row, p clusterParams, d, lo, hi time.Duration) error {
	c, err := e.newCluster(ctx, p)
	if err != nil {
		return err
	}
	err = nemesisUntil(ctx, e, d, lo, hi, func() error {
		i := c.busyWorker(ctx)
		w := c.workers[i]
		k := c.hit(ctx, w, syscall.SIGKILL)
		if _, ok := w.wait(ctx, 10*time.Second); !ok {
			return fmt.Errorf("%s survived SIGKILL", w.name)
		}
		row.Kills++
		e.logf("kill %d: SIGKILL %s (pid %d), which held %d of %d syncs; restarting it", row.Kills, w.name, w.pid(), len(k.Syncs), p.Syncs)
		if err := sleep(ctx, e.between(0, 2*time.Second)); err != nil {
			return err
		}
		return c.restartWorker(i)
	})
	if err != nil {
		return err
	}
	if err := c.settle(ctx, row, 5*time.Minute); err != nil {
		return err
	}
	c.check(row)
	return nil
}

// redisRestart: a throwaway Redis stopped for 30 s mid-run, then restarted
// empty (no persistence): leases are gone, the store's fences stay.
func redisRestart(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	if err := needPG(ctx, e); err != nil {
		return row, err
	}
	r, err := e.startRedis(ctx)
	if err != nil {
		return row, err
	}
	d, outage := 2*time.Minute, 30*time.Second
	if e.o.Short {
		d = 90 * time.Second
	}
	c, err := e.newCluster(ctx, clusterParams{Syncs: 8, SingleEvery: 4, InitialRows: 1500, AppendRows: 100, PageSize: 200,
		Workers: 2, RedisURL: r.URL(), Fake: fakebrevo.Options{Latency: 10 * time.Millisecond}})
	if err != nil {
		return row, err
	}
	if err := sleep(ctx, d/3); err != nil {
		return row, err
	}
	keys := c.probe.redisKeys(ctx)
	held := c.probe.holders(ctx, c.ids)
	down := time.Now()
	if err := r.stop(ctx); err != nil {
		return row, err
	}
	row.Kills++
	c.noteHit(down)
	before := totalWrites(c)
	e.logf("stopped Redis (it held %d oncesync keys; %d syncs had a live lease) for %s", keys, len(held), outage)
	if err := sleep(ctx, outage); err != nil {
		return row, err
	}
	during := totalWrites(c) - before
	if err := r.start(ctx); err != nil {
		return row, err
	}
	c.outageOver(time.Now())
	e.logf("Redis restarted (empty); %d writes were accepted while it was down", during)
	row.notef("Redis held %d oncesync keys before the stop; %d writes accepted during the %s outage (a run may write until its lease time runs out)",
		keys, during, outage)
	if err := sleep(ctx, time.Until(down.Add(d*2/3))); err != nil {
		return row, err
	}
	if err := c.settle(ctx, row, 5*time.Minute); err != nil {
		return row, err
	}
	c.check(row)
	return row, nil
}

func totalWrites(c *cluster) int {
	n := 0
	for _, id := range c.ids {
		n += c.dest.writeCount(id)
	}
	return n
}

// destinationFaults: the fake answers 2 % of requests 503, 2 % 429, cuts
// 2 % of write responses after applying the write, and holds 0.5 % of
// writes 4 s, past the syncs' 2 s attempt timeout, before applying them
// (late writes: a read-back before they land would send them twice), for
// the whole scenario; on top, the router injects seeded phases: 5xx
// bursts, 429 storms and slow responses (1.5 s each).
func destinationFaults(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	if err := needPG(ctx, e); err != nil {
		return row, err
	}
	d := 2 * time.Minute
	if e.o.Short {
		d = 75 * time.Second
	}
	c, err := e.newCluster(ctx, clusterParams{Syncs: 8, SingleEvery: 2, InitialRows: 1500, AppendRows: 100, PageSize: 200,
		Workers: 2, DestTimeout: 2 * time.Second, Fake: fakebrevo.Options{Latency: 10 * time.Millisecond, ErrorRate: 0.02,
			RateLimitRate: 0.02, DropResponseRate: e.o.DropRate, HoldWriteRate: 0.005, HoldWrite: 4 * time.Second}})
	if err != nil {
		return row, err
	}
	phases := map[string]int{}
	err = nemesisUntil(ctx, e, d, 5*time.Second, 10*time.Second, func() error {
		var f fault
		var name string
		var long time.Duration
		switch e.intN(3) {
		case 0:
			f, name, long = fault{Status: http.StatusServiceUnavailable}, "5xx burst", e.between(3*time.Second, 8*time.Second)
		case 1:
			f, name, long = fault{Status: http.StatusTooManyRequests}, "429 storm", e.between(3*time.Second, 8*time.Second)
		default:
			f, name, long = fault{Delay: 1500 * time.Millisecond}, "slow responses", 10*time.Second
		}
		e.vlogf("%s for %s", name, long)
		c.dest.setFault(f)
		c.noteHit(time.Now())
		err := sleep(ctx, long)
		c.dest.setFault(fault{})
		phases[name]++
		row.Kills++
		return err
	})
	if err != nil {
		return row, err
	}
	st := c.dest.fake.Stats()
	row.notef("router phases: %v; the fake's own faults throughout: 2%% 503, 2%% 429, %g%% responses cut after the write, %d writes held 4 s (%d of them applied after their client gave up)",
		phases, 100*e.o.DropRate, st.Held, st.HeldAbandoned)
	// A run that failed on a burst is retried by River after 60 s (then 120 s).
	if err := c.settle(ctx, row, 6*time.Minute); err != nil {
		return row, err
	}
	c.check(row)
	return row, nil
}

// zombie: a worker is frozen with SIGSTOP once one of its writes has been
// fully sent (the fake applies it; the worker hears back only after SIGCONT), past
// its 3 s lease; another worker takes its syncs over; then SIGCONT. The
// zombie must be fenced: nothing written twice.
func zombie(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	if err := needPG(ctx, e); err != nil {
		return row, err
	}
	const ttl = 3 * time.Second
	p := clusterParams{Syncs: 4, InitialRows: 4000, AppendRows: 100, PageSize: 100,
		Workers: 2, Slots: 2, Settings: "{lease_ttl: 3s, lease_renew: 1s}", LeaseTTL: ttl,
		Fake: fakebrevo.Options{Latency: 40 * time.Millisecond}}
	if e.o.Short {
		p.SettleLimit = 90 * time.Second
	}
	c, err := e.newCluster(ctx, p)
	if err != nil {
		return row, err
	}
	var (
		mu     sync.Mutex
		frozen *proc
		k      killRecord
	)
	armed := make(chan struct{})
	froze := make(chan struct{})
	c.dest.setIntercept(func(syncID string, w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-armed:
		default:
			return false
		}
		if !isWrite(r, r.URL.Path) {
			return false
		}
		mu.Lock()
		defer mu.Unlock()
		if frozen != nil {
			return false
		}
		pid := holderPID(c.probe.holders(ctx, []string{syncID})[syncID])
		c.mu.Lock()
		workers := append([]*proc(nil), c.workers...)
		c.mu.Unlock()
		for _, wp := range workers {
			if wp.pid() == pid && wp.running() {
				// Freeze only once the whole request has left the worker: a
				// zombie frozen half-way through sending finishes the send
				// when it wakes, after its successor found nothing landed
				// and wrote the page. That is the one gap no client-side
				// check can close (docs/RELIABILITY.md), not what this
				// scenario measures.
				body, err := io.ReadAll(r.Body)
				if err != nil {
					return false
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				frozen = wp
				k = c.hit(ctx, wp, syscall.SIGSTOP)
				close(froze)
				break
			}
		}
		return false // the fake applies the write; the frozen worker hears back after SIGCONT
	})
	arm := e.between(3*time.Second, 8*time.Second)
	if e.o.Short {
		arm = e.between(2*time.Second, 4*time.Second)
	}
	if err := sleep(ctx, arm); err != nil {
		return row, err
	}
	close(armed)
	select {
	case <-froze:
	case <-time.After(90 * time.Second):
		return row, fmt.Errorf("no worker wrote within 90 s of arming the freeze")
	case <-ctx.Done():
		return row, ctx.Err()
	}
	c.dest.setIntercept(nil)
	row.Kills++
	e.logf("froze %s (SIGSTOP) with a write on the wire; it held %v", frozen.name, k.Syncs)
	// Wait until every sync it held progressed without it.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		all := true
		for _, id := range k.Syncs {
			if _, ok := c.progressAfter(id, k.At); !ok {
				all = false
			}
		}
		if all && time.Since(k.At) > ttl {
			break
		}
		if time.Now().After(deadline) {
			row.problemf("the frozen worker's syncs were not taken over within 2 minutes")
			break
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return row, err
		}
	}
	e.logf("taken over after %s; SIGCONT %s", time.Since(k.At).Round(100*time.Millisecond), frozen.name)
	if err := frozen.signal(syscall.SIGCONT); err != nil {
		return row, err
	}
	c.noteHit(time.Now())
	if err := sleep(ctx, 5*time.Second); err != nil {
		return row, err
	}
	if !frozen.running() {
		row.notef("the thawed worker exited %d: %s", frozen.exitCode(), frozen.lastLine())
	}
	lostLines := strings.Count(frozen.output(), "lease_lost") + strings.Count(frozen.output(), "lost its slot")
	row.notef("froze %s holding %d syncs; its log mentions the lost lease %d times after SIGCONT", frozen.name, len(k.Syncs), lostLines)
	if err := c.settle(ctx, row, 4*time.Minute); err != nil {
		return row, err
	}
	c.check(row)
	return row, nil
}

// pgRestart: the store's PostgreSQL restarted mid-run. It runs a throwaway
// PostgreSQL (initdb + pg_ctl) so it can be restarted; when that is not
// possible, it terminates the store's connections with pg_terminate_backend
// three times instead (the row's notes say which).
func pgRestart(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	d, outage := 2*time.Minute, 10*time.Second
	if e.o.Short {
		d = 90 * time.Second
	}
	pg, perr := e.startPG(ctx)
	p := clusterParams{Syncs: 8, SingleEvery: 4, InitialRows: 1500, AppendRows: 100, PageSize: 200,
		Workers: 2, Fake: fakebrevo.Options{Latency: 10 * time.Millisecond}}
	if perr == nil {
		p.ServerURL = pg.URL()
	} else {
		if err := needPG(ctx, e); err != nil {
			return row, err
		}
		row.notef("no throwaway PostgreSQL (%v): terminating the store's connections instead", perr)
	}
	c, err := e.newCluster(ctx, p)
	if err != nil {
		return row, err
	}
	if err := sleep(ctx, d/3); err != nil {
		return row, err
	}
	if perr == nil {
		down := time.Now()
		before := totalWrites(c)
		if err := pg.stop(ctx); err != nil {
			return row, err
		}
		row.Kills++
		c.noteHit(down)
		e.logf("stopped PostgreSQL (pg_ctl stop -m fast) for %s", outage)
		if err := sleep(ctx, outage); err != nil {
			return row, err
		}
		during := totalWrites(c) - before
		if err := pg.start(ctx); err != nil {
			return row, err
		}
		c.outageOver(time.Now())
		e.logf("PostgreSQL restarted; %d writes were accepted while it was down", during)
		row.notef("throwaway PostgreSQL stopped (pg_ctl stop -m fast) for %s and restarted; %d writes accepted while it was down", outage, during)
	} else {
		for i := range 3 {
			n, err := terminateBackends(ctx, c.dbURL)
			if err != nil {
				return row, err
			}
			row.Kills++
			c.noteHit(time.Now())
			e.logf("terminated %d backends of the store's database (%d of 3)", n, i+1)
			if err := sleep(ctx, d/9); err != nil {
				return row, err
			}
		}
	}
	if err := sleep(ctx, d/3); err != nil {
		return row, err
	}
	if err := c.settle(ctx, row, 5*time.Minute); err != nil {
		return row, err
	}
	c.check(row)
	return row, nil
}

// terminateBackends ends every other connection to the database of dbURL.
func terminateBackends(ctx context.Context, dbURL string) (int, error) {
	conn, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
	return n, err
}
