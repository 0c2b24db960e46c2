// Package redislease is the Redis lease of docs/guide.md#the-store-and-the-leases: one lease per sync, taken,
// renewed and released by Lua scripts, with expiry judged by Redis's clock and
// never by a worker's.
//
// # Keys
//
// Per sync, five keys sharing one hash tag (see package rediskey), so every
// script touches one Redis Cluster slot / one go-redis Ring shard:
//
//   - lease: a hash {token, fence, holder, run_id, granted_at_us} with a PX
//     expiry of the lease TTL. Absent means free, or lost (see below).
//   - fence: an integer counter, INCRed on every grant, never expiring.
//   - lease-end: "fence:µs:ttl ms:server run id", the Redis time at which
//     the lease granted under that fence ends (its expiry as last granted
//     or renewed, with that TTL) or ended (its release, TTL 0), and the
//     Redis server that wrote it. No expiry. A grant reads it to tell how
//     long the lease had been free (lease.Grant.FreeFor), trusting it only
//     when its fence is the fence counter's value, i.e. it belongs to the
//     last grant, and to notice a server switch (below).
//   - lease-loss: while it exists, the quarantine after a loss of Redis's
//     data: the Redis time the loss was noticed, with a PX expiry of one TTL.
//   - fence-stored: the highest fence seen registered in the store (raised
//     by the confirm script). No expiry. A store whose fence is below it
//     went back in time (a backup restored, a lagging standby promoted):
//     Acquire refuses it with a *StoreBehindError
//     (docs/guide.md#a-store-that-went-back-in-time).
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
// # Quarantine after a loss
//
// A refusal in step 1 or 2 while the lease is still ours (the raise script
// checks the token) can only mean that Redis's counter is behind the store:
// Redis lost data, and with it, possibly, the lease of a run that is still
// writing to the destination. Fences stop that run's store writes, but a
// destination cannot check a fence: the only protection left is time. So the
// grant is not handed out: once its fence is registered (the old holder's
// store writes are now refused), one script deletes it and records the
// lease-loss key with Redis's time and a PX of one TTL (the longer of
// Params.TTL and the TTL asked for), and Acquire returns a
// *lease.QuarantineError. Every Acquire before the key expires returns one
// too; the first after gets a normal grant (the counter is already past the
// store's fence, so nothing is noticed again). The old holder's lease had at
// most one TTL left when the data was lost, before the notice, and it stops
// writing at its local expiry (package runner), so no grant overlaps it.
//
// Get notices a loss too, so that lease-expiry recovery never reads a lost
// lease as a dead holder: a missing lease key is proved free by registering
// Redis's counter in the store (RaiseFence(counter), accepted only when no
// higher fence is registered). When that is refused, Get registers a fence
// above the store's, moves the counter past it and records the lease-loss key
// in one script, and returns a *lease.QuarantineError.
//
// The lease-loss key lives on Redis with the data it guards: a second loss
// during the quarantine takes it too, and the next Acquire or Get notices
// the loss afresh (the counter is behind the store again), starting a new
// quarantine. A fresh deployment (no fence ever registered in the store for
// the sync) has nothing to lose and waits for nothing.
//
// The argument above needs the old holder's renewals to fail, as they do
// when Redis lost its lease. Two key spaces on one store (processes of one
// deployment with different redis_namespace or redis URLs) break it: the
// old holder renews in its own space. So the background renewal also checks the holder's
// fence against the store (CheckFence: RaiseFence(fence), refused once a
// higher one is registered) and reports the lease lost: the holder stops within one
// renewal interval, inside the other space's quarantine. A change of key
// namespace or of rediskey.Version, or a switch from the SQL lease to Redis,
// looks like a loss and costs one TTL once.
//
// # A server switch
//
// Redis can also come back with the lease's data but without its holder's
// last renewals: restarted from an RDB snapshot or an AOF older than them,
// or a replica promoted that had not received them. The fence counter is
// then the store's (no grant was lost), so no loss is noticed, yet the lease
// reads as expired while its holder, which renewed it on the server before,
// writes until its own expiry. Every script that writes a lease-end records
// the TTL and the writing server's run id in it ("fence:µs:ttl ms:run id";
// a TTL of 0 marks a release). A free lease whose lease-end another server
// wrote (or no server id: an older binary's) is a switch: unless it was
// released there (nobody held it then, and a later grant would have left the
// counter behind the store), no grant is safe until one TTL after the
// switch: after this server's start (INFO's uptime), or, on a server
// promoted since its start (INFO replication's second_repl_offset), after
// now, the moment of the switch being unknown. Acquire and Get then record
// the lease-loss key for what is left (its value ends in ":switch") and
// report a *lease.QuarantineError with Switch set; either way the lease-end
// is adopted (rewritten with this server's id and an end no earlier than
// the switch allows), so a switch is judged once per sync. Where scripts
// may not call INFO, no switch is ever seen.
//
// The same lease-end tells a lease key that vanished before its end (a DEL,
// or an eviction when allow_evicting_redis let oncesync start on an evicting
// Redis): the key expires with its lease-end, so a free lease whose
// lease-end, written by this server for the counter's fence, lies ahead is
// quarantined until that end (the lease-loss value ends in ":vanished").
// Every script that moves the counter writes the lease-end of the new fence
// (a quarantine's end included), so a lease-end missing or behind the
// counter means it went with the lease (a DEL by pattern, allkeys
// eviction) or with a quarantine's key: one TTL of quarantine, ":vanished"
// too (docs/RELIABILITY.md#redis-as-production-runs-it).
//
// If the lease is lost during registration, Acquire starts over (and then
// usually reports the new holder). If the store cannot be reached, the lease
// is released and the error (wrapping store.ErrUnavailable) returned: a grant
// whose fence is not registered is never handed out.
//
// # Errors
//
// Acquire returns *lease.HeldError (errors.Is lease.ErrHeld) when a live
// holder exists and *lease.QuarantineError (errors.Is lease.ErrQuarantined)
// during a quarantine, as does Get; Renew returns an error wrapping lease.ErrLost (and
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
	"github.com/oncesync/oncesync/internal/rediserr"
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

