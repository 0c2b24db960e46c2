package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// clusterParams configure a several-processes deployment: one `serve` and
// some `worker` processes on a PostgreSQL store with Redis.
type clusterParams struct {
	Syncs       int
	SingleEvery int // every SingleEvery-th sync uses the single path (0: none)
	InitialRows int // per bulk sync; single syncs get a fifth
	AppendRows  int // per bulk sync per AppendEvery; single syncs get a fifth
	// PGSyncs are syncs over PostgreSQL tables in the cluster's database
	// (after the CSV ones, every second on the single path), whose rows
	// also change and change back (--flips). Default 2; negative: none.
	PGSyncs     int
	AppendEvery time.Duration
	PageSize    int
	Schedule    string
	Settings    string // YAML flow map
	Workers     int    // worker processes (besides serve)
	Slots       int    // --workers of every process
	Fake        fakebrevo.Options
	// ServerURL is the PostgreSQL server; the cluster works in a database of
	// its own on it (created, then dropped). Default: --database-url.
	ServerURL string
	RedisURL  string // default: --redis-url
	// LeaseTTL is the lease TTL the settings give (for the stuck-run horizon).
	LeaseTTL time.Duration
	// SettleLimit bounds the wait for delivery at the end (default 5m).
	SettleLimit time.Duration
	// VendorSyncs adds a HubSpot and a Klaviyo sync (bulk, CSV sources
	// that grow and change like the others) among the Brevo ones, checked
	// at their own fakes (vendors.go).
	VendorSyncs bool
	// Machines runs every worker in a PID namespace of its own, as on a
	// machine of its own (workers-kill9-machines).
	Machines bool
	// CutOff, when set, puts worker1's store and Redis connections
	// behind cut proxies (cluster.cut) and tags its writes cutOffTag (by
	// the process owning each connection: connowner.go). Its sources (a sync's
	// PostgreSQL dsn is part of its definition) and the destination stay
	// direct.
	CutOff bool
	// SharedAccount gives every Brevo sync the fake's one account URL
	// (dest.AccountURL) instead of a URL of its own, so oncesync paces them
	// as one account (docs/guide.md#one-rate-limit-per-account).
	SharedAccount bool
	// DestTimeout, when set, is every Brevo sync's destination timeout
	// (one HTTP attempt), so that writes the fake holds (Fake.HoldWrite)
	// outlive their client.
	DestTimeout time.Duration
	// RateLimit is every Brevo sync's rate_limit (default 1000: the fake
	// limits nothing unless Fake.RateLimitPerSecond says so).
	RateLimit int
	// TagWorkers tags every worker's writes with its name (by the process
	// owning each connection: connowner.go), so the writes each one lands
	// can be told apart.
	TagWorkers bool
}

// recoverySweep is the lease-expiry recovery's period (docs/guide.md#running-on-a-schedule-serve-and-worker).
const recoverySweep = 10 * time.Second

// cutOffTag is the client tag of the worker that CutOff can cut off.
const cutOffTag = "cut-off"

// cluster is a running deployment.
type cluster struct {
	e       *env
	p       clusterParams
	dest    *dest
	probe   *probe
	config  string
	dbURL   string
	sources []chaosSource
	ids     []string

	mu       sync.Mutex
	serve    *proc
	workers  []*proc
	started  int
	kills    []killRecord
	lastHit  time.Time // the last nemesis action
	drains   []time.Duration
	stopBg   context.CancelFunc
	bgDone   sync.WaitGroup
	appendMu sync.Mutex
	appendOn bool
	// cutConfig is worker1's config when CutOff (its store and Redis URLs
	// through cutProxies).
	cutConfig  string
	cutProxies []*cutProxy
}

// killRecord is one nemesis action against a process.
type killRecord struct {
	At    time.Time
	Sig   syscall.Signal
	Proc  string
	Syncs []string // syncs whose lease the victim held
}

// pgAvailable reports whether the PostgreSQL server answers.
func pgAvailable(ctx context.Context, serverURL string) error {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(cctx, serverURL)
	if err != nil {
		return err
	}
	return conn.Close(cctx)
}

