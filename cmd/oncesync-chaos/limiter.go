package main

import (
	"context"
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/rediskey"
)

// limiterRate is the account's limit in redis-restart-limiter: the fake's
// requests per second on /v3/contacts and every sync's rate_limit.
const limiterRate = 20

// maxLimitedAfter bounds the 429 share once Redis is back: issue 19's goal
// for the shared limit (docs/PERFORMANCE.md#shared-rate-limit-2026-12-02).
// Working, the limiter leaves only the 429s of arrival jitter across the
// fake's fixed one-second windows: 0.0-0.7 % after the restart here, 0.2 %
// in the accounts bench. Not back on Redis, the processes pace the account
// alone and send it several times its budget: a build whose fallback never
// returned to Redis saw 13.7 % here (the vendor's "remaining: 0" pauses
// each process, which keeps it from more), and 58 % in the bench before
// the shared limiter. The one burst an empty limiter allows (burst 1: one
// request per account) is far inside it.
const maxLimitedAfter = 0.05

// minAfterSeconds: the share after the restart must rest on at least this
// many seconds' worth of the account's budget, or it proves nothing.
const minAfterSeconds = 10

// phase is the /v3/contacts traffic of one stretch of the scenario.
type phase struct {
	Name        string
	From, To    time.Time
	N, Limited  int
	Accepted    int // answered other than 429
	RateAllowed int // the account's requests per second
}

func (p phase) share() float64 { return float64(p.Limited) / float64(max(p.N, 1)) }

// used is the share of the account's budget the accepted requests took.
func (p phase) used() float64 {
	s := p.To.Sub(p.From).Seconds()
	if s <= 0 {
		return 0
	}
	return float64(p.Accepted) / (float64(p.RateAllowed) * s)
}

func (p phase) String() string {
	return fmt.Sprintf("%s %.0f s: %d requests, %d answered 429 (%.1f %%), %.0f %% of the account's %d/s used",
		p.Name, p.To.Sub(p.From).Seconds(), p.N, p.Limited, 100*p.share(), 100*p.used(), p.RateAllowed)
}

func (c *cluster) phase(name string, from, to time.Time) phase {
	n, limited := c.dest.contactCalls(from, to)
	return phase{Name: name, From: from, To: to, N: n, Limited: limited, Accepted: n - limited, RateAllowed: limiterRate}
}

// judgeAfter is the limiter's verdict once Redis is back: enough requests
// to judge, and a 429 share within maxLimitedAfter.
func judgeAfter(after phase) []string {
	var problems []string
	if need := limiterRate * minAfterSeconds; after.N < need {
		problems = append(problems, fmt.Sprintf("only %d requests after Redis came back (want at least %d, %d s at the account's %d/s): too few to judge the limiter",
			after.N, need, minAfterSeconds, limiterRate))
	}
	if after.share() > maxLimitedAfter {
		problems = append(problems, fmt.Sprintf("after Redis came back %.1f %% of requests were answered 429 (limit %.0f %%): the shared limiter did not recover",
			100*after.share(), 100*maxLimitedAfter))
	}
	return problems
}

