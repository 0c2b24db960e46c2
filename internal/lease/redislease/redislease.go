// Package redislease is the Redis lease of SPEC §5: one lease per sync, taken,
// renewed and released by Lua scripts, with expiry judged by Redis's clock and
// never by a worker's.
//
// # Keys
//
// Per sync, two keys sharing one hash tag (see package rediskey), so every
// script touches one Redis Cluster slot / one go-redis Ring shard:
//
//   - lease: a hash {token, fence, holder, run_id, granted_at_us} with a PX
//     expiry of the lease TTL. Absent means free.
//   - fence: an integer counter, INCRed on every grant, never expiring.
//
// # Fences: the store is the source of truth
//
// A fence only protects writes once the store knows it: cursor and ledger
// writes are refused below the store's registered fence. So a grant is not
// handed out until its fence f is registered in the store AND proven new:
//
//  1. RaiseFence(f-1) must succeed: nothing at or above f was registered yet.
//     (Redis fences start at 2 so that f-1 is a valid fence.)
//  2. RaiseFence(f) registers f: from now on writes under a lower fence fail.
//  3. A confirm script checks the Redis lease still carries our token and f:
//     we did not lose it while registering.
//
// Step 1 matters when Redis lost the fence counter (a flush, a restart
// without persistence, a failover to a replica that missed the last INCR, a
// Ring shard that went away): Redis then issues a fence that a still-running
// old holder may already use. RaiseFence alone accepts an equal fence, so two
// runs would share f and both pass the fencing checks. When step 1 or 2 is
// refused (store.ErrFenced), the store holds a fence >= f whose exact value
// the store interface does not tell: the Redis counter (and the lease's
// fence) is raised past f by a doubling step under the lease token and the
// steps are repeated, so the grant ends above every registered fence and the
// old holder's writes are refused. Step 3 closes the window in which two
// grants of the same f could both pass steps 1-2: whichever registered first
// sees its Redis lease gone by the time it confirms.
//
// If the lease is lost during registration, Acquire starts over (and then
// usually reports the new holder). If the store cannot be reached, the lease
// is released and the error (wrapping store.ErrUnavailable) returned: a grant
// whose fence is not registered is never handed out.
//
// # Errors
//
// Acquire returns *lease.HeldError (errors.Is lease.ErrHeld) when a live
// holder exists; Renew returns an error wrapping lease.ErrLost (and
// store.ErrLeaseLost) once the lease expired, was released or taken. Redis
// unreachable (network, closed client, pool timeout, LOADING, READONLY,
// CLUSTERDOWN, ...) gives an error wrapping store.ErrUnavailable, never a
// grant and never ErrLost, so the runner reports store_unavailable and keeps
// writing only until its known expiry.
package redislease

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
)

// ErrInvalid: a bad argument or configuration (empty sync id, TTL under 1 ms,
// no client or store). Never retryable.
var ErrInvalid = errors.New("invalid redis lease request")

const (
	// acquireAttempts bounds how often Acquire starts over after losing a
	// fresh grant during fence registration.
	acquireAttempts = 3
	// maxRaises bounds the doubling steps past a store fence: 2^48 grants of
	// head start is far beyond any real gap, and keeps fences below 2^53
	// where Lua's numbers are exact.
	maxRaises = 48
	// releaseTimeout bounds the best-effort release of a grant that could not
	// be registered, even when the caller's context is already done.
	releaseTimeout = 2 * time.Second
)

// The scripts. Each runs with Script.Run: EVALSHA, falling back to EVAL
// (which also loads it) when the server answers NOSCRIPT. They are immutable
// once built and safe for concurrent use.
var (
	// acquireScript grants the lease when it is free, or held by the token
	// ARGV[5] (a holder known to be dead), else reports the holder.
	//
	// KEYS: lease, fence. ARGV: token, holder, run id, ttl ms, takeover token
	// ("" for none).
	// Returns {1, fence, time sec, time µs} or {0, holder, holder token}.
	acquireScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'token', 'holder')
if cur[1] and cur[1] ~= ARGV[5] then
  return {0, cur[2] or '', cur[1]}
end
local fence = redis.call('INCR', KEYS[2])
if fence < 2 then
  fence = 2
  redis.call('SET', KEYS[2], '2')
end
local t = redis.call('TIME')
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'fence', string.format('%d', fence), 'holder', ARGV[2],
  'run_id', ARGV[3], 'granted_at_us', t[1] .. string.format('%06d', tonumber(t[2])))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return {1, fence, tonumber(t[1]), tonumber(t[2])}