// createDatabase creates a fresh database on serverURL and returns its URL;
// it is dropped when the scenario ends.
func (e *env) createDatabase(ctx context.Context, serverURL string) (string, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	name := "chaos_" + strings.ReplaceAll(e.name, "-", "_") + "_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return "", fmt.Errorf("PostgreSQL at the --database-url: %w", err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	e.onClose(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, serverURL)
		if err != nil {
			e.logf("could not drop database %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			e.logf("could not drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(serverURL)
	if err != nil {
		return "", err
	}
	u.Path = "/" + name
	return u.String(), nil
}

// newCluster writes the sources and the config, starts the fake, serve and
// the workers, and starts appending rows to the sources.
func (e *env) newCluster(ctx context.Context, p clusterParams) (*cluster, error) {
	if p.ServerURL == "" {
		p.ServerURL = e.o.DBURL
	}
	if p.RedisURL == "" {
		p.RedisURL = e.o.RedisURL
	}
	if p.Schedule == "" {
		p.Schedule = "@every 5s"
	}
	if p.Settings == "" {
		p.Settings = "{lease_ttl: 30s, lease_renew: 10s}"
		p.LeaseTTL = 30 * time.Second
	}
	if p.Slots == 0 {
		p.Slots = 4
	}
	if p.AppendEvery == 0 {
		p.AppendEvery = 5 * time.Second
	}
	if p.PGSyncs == 0 {
		p.PGSyncs = 2
	}
	if p.RateLimit == 0 {
		p.RateLimit = 1000
	}
	dbURL, err := e.createDatabase(ctx, p.ServerURL)
	if err != nil {
		return nil, err
	}
	c := &cluster{e: e, p: p, dbURL: dbURL}
	if c.dest, err = e.newDest(p.Fake); err != nil {
		return nil, err
	}
	var tag [3]byte
	_, _ = rand.Read(tag[:])
	var syncs strings.Builder
	addSync := func(src chaosSource) {
		c.sources = append(c.sources, src)
		c.ids = append(c.ids, src.syncID())
		base := c.dest.URL(src.syncID())
		if p.SharedAccount {
			base = c.dest.AccountURL()
		}
		timeout := ""
		if p.DestTimeout > 0 {
			timeout = ", timeout: " + p.DestTimeout.String()
		}
		dest := fmt.Sprintf("{type: brevo, base_url: %s, api_key: ${BREVO_API_KEY}, mode: %s, list_ids: [2], rate_limit: %d%s}",
			base, src.mode(), p.RateLimit, timeout)
		if v, ok := src.(*vendorSource); ok {
			dest = v.destinationYAML()
		}
		fmt.Fprintf(&syncs, `  - id: %s
    workspace: chaos
    schedule: %q
%s    destination: %s
`, src.syncID(), p.Schedule, src.yaml(p.PageSize), dest)
	}
	for i := range p.Syncs {
		id := fmt.Sprintf("c%s-s%02d", hex.EncodeToString(tag[:]), i)
		mode, rows := "bulk", p.InitialRows
		if p.SingleEvery > 0 && i%p.SingleEvery == p.SingleEvery-1 {
			mode, rows = "single", max(1, p.InitialRows/5)
		}
		src, err := newCSVSource(e.dir, id, mode, rows)
		if err != nil {
			return nil, err
		}
		addSync(src)
	}
	for i := range max(0, p.PGSyncs) {
		id := fmt.Sprintf("c%s-p%02d", hex.EncodeToString(tag[:]), i)
		mode, rows := "bulk", p.InitialRows
		if i%2 == 1 {
			mode, rows = "single", max(1, p.InitialRows/5)
		}
		src, err := e.newPGSource(ctx, dbURL, id, fmt.Sprintf("p%02d", i), mode, rows)
		if err != nil {
			return nil, err
		}
		addSync(src)
	}
	if p.VendorSyncs {
		vs, err := e.vendorSyncs(fmt.Sprintf("c%s-v", hex.EncodeToString(tag[:])), max(1, p.InitialRows/2))
		if err != nil {
			return nil, err
		}
		for _, v := range vs {
			addSync(v)
		}
	}
	c.config = filepath.Join(e.dir, "oncesync.yaml")
	redisLine := ""
	if p.RedisURL != "" {
		redisLine = "redis: " + p.RedisURL + "\n"
	}
	cfg := fmt.Sprintf("store: %s\n%ssettings: %s\nsyncs:\n%s", dbURL, redisLine, p.Settings, syncs.String())
	if err := os.WriteFile(c.config, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	if p.CutOff {
		storeURL, err := c.proxied(dbURL)
		if err != nil {
			return nil, err
		}
		redisURL, err := c.proxied(p.RedisURL)
		if err != nil {
			return nil, err
		}
		c.cutConfig = filepath.Join(e.dir, "oncesync-cut-off.yaml")
		cfg := fmt.Sprintf("store: %s\nredis: %s\nsettings: %s\nsyncs:\n%s", storeURL, redisURL, p.Settings, syncs.String())
		if err := os.WriteFile(c.cutConfig, []byte(cfg), 0o600); err != nil {
			return nil, err
		}
	}
	if c.probe, err = openPGProbe(dbURL, p.RedisURL); err != nil {
		return nil, err
	}
	e.onClose(c.probe.close)

	// serve first: it applies the migrations the workers rely on.
	if c.serve, err = c.startServe(); err != nil {
		return nil, err
	}
	if err := c.waitStarted(ctx, c.serve); err != nil {
		return nil, err
	}
	for i := range p.Workers {
		w, err := c.startWorker(i)
		if err != nil {
			return nil, err
		}
		c.workers = append(c.workers, w)
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.stopBg = cancel
	e.onClose(c.stopBackground)
	c.appendOn = true
	c.bgDone.Add(2)
	go func() { defer c.bgDone.Done(); c.probe.pollCursors(bg, 200*time.Millisecond) }()
	go func() { defer c.bgDone.Done(); c.appender(bg) }()
	e.logf("cluster up: serve + %d workers (%d slots each), %d syncs (%s), store %s, redis %s",
		p.Workers, p.Slots, len(c.ids), p.Schedule, redactedDB(dbURL), p.RedisURL)
	return c, nil
}

func redactedDB(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres"
	}
	u.RawQuery = ""
	return u.Redacted()
}

func (c *cluster) stopBackground() {
	if c.stopBg != nil {
		c.stopBg()
		c.bgDone.Wait()
	}
}

func (c *cluster) startServe() (*proc, error) {
	c.started++
	return c.e.oncesync("serve", "serve", "--config", c.config, "--listen", "127.0.0.1:0",
		"--workers", fmt.Sprint(c.p.Slots), "--log-level", "info")
}

func (c *cluster) startWorker(i int) (*proc, error) {
	c.started++
	config, tag := c.config, ""
	if i == 0 && c.cutConfig != "" {
		config, tag = c.cutConfig, cutOffTag
	} else if c.p.TagWorkers {
		tag = fmt.Sprintf("worker%d", i+1)
	}
	args := []string{"worker", "--config", config, "--workers", fmt.Sprint(c.p.Slots), "--log-level", "info"}
	var p *proc
	var err error
	if !c.p.Machines {
		p, err = c.e.oncesyncEnv(fmt.Sprintf("worker%d", i+1), nil, args...)
	} else {
		// A PID namespace of its own: the worker's lease holders name another
		// namespace, so the leader cannot see it die (lease.DeadHere), as with
		// a worker on another machine.
		p, err = c.e.oncesyncAttr(fmt.Sprintf("worker%d", i+1), nil, &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}, args...)
		if err == nil {
			// Pin the namespace until the scenario ends: the kernel reuses a dead
			// namespace's inode, and a restarted worker (pid 1 in a namespace of the
			// same inode) would then pass for its dead predecessor, in heldBy and in
			// the leases it reads.
			if f, err := os.Open(fmt.Sprintf("/proc/%d/ns/pid", p.pid())); err == nil {
				c.e.onClose(func() { _ = f.Close() })
			}
		}
	}
	if err != nil {
		return nil, err
	}
	if tag != "" {
		// Before its first connection: the worker is still starting.
		c.dest.tagPID(p.pid(), tag)
	}
	return p, nil
}

// proxied is raw (a postgres:// or redis:// URL) with its host:port
// replaced by a new cut proxy's in front of it.
func (c *cluster) proxied(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", err
	}
	p, err := c.e.newCutProxy(u.Host)
	if err != nil {
		return "", err
	}
	c.cutProxies = append(c.cutProxies, p)
	u.Host = p.addr()
	return u.String(), nil
}

// cut stops (true) or resumes (false) every byte between worker1 and the
// store and Redis.
func (c *cluster) cut(on bool) {
	for _, p := range c.cutProxies {
		p.setCut(on)
	}
}

// waitStarted waits for p's start line ("oncesync serve: ...").
func (c *cluster) waitStarted(ctx context.Context, p *proc) error {
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if strings.Contains(p.output(), "oncesync "+strings.Fields(p.cmd.Args[1])[0]+": ") {
			return nil
		}
		if !p.running() {
			return fmt.Errorf("%s exited at start (%d):\n%s", p.name, p.exitCode(), p.tail(20))
		}
		if err := sleep(ctx, 50*time.Millisecond); err != nil {
			return err
		}
	}
	return fmt.Errorf("%s did not start within 60 s:\n%s", p.name, p.tail(20))
}