// serverLua defines server_id() and server_uptime(): the run id of the
// Redis server a script runs on (a new one at each start) and how long it has
// been up. server_id() is "" and server_uptime() 0 where scripts may not call
// INFO (then no server switch is ever seen: the lease works as before).
// server_promoted() tells whether the server took over as a master since it
// started (INFO replication's second_repl_offset is set by a promotion).
const serverLua = `
local function server_id()
  local info = redis.pcall('INFO', 'server')
  if type(info) ~= 'string' then
    return ''
  end
  return string.match(info, 'run_id:(%x+)') or ''
end
local function server_uptime()
  local info = redis.pcall('INFO', 'server')
  if type(info) ~= 'string' then
    return 0
  end
  return tonumber(string.match(info, 'uptime_in_seconds:(%d+)')) or 0
end
local function server_promoted()
  local info = redis.pcall('INFO', 'replication')
  return type(info) ~= 'string' or string.match(info, 'second_repl_offset:(%-?%d+)') ~= '-1'
end
`

// switchLua defines switched(fence key, lease-loss key, lease-end key, server
// id, now µs, ttl ms) for a free lease (see "A server switch" in the package
// doc). It returns the quarantine's notice ("µs:switch", the lease-loss key
// set) when the lease's data was written by another Redis server and a
// holder from before the switch may still be within its TTL, or
// ("µs:vanished") when this server's lease-end says the lease is still held
// (its key was deleted or evicted); "unknown" when a switch may hide a
// holder but no TTL is known (nothing recorded); else nil and the end of
// the last grant's lease in µs (nil when not known), for FreeFor. A switch
// found harmless is adopted: the lease-end is rewritten with this server's
// id and an end no earlier than the switch allows.
const switchLua = `
local function switched(fkey, losskey, endkey, id, now, ttl)
  local prev = redis.call('GET', fkey)
  if not prev then
    return nil, nil
  end
  local f, e, lttl, by = string.match(redis.call('GET', endkey) or '', '^(%d+):(%d+):?(%d*):?(%x*)$')
  local known = nil
  if f == prev then
    known = tonumber(e)
  elseif f and tonumber(f) > tonumber(prev) then
    -- The counter behind its lease-end: the counter was lost, which the
    -- store's fence tells (the grant's registration quarantines).
    known = nil
  elseif ttl and ttl > 0 then
    -- Every script that moves the counter writes the lease-end of its
    -- fence: a lease-end gone or behind the counter was deleted or evicted
    -- with the lease (a DEL by pattern, allkeys-lru), or the counter moved
    -- by an oncesync older than lease-ends; its holder may write for one
    -- more TTL (docs/RELIABILITY.md#redis-as-production-runs-it).
    local notice = string.format('%d:vanished', now)
    redis.call('SET', losskey, notice, 'PX', string.format('%d', ttl))
    redis.call('SET', endkey, string.format('%s:%d:%d:%s', prev, now + ttl * 1000, ttl, id))
    return notice, nil
  else
    return 'unknown', nil
  end
  if by == id and known and lttl ~= '' and lttl ~= '0' and known > now + 50000 then
    -- This server renewed the lease until known, yet its key is gone: deleted
    -- or evicted, not expired (it expires with its lease-end). Its holder
    -- may write until then.
    local notice = string.format('%d:vanished', now)
    redis.call('SET', losskey, notice, 'PX', string.format('%d', math.ceil((known - now) / 1000)))
    return notice, nil
  end
  if id == '' or by == id then
    return nil, known
  end
  if f == prev and lttl == '0' then
    -- Released before the switch, and no grant since (one would have moved
    -- the counter past the store's fence): nobody can hold it.
    redis.call('SET', endkey, string.format('%s:%d:0:%s', prev, known, id))
    return nil, known
  end
  local window = math.max(tonumber(lttl) or 0, ttl or 0) * 1000
  if window <= 0 then
    return 'unknown', nil
  end
  -- INFO's uptime is a difference of whole seconds: the server started
  -- before the second after (now's second less the uptime).
  local safe = (math.floor(now / 1000000) - server_uptime() + 1) * 1000000 + window
  if server_promoted() then
    safe = now + window
  end
  local adopted = math.max(known or safe, safe)
  redis.call('SET', endkey, string.format('%s:%d:%d:%s', prev, adopted, window / 1000, id))
  if safe <= now then
    if known then
      return nil, adopted
    end
    return nil, nil
  end
  local notice = string.format('%d:switch', now)
  redis.call('SET', losskey, notice, 'PX', string.format('%d', math.ceil((safe - now) / 1000)))
  return notice, nil
end
`

