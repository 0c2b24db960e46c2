package main

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// A worker cut off from the lease store and the store but not from the
// destination (docs/guide.md#the-store-and-the-leases, issue 13 finding 5, second half): its renewals and
// checkpoints hang, while its writes still reach Brevo. Another worker takes
// its syncs over once its lease expires; from then on a write of the cut-off
// worker that lands is a write that may be made twice, and Brevo cannot
// check a fence. The product must stop writing within the lease it had:
// attempt deadlines bounded by the lease's local expiry, a lease check
// before every retry and rate-limit wait, renewals with a timeout.

// cutOffMargin is how long after its lease's expiry a write of the cut-off
// worker may still land (the expiry is read from Redis just after the cut:
// reading and scheduling slack on one machine).
const cutOffMargin = 500 * time.Millisecond

// cutOffLate is how long past the lease's expiry the troubled write lands
// (or is retried), unless the worker gave it up: the product abandons it
// before the expiry (attempt deadline, lease check before a rate-limit
// wait); 4ad9ecf notices the lost lease only when a renewal fails after the
// expiry, a Redis timeout (3 s) later.
const cutOffLate = time.Second

// cutOffWorker: serve + 2 workers (3 slots each) on PostgreSQL + Redis, lease
// 6 s / 2 s, 6 CSV syncs (one in three single path) and 2 PostgreSQL-table
// syncs on growing sources. worker1 reaches the store and Redis through cut
// proxies. At a seeded moment, as one of worker1's writes arrives, both
// proxies stop passing bytes (connections stay open), the expiry of every
// lease worker1 holds is read from Redis, and that write meets a destination
// in trouble (seeded): it is held on the wire until 1 s past its sync's lease
// expiry and then applied, or answered 429 with a rate-limit reset that ends
// 1 s past it. Past the takeover, the proxies pass bytes again and the
// cluster settles. Checks: between the cut and the heal no write of worker1
// lands later than its sync's lease expiry + 0.5 s; every sync worker1 held
// progresses elsewhere; no duplicate, nothing lost, every final value right.
func cutOffWorker(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	if err := needPG(ctx, e); err != nil {
		return row, err
	}
	const ttl = 6 * time.Second
	p := clusterParams{Syncs: 6, SingleEvery: 3, InitialRows: 1500, AppendRows: 100, PageSize: 100,
		Workers: 2, Slots: 3, Settings: "{lease_ttl: 6s, lease_renew: 2s}", LeaseTTL: ttl, CutOff: true,
		Fake: fakebrevo.Options{Latency: 20 * time.Millisecond}}
	if e.o.Short {
		p.SettleLimit = 2 * time.Minute
	}
	c, err := e.newCluster(ctx, p)
	if err != nil {
		return row, err
	}
	trouble := []string{"slow answer", "429 with a long reset"}[e.intN(2)]
	var (
		mu       sync.Mutex
		cutAt    time.Time
		hold     time.Duration
		held     []string             // syncs worker1 held at the cut
		expiry   map[string]time.Time // their leases' expiry, read from Redis at the cut
		heldSync string               // the sync of the write that met the trouble
		gaveUp   bool                 // the slow write's client went away before it landed
	)
	armed := make(chan struct{})
	cutCh := make(chan struct{})
	c.dest.setIntercept(func(syncID string, w http.ResponseWriter, r *http.Request) bool {
		select {
		case <-armed:
		default:
			return false
		}
		if tag, _ := r.Context().Value(tagKey{}).(string); tag != cutOffTag || !isWrite(r, r.URL.Path) {
			return false
		}
		mu.Lock()
		if !cutAt.IsZero() {
			mu.Unlock()
			return false
		}
		c.mu.Lock()
		victim := c.workers[0]
		c.mu.Unlock()
		c.cut(true)
		cutAt, heldSync = time.Now(), syncID
		held = c.probe.heldBy(ctx, c.ids, victim.pid())
		expiry = c.probe.leaseExpiries(ctx, held)
		end, ok := expiry[syncID]
		if !ok {
			end = cutAt.Add(ttl)
		}
		hold = time.Until(end.Add(cutOffLate))
		mu.Unlock()
		close(cutCh)
		if trouble == "slow answer" {
			mu.Lock()
			h := hold
			mu.Unlock()
			if holdOnTheWire(r, h) {
				return false // it lands now
			}
			mu.Lock()
			gaveUp = true
			mu.Unlock()
			w.WriteHeader(http.StatusServiceUnavailable)
			return true
		}
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set(fakebrevo.HeaderRateLimitLimit, "10")
		h.Set(fakebrevo.HeaderRateLimitRemaining, "0")
		h.Set(fakebrevo.HeaderRateLimitReset, strconv.Itoa(int((hold+time.Second-1)/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"code":"too_many_requests","message":"chaos: rate limited"}`))
		return true
	})
	if err := sleep(ctx, e.between(3*time.Second, 6*time.Second)); err != nil {
		return row, err
	}
	close(armed)
	select {
	case <-cutCh:
	case <-time.After(90 * time.Second):
		return row, fmt.Errorf("worker1 wrote nothing within 90 s of arming the cut")
	case <-ctx.Done():
		return row, ctx.Err()
	}
	mu.Lock()
	at, victimHeld, hs, ends, h := cutAt, held, heldSync, expiry, hold
	mu.Unlock()
	row.Kills++
	c.noteHit(at)
	e.logf("cut worker1 off the store and Redis as its write of %s arrived (%s until %s after the cut); it held %v", hs, trouble, h.Round(100*time.Millisecond), victimHeld)
	// Past the takeover: lease expiry + a recovery sweep + the new holder's
	// wait before it reads the page in doubt back (settings.in_doubt_grace,
	// the default here) + slack.
	if err := sleep(ctx, time.Until(at.Add(ttl+recoverySweep+config.Defaults().InDoubtGrace+10*time.Second))); err != nil {
		return row, err
	}
	c.dest.setIntercept(nil)
	healed := time.Now()
	c.cut(false)
	c.noteHit(healed)
	e.logf("healed worker1's connections after %s", healed.Sub(at).Round(100*time.Millisecond))

	var (
		late      []landing
		worst     time.Duration
		lateSyncs []string
	)
	all := c.dest.landings(cutOffTag, at)
	for _, l := range all {
		end, ok := ends[l.SyncID]
		if !ok {
			end = at.Add(ttl) // a lease taken after the cut could not be renewed either
		}
		if l.Landed.After(end.Add(cutOffMargin)) && l.Landed.Before(healed) {
			late = append(late, l)
			worst = max(worst, l.Landed.Sub(end))
			if !slices.Contains(lateSyncs, l.SyncID) {
				lateSyncs = append(lateSyncs, l.SyncID)
			}
		}
	}
	if len(late) > 0 {
		row.problemf("%d writes of the cut-off worker (syncs %v) landed after their lease expired, up to %s after (the last %s after the cut)",
			len(late), lateSyncs, worst.Round(10*time.Millisecond), late[len(late)-1].Landed.Sub(at).Round(10*time.Millisecond))
	}
	mu.Lock()
	if gaveUp {
		row.notef("worker1 gave its held write up before it landed")
	}
	mu.Unlock()
	row.notef("worker1 cut off from PostgreSQL and Redis (bytes held, connections open) as its write of %s met a %s (until %s after the cut, %s past that sync's lease expiry); it held %d syncs; %d of its writes landed after the cut, %d of them past their lease + %s; healed after %s",
		hs, trouble, h.Round(100*time.Millisecond), cutOffLate, len(victimHeld), len(all), len(late), cutOffMargin, healed.Sub(at).Round(100*time.Millisecond))
	// The syncs it held resume elsewhere (c.check adds the resume samples of
	// c.kills; the victim is not a killed process, so record them here).
	for _, id := range victimHeld {
		if t, ok := c.otherLanding(id, at); ok && t.Before(healed) {
			row.Resume = append(row.Resume, t.Sub(at))
		} else {
			row.problemf("sync %s, held by the cut-off worker, made no progress elsewhere before the heal", id)
		}
	}
	if err := c.settle(ctx, row, 5*time.Minute); err != nil {
		return row, err
	}
	c.check(row)
	return row, nil
}

// otherLanding is the first write of syncID landed after t by a client
// other than the cut-off worker.
func (c *cluster) otherLanding(syncID string, t time.Time) (time.Time, bool) {
	c.dest.mu.Lock()
	defer c.dest.mu.Unlock()
	for _, l := range c.dest.landed {
		if l.SyncID == syncID && l.Tag != cutOffTag && l.Landed.After(t) {
			return l.Landed, true
		}
	}
	return time.Time{}, false
}