// appender grows every source every AppendEvery while appending is on.
func (c *cluster) appender(ctx context.Context) {
	t := time.NewTicker(c.p.AppendEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		c.appendMu.Lock()
		on := c.appendOn
		c.appendMu.Unlock()
		if !on || c.p.AppendRows == 0 {
			continue
		}
		for _, s := range c.sources {
			n, k := c.p.AppendRows, flipsPerStep
			if s.mode() == "single" {
				n, k = max(1, n/5), max(1, k/4)
			}
			if err := s.grow(ctx, n); err != nil {
				c.e.vlogf("append to %s: %v", s.syncID(), err) // a store outage is the point of some scenarios
			}
			if c.e.o.Flips {
				if err := s.flip(ctx, c.e, k); err != nil {
					c.e.vlogf("change rows of %s: %v", s.syncID(), err)
				}
			}
		}
	}
}

// flipsPerStep is how many rows of a bulk sync's table change at every
// append (a quarter of that on the single path); each is changed back two
// appends later.
const flipsPerStep = 8

// stopAppending stops the sources growing and changes back every row still
// changed, so the final values are the ones the sync started with.
func (c *cluster) stopAppending() {
	c.appendMu.Lock()
	c.appendOn = false
	c.appendMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range c.sources {
		if err := s.unflip(ctx); err != nil {
			c.e.logf("change back the rows of %s: %v", s.syncID(), err)
		}
	}
}