// The scripts. Each runs with Script.Run: EVALSHA, falling back to EVAL
// (which also loads it) when the server answers NOSCRIPT. They are immutable
// once built and safe for concurrent use.
var (
	// acquireScript grants the lease when it is free, or held by the token
	// ARGV[5] (a holder known to be dead), and no quarantine is on; else
	// reports the holder or the quarantine.
	//
	// KEYS: lease, fence, lease-loss, lease-end. ARGV: token, holder, run
	// id, ttl ms, takeover token ("" for none).
	// Returns {1, fence, time sec, time µs, free µs}, {0, holder, holder
	// token} or {2, noticed at µs, quarantine left ms, time sec, time µs}.
	// free is how long the lease had been free (lease.Grant.FreeFor): from
	// the lease-end of the previous grant, trusted only when it carries
	// the fence counter's value (that grant's fence: no grant, raise or
	// loss since); 0 for a takeover or when unknown. A free lease whose
	// lease-end another Redis server wrote starts the quarantine of a
	// server switch first (see switchLua).
	acquireScript = redis.NewScript(serverLua + switchLua + `
local cur = redis.call('HMGET', KEYS[1], 'token', 'holder')
if cur[1] and cur[1] ~= ARGV[5] then
  return {0, cur[2] or '', cur[1]}
end
local noticed = redis.call('GET', KEYS[3])
if noticed then
  local t = redis.call('TIME')
  return {2, noticed, redis.call('PTTL', KEYS[3]), tonumber(t[1]), tonumber(t[2])}
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local id = server_id()
local free = 0
if not cur[1] then
  local held, known = switched(KEYS[2], KEYS[3], KEYS[4], id, now, tonumber(ARGV[4]))
  if held then
    return {2, held, redis.call('PTTL', KEYS[3]), tonumber(t[1]), tonumber(t[2])}
  end
  if known and known < now then
    free = now - known
  end
end
local fence = redis.call('INCR', KEYS[2])
if fence < 2 then
  fence = 2
  redis.call('SET', KEYS[2], '2')
end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'token', ARGV[1], 'fence', string.format('%d', fence), 'holder', ARGV[2],
  'run_id', ARGV[3], 'granted_at_us', t[1] .. string.format('%06d', tonumber(t[2])))
redis.call('PEXPIRE', KEYS[1], ARGV[4])
redis.call('SET', KEYS[4], string.format('%d:%d:%d:%s', fence, now + tonumber(ARGV[4]) * 1000, tonumber(ARGV[4]), id))
return {1, fence, tonumber(t[1]), tonumber(t[2]), free}
`)

	// renewScript extends the lease if ARGV[1] still holds it, and its
	// lease-end with it.
	//
	// KEYS: lease, lease-end. ARGV: token, ttl ms.
	// Returns {1, time sec, time µs} or {0, current holder or "", gone}:
	// gone is 1 when neither the lease nor its lease-end is there (Redis
	// lost its data, or the keys were evicted or deleted), else 0.
	renewScript = redis.NewScript(serverLua + `
local cur = redis.call('HMGET', KEYS[1], 'token', 'holder', 'fence')
if cur[1] ~= ARGV[1] then
  local gone = 0
  if not cur[1] and redis.call('EXISTS', KEYS[2]) == 0 then
    gone = 1
  end
  return {0, cur[2] or '', gone}
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('SET', KEYS[2], string.format('%s:%d:%d:%s', cur[3] or '0', now + tonumber(ARGV[2]) * 1000, tonumber(ARGV[2]), server_id()))
return {1, tonumber(t[1]), tonumber(t[2])}
`)

	// releaseScript deletes the lease if ARGV[1] holds it, and records the
	// moment as its lease-end, with a TTL of 0: released, nobody holds it.
	// The fence stays.
	//
	// KEYS: lease, lease-end. ARGV: token. Returns 1 if deleted, else 0.
	releaseScript = redis.NewScript(serverLua + `
local cur = redis.call('HMGET', KEYS[1], 'token', 'fence')
if cur[1] == ARGV[1] then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('SET', KEYS[2], string.format('%s:%d:0:%s', cur[2] or '0', now, server_id()))
  return redis.call('DEL', KEYS[1])
end
return 0
`)

	// raiseScript moves the fence counter and the lease's fence to
	// max(counter + 1, ARGV[2]) if ARGV[1] still holds the lease.
	//
	// The lease-end follows the fence (its end is the lease's): a lease-end
	// behind the counter reads as deleted with the lease (switchLua).
	//
	// KEYS: lease, fence, lease-end. ARGV: token, floor. Returns the new
	// fence, or 0 if the lease is not ARGV[1]'s.
	raiseScript = redis.NewScript(serverLua + `
if redis.call('HGET', KEYS[1], 'token') ~= ARGV[1] then
  return 0
end
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
local fence = string.format('%d', math.max(cur + 1, tonumber(ARGV[2])))
redis.call('SET', KEYS[2], fence)
redis.call('HSET', KEYS[1], 'fence', fence)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local left = math.max(redis.call('PTTL', KEYS[1]), 0)
local lttl = string.match(redis.call('GET', KEYS[3]) or '', '^%d+:%d+:(%d+)') or string.format('%d', left)
redis.call('SET', KEYS[3], string.format('%s:%d:%s:%s', fence, now + left * 1000, lttl, server_id()))
return tonumber(fence)
`)

	// confirmScript checks that the lease is held by ARGV[1] under fence
	// ARGV[2], whose registration in the store has committed, and raises the
	// fence-stored key to it.
	//
	// KEYS: lease, fence-stored. ARGV: token, fence. Returns 1 or 0.
	confirmScript = redis.NewScript(`
local cur = redis.call('HMGET', KEYS[1], 'token', 'fence')
if cur[1] == ARGV[1] and cur[2] == ARGV[2] then
  if tonumber(redis.call('GET', KEYS[2]) or '0') < tonumber(ARGV[2]) then
    redis.call('SET', KEYS[2], ARGV[2])
  end
  return 1
end
return 0
`)

	// readScript reads a key (Manager's client runs scripts only).
	readScript = redis.NewScript(`return redis.call('GET', KEYS[1])`)

	// quarantineScript turns the grant ARGV[1] (fence ARGV[2]), found to
	// come from a counter behind the store, into a quarantine: it deletes
	// the lease and records the notice with Redis's time for ARGV[3] ms.
	//
	// The quarantine's end is recorded as the lease-end of the fence too, so
	// that a lease-loss key evicted or deleted before its PX (volatile-ttl
	// evicts it first) reads as a vanished lease until then (switchLua).
	//
	// KEYS: lease, lease-loss, lease-end. ARGV: token, fence, quarantine ms.
	// Returns {2, noticed at µs, quarantine ms, time sec, time µs}, or {0}
	// if the lease is not ARGV[1]'s under ARGV[2].
	quarantineScript = redis.NewScript(serverLua + `
local cur = redis.call('HMGET', KEYS[1], 'token', 'fence')
if cur[1] ~= ARGV[1] or cur[2] ~= ARGV[2] then
  return {0}
end
redis.call('DEL', KEYS[1])
local t = redis.call('TIME')
local noticed = t[1] .. string.format('%06d', tonumber(t[2]))
redis.call('SET', KEYS[2], noticed, 'PX', ARGV[3])
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('SET', KEYS[3], string.format('%s:%d:%d:%s', ARGV[2], now + tonumber(ARGV[3]) * 1000, tonumber(ARGV[3]), server_id()))
return {2, noticed, tonumber(ARGV[3]), tonumber(t[1]), tonumber(t[2])}
`)

	// noticeScript records a loss that Get noticed (no lease, and the store
	// ahead of the counter): it moves the counter to at least ARGV[1] (a
	// fence already registered above the store's) and starts the quarantine
	// unless one is on, unless a lease was granted meanwhile. A new
	// quarantine is recorded as the lease-end of the counter's fence too
	// (the old holder stops by its end), written by this server.
	//
	// KEYS: lease, fence, lease-loss, lease-end. ARGV: floor, quarantine ms.
	// Returns {1} if a lease exists, else
	// {2, noticed at µs, quarantine left ms, time sec, time µs}.
	noticeScript = redis.NewScript(serverLua + `
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {1}
end
local cur = tonumber(redis.call('GET', KEYS[2]) or '0')
if cur < tonumber(ARGV[1]) then
  cur = tonumber(ARGV[1])
  redis.call('SET', KEYS[2], ARGV[1])
end
local t = redis.call('TIME')
local noticed = redis.call('GET', KEYS[3])
if not noticed then
  noticed = t[1] .. string.format('%06d', tonumber(t[2]))
  redis.call('SET', KEYS[3], noticed, 'PX', ARGV[2])
end
-- The lease-end follows the counter to the quarantine's end (see
-- quarantineScript).
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local left = math.max(redis.call('PTTL', KEYS[3]), 0)
redis.call('SET', KEYS[4], string.format('%d:%d:%d:%s', cur, now + left * 1000, tonumber(ARGV[2]), server_id()))
return {2, noticed, redis.call('PTTL', KEYS[3]), tonumber(t[1]), tonumber(t[2])}
`)

	// getScript reads the lease with its remaining TTL and Redis's time, or
	// the quarantine, or (the lease free) the fence counter. A free lease
	// whose lease-end another Redis server wrote starts the quarantine of a
	// server switch (see switchLua) when ARGV[1] or the lease-end gives a
	// TTL, and reports one without times when neither does.
	//
	// KEYS: lease, fence, lease-loss, lease-end. ARGV: ttl ms (0 unknown).
	// Returns {1, token, fence, holder, run id, pttl ms, time sec, time µs}
	// when held, {2, noticed at µs, quarantine left ms, time sec, time µs}
	// during a quarantine, else {0, fence counter (0 when absent)}.
	getScript = redis.NewScript(serverLua + switchLua + `
local cur = redis.call('HMGET', KEYS[1], 'token', 'fence', 'holder', 'run_id')
local t = redis.call('TIME')
if cur[1] then
  return {1, cur[1], cur[2] or '0', cur[3] or '', cur[4] or '0',
    redis.call('PTTL', KEYS[1]), tonumber(t[1]), tonumber(t[2])}
end
local noticed = redis.call('GET', KEYS[3])
if noticed then
  return {2, noticed, redis.call('PTTL', KEYS[3]), tonumber(t[1]), tonumber(t[2])}
end
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local held = switched(KEYS[2], KEYS[3], KEYS[4], server_id(), now, tonumber(ARGV[1]))
if held == 'unknown' then
  return {2, string.format('%d:switch', now), -1, tonumber(t[1]), tonumber(t[2])}
elseif held then
  return {2, held, redis.call('PTTL', KEYS[3]), tonumber(t[1]), tonumber(t[2])}
end
return {0, tonumber(redis.call('GET', KEYS[2]) or '0')}
`)
)