// redisRestartLimiter: six syncs (five on the single path, one request per
// record) write to one Brevo account whose fake allows 20 requests/s, over
// serve + 2 workers that share its budget through the limiter in Redis;
// Redis is SIGKILLed with requests in flight and restarted empty, so the
// limiter's state is gone. Besides the usual checks (no duplicate, nothing
// lost, final values right, every sync converging), the share of 429s once
// Redis is back must be down to the shared limit's level.
func redisRestartLimiter(ctx context.Context, e *env) (*Row, error) {
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
		d, outage = 90*time.Second, 20*time.Second
	}
	// Four CSV syncs and one PostgreSQL-table sync on the single path
	// (InitialRows/5 records each, AppendRows/5 more every 5 s: together
	// about the account's 20/s, so they contend for it all along) and one
	// bulk PostgreSQL-table sync whose imports share the budget too.
	c, err := e.newCluster(ctx, clusterParams{Syncs: 4, SingleEvery: 1, InitialRows: 1000, AppendRows: 100, PageSize: 100,
		Workers: 2, RedisURL: r.URL(), SharedAccount: true, RateLimit: limiterRate,
		Fake: fakebrevo.Options{Latency: 10 * time.Millisecond, RateLimitPerSecond: limiterRate}})
	if err != nil {
		return row, err
	}
	start := time.Now()
	key := rediskey.Default().AccountRate(destination.Account("brevo", c.dest.AccountURL(), apiKey))
	if err := sleep(ctx, d/3); err != nil {
		return row, err
	}
	// Kill with requests on the wire and the limiter's state in Redis.
	var inFlight int
	keyBefore := false
	for wait := time.Now().Add(10 * time.Second); time.Now().Before(wait); {
		inFlight, keyBefore = c.dest.busy(), c.probe.exists(ctx, key)
		if inFlight > 0 && keyBefore {
			break
		}
		if err := sleep(ctx, 5*time.Millisecond); err != nil {
			return row, err
		}
	}
	if !keyBefore {
		row.problemf("the account's limiter key was never seen in Redis before the kill: the syncs are not paced through Redis")
	}
	down := time.Now()
	if err := r.p.signal(syscall.SIGKILL); err != nil {
		return row, err
	}
	if _, ok := r.p.wait(ctx, 10*time.Second); !ok {
		return row, errors.New("redis-server survived SIGKILL")
	}
	row.Kills++
	c.noteHit(down)
	e.logf("SIGKILLed Redis with %d requests in flight at the fake; down for %s", inFlight, outage)
	if err := sleep(ctx, outage); err != nil {
		return row, err
	}
	if err := r.start(ctx); err != nil {
		return row, err
	}
	up := time.Now()
	c.outageOver(up)
	e.logf("Redis restarted (empty)")
	// The limiter must be back in Redis, not only each process pacing
	// alone: its key reappears with the first booking (after the lease
	// store's one lease TTL without grants, docs/guide.md#the-store-and-the-leases).
	keyBack := make(chan time.Time, 1)
	pollCtx, stopPoll := context.WithCancel(ctx)
	defer stopPoll()
	go func() {
		for pollCtx.Err() == nil {
			if c.probe.exists(pollCtx, key) {
				keyBack <- time.Now()
				return
			}
			_ = sleep(pollCtx, 50*time.Millisecond)
		}
	}()
	if err := sleep(ctx, time.Until(down.Add(d*2/3))); err != nil {
		return row, err
	}
	// No process may have died of the limiter's Redis going away.
	c.mu.Lock()
	procs := append([]*proc{c.serve}, c.workers...)
	c.mu.Unlock()
	for _, p := range procs {
		if !p.running() {
			row.problemf("%s exited %d during or after the outage: %s", p.name, p.exitCode(), p.lastLine())
		}
	}
	if err := c.settle(ctx, row, 5*time.Minute); err != nil {
		return row, err
	}
	end := time.Now()
	stopPoll()
	c.check(row)
	for _, id := range c.ids {
		if _, ok := c.dest.firstWriteAfter(id, up); !ok {
			row.problemf("sync %s wrote nothing after Redis came back", id)
		}
	}
	before, during, after := c.phase("before", start, down), c.phase("during the outage", down, up), c.phase("after", up, end)
	for _, p := range []phase{before, during, after} {
		row.notef("%s", p)
	}
	select {
	case at := <-keyBack:
		row.notef("%d requests in flight at the SIGKILL; the limiter's key was back in Redis %.1f s after the restart (the lease store's quarantine and River's retry of the runs that failed)",
			inFlight, at.Sub(up).Seconds())
		row.notef("%s; %s", c.phase("first 5 s of bookings on the new Redis", at, at.Add(5*time.Second)),
			c.phase("from the first booking to the end", at, end))
	default:
		row.problemf("the account's limiter key never reappeared in Redis after the restart (%s)", end.Sub(up).Round(time.Second))
	}
	for _, p := range judgeAfter(after) {
		row.problemf("%s", p)
	}
	return row, nil
}