// hit signals one process, first noting which syncs it holds.
func (c *cluster) hit(ctx context.Context, p *proc, sig syscall.Signal) killRecord {
	held := c.probe.heldBy(ctx, c.ids, p.pid())
	k := killRecord{At: time.Now(), Sig: sig, Proc: p.name, Syncs: held}
	_ = p.signal(sig)
	c.mu.Lock()
	c.kills = append(c.kills, k)
	c.lastHit = k.At
	c.mu.Unlock()
	c.e.vlogf("%s %s (pid %d), holding %d syncs", sig, p.name, p.pid(), len(held))
	return k
}

// noteHit records a nemesis action that is not a signal (a service outage).
func (c *cluster) noteHit(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastHit = at
}

// outageOver records the end of a service outage: the resume time of every
// sync is measured from it.
func (c *cluster) outageOver(at time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.lastHit = at
	c.kills = append(c.kills, killRecord{At: at, Proc: "outage", Syncs: slices.Clone(c.ids)})
}

// busyWorker picks a worker that holds at least one lease (seeded choice
// among them), polling for up to 10 s; else any worker.
func (c *cluster) busyWorker(ctx context.Context) int {
	deadline := time.Now().Add(10 * time.Second)
	for {
		var busy []int
		c.mu.Lock()
		workers := append([]*proc(nil), c.workers...)
		c.mu.Unlock()
		for i, w := range workers {
			if w.running() && len(c.probe.heldBy(ctx, c.ids, w.pid())) > 0 {
				busy = append(busy, i)
			}
		}
		if len(busy) > 0 {
			return busy[c.e.intN(len(busy))]
		}
		if time.Now().After(deadline) || sleep(ctx, 20*time.Millisecond) != nil {
			return c.e.intN(len(workers))
		}
	}
}

// restartWorker starts a new process in slot i.
func (c *cluster) restartWorker(i int) error {
	w, err := c.startWorker(i)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.workers[i] = w
	c.mu.Unlock()
	return nil
}

// progressAfter is syncID's first progress after t: an accepted write at the
// fake or a cursor move in the store.
func (c *cluster) progressAfter(syncID string, t time.Time) (time.Time, bool) {
	return firstOf(c.dest.firstWriteAfter(syncID, t))(c.probe.firstMoveAfter(syncID, t))
}

// maxSlowNotes bounds the notes on resumes slower than the goal.
const maxSlowNotes = 5