`)

	// renewScript extends the lease if ARGV[1] still holds it.
	//
	// KEYS: lease. ARGV: token, ttl ms.
	// Returns {1, time sec, time µs} or {0, current holder or ""}.
	renewScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'token', 'holder')
if cur[1] ~= ARGV[1] then
  return {0, cur[2] or ''}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local t = redis.call('TIME')
return {1, tonumber(t[1]), tonumber(t[2])}
`)

	// releaseScript deletes the lease if ARGV[1] holds it. The fence stays.
	//
	// KEYS: lease. ARGV: token. Returns 1 if deleted, else 0.
	releaseScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'token') == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
`)

	// raiseScript moves the fence counter and the lease's fence to
	// max(counter + 1, ARGV[2]) if ARGV[1] still holds the lease.
	//
	// KEYS: lease, fence. ARGV: token, floor. Returns the new fence, or 0 if
	// the lease is not ARGV[1]'s.
	raiseScript = redis.NewScript(`
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
local fence = string.format('%d', math.max(cur + 1, tonumber(ARGV[2])))
redis.call('SET', KEYS[2], fence)
redis.call('HSET', KEYS[1], 'fence', fence)
return tonumber(fence)
`)

	// confirmScript checks that the lease is held by ARGV[1] under fence ARGV[2].
	//
	// KEYS: lease. ARGV: token, fence. Returns 1 or 0.
	confirmScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'token', 'fence')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] then
  return 1
end
return 0
`)

	// getScript reads the lease with its remaining TTL and Redis's time.
	//
	// KEYS: lease. Returns {0} when free, else
	// {1, token, fence, holder, run id, pttl ms, time sec, time µs}.
	getScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'token', 'fence', 'holder', 'run_id')
if not cur[1] then
  return {0}
end
local t = redis.call('TIME')
return {1, cur[1], cur[2] or '0', cur[3] or '', cur[4] or '0',
  redis.call('PTTL', KEYS[1]), tonumber(t[1]), tonumber(t[2])}
