package main

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"time"

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
	return loseLeaseStore(ctx, e, lossParams{
		How: []string{"flushed", "restarted empty"}[e.intN(2)], Target: 2 + e.intN(3),
		TTL: 30 * time.Second, Settings: "{lease_ttl: 30s, lease_renew: 10s}", PageSize: 250,
		Latency: 10 * time.Millisecond, Hold: leaseLossHold,
	})
}

// leaseStoreSnapshot: Redis comes back with the lease's data but without
// the holder's last renewals (docs/guide.md#the-store-and-the-leases). As in
// leaseStoreLoss, with 4,000 rows, a 6 s / 2 s lease and a 2 s in-doubt
// grace, imports of 100 rows taking 0.6 s (a run of about 20 s): Redis is
// snapshotted (SAVE) at the first import, and at the first import 9 to 12 s
// (seeded; past the snapshot's lease end and the grace) later, held 5 s on
// the wire and then applied whatever its client did meanwhile, it is
// SIGKILLed and restarted from that snapshot, whose copy of the lease
// expired long ago while its holder renewed it every 2 s, and a second run
// starts at once. Without the server-switch rule the second run is granted
// the sync at once, finds the held page's records absent and sends them
// again, then the held write lands.
func leaseStoreSnapshot(ctx context.Context, e *env) (*Row, error) {
	return loseLeaseStore(ctx, e, lossParams{
		How: "restarted from a snapshot", After: e.between(9*time.Second, 12*time.Second), Records: 4000,
		TTL: 6 * time.Second, Settings: "{lease_ttl: 6s, lease_renew: 2s, in_doubt_grace: 2s}", PageSize: 100,
		Latency: 600 * time.Millisecond, Hold: 5 * time.Second, LandAnyway: true,
	})
}

// lossParams is one way for the lease store to lose a run's lease while
// its write is on the wire.
type lossParams struct {
	// How Redis loses it: "flushed", "restarted empty", or "restarted from
	// a snapshot" (taken at the first write).
	How string
	// Target is the write held when the loss happens; with After set, the
	// first write at least After past the snapshot is.
	Target int
	After  time.Duration
	// TTL is the lease TTL that Settings gives.
	TTL      time.Duration
	Settings string
	// Records is the CSV's size (default 3,000).
	Records  int
	PageSize int
	Latency  time.Duration
	// Hold is how long the router holds the target write; with LandAnyway
	// it lands after that even if its client gave it up.
	Hold       time.Duration
	LandAnyway bool
}

func loseLeaseStore(ctx context.Context, e *env, lp lossParams) (*Row, error) {
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
	ttl, how := lp.TTL, lp.How
	f, err := e.newForeground(foregroundParams{Records: cmp.Or(lp.Records, 3000), PageSize: lp.PageSize, Mode: "bulk", Store: dbURL, Redis: r.URL(),
		Settings: lp.Settings, Fake: fakebrevo.Options{Latency: lp.Latency}})
	if err != nil {
		return row, err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go f.pollCursor(pctx)

	var (
		mu       sync.Mutex
		seen     int
		target   int
		savedAt  time.Time // the snapshot
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
		var hit, save bool
		switch {
		case lp.After == 0:
			hit = seen == lp.Target
		case savedAt.IsZero():
			save, savedAt = true, time.Now()
		default:
			hit = lostAt.IsZero() && target == 0 && time.Since(savedAt) >= lp.After
		}
		if hit {
			target = seen
		}
		mu.Unlock()
		if save {
			if err := r.save(ctx); err != nil {
				mu.Lock()
				nemErr = err
				mu.Unlock()
			}
		}
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
		if lp.LandAnyway {
			landAnyway(r2, lp.Hold)
			return false
		}
		if holdOnTheWire(r2, lp.Hold) {
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
	at, p2, nerr, before, held, writes := lostAt, second, nemErr, writesAt, target, seen
	mu.Unlock()
	f.dest.setIntercept(nil)
	if nerr != nil {
		return row, nerr
	}
	if at.IsZero() {
		return row, fmt.Errorf("%s exited %d before the write to hold (%d seen): %s", first.name, code1, writes, first.lastLine())
	}
	if !savedAt.IsZero() {
		row.notef("Redis snapshotted at the first write, %s before the loss", at.Sub(savedAt).Round(100*time.Millisecond))
	}
	row.notef("Redis %s while write %d of %s was on the wire (held %s); %s started at once", how, held, first.name, lp.Hold, p2.name)
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
// and a restart on the same port, with nothing (it persists nothing) or
// with the snapshot a SAVE wrote.
func loseRedis(ctx context.Context, r *throwawayRedis, how string) error {
	if strings.HasPrefix(how, "flushed") {
		c := r.client()
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