// slowResume describes one resume slower than the goal: which hit, when
// (seconds since the scenario's start), and which later hits of the same
// sync came before its progress (each counts in this one resume).
func slowResume(start time.Time, k killRecord, syncID string, d time.Duration, kills []killRecord) string {
	var again []string
	for _, l := range kills {
		if l.At.After(k.At) && l.At.Before(k.At.Add(d)) && slices.Contains(l.Syncs, syncID) {
			again = append(again, fmt.Sprintf("%s at +%.1fs", l.Proc, l.At.Sub(start).Seconds()))
		}
	}
	what := "not hit again before it progressed"
	if len(again) > 0 {
		what = "hit again before it progressed: " + strings.Join(again, ", ")
	}
	return fmt.Sprintf("sync %s, %s hit at +%.1fs, progressed %.1f s later; %s", syncID, k.Proc, k.At.Sub(start).Seconds(), d.Seconds(), what)
}

// firstOf returns the earlier of two optional times (curried for two
// two-valued calls).
func firstOf(a time.Time, aok bool) func(time.Time, bool) (time.Time, bool) {
	return func(b time.Time, bok bool) (time.Time, bool) {
		switch {
		case aok && bok:
			if b.Before(a) {
				return b, true
			}
			return a, true
		case aok:
			return a, true
		default:
			return b, bok
		}
	}
}

// caughtUp reports whether every source record is at the fake with its
// current values.
func (c *cluster) caughtUp(ctx context.Context) bool {
	for _, s := range c.sources {
		if !s.caughtUp(ctx, c.dest.fake) {
			return false
		}
	}
	return true
}