// Params configures a Manager.
type Params struct {
	// Client runs the scripts: a *redis.Client, *redis.Ring,
	// *redis.ClusterClient or any redis.UniversalClient. Required.
	Client redis.Scripter
	// Store registers every granted fence. Required.
	Store Fences
	// Keys names the Redis keys; the zero value is rediskey.Default().
	Keys rediskey.Space
	// Self describes this process (recorded as the holder, and used to take
	// over leases of dead processes on this machine); zero means
	// lease.ThisProcess().
	Self lease.Process
	// TTL is the deployment's lease TTL (settings.lease_ttl): how long a
	// noticed loss of Redis's data holds grants back. Acquire quarantines
	// for the longer of it and the TTL it is asked for. Get is given no TTL:
	// with TTL zero it reports a loss it finds (a *lease.QuarantineError
	// without times) but records nothing, so only an Acquire starts the
	// quarantine.
	TTL time.Duration
}

// Fences is what a Redis lease needs of the store: the registered fence
// every grant raises (store.Cursors has it).
type Fences interface {
	RaiseFence(ctx context.Context, syncID string, fence int64) error
}

// Manager is lease.Manager on Redis. It is safe for concurrent use.
type Manager struct {
	client redis.Scripter
	store  Fences
	keys   rediskey.Space
	self   lease.Process
	ttl    time.Duration
}

