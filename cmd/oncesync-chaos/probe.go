package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/redis/go-redis/v9"
	_ "modernc.org/sqlite" // database/sql driver "sqlite"

	"github.com/oncesync/oncesync/internal/rediskey"
)

// probe reads oncesync's store (SQLite or PostgreSQL, the same tables) and
// Redis the way an operator would: the runs, cursors and leases. It never
// writes.
type probe struct {
	db     *sql.DB
	prefix string // "oncesync." on PostgreSQL
	redis  *redis.Client

	mu    sync.Mutex
	moves map[string][]time.Time // per sync: every cursor update seen
	last  map[string]int64
}

func openSQLiteProbe(path string) (*probe, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	db, err := sql.Open("sqlite", "file:"+path+"?"+q.Encode())
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	return &probe{db: db, moves: map[string][]time.Time{}, last: map[string]int64{}}, nil
}

func openPGProbe(dbURL, redisURL string) (*probe, error) {
	db, err := sql.Open("pgx", dbURL)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(2)
	p := &probe{db: db, prefix: "oncesync.", moves: map[string][]time.Time{}, last: map[string]int64{}}
	if redisURL != "" {
		opts, err := redis.ParseURL(redisURL)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("redis URL: %w", err)
		}
		opts.MaxRetries = 0
		opts.DialTimeout = time.Second
		p.redis = redis.NewClient(opts)
	}
	return p, nil
}

func (p *probe) close() {
	_ = p.db.Close()
	if p.redis != nil {
		_ = p.redis.Close()
	}
}

// runStats are the store's runs, summed.
type runStats struct {
	Total, Running, Settled, InDoubt int64
	// Outcomes counts runs by "state" or "state/failure_code".
	Outcomes map[string]int64
}

func (s runStats) outcomes() string {
	var parts []string
	for k, v := range s.Outcomes {
		parts = append(parts, fmt.Sprintf("%s %d", k, v))
	}
	sortStrings(parts)
	return strings.Join(parts, ", ")
}

func (p *probe) runStats(ctx context.Context) (runStats, error) {
	st := runStats{Outcomes: map[string]int64{}}
	rows, err := p.db.QueryContext(ctx, "SELECT state, failure_code, count(*), coalesce(sum(n_settled), 0), coalesce(sum(n_in_doubt), 0) FROM "+p.prefix+"runs GROUP BY state, failure_code")
	if err != nil {
		return st, err
	}
	defer rows.Close()
	for rows.Next() {
		var state, code string
		var n, settled, inDoubt int64
		if err := rows.Scan(&state, &code, &n, &settled, &inDoubt); err != nil {
			return st, err
		}
		k := state
		if code != "" {
			k += "/" + code
		}
		st.Outcomes[k] += n
		st.Total += n
		st.Settled += settled
		st.InDoubt += inDoubt
		if state == "running" {
			st.Running += n
		}
	}
	return st, rows.Err()
}

// writtenRejected sums the runs' written and rejected counters.
func (p *probe) writtenRejected(ctx context.Context) (written, rejected int64, err error) {
	err = p.db.QueryRowContext(ctx, "SELECT coalesce(sum(n_written), 0), coalesce(sum(n_rejected), 0) FROM "+p.prefix+"runs").
		Scan(&written, &rejected)
	return written, rejected, err
}

// runningSince counts runs still running that started before t.
func (p *probe) runningSince(ctx context.Context, t time.Time) (int64, error) {
	var n int64
	err := p.db.QueryRowContext(ctx, "SELECT count(*) FROM "+p.prefix+"runs WHERE state = 'running' AND started_at < "+
		strconv.FormatInt(t.UnixNano(), 10)).Scan(&n)
	return n, err
}

// runningJobs maps each sync to its River run jobs still in state running,
// with the time they were attempted. On PostgreSQL River's tables live in the
// store's schema (oncesync), which the probe's connections do not have on
// their search_path.
func (p *probe) runningJobs(ctx context.Context) (map[string][]time.Time, error) {
	rows, err := p.db.QueryContext(ctx, `SELECT coalesce(args->>'sync_id', ''), coalesce(attempted_at, created_at) FROM `+p.prefix+`river_job
		WHERE state = 'running' AND kind = 'oncesync_run_sync'`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string][]time.Time{}
	for rows.Next() {
		var id string
		var at time.Time
		if err := rows.Scan(&id, &at); err != nil {
			return nil, err
		}
		out[id] = append(out[id], at)
	}
	return out, rows.Err()
}

