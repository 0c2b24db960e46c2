package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// Lease-store loss (docs/guide.md#the-store-and-the-leases, issue 13 finding 5): the Redis holding the
// leases loses its data while a run's write is on the wire, and a second run
// starts at once. The first run's write is still going to land; the second
// must not be granted the sync and write the same page (Brevo cannot check a
// fence). What the product must do: a lease store that lost its data grants
// no lease of a sync until one TTL after the loss was noticed, and the first
// run's write never outlives its own lease.

// leaseLossHold is how long the router holds the write that is on the wire
// when Redis loses its data.
const leaseLossHold = 4 * time.Second

// leaseStoreLoss: `oncesync run` on a PostgreSQL store with leases in a
// throwaway Redis (default 30 s / 10 s lease), bulk, 3,000 rows. The router
// holds one seeded import (the 2nd to 4th) for 4 s; as it arrives, Redis is
// flushed or SIGKILLed and restarted empty (seeded), and a second `oncesync
// run` of the sync is started at once. Then, one lease TTL after the loss,
// runs go on until one succeeds. Checks: no duplicate write, nothing lost,
// every final value right.
func leaseStoreLoss(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	if err := needPG(ctx, e); err != nil {
		return row, err
	}
	r, err := e.startRedis(ctx)
	if err != nil {
		return row, err
	}
	dbURL, err := e.createDatabase(ctx, e.o.DBURL)
	if err != nil {
		return row, err
	}
	const ttl = 30 * time.Second
	f, err := e.newForeground(foregroundParams{Records: 3000, PageSize: 250, Mode: "bulk", Store: dbURL, Redis: r.URL(),
		Settings: "{lease_ttl: 30s, lease_renew: 10s}", Fake: fakebrevo.Options{Latency: 10 * time.Millisecond}})
	if err != nil {
		return row, err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go f.pollCursor(pctx)

	how := []string{"flushed", "restarted empty"}[e.intN(2)]
	target := 2 + e.intN(3)
	var (
		mu       sync.Mutex
		seen     int
		lostAt   time.Time
		second   *proc
		abandon  bool // the first run gave its held write up
		nemErr   error
		writesAt int // writes the fake had applied when Redis lost its data
	)
	f.dest.setIntercept(func(_ string, w http.ResponseWriter, r2 *http.Request) bool {
		if !isWrite(r2, r2.URL.Path) {
			return false
		}
		mu.Lock()
		seen++
		hit := seen == target
		mu.Unlock()
		if !hit {
			return false
		}
		// The write is on the wire: Redis loses its data, a second run starts.
		err := loseRedis(ctx, r, how)
		p, perr := f.start()
		mu.Lock()
		lostAt, second, nemErr = time.Now(), p, firstErr(err, perr)
		writesAt = f.dest.writeCount(f.syncID)
		mu.Unlock()
		if holdOnTheWire(r2, leaseLossHold) {
			return false // it lands now
		}
		mu.Lock()
		abandon = true
		mu.Unlock()
		w.WriteHeader(http.StatusServiceUnavailable)
		return true
	})
	first, err := f.start()
	if err != nil {
		return row, err
	}
	code1, ok := first.wait(ctx, 3*time.Minute)
	if !ok {
		return row, fmt.Errorf("%s did not exit within 3 minutes:\n%s", first.name, first.tail(20))
	}
	mu.Lock()
	at, p2, nerr, before := lostAt, second, nemErr, writesAt
	mu.Unlock()
	f.dest.setIntercept(nil)
	if nerr != nil {
		return row, nerr
	}
	if at.IsZero() {
		return row, fmt.Errorf("%s exited %d before its write %d: %s", first.name, code1, target, first.lastLine())
	}
	row.notef("Redis %s while write %d of %s was on the wire (held %s); %s started at once", how, target, first.name, leaseLossHold, p2.name)
	row.notef("%s exited %d: %s", first.name, code1, first.lastLine())
	if p2 != nil {
		code2, ok := p2.wait(ctx, 3*time.Minute)
		if !ok {
			return row, fmt.Errorf("%s did not exit within 3 minutes:\n%s", p2.name, p2.tail(20))
		}
		row.notef("%s (started at the loss) exited %d: %s", p2.name, code2, p2.lastLine())
	}
	mu.Lock()
	if abandon {
		row.notef("%s gave its held write up before it landed", first.name)
	}
	mu.Unlock()
	row.notef("%d writes applied by the fake before the loss, %d after it", before, f.dest.writeCount(f.syncID)-before)

	// One lease TTL after the loss the sync must be grantable again; the
	// next runs settle what the first two left and finish.
	if err := sleep(ctx, time.Until(at.Add(ttl+2*time.Second))); err != nil {
		return row, err
	}
	var final *proc
	for attempt := 1; ; attempt++ {
		final, err = f.start()
		if err != nil {
			return row, err
		}
		code, ok := final.wait(ctx, 3*time.Minute)
		if ok && code == 0 {
			row.notef("final run %s: %s", final.name, summaryLine(final))
			break
		}
		if attempt == 4 || !ok {
			row.problemf("no run succeeded after the loss: %s exited %d (finished: %v): %s", final.name, code, ok, final.lastLine())
			break
		}
		row.notef("%s exited %d: %s; trying again in 5 s", final.name, code, final.lastLine())
		if err := sleep(ctx, 5*time.Second); err != nil {
			return row, err
		}
	}
	cancel()
	f.finish(ctx, row, []killRecord{{At: at, Proc: "redis " + how, Syncs: []string{f.syncID}}})
	return row, nil
}

// loseRedis makes the throwaway Redis lose its data: FLUSHALL, or SIGKILL
// and a restart on the same port with nothing (it persists nothing).
func loseRedis(ctx context.Context, r *throwawayRedis, how string) error {
	if strings.HasPrefix(how, "flushed") {
		opts, err := redis.ParseURL(r.URL())
		if err != nil {
			return err
		}
		c := redis.NewClient(opts)
		defer c.Close()
		return c.FlushAll(ctx).Err()
	}
	if err := r.p.signal(syscall.SIGKILL); err != nil {
		return err
	}
	if _, ok := r.p.wait(ctx, 10*time.Second); !ok {
		return fmt.Errorf("redis-server survived SIGKILL")
	}
	return r.start(ctx)
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