var _ lease.Manager = (*Manager)(nil)

// New returns a Manager. Missing Client or Store make every call fail with
// ErrInvalid.
func New(p Params) *Manager {
	self := p.Self
	if self.PID == 0 {
		self = lease.ThisProcess()
	}
	return &Manager{client: p.Client, store: p.Store, keys: p.Keys, self: self, ttl: p.TTL}
}

// Acquire grants p.SyncID's lease for p.TTL with a new fence registered in
// the store (see the package doc). A lease held by a dead process on this
// machine (same host, boot and PID namespace) is taken over at once; any
// other holder gives *lease.HeldError. After Redis lost its data it grants
// nothing for one TTL and returns *lease.QuarantineError.
func (m *Manager) Acquire(ctx context.Context, p lease.AcquireParams) (lease.Grant, error) {
	ttlMS, err := m.check(p.SyncID, p.TTL)
	if err != nil {
		return lease.Grant{}, err
	}
	quarantineMS := max(ttlMS, durationMS(m.ttl))
	for range acquireAttempts {
		g, err := m.grant(ctx, p, ttlMS)
		if err != nil {
			return lease.Grant{}, err
		}
		g, err = m.register(ctx, g, quarantineMS)
		if errors.Is(err, errLostWhileRegistering) {
			continue // start over: someone took it; usually we now see them
		}
		if errors.Is(err, lease.ErrQuarantined) {
			return lease.Grant{}, err // the script deleted the grant
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

// lossKeys are the KEYS of the scripts that tell a loss of Redis's data
// (acquireScript, noticeScript, getScript): syncID's lease, fence counter,
// lease-loss and lease-end.
func (m *Manager) lossKeys(syncID string) []string {
	return []string{m.keys.Lease(syncID), m.keys.Fence(syncID), m.keys.LeaseLoss(syncID), m.keys.LeaseEnd(syncID)}
}

// grant runs acquireScript, retrying once with a takeover if the holder is a
// dead process on this machine.
func (m *Manager) grant(ctx context.Context, p lease.AcquireParams, ttlMS int64) (lease.Grant, error) {
	token := lease.NewToken()
	keys := m.lossKeys(p.SyncID)
	takeover := ""
	for {
		res, err := acquireScript.Run(ctx, m.client, keys,
			token, m.self.String(), p.RunID, ttlMS, takeover).Slice()
		if err != nil {
			return lease.Grant{}, m.mapErr(ctx, "acquire", p.SyncID, err)
		}
		if status(res) == 1 && len(res) == 5 {
			fence := toInt(res[1]) // res[2], res[3]: Redis's time, not compared with ours (ownClock)
			return lease.Grant{
				SyncID:    p.SyncID,
				Token:     token,
				Fence:     fence,
				ExpiresAt: ownClock(ttlMS),
				FreeFor:   time.Duration(max(toInt(res[4]), 0)) * time.Microsecond,
			}, nil
		}
		if status(res) == 2 {
			return lease.Grant{}, quarantineError(p.SyncID, res)
		}
		if len(res) != 3 {
			return lease.Grant{}, fmt.Errorf("redis lease acquire of sync %q: unexpected script reply of %d values", p.SyncID, len(res))
		}
		holder, holderToken := toString(res[1]), toString(res[2])
		if takeover == "" {
			if lease.DeadHere(holder, m.self) {
				takeover = holderToken
				continue
			}
		}
		return lease.Grant{}, &lease.HeldError{Holder: holder}
	}
}

// register makes g's fence registered in the store and proven new, raising it
// past the store's fence when needed (see the package doc). When the store
// was found ahead of Redis's counter, the grant is turned into a quarantine
// of quarantineMS once its fence is registered, and the error is a
// *lease.QuarantineError.
func (m *Manager) register(ctx context.Context, g lease.Grant, quarantineMS int64) (lease.Grant, error) {
	if err := m.storeNotBehind(ctx, g.SyncID); err != nil {
		return g, err
	}
	step := int64(1)
	lost := false // the store was ahead of Redis's counter
	for range maxRaises {
		err := m.store.RaiseFence(ctx, g.SyncID, g.Fence-1)
		if err == nil {
			err = m.store.RaiseFence(ctx, g.SyncID, g.Fence)
		}
		switch {
		case err == nil && lost:
			return g, m.quarantine(ctx, g, quarantineMS)
		case err == nil:
			ok, err := confirmScript.Run(ctx, m.client, []string{m.keys.Lease(g.SyncID), m.keys.FenceStored(g.SyncID)}, g.Token, g.Fence).Int64()
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
		fence, err := raiseScript.Run(ctx, m.client, []string{m.keys.Lease(g.SyncID), m.keys.Fence(g.SyncID), m.keys.LeaseEnd(g.SyncID)},
			g.Token, g.Fence+step).Int64()
		if err != nil {
			return g, m.mapErr(ctx, "raise fence", g.SyncID, err)
		}
		if fence == 0 {
			return g, errLostWhileRegistering
		}
		// The lease is still ours, so no other grant raced us to the store:
		// only a loss of Redis's data leaves the counter behind it.
		lost = true
		g.Fence = fence
		step *= 2
	}
	return g, fmt.Errorf("redis lease of sync %q: the store's fence is more than 2^%d above Redis's fence counter; refusing to raise it further",
		g.SyncID, maxRaises)
}

// CheckFence reports lease.ErrLost when the store registered a fence above
// g's (lease.FenceChecker): Redis renews a lease the store has fenced when
// another key space granted the sync (a process of this deployment with
// another redis or redis_namespace). Held's background renewal asks, so the
// holder stops within one renewal interval, not at its next store write:
// the other grant waits only one TTL (docs/guide.md#upgrading-oncesync). Any
// other store error leaves the lease as Redis granted it: the run's own
// store writes stop it if the store is gone.
func (m *Manager) CheckFence(ctx context.Context, g lease.Grant) error {
	if err := m.store.RaiseFence(ctx, g.SyncID, g.Fence); errors.Is(err, store.ErrFenced) {
		return fmt.Errorf("redis lease of sync %q (fence %d): %w: %w (a higher fence is registered in the store: "+
			"another process of this deployment takes leases with another redis or redis_namespace)",
			g.SyncID, g.Fence, lease.ErrLost, store.ErrLeaseLost)
	}
	return nil
}

// ErrStoreBehind: the store lost committed writes: its registered fence of a
// sync is below one it registered before (see *StoreBehindError).
var ErrStoreBehind = errors.New("the store lost writes it had committed")

// StoreBehindError names the sync whose fence the store forgot, and the
// Redis key that remembers it.
type StoreBehindError struct {
	SyncID string
	Fence  int64  // registered in the store before, missing from it now
	Key    string // rediskey.Space.FenceStored
}

func (e *StoreBehindError) Error() string {
	return fmt.Sprintf("redis lease of sync %q: %v: fence %d was registered in it, and it no longer is", e.SyncID, ErrStoreBehind, e.Fence)
}

func (e *StoreBehindError) Unwrap() error { return ErrStoreBehind }

// Advice says what happened and the two ways on (failure.Adviser).
func (e *StoreBehindError) Advice() string {
	return fmt.Sprintf("the store lost writes it had committed (fence %d of sync %s is gone from it): it was restored from a backup, "+
		"failed over to a standby that had not received them, or replaced by a new, empty store, and its ledger may have forgotten deliveries that a run would "+
		"send again. Bring back the store that has them (the latest backup, the standby that had them); or, to go on and "+
		"accept that records delivered since may be written again, delete the Redis key %s. "+
		"If instead another deployment with its own store (staging and production) uses this Redis with the same "+
		"redis_namespace, nothing was lost: give each deployment its own redis_namespace, and delete nothing",
		e.Fence, e.SyncID, e.Key)
}

// storeNotBehind refuses a store whose registered fence of syncID is below
// the highest Redis saw it register (confirmScript records it): such a
// store went back in time (docs/guide.md#a-store-that-went-back-in-time).
// RaiseFence(f-1) succeeds only when the store holds no fence >= f.
func (m *Manager) storeNotBehind(ctx context.Context, syncID string) error {
	key := m.keys.FenceStored(syncID)
	f, err := readScript.Run(ctx, m.client, []string{key}).Int64()
	if errors.Is(err, redis.Nil) || err == nil && f < 2 {
		return nil
	}
	if err != nil {
		return m.mapErr(ctx, "read the stored fence", syncID, err)
	}
	switch err := m.store.RaiseFence(ctx, syncID, f-1); {
	case errors.Is(err, store.ErrFenced):
		return nil
	case err != nil:
		return fmt.Errorf("redis lease of sync %q: check fence %d against the store: %w", syncID, f, err)
	}
	return &StoreBehindError{SyncID: syncID, Fence: f, Key: key}
}

// quarantine deletes the grant g, whose counter was behind the store, and
// starts the quarantine of the package doc.
func (m *Manager) quarantine(ctx context.Context, g lease.Grant, quarantineMS int64) error {
	res, err := quarantineScript.Run(ctx, m.client, []string{m.keys.Lease(g.SyncID), m.keys.LeaseLoss(g.SyncID), m.keys.LeaseEnd(g.SyncID)},
		g.Token, g.Fence, quarantineMS).Slice()
	if err != nil {
		return m.mapErr(ctx, "quarantine", g.SyncID, err)
	}
	if status(res) != 2 {
		return errLostWhileRegistering
	}
	return quarantineError(g.SyncID, res)
}

// Renew extends g by ttl if g still holds the lease; the new expiry is
// this machine's time plus ttl (ownClock). An expired, released or taken
// lease gives an error wrapping lease.ErrLost.
func (m *Manager) Renew(ctx context.Context, g lease.Grant, ttl time.Duration) (lease.Grant, error) {
	ttlMS, err := m.check(g.SyncID, ttl)
	if err != nil {
		return g, err
	}
	res, err := renewScript.Run(ctx, m.client, []string{m.keys.Lease(g.SyncID), m.keys.LeaseEnd(g.SyncID)}, g.Token, ttlMS).Slice()
	if err != nil {
		return g, m.mapErr(ctx, "renew", g.SyncID, err)
	}
	if status(res) == 1 && len(res) == 3 {
		g.ExpiresAt = ownClock(ttlMS)
		return g, nil
	}
	why := "expired or released"
	if len(res) > 1 && toString(res[1]) != "" {
		why = "taken by " + toString(res[1])
	}
	err = fmt.Errorf("redis lease of sync %q (fence %d): %w: %w (%s)", g.SyncID, g.Fence, lease.ErrLost, store.ErrLeaseLost, why)
	keys := m.lossKeys(g.SyncID)
	var q []any // a quarantine's answer, if one is on
	if len(res) > 2 && toInt(res[2]) == 1 {
		// Said on the run's failure line: lease_lost alone sent the
		// operator looking for another worker.
		err = store.WithAdvice(err, leaseGoneAdvice)
		// Redis lost the lease and its record: the quarantine starts
		// now, not when a later grant finds the counter behind the
		// store (a retry's backoff later, then one TTL more), and the
		// counter moves above this holder's fence, registered in the
		// store, so that grant is not behind.
		q, _ = noticeScript.Run(ctx, m.client, keys, g.Fence, ttlMS).Slice()
	} else {
		// Another process may have noticed the loss first (a recovery
		// sweep's or a heartbeat's read), writing the lease's end as it
		// started the quarantine: the renewal then finds that end, not
		// the loss.
		q, _ = getScript.Run(ctx, m.client, keys, ttlMS).Slice()
	}
	if status(q) == 2 {
		// The queue snoozes the job until the quarantine ends.
		err = fmt.Errorf("%w: %w", err, quarantineError(g.SyncID, q))
	}
	return g, err
}

// leaseGoneAdvice is why a renewal found neither the lease nor its record.
const leaseGoneAdvice = "the lease was gone from Redis with the record of its end: Redis lost its data " +
	"(restarted without it, flushed, or failed over to a replica behind) or evicted or deleted the keys; " +
	"no lease of the sync is granted for one lease_ttl, then the next run resumes (docs/recovery.md#lease_lost)"

// Release frees the lease if g still holds it; no error if it does not. The
// fence counter is kept, so the next grant takes a higher fence.
func (m *Manager) Release(ctx context.Context, g lease.Grant) error {
	if err := m.checkSync(g.SyncID); err != nil {
		return err
	}
	if err := releaseScript.Run(ctx, m.client, []string{m.keys.Lease(g.SyncID), m.keys.LeaseEnd(g.SyncID)}, g.Token).Err(); err != nil {
		return m.mapErr(ctx, "release", g.SyncID, err)
	}
	return nil
}

// Get returns syncID's current lease (ExpiresAt: the key's remaining TTL
// from now, on this machine's clock), or an error wrapping store.ErrNotFound when it is free
// or expired, or a *lease.QuarantineError when Redis lost the sync's lease
// data less than one TTL ago (the holder from before the loss may still be
// writing): a missing lease is proved free in the store first, and a loss
// found that way starts the quarantine (see the package doc). Lease-expiry
// recovery uses it.
func (m *Manager) Get(ctx context.Context, syncID string) (store.Lease, error) {
	if err := m.checkSync(syncID); err != nil {
		return store.Lease{}, err
	}
	keys := m.lossKeys(syncID)
	for range acquireAttempts {
		res, err := getScript.Run(ctx, m.client, keys, durationMS(m.ttl)).Slice()
		if err != nil {
			return store.Lease{}, m.mapErr(ctx, "get", syncID, err)
		}
		switch {
		case status(res) == 1 && len(res) == 8:
			return heldLease(syncID, res), nil
		case status(res) == 2:
			return store.Lease{}, quarantineError(syncID, res)
		case status(res) != 0 || len(res) != 2:
			return store.Lease{}, fmt.Errorf("redis lease get of sync %q: unexpected script reply of %d values", syncID, len(res))
		}
		floor, err := m.aboveStore(ctx, syncID, toInt(res[1]))
		if err != nil {
			return store.Lease{}, err
		}
		if floor == 0 {
			return store.Lease{}, fmt.Errorf("redis lease of sync %q: %w", syncID, store.ErrNotFound)
		}
		if m.ttl <= 0 {
			return store.Lease{}, &lease.QuarantineError{SyncID: syncID}
		}
		res, err = noticeScript.Run(ctx, m.client, keys, floor, durationMS(m.ttl)).Slice()
		if err != nil {
			return store.Lease{}, m.mapErr(ctx, "notice a loss", syncID, err)
		}
		if status(res) == 2 {
			return store.Lease{}, quarantineError(syncID, res)
		}
		// A lease was granted meanwhile: read it.
	}
	return store.Lease{}, fmt.Errorf("redis lease of sync %q: the lease changed under %d reads in a row", syncID, acquireAttempts)
}

// aboveStore proves Redis's fence counter of syncID (counter) not behind
// the store: it returns 0 when the store accepts counter (at least 1) as its
// fence, i.e. no higher fence was ever registered. Otherwise Redis lost
// data: it finds the store's fence by doubling steps, registers one above
// it (so the old holder's store writes are refused from now on) and
// returns that.
func (m *Manager) aboveStore(ctx context.Context, syncID string, counter int64) (int64, error) {
	f, step := max(counter, 1), int64(1)
	for i := range maxRaises {
		err := m.store.RaiseFence(ctx, syncID, f)
		if err == nil && i > 0 {
			err = m.store.RaiseFence(ctx, syncID, f+1)
			f++
		}
		switch {
		case err == nil && i == 0:
			return 0, nil
		case err == nil:
			return f, nil
		case !errors.Is(err, store.ErrFenced):
			return 0, fmt.Errorf("redis lease of sync %q: check fence %d against the store: %w", syncID, f, err)
		}
		f += step
		step *= 2
	}
	return 0, fmt.Errorf("redis lease of sync %q: the store's fence is more than 2^%d above Redis's fence counter; refusing to raise it further",
		syncID, maxRaises)
}

// heldLease decodes getScript's reply for a held lease.
func heldLease(syncID string, res []any) store.Lease {
	fence, _ := strconv.ParseInt(toString(res[2]), 10, 64)
	runID, _ := strconv.ParseInt(toString(res[4]), 10, 64)
	l := store.Lease{SyncID: syncID, Token: toString(res[1]), Fence: fence, Holder: toString(res[3]), RunID: runID}
	if pttl := toInt(res[5]); pttl >= 0 {
		l.ExpiresAt = ownClock(pttl)
	}
	return l
}

// quarantineError decodes a quarantine reply
// {2, noticed at µs, quarantine left ms, time sec, time µs}.
func quarantineError(syncID string, res []any) *lease.QuarantineError {
	e := &lease.QuarantineError{SyncID: syncID}
	if len(res) != 5 {
		return e
	}
	noticed, how, _ := strings.Cut(toString(res[1]), ":")
	e.Cause = lease.QuarantineCause(how)
	if us, _ := strconv.ParseInt(noticed, 10, 64); us > 0 {
		e.NoticedAt = time.UnixMicro(us)
	}
	if left := toInt(res[2]); left >= 0 {
		e.Until = redisTime(toInt(res[3]), toInt(res[4])).Add(time.Duration(left) * time.Millisecond)
	}
	return e
}

// durationMS is d in whole milliseconds, rounded up.
func durationMS(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Millisecond - 1) / time.Millisecond)
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
	return durationMS(ttl), nil
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

// mapErr wraps a Redis error of op on syncID's lease (internal/rediserr).
func (m *Manager) mapErr(ctx context.Context, op, syncID string, err error) error {
	return rediserr.Wrap(ctx, fmt.Sprintf("redis lease %s of sync %q", op, syncID), err)
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

// ownClock is the end of a lease that Redis gave leftMS more milliseconds,
// on this machine's clock: now (the reply is in) plus leftMS. Redis's time
// (in the scripts' replies) is not compared with this machine's:
// the two clocks may disagree by more than a lease (no NTP, a VM resumed),
// and a holder whose clock runs ahead would read its fresh lease as nearly
// over, another machine a live lease as expired (docs/guide.md#the-store-and-the-leases).
// Reading the end after the reply puts it at most one round trip late.
func ownClock(leftMS int64) time.Time {
	return time.Now().Add(time.Duration(leftMS) * time.Millisecond)
}

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