// settle stops the sources growing, waits for every row to be delivered and
// for every run that was running at the last nemesis action to end (lease
// expiry plus two recovery sweeps after it), then stops every process with
// SIGTERM and checks the drain times and that no run is left running.
func (c *cluster) settle(ctx context.Context, row *Row, limit time.Duration) error {
	if c.p.SettleLimit > 0 {
		limit = c.p.SettleLimit
	}
	c.stopAppending()
	c.e.logf("settling: sources frozen at %d rows; waiting for delivery and for stuck runs to be recovered", c.totalRows())
	c.mu.Lock()
	lastHit := c.lastHit
	c.mu.Unlock()
	horizon := c.p.LeaseTTL + 22*time.Second // lease expiry + two recovery sweeps (every 10 s) + slack
	deadline := time.Now().Add(limit)
	var stuck int64 = -1
	for {
		delivered := c.caughtUp(ctx)
		if delivered && time.Since(lastHit) > horizon {
			n, err := c.probe.runningSince(ctx, lastHit)
			if err == nil {
				stuck = n
				if n == 0 {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			if !delivered {
				row.problemf("not every row was delivered %s after the sources stopped growing", limit)
				c.diagnose(ctx, row)
			}
			if stuck > 0 {
				row.problemf("%d runs that were running at the last nemesis action were still running %s later (stuck: not recovered)",
					stuck, time.Since(lastHit).Round(time.Second))
			}
			break
		}
		if err := sleep(ctx, time.Second); err != nil {
			return err
		}
	}
	c.e.logf("settled: stopping every process with SIGTERM")
	return c.shutdown(ctx, row)
}

// shutdown sends SIGTERM to every process, checks each exits within 25 s,
// then checks no run is left running.
func (c *cluster) shutdown(ctx context.Context, row *Row) error {
	c.mu.Lock()
	procs := append([]*proc{c.serve}, c.workers...)
	c.mu.Unlock()
	sent := time.Now()
	for _, p := range procs {
		if p.running() {
			_ = p.signal(syscall.SIGTERM)
		}
	}
	for _, p := range procs {
		if _, ok := p.wait(ctx, 30*time.Second); !ok {
			row.problemf("%s did not exit within 30 s of SIGTERM", p.name)
			p.stop()
			continue
		}
		if took := p.exited.Sub(sent); took > 25*time.Second && p.exited.After(sent) {
			row.problemf("%s took %s to exit after SIGTERM (limit 25 s)", p.name, took.Round(time.Millisecond))
		}
	}
	c.stopBackground()
	if jobs, err := c.probe.runningJobs(ctx); err == nil {
		n := 0
		for _, at := range jobs {
			n += len(at)
		}
		if n > 0 {
			row.problemf("%d River run jobs left in state running after every process stopped (their syncs get no new run until River's stuck-job rescue)", n)
		}
	}
	st, err := c.probe.runStats(ctx)
	if err != nil {
		return fmt.Errorf("read the runs: %w", err)
	}
	if st.Running != 0 {
		row.problemf("%d runs left in state running after every process stopped", st.Running)
	}
	row.Runs = st.Total
	row.InDoubtSettled = st.Settled
	row.notef("runs by outcome: %s", st.outcomes())
	if st.InDoubt > st.Settled {
		row.notef("in doubt %d, settled %d", st.InDoubt, st.Settled)
	}
	return nil
}

// diagnose says, for every sync not caught up, how far behind it is and
// whether a River job of it is still running (a dead worker's job).
func (c *cluster) diagnose(ctx context.Context, row *Row) {
	jobs, jerr := c.probe.runningJobs(ctx)
	for _, s := range c.sources {
		if s.caughtUp(ctx, c.dest.fake) {
			continue
		}
		v := s.check(ctx, c.dest.fake)
		msg := fmt.Sprintf("sync %s: %d of %d records not delivered, %d with wrong values", s.syncID(), v.Lost, v.Records, v.Wrong)
		if jerr == nil {
			for _, at := range jobs[s.syncID()] {
				msg += fmt.Sprintf("; its River job is still running, attempted %s ago", time.Since(at).Round(time.Second))
			}
		}
		if last, ok := c.dest.lastWrite(s.syncID()); ok {
			msg += fmt.Sprintf("; last write %s ago", time.Since(last).Round(time.Second))
		}
		row.problemf("%s", msg)
	}
}

func (c *cluster) totalRows() int {
	n := 0
	for _, s := range c.sources {
		n += s.rows()
	}
	return n
}

// check fills the row from the sources and the fake: the value checker
// over every record, the duplicates, the resume times.
func (c *cluster) check(row *Row) {
	ctx := context.Background()
	var v valueCounts
	flipped := 0
	for _, s := range c.sources {
		v.add(s.check(ctx, c.dest.fake))
		if ps, ok := s.(*pgSource); ok {
			ps.mu.Lock()
			flipped += len(ps.flipped)
			ps.mu.Unlock()
		}
	}
	v.fill(row)
	if flipped > 0 {
		row.notef("%d records of the PostgreSQL-table syncs changed and changed back while runs went on", flipped)
	}
	st := c.dest.fake.Stats()
	row.DuplicateWrites = st.DuplicateWrites
	for _, ex := range st.DuplicateExamples {
		row.notef("duplicate write: %s", ex)
	}
	for _, s := range c.sources {
		if v, ok := s.(*vendorSource); ok {
			n, exs := v.view.duplicates()
			row.DuplicateWrites += n
			for _, ex := range exs {
				row.notef("duplicate write at %s: %s", v.view.name(), ex)
			}
			row.notef("%s sync %s: %d records checked at the fake %s", v.view.name(), v.syncID(), v.rows(), v.view.name())
		}
	}
	c.mu.Lock()
	kills := slices.Clone(c.kills)
	c.mu.Unlock()
	unresolved, slow := 0, 0
	for _, k := range kills {
		for _, id := range k.Syncs {
			at, ok := c.progressAfter(id, k.At)
			if !ok {
				unresolved++
				continue
			}
			d := at.Sub(k.At)
			row.Resume = append(row.Resume, d)
			if row.resumeGoal > 0 && d > row.resumeGoal {
				if slow++; slow <= maxSlowNotes {
					row.notef("slow resume: %s", slowResume(c.e.start, k, id, d, kills))
				}
			}
		}
	}
	if slow > maxSlowNotes {
		row.notef("slow resume: %d more", slow-maxSlowNotes)
	}
	if unresolved > 0 {
		row.notef("%d syncs held by a victim showed no progress after the hit (nothing left to do, or never resumed)", unresolved)
	}
	row.notef("fake: %d requests, %d contacts written, %d dropped responses, statuses %v",
		st.Requests, st.ContactsWritten, st.Dropped, st.ByStatus)
	if n := c.probe.redisKeys(context.Background()); n == 0 {
		row.notef("Redis held no oncesync key at the end")
	}
}

// errSkip marks a scenario that cannot run here (no PostgreSQL).
var errSkip = errors.New("skipped")

// needPG skips a cluster scenario when PostgreSQL does not answer.
func needPG(ctx context.Context, e *env) error {
	if err := pgAvailable(ctx, e.o.DBURL); err != nil {
		return fmt.Errorf("%w: PostgreSQL at --database-url does not answer: %v", errSkip, err)
	}
	return nil
}

func sortStrings(s []string) { slices.Sort(s) }