`)
)

// Params configures a Manager.
type Params struct {
	// Client runs the scripts: a *redis.Client, *redis.Ring,
	// *redis.ClusterClient or any redis.UniversalClient. Required.
	Client redis.Scripter
	// Store registers every granted fence (RaiseFence). Required.
	Store store.Store
	// Keys names the Redis keys; the zero value is rediskey.Default().
	Keys rediskey.Space
	// Self describes this process (recorded as the holder, and used to take
	// over leases of dead processes on this machine); zero means
	// lease.ThisProcess().
	Self lease.Process
}

// Manager is lease.Manager on Redis. It is safe for concurrent use.
type Manager struct {
	client redis.Scripter
	store  store.Store
	keys   rediskey.Space
	self   lease.Process
}

var _ lease.Manager = (*Manager)(nil)

// New returns a Manager. Missing Client or Store make every call fail with
// ErrInvalid.
func New(p Params) *Manager {
	self := p.Self
	if self.PID == 0 {
		self = lease.ThisProcess()
	}
	return &Manager{client: p.Client, store: p.Store, keys: p.Keys, self: self}
}

// Acquire grants p.SyncID's lease for p.TTL with a new fence registered in
// the store (see the package doc). A lease held by a dead process on this
// machine (same host, boot and PID namespace) is taken over at once; any
// other holder gives *lease.HeldError.
func (m *Manager) Acquire(ctx context.Context, p lease.AcquireParams) (lease.Grant, error) {
	ttlMS, err := m.check(p.SyncID, p.TTL)
	if err != nil {
		return lease.Grant{}, err
	}
	for range acquireAttempts {
		g, err := m.grant(ctx, p, ttlMS)
		if err != nil {
			return lease.Grant{}, err
		}
		g, err = m.register(ctx, g)
		if errors.Is(err, errLostWhileRegistering) {
			continue // start over: someone took it; usually we now see them
		}
		if err != nil {
			m.releaseDetached(ctx, g)
			return lease.Grant{}, err
		}
		return g, nil
	}
	return lease.Grant{}, fmt.Errorf("redis lease of sync %q: %w: lost %d fresh grants in a row while registering their fences",
		p.SyncID, lease.ErrLost, acquireAttempts)
}

// errLostWhileRegistering: the lease stopped being ours between the grant and
// the end of its fence registration.
var errLostWhileRegistering = errors.New("lease lost while registering its fence")

// grant runs acquireScript, retrying once with a takeover if the holder is a
// dead process on this machine.
func (m *Manager) grant(ctx context.Context, p lease.AcquireParams, ttlMS int64) (lease.Grant, error) {
	token := lease.NewToken()
	keys := []string{m.keys.Lease(p.SyncID), m.keys.Fence(p.SyncID)}
	takeover := ""
	for {
		res, err := acquireScript.Run(ctx, m.client, keys,
			token, m.self.String(), p.RunID, ttlMS, takeover).Slice()
		if err != nil {
			return lease.Grant{}, m.mapErr(ctx, "acquire", p.SyncID, err)
		}
		if status(res) == 1 && len(res) == 4 {
			fence, sec, usec := toInt(res[1]), toInt(res[2]), toInt(res[3])
			return lease.Grant{
				SyncID:    p.SyncID,
				Token:     token,
				Fence:     fence,
				ExpiresAt: redisTime(sec, usec).Add(time.Duration(ttlMS) * time.Millisecond),
			}, nil
		}
		if len(res) != 3 {
			return lease.Grant{}, fmt.Errorf("redis lease acquire of sync %q: unexpected script reply of %d values", p.SyncID, len(res))
		}
		holder, holderToken := toString(res[1]), toString(res[2])
		if takeover == "" {
			if h, ok := lease.ParseProcess(holder); ok && m.self.SameMachine(h) && !h.Alive() {
				takeover = holderToken
				continue
			}
		}
		return lease.Grant{}, &lease.HeldError{Holder: holder}
	}
}

// register makes g's fence registered in the store and proven new, raising it
// past the store's fence when needed (see the package doc).
func (m *Manager) register(ctx context.Context, g lease.Grant) (lease.Grant, error) {
	step := int64(1)
	for range maxRaises {
		err := m.store.RaiseFence(ctx, g.SyncID, g.Fence-1)
		if err == nil {
			err = m.store.RaiseFence(ctx, g.SyncID, g.Fence)
		}
		switch {
		case err == nil:
			ok, err := confirmScript.Run(ctx, m.client, []string{m.keys.Lease(g.SyncID)}, g.Token, g.Fence).Int64()
			if err != nil {
				return g, m.mapErr(ctx, "confirm", g.SyncID, err)
			}
			if ok != 1 {
				return g, errLostWhileRegistering
			}
			return g, nil
		case !errors.Is(err, store.ErrFenced):
			return g, fmt.Errorf("redis lease of sync %q: register fence %d in the store: %w", g.SyncID, g.Fence, err)
		}
		// The store already has a fence >= g.Fence: Redis lost its counter,
		// or another grant raced us. Move past it and prove the new fence.
		fence, err := raiseScript.Run(ctx, m.client, []string{m.keys.Lease(g.SyncID), m.keys.Fence(g.SyncID)},
			g.Token, g.Fence+step).Int64()
		if err != nil {
			return g, m.mapErr(ctx, "raise fence", g.SyncID, err)
		}
		if fence == 0 {
			return g, errLostWhileRegistering
		}
		g.Fence = fence
		step *= 2
	}
	return g, fmt.Errorf("redis lease of sync %q: the store's fence is more than 2^%d above Redis's fence counter; refusing to raise it further",
		g.SyncID, maxRaises)
}

// Renew extends g by ttl if g still holds the lease; the new expiry is
// Redis's time plus ttl. An expired, released or taken lease gives an error
// wrapping lease.ErrLost.
func (m *Manager) Renew(ctx context.Context, g lease.Grant, ttl time.Duration) (lease.Grant, error) {
	ttlMS, err := m.check(g.SyncID, ttl)
	if err != nil {
		return g, err
	}
	res, err := renewScript.Run(ctx, m.client, []string{m.keys.Lease(g.SyncID)}, g.Token, ttlMS).Slice()
	if err != nil {
		return g, m.mapErr(ctx, "renew", g.SyncID, err)
	}
	if status(res) == 1 && len(res) == 3 {
		g.ExpiresAt = redisTime(toInt(res[1]), toInt(res[2])).Add(time.Duration(ttlMS) * time.Millisecond)
		return g, nil
	}
	why := "expired or released"
	if len(res) > 1 && toString(res[1]) != "" {
		why = "taken by " + toString(res[1])
	}
	return g, fmt.Errorf("redis lease of sync %q (fence %d): %w: %w (%s)", g.SyncID, g.Fence, lease.ErrLost, store.ErrLeaseLost, why)
}

// Release frees the lease if g still holds it; no error if it does not. The
// fence counter is kept, so the next grant takes a higher fence.
func (m *Manager) Release(ctx context.Context, g lease.Grant) error {
	if err := m.checkSync(g.SyncID); err != nil {
		return err
	}
	if err := releaseScript.Run(ctx, m.client, []string{m.keys.Lease(g.SyncID)}, g.Token).Err(); err != nil {
		return m.mapErr(ctx, "release", g.SyncID, err)
	}
	return nil
}

// Get returns syncID's current lease (ExpiresAt from Redis's time and the
// key's remaining TTL), or an error wrapping store.ErrNotFound when it is free
// or expired. Lease-expiry recovery and status pages use it.
func (m *Manager) Get(ctx context.Context, syncID string) (store.Lease, error) {
	if err := m.checkSync(syncID); err != nil {
		return store.Lease{}, err
	}
	res, err := getScript.Run(ctx, m.client, []string{m.keys.Lease(syncID)}).Slice()
	if err != nil {
		return store.Lease{}, m.mapErr(ctx, "get", syncID, err)
	}
	if status(res) != 1 || len(res) != 8 {
		return store.Lease{}, fmt.Errorf("redis lease of sync %q: %w", syncID, store.ErrNotFound)
	}
	fence, _ := strconv.ParseInt(toString(res[2]), 10, 64)
	runID, _ := strconv.ParseInt(toString(res[4]), 10, 64)
	l := store.Lease{SyncID: syncID, Token: toString(res[1]), Fence: fence, Holder: toString(res[3]), RunID: runID}
	if pttl := toInt(res[5]); pttl >= 0 {
		l.ExpiresAt = redisTime(toInt(res[6]), toInt(res[7])).Add(time.Duration(pttl) * time.Millisecond)
	}
	return l, nil
}

// releaseDetached releases g after a failed registration, even if ctx is
// done; if it fails too the lease simply expires after its TTL.
func (m *Manager) releaseDetached(ctx context.Context, g lease.Grant) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
	defer cancel()
	_ = m.Release(ctx, g) // best effort: the TTL frees it otherwise
}

// check validates a call and returns ttl in whole milliseconds (rounded up).
func (m *Manager) check(syncID string, ttl time.Duration) (int64, error) {
	if err := m.checkSync(syncID); err != nil {
		return 0, err
	}
	if ttl < time.Millisecond {
		return 0, fmt.Errorf("%w: lease ttl %s is under 1ms", ErrInvalid, ttl)
	}
	return int64((ttl + time.Millisecond - 1) / time.Millisecond), nil
}

func (m *Manager) checkSync(syncID string) error {
	switch {
	case m.client == nil:
		return fmt.Errorf("%w: no redis client", ErrInvalid)
	case m.store == nil:
		return fmt.Errorf("%w: no store to register fences in", ErrInvalid)
	case syncID == "":
		return fmt.Errorf("%w: empty sync id", ErrInvalid)
	}
	return nil
}

// mapErr wraps a Redis error: store.ErrUnavailable when Redis cannot be used
// right now, the plain error when the caller's context ended or the reply is
// a bug (a script error, a wrong key type).
func (m *Manager) mapErr(ctx context.Context, op, syncID string, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("redis lease %s of sync %q: %w", op, syncID, err)
	}
	if unavailable(err) {
		return fmt.Errorf("redis lease %s of sync %q: %w: %w", op, syncID, store.ErrUnavailable, err)
	}
	return fmt.Errorf("redis lease %s of sync %q: %w", op, syncID, err)
}

// unavailable reports whether err means Redis cannot be used right now, as
// opposed to a bug: every error that is not a Redis reply (dial, I/O,
// timeouts, closed client, exhausted pool), and the replies of a Redis that
// is loading, read-only, failing over, out of memory or busy.
func unavailable(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true
	}
	for _, prefix := range []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
		"BUSY", "NOREPLICAS", "OOM", "MOVED", "ASK", "NOAUTH", "WRONGPASS"} {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return strings.Contains(err.Error(), "max number of clients reached")
}

// status is the first integer of a script reply: 1 for success, 0 otherwise
// (-1 for an empty reply).
func status(res []any) int64 {
	if len(res) == 0 {
		return -1
	}
	n, _ := res[0].(int64)
	return n
}

func redisTime(sec, usec int64) time.Time { return time.Unix(sec, usec*int64(time.Microsecond)) }

func toInt(v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case string:
		n, _ := strconv.ParseInt(x, 10, 64)
		return n
	}
	return 0
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case int64:
		return strconv.FormatInt(x, 10)
	}
	return ""
}
