// Package barrier is the checkpoint barrier of docs/guide.md#the-checkpoint-barrier: parallel workers
// agree on one reference point (a snapshot of their inputs) before they act.
//
// # The barrier
//
// One Redis key per barrier holds the string "token:snapshot" with a TTL
// (default 60 s). Four named Lua scripts, each atomic on one key:
//
//   - Check(key, token, snapshot): key absent → write "token:snapshot" with
//     the TTL, Created; present with exactly the same snapshot → Aligned
//     (whatever its token); any other snapshot → Mismatch, with the holder's
//     token and snapshot. The comparison is byte-for-byte equality (the
//     seed's substring match let "abc" align with "xabcx"), and it is the
//     snapshot that is compared, never the key's mere existence: a stale key
//     left by an earlier run with another snapshot is a Mismatch.
//   - Verify(key, snapshot): like Check but never creates: an absent key is
//     Missing. Workers that must not define the reference point themselves
//     (the partitions of a partitioned sync) use it, so a key lost to a Redis
//     restart or an eviction is not mistaken for a fresh start. Wait with a
//     Pin (the creator's token and snapshot, kept outside Redis by the
//     caller) restores such a key to the creator's reference point, never
//     to the caller's own view.
//   - Advance(key, token, next): the holder (same token) moves the barrier to
//     the next snapshot and renews the TTL.
//   - Release(key, token): the holder deletes the barrier.
//
// Keys come from package rediskey (Space.Barrier for a sync run,
// Space.Checkpoint for a named barrier); they are hash-tagged, and every
// script touches one key, so the barrier works unchanged over a
// *redis.Client, a go-redis *redis.Ring (consistent hashing over shards) or
// a *redis.ClusterClient.
//
// # Snapshots
//
// Snapshot hashes inputs with SHA-256 over a canonical, typed, length-prefixed
// encoding: map keys sorted, every value tagged with its type, nothing read
// from a clock or the local time zone. Identical inputs hash alike on every
// node, so the seed's "tolerance window" for clock skew is not needed.
//
// # Waiting and dead letters
//
// Wait retries a Mismatch with full-jitter exponential backoff (1 s, ×2,
// capped at 30 s) and after 3 retries records a DeadLetter through the
// DeadLetters interface (implemented by the SQLite and PostgreSQL stores) and
// returns a *DeadLetteredError. A person lists and re-queues dead letters
// (`oncesync deadletter list|requeue`).
//
// # Operations
//
// CheckEvictionPolicy refuses a Redis whose maxmemory-policy may evict keys
// (an evicted barrier reads as a fresh start). Metrics counts outcomes, the
// key hit ratio and latency; every attempt is logged with token and snapshot.
package barrier

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/rediserr"
)

// DefaultTTL is the barrier TTL when a call passes ttl <= 0 (docs/guide.md#the-checkpoint-barrier).
const DefaultTTL = 60 * time.Second

// Errors. Redis failures wrap store.ErrUnavailable (Redis unreachable,
// loading, read-only, failing over...), so callers report store_unavailable
// and never proceed unaligned.
var (
	// ErrInvalid: a bad argument (empty key, token or snapshot, a token
	// holding ":", no client). Never retryable.
	ErrInvalid = errors.New("invalid checkpoint request")
	// ErrNotHolder: Advance or Release by a token that does not hold the
	// barrier (see *NotHolderError).
	ErrNotHolder = errors.New("checkpoint barrier not held by this token")
)

// NotHolderError is returned by Advance and Release when the barrier is held
// by another token (HolderToken set) or, for Advance, absent (HolderToken
// empty: it expired or was released). It wraps ErrNotHolder.
type NotHolderError struct {
	Key            string
	HolderToken    string
	HolderSnapshot string
}

func (e *NotHolderError) Error() string {
	if e.HolderToken == "" && e.HolderSnapshot == "" {
		return fmt.Sprintf("checkpoint %s: %v: the barrier expired or was released", e.Key, ErrNotHolder)
	}
	return fmt.Sprintf("checkpoint %s: %v: held by %s at snapshot %s", e.Key, ErrNotHolder, e.HolderToken, e.HolderSnapshot)
}

