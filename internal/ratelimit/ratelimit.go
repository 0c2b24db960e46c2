// Package ratelimit shares each destination account's request budget
// between the runs and processes that write to it
// (docs/guide.md#one-rate-limit-per-account): a vendor such as Brevo limits
// an account (10 requests/s), not a sync, so four syncs pacing themselves
// alone at 10/s on one account send 40/s and see most of it refused.
//
// Both pacers are a GCRA (generic cell rate algorithm) that books a send
// time per request rather than refusing it: Memory within one process
// (embedded mode), Redis across processes (one script per step, Redis's
// clock, so the workers' clocks never matter). They implement
// destination.AccountPacer.
package ratelimit

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/rediskey"
)

// maxAhead bounds how far ahead of now an account's bookings may reach: a
// request that would wait longer is told so and its wait is not booked
// (the caller's attempt deadline decides whether it waits at all).
const maxAhead = 5 * time.Minute

// interval is the spacing of limit's requests, and tau its burst tolerance.
func interval(l destination.Limit) (iv, tau time.Duration) {
	iv = time.Duration(float64(time.Second) / l.Rate)
	b := max(l.Burst, 1)
	return iv, iv * time.Duration(b-1)
}

// ErrBadLimit: a limit without a positive rate.
var ErrBadLimit = errors.New("ratelimit: the limit's rate must be positive")

// Memory shares accounts' budgets within one process.
type Memory struct {
	clock clock.Clock
	mu    sync.Mutex
	accts map[string]*state
}

type state struct {
	tat, pausedUntil time.Time
}

// NewMemory returns an empty Memory on c (nil: the wall clock).
func NewMemory(c clock.Clock) *Memory {
	if c == nil {
		c = clock.Real{}
	}
	return &Memory{clock: c, accts: map[string]*state{}}
}

var _ destination.AccountPacer = (*Memory)(nil)

// Reserve books account's next send time under l.
func (m *Memory) Reserve(_ context.Context, account string, l destination.Limit) (time.Duration, error) {
	if l.Rate <= 0 {
		return 0, ErrBadLimit
	}
	iv, tau := interval(l)
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.accts[account]
	if st == nil {
		st = &state{}
		m.accts[account] = st
	}
	tat := st.tat
	if tat.Before(now) {
		tat = now
	}
	allow := tat.Add(-tau)
	if st.pausedUntil.After(allow) {
		allow = st.pausedUntil
		if tat.Before(allow) {
			tat = allow
		}
	}
	if allow.Before(now) {
		allow = now
	}
	wait := allow.Sub(now)
	if wait <= maxAhead {
		st.tat = tat.Add(iv)
	}
	return wait, nil
}

// Pause holds account's requests back until d from now.
func (m *Memory) Pause(_ context.Context, account string, d time.Duration) error {
	until := m.clock.Now().Add(d)
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.accts[account]
	if st == nil {
		st = &state{}
		m.accts[account] = st
	}
	if until.After(st.pausedUntil) {
		st.pausedUntil = until
	}
	return nil
}

// Redis shares accounts' budgets between every process using one Redis.
type Redis struct {
	rdb  redis.Scripter
	keys rediskey.Space
}

// NewRedis returns a pacer on rdb under keys' namespace.
func NewRedis(rdb redis.Scripter, keys rediskey.Space) *Redis {
	return &Redis{rdb: rdb, keys: keys}
}

var _ destination.AccountPacer = (*Redis)(nil)

var (
	// reserveScript books the account's next send time (GCRA): the
	// theoretical arrival time moves one interval past the later of now
	// and itself; the request may go tau before it, and not before a
	// pause ends. A wait past max-ahead is answered and not booked.
	//
	// KEYS: rate, pause. ARGV: interval µs, tau µs, max-ahead µs.
	// Returns the wait in µs.
	reserveScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local iv, tau, ahead = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local allow = tat - tau
local paused = tonumber(redis.call('GET', KEYS[2])) or 0
if paused > allow then
  allow = paused
  if tat < allow then tat = allow end
end
if allow < now then allow = now end
local wait = allow - now
if wait <= ahead then
  local nt = tat + iv
  redis.call('SET', KEYS[1], string.format('%d', nt), 'PX', math.floor((nt - now) / 1000) + 1000)
end
return wait
`)
	// pauseScript moves the account's pause to now + d if that is later.
	//
	// KEYS: pause. ARGV: d µs.
	pauseScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local untl = now + tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', KEYS[1])) or 0
if untl > cur then
  redis.call('SET', KEYS[1], string.format('%d', untl), 'PX', math.floor(tonumber(ARGV[1]) / 1000) + 1000)
end
return 1
`)
)

func micros(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) }

// Reserve books account's next send time under l, on Redis's clock.
func (r *Redis) Reserve(ctx context.Context, account string, l destination.Limit) (time.Duration, error) {
	if l.Rate <= 0 {
		return 0, ErrBadLimit
	}
	iv, tau := interval(l)
	us, err := reserveScript.Run(ctx, r.rdb, []string{r.keys.AccountRate(account), r.keys.AccountPause(account)},
		micros(iv), micros(tau), micros(maxAhead)).Int64()
	if err != nil {
		return 0, err
	}
	return time.Duration(us) * time.Microsecond, nil
}

// Pause holds account's requests back for d in every process.
func (r *Redis) Pause(ctx context.Context, account string, d time.Duration) error {
	return pauseScript.Run(ctx, r.rdb, []string{r.keys.AccountPause(account)}, micros(d)).Err()
}

// Fallback is a process's pacer when the deployment has Redis: the Redis
// pacer, and, while Redis does not answer, a Memory pacer shared by every
// run of the process. A run's own limiter (apiclient.AccountLimiter) would
// pace that run alone, so k runs of one account in a process would send k
// times its budget during an outage; through Fallback they send the
// process's one share, and the Redis schedule takes over again with the
// first booking Redis answers (docs/guide.md#one-rate-limit-per-account).
type Fallback struct {
	redis *Redis
	local *Memory
}

// NewFallback returns the pacer on r that falls back to local.
func NewFallback(r *Redis, local *Memory) *Fallback {
	return &Fallback{redis: r, local: local}
}

var _ destination.AccountPacer = (*Fallback)(nil)

// Reserve books on Redis, else in this process.
func (f *Fallback) Reserve(ctx context.Context, account string, l destination.Limit) (time.Duration, error) {
	d, err := f.redis.Reserve(ctx, account, l)
	if err == nil || errors.Is(err, ErrBadLimit) {
		return d, err
	}
	return f.local.Reserve(ctx, account, l)
}

// Pause holds account's requests back in this process, and in every
// process when Redis answers.
func (f *Fallback) Pause(ctx context.Context, account string, d time.Duration) error {
	_ = f.local.Pause(ctx, account, d) // never fails
	return f.redis.Pause(ctx, account, d)
}