// pollCursors records every cursor update (its stored time) until ctx ends.
func (p *probe) pollCursors(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		p.readCursors(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (p *probe) readCursors(ctx context.Context) {
	rows, err := p.db.QueryContext(ctx, "SELECT sync_id, updated_at FROM "+p.prefix+"cursors")
	if err != nil {
		return // the store may be down (that is the point of some scenarios)
	}
	defer rows.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for rows.Next() {
		var id string
		var at int64
		if rows.Scan(&id, &at) != nil {
			return
		}
		if p.last[id] != at {
			p.last[id] = at
			p.moves[id] = append(p.moves[id], time.Unix(0, at))
		}
	}
}

// firstMoveAfter is syncID's first cursor update seen after t.
func (p *probe) firstMoveAfter(syncID string, t time.Time) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var best time.Time
	for _, at := range p.moves[syncID] {
		if at.After(t) && (best.IsZero() || at.Before(best)) {
			best = at
		}
	}
	return best, !best.IsZero()
}

// holders maps every sync whose lease is live right now to its holder
// ("host=... pid=N"), from the SQL leases table and, when set, Redis.
func (p *probe) holders(ctx context.Context, syncIDs []string) map[string]string {
	out := map[string]string{}
	now := strconv.FormatInt(time.Now().UnixNano(), 10)
	if rows, err := p.db.QueryContext(ctx, "SELECT sync_id, holder FROM "+p.prefix+"leases WHERE expires_at > "+now); err == nil {
		for rows.Next() {
			var id, h string
			if rows.Scan(&id, &h) == nil {
				out[id] = h
			}
		}
		rows.Close()
	}
	if p.redis != nil {
		keys := rediskey.Default()
		for _, id := range syncIDs {
			if h, err := p.redis.HGet(ctx, keys.Lease(id), "holder").Result(); err == nil && h != "" {
				out[id] = h
			}
		}
	}
	return out
}

// leaseExpiries reads when each sync's Redis lease expires (its PTTL from
// now); syncs without a live Redis lease are left out.
func (p *probe) leaseExpiries(ctx context.Context, syncIDs []string) map[string]time.Time {
	out := map[string]time.Time{}
	if p.redis == nil {
		return out
	}
	keys := rediskey.Default()
	for _, id := range syncIDs {
		now := time.Now()
		if d, err := p.redis.PTTL(ctx, keys.Lease(id)).Result(); err == nil && d > 0 {
			out[id] = now.Add(d)
		}
	}
	return out
}

// heldBy lists the syncs whose live lease pid holds. A process in a PID
// namespace of its own (workers-kill9-machines) records its pid in that namespace and
// the namespace: both are matched.
func (p *probe) heldBy(ctx context.Context, syncIDs []string, pid int) []string {
	nsPID, ns := pidInNamespace(pid)
	var out []string
	for id, h := range p.holders(ctx, syncIDs) {
		if holderPID(h) == nsPID && (ns == "" || holderField(h, "pidns") == ns) {
			out = append(out, id)
		}
	}
	sortStrings(out)
	return out
}

// pidInNamespace is process pid's own pid (the last of NSpid) and PID
// namespace, as it records them in a lease's holder; pid and "" when
// /proc does not tell (the process is gone).
func pidInNamespace(pid int) (int, string) {
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		return pid, ""
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return pid, ""
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				if n, err := strconv.Atoi(f[len(f)-1]); err == nil {
					return n, ns
				}
			}
		}
	}
	return pid, ns
}

// holderField is the value of key in a lease's holder
// ("host=... boot=... pidns=... pid=N").
func holderField(h, key string) string {
	for _, f := range strings.Fields(h) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			return v
		}
	}
	return ""
}

// redisKeys counts oncesync's keys in Redis (-1 when unknown).
func (p *probe) redisKeys(ctx context.Context) int {
	if p.redis == nil {
		return -1
	}
	keys, err := p.redis.Keys(ctx, rediskey.Default().Prefix()+"*").Result()
	if err != nil {
		return -1
	}
	return len(keys)
}

func holderPID(h string) int {
	n, _ := strconv.Atoi(holderField(h, "pid"))
	return n
}

// exists reports whether key is in Redis now.
func (p *probe) exists(ctx context.Context, key string) bool {
	if p.redis == nil {
		return false
	}
	n, err := p.redis.Exists(ctx, key).Result()
	return err == nil && n > 0
}