// Unwrap returns ErrNotHolder.
func (e *NotHolderError) Unwrap() error { return ErrNotHolder }

// Outcome is the answer of Check or Verify.
type Outcome int

// The outcomes. The zero value is not a valid outcome.
const (
	// Created: the key was absent; this call wrote token:snapshot.
	Created Outcome = iota + 1
	// Aligned: the key holds exactly this snapshot.
	Aligned
	// Mismatch: the key holds another snapshot (or a value not written by
	// this package): do not act on the inputs.
	Mismatch
	// Missing: Verify found no key (expired, released, evicted, or Redis
	// restarted without persistence). Check never answers Missing.
	Missing
)

// String returns "created", "aligned", "mismatch" or "missing".
func (o Outcome) String() string {
	switch o {
	case Created:
		return "created"
	case Aligned:
		return "aligned"
	case Mismatch:
		return "mismatch"
	case Missing:
		return "missing"
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Result is the answer of Check or Verify. HolderToken and HolderSnapshot
// are the key's content for Aligned and Mismatch (for Created, this call's
// own token and snapshot; for Missing, empty). A value not in the
// "token:snapshot" form is reported as a Mismatch with an empty HolderToken
// and the raw value as HolderSnapshot.
type Result struct {
	Outcome        Outcome
	HolderToken    string
	HolderSnapshot string
}

// The scripts. Each runs with Script.Run: EVALSHA, falling back to EVAL
// (which also loads it) on NOSCRIPT. Values are "token:snapshot"; the token
// never holds ":", so the first ":" splits them and the snapshot may hold
// anything. Comparisons are Lua string equality: exact, byte for byte.
var (
	// checkScript — KEYS: barrier. ARGV: token, snapshot, ttl ms.
	// Returns {1} created, {2, token, snapshot} aligned,
	// {0, token, snapshot} mismatch.
	checkScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then
  redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'PX', ARGV[3])
  return {1}
end
local i = string.find(cur, ':', 1, true)
if not i then
  return {0, '', cur}
end
local token, snap = string.sub(cur, 1, i - 1), string.sub(cur, i + 1)
if snap == ARGV[2] then
  return {2, token, snap}
end
return {0, token, snap}
`)

	// verifyScript — KEYS: barrier. ARGV: snapshot.
	// Returns {3} missing, {2, token, snapshot} aligned,
	// {0, token, snapshot} mismatch.
	verifyScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then
  return {3}
end
local i = string.find(cur, ':', 1, true)
if not i then
  return {0, '', cur}
end
local token, snap = string.sub(cur, 1, i - 1), string.sub(cur, i + 1)
if snap == ARGV[1] then
  return {2, token, snap}
end
return {0, token, snap}
`)

	// advanceScript — KEYS: barrier. ARGV: token, next snapshot, ttl ms.
	// Returns {1} advanced, or {0, holder token, holder snapshot} (empty
	// strings when the key is absent).
	advanceScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then
  return {0, '', ''}
end
local i = string.find(cur, ':', 1, true)
if not i then
  return {0, '', cur}
end
local token = string.sub(cur, 1, i - 1)
if token ~= ARGV[1] then
  return {0, token, string.sub(cur, i + 1)}
end
redis.call('SET', KEYS[1], ARGV[1] .. ':' .. ARGV[2], 'PX', ARGV[3])
return {1}
`)

	// releaseScript — KEYS: barrier. ARGV: token.
	// Returns {1} deleted, {2} already absent, or {0, holder token, holder
	// snapshot}.
	releaseScript = redis.NewScript(`
local cur = redis.call('GET', KEYS[1])
if not cur then
  return {2}
end
local i = string.find(cur, ':', 1, true)
if not i then
  return {0, '', cur}
end
local token = string.sub(cur, 1, i - 1)
if token ~= ARGV[1] then
  return {0, token, string.sub(cur, i + 1)}
end
redis.call('DEL', KEYS[1])
return {1}
`)
)

// Params configures a Barrier.
type Params struct {
	// Client runs the scripts: a *redis.Client, *redis.Ring,
	// *redis.ClusterClient or any redis.UniversalClient. Required.
	Client redis.Scripter
	// Metrics, if set, counts outcomes and latencies (see NewMetrics).
	Metrics *Metrics
	// Logger gets one line per Check/Verify attempt with key, token,
	// snapshot and outcome. Nil discards.
	Logger *slog.Logger
	// Clock times the calls for the latency histogram. Nil means the wall
	// clock. (Snapshots never depend on it.)
	Clock clock.Clock
}

// Barrier runs the checkpoint scripts. It is safe for concurrent use.
type Barrier struct {
	client  redis.Scripter
	metrics *Metrics
	log     *slog.Logger
	clock   clock.Clock
}

// New returns a Barrier. A missing Client makes every call fail with
// ErrInvalid.
func New(p Params) *Barrier {
	b := &Barrier{client: p.Client, metrics: p.Metrics, log: p.Logger, clock: p.Clock}
	if b.log == nil {
		b.log = slog.New(slog.DiscardHandler)
	}
	if b.clock == nil {
		b.clock = clock.Real{}
	}
	return b
}

// Check runs the barrier's check script on key (see the package doc): it
// creates the barrier at token:snapshot when absent, and otherwise compares
// snapshots exactly. ttl <= 0 means DefaultTTL; the TTL applies only when the
// key is created.
func (b *Barrier) Check(ctx context.Context, key, token, snapshot string, ttl time.Duration) (Result, error) {
	start := b.clock.Now()
	res, err := b.check(ctx, key, token, snapshot, ttl)
	b.observe(ctx, "check", key, token, snapshot, start, res, err)
	return res, err
}

func (b *Barrier) check(ctx context.Context, key, token, snapshot string, ttl time.Duration) (Result, error) {
	if err := b.validate(key, token, snapshot, true); err != nil {
		return Result{}, err
	}
	reply, err := checkScript.Run(ctx, b.client, []string{key}, token, snapshot, ttlMillis(ttl)).Slice()
	if err != nil {
		return Result{}, mapErr(ctx, "check", key, err)
	}
	switch status(reply) {
	case 1:
		return Result{Outcome: Created, HolderToken: token, HolderSnapshot: snapshot}, nil
	case 2:
		return holderResult(Aligned, reply)
	case 0:
		return holderResult(Mismatch, reply)
	}
	return Result{}, fmt.Errorf("checkpoint check %s: unexpected script reply %v", key, reply)
}

// Verify compares snapshot with the barrier at key without ever creating it:
// Aligned, Mismatch, or Missing when the key is absent.
func (b *Barrier) Verify(ctx context.Context, key, snapshot string) (Result, error) {
	start := b.clock.Now()
	res, err := b.verify(ctx, key, snapshot)
	b.observe(ctx, "verify", key, "", snapshot, start, res, err)
	return res, err
}

func (b *Barrier) verify(ctx context.Context, key, snapshot string) (Result, error) {
	if err := b.validate(key, "", snapshot, false); err != nil {
		return Result{}, err
	}
	reply, err := verifyScript.Run(ctx, b.client, []string{key}, snapshot).Slice()
	if err != nil {
		return Result{}, mapErr(ctx, "verify", key, err)
	}
	switch status(reply) {
	case 3:
		return Result{Outcome: Missing}, nil
	case 2:
		return holderResult(Aligned, reply)
	case 0:
		return holderResult(Mismatch, reply)
	}
	return Result{}, fmt.Errorf("checkpoint verify %s: unexpected script reply %v", key, reply)
}

// Advance moves the barrier at key to the next snapshot and renews its TTL
// (ttl <= 0 means DefaultTTL), if token holds it. Otherwise it returns a
// *NotHolderError (errors.Is ErrNotHolder).
func (b *Barrier) Advance(ctx context.Context, key, token, next string, ttl time.Duration) error {
	start := b.clock.Now()
	err := b.advance(ctx, key, token, next, ttl)
	b.observeOp("advance", start)
	return err
}

func (b *Barrier) advance(ctx context.Context, key, token, next string, ttl time.Duration) error {
	if err := b.validate(key, token, next, true); err != nil {
		return err
	}
	reply, err := advanceScript.Run(ctx, b.client, []string{key}, token, next, ttlMillis(ttl)).Slice()
	if err != nil {
		return mapErr(ctx, "advance", key, err)
	}
	switch status(reply) {
	case 1:
		return nil
	case 0:
		return notHolder(key, reply)
	}
	return fmt.Errorf("checkpoint advance %s: unexpected script reply %v", key, reply)
}

// Release deletes the barrier at key if token holds it. An absent key is not
// an error (already released or expired); a key held by another token gives a
// *NotHolderError and is left alone.
func (b *Barrier) Release(ctx context.Context, key, token string) error {
	start := b.clock.Now()
	err := b.release(ctx, key, token)
	b.observeOp("release", start)
	return err
}

func (b *Barrier) release(ctx context.Context, key, token string) error {
	if err := b.validate(key, token, "-", true); err != nil {
		return err
	}
	reply, err := releaseScript.Run(ctx, b.client, []string{key}, token).Slice()
	if err != nil {
		return mapErr(ctx, "release", key, err)
	}
	switch status(reply) {
	case 1, 2:
		return nil
	case 0:
		return notHolder(key, reply)
	}
	return fmt.Errorf("checkpoint release %s: unexpected script reply %v", key, reply)
}

// validate checks the arguments common to every call.
func (b *Barrier) validate(key, token, snapshot string, needToken bool) error {
	switch {
	case b.client == nil:
		return fmt.Errorf("%w: no redis client", ErrInvalid)
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalid)
	case needToken && token == "":
		return fmt.Errorf("%w: empty token", ErrInvalid)
	case strings.Contains(token, ":"):
		return fmt.Errorf("%w: token %q holds ':' (it separates token and snapshot)", ErrInvalid, token)
	case snapshot == "":
		return fmt.Errorf("%w: empty snapshot", ErrInvalid)
	}
	return nil
}

// observe records one Check/Verify attempt in the metrics and the log.
func (b *Barrier) observe(ctx context.Context, op, key, token, snapshot string, start time.Time, res Result, err error) {
	elapsed := b.clock.Now().Sub(start)
	outcome := "error"
	if err == nil {
		outcome = res.Outcome.String()
	}
	if b.metrics != nil {
		b.metrics.observe(op, outcome, elapsed)
	}
	attrs := []slog.Attr{
		slog.String("op", op),
		slog.String("key", key),
		slog.String("token", token),
		slog.String("snapshot", snapshot),
		slog.String("outcome", outcome),
		slog.Duration("elapsed", elapsed),
	}
	if err == nil && (res.Outcome == Aligned || res.Outcome == Mismatch) {
		attrs = append(attrs, slog.String("holder_token", res.HolderToken), slog.String("holder_snapshot", res.HolderSnapshot))
	}
	// The error itself is the caller's to report; the attempt is logged so
	// that every worker's view of the barrier can be traced by token.
	b.log.LogAttrs(ctx, slog.LevelInfo, "checkpoint attempt", attrs...)
}

func (b *Barrier) observeOp(op string, start time.Time) {
	if b.metrics != nil {
		b.metrics.latency.WithLabelValues(op).Observe(b.clock.Now().Sub(start).Seconds())
	}
}

// ttlMillis returns ttl in whole milliseconds (rounded up), DefaultTTL for
// ttl <= 0.
func ttlMillis(ttl time.Duration) int64 {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

func holderResult(o Outcome, reply []any) (Result, error) {
	if len(reply) != 3 {
		return Result{}, fmt.Errorf("checkpoint: unexpected script reply of %d values", len(reply))
	}
	return Result{Outcome: o, HolderToken: toString(reply[1]), HolderSnapshot: toString(reply[2])}, nil
}

func notHolder(key string, reply []any) error {
	e := &NotHolderError{Key: key}
	if len(reply) == 3 {
		e.HolderToken, e.HolderSnapshot = toString(reply[1]), toString(reply[2])
	}
	return e
}

// mapErr wraps a Redis error of op on key (internal/rediserr).
func mapErr(ctx context.Context, op, key string, err error) error {
	return rediserr.Wrap(ctx, "checkpoint "+op+" "+key, err)
}

// status is the first integer of a script reply, -1 if there is none.
func status(reply []any) int64 {
	if len(reply) == 0 {
		return -1
	}
	n, ok := reply[0].(int64)
	if !ok {
		return -1
	}
	return n
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
