// Package barrier lets parallel workers agree on one reference point before
// they act: the checkpoint barrier oncesync's partitioned syncs use, for
// your own workers (the pattern of seed 000, made exact).
//
// The first worker to Check a key with a snapshot of its inputs writes
// "token:snapshot" there, with a TTL; a worker whose snapshot is exactly the
// same is Aligned; any other snapshot, including a stale one left by an
// earlier run, is a Mismatch, and that worker must not act on its inputs.
// Wait retries a mismatch with full-jitter backoff (1 s, ×2, capped at 30 s)
// and, after three retries, parks the work as a DeadLetter for a person.
// Each operation is one atomic Lua script on one key, so a barrier works on
// a *redis.Client, a *redis.Ring or a *redis.ClusterClient alike.
//
// Snapshot hashes a map of inputs over a canonical, typed encoding (map keys
// sorted, no clock read), so equal inputs give equal snapshots on every
// machine. CheckEvictionPolicy refuses a Redis that may evict keys: an
// evicted barrier reads as a fresh start.
//
// Redis errors wrap ErrUnavailable when Redis cannot be used right now
// (unreachable, loading, read-only, failing over): do not proceed, retry the
// work later. docs/guide.md#the-checkpoint-barrier tells the whole story.
//
// This package is the module's public face of internal/barrier: its names
// are that package's, and it is kept small; what is not here is not part of
// the stable API.
package barrier

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	ib "github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
)

type (
	// Params configure New: Client is required (any redis.Scripter, such
	// as a redis.UniversalClient); Logger, Metrics (NewMetrics) and Clock
	// (anything with a Now() time.Time method) are optional.
	Params = ib.Params
	// Metrics count a Barrier's outcomes and latencies on your Prometheus
	// registry (NewMetrics); one may serve several Barriers.
	Metrics = ib.Metrics
	// Result is the answer of Check, Verify and Wait: Outcome, and
	// HolderToken and HolderSnapshot, the token and snapshot the key holds
	// (empty when Created or Missing).
	Result = ib.Result
	// Outcome is Created, Aligned, Mismatch or Missing.
	Outcome = ib.Outcome
	// WaitParams configure Wait: Key, Token, Snapshot and TTL are Check's
	// arguments; VerifyOnly uses Verify (never creates the barrier; Missing
	// is retried); Pin, with VerifyOnly, is the creator's reference point a
	// Missing barrier is restored to; Retries after the first check (0:
	// DefaultRetries, < 0: none); DeadLetters stores the parked work (nil:
	// only returned in the *DeadLetteredError) from the template Entry
	// (SyncID, RunID, Partition, Payload, Reason); Sleep, Jitter and Clock
	// replace the timer, math/rand/v2 and the wall clock (tests).
	WaitParams = ib.WaitParams
	// Pin is a barrier creator's token and snapshot, kept outside Redis, to
	// which Wait restores a barrier whose key was lost.
	Pin = ib.Pin
	// DeadLetter is work Wait parked after its last retry.
	DeadLetter = store.DeadLetter
	// DeadLetters stores dead letters; oncesync's stores implement it, and
	// so may yours.
	DeadLetters = store.DeadLetters
	// ListDeadLettersParams filter DeadLetters.ListDeadLetters.
	ListDeadLettersParams = store.ListDeadLettersParams
	// NotHolderError: Advance or Release by a token that does not hold the
	// barrier.
	NotHolderError = ib.NotHolderError
	// DeadLetteredError: Wait gave up and parked the work.
	DeadLetteredError = ib.DeadLetteredError
)

// The outcomes of Check and Verify.
const (
	Created  = ib.Created
	Aligned  = ib.Aligned
	Mismatch = ib.Mismatch
	Missing  = ib.Missing
)

// ReasonMismatch is the Reason of a DeadLetter Wait parked after repeated
// mismatches (WaitParams.Entry's default).
const ReasonMismatch = ib.ReasonMismatch

// HitRatioAlert is the PromQL of the alert on the key hit ratio over 10
// minutes (below 95 %): frequent misses mean keys expire too early or are
// evicted, and an evicted barrier reads as a fresh start.
const HitRatioAlert = ib.HitRatioAlert

// Defaults.
const (
	// DefaultTTL is a barrier's TTL when a call passes ttl <= 0.
	DefaultTTL = ib.DefaultTTL
	// DefaultRetries is Wait's retries before the work is parked.
	DefaultRetries = ib.DefaultRetries
)

// Errors.
var (
	// ErrInvalid: a bad argument (an empty key, token or snapshot, a token
	// holding ":", no client).
	ErrInvalid = ib.ErrInvalid
	// ErrNotHolder is wrapped by *NotHolderError.
	ErrNotHolder = ib.ErrNotHolder
	// ErrDeadLettered is wrapped by *DeadLetteredError.
	ErrDeadLettered = ib.ErrDeadLettered
	// ErrEvictingRedis: CheckEvictionPolicy found a maxmemory-policy that
	// may evict keys.
	ErrEvictingRedis = ib.ErrEvictingRedis
	// ErrUnhashable: Snapshot met a value it has no encoding for.
	ErrUnhashable = ib.ErrUnhashable
	// ErrUnavailable is wrapped by every error of a Redis that cannot be
	// used right now.
	ErrUnavailable = store.ErrUnavailable
	// ErrNotFound: what your DeadLetters wraps for an unknown id.
	ErrNotFound = store.ErrNotFound
	// ErrAlreadyRequeued: what your DeadLetters returns when an entry was
	// re-queued already.
	ErrAlreadyRequeued = store.ErrAlreadyRequeued
)

// Barrier runs the checkpoint scripts; safe for concurrent use.
type Barrier struct{ b *ib.Barrier }

// New returns a Barrier over p.Client. A missing Client makes every call
// fail with ErrInvalid.
func New(p Params) *Barrier { return &Barrier{b: ib.New(p)} }

// Check creates the barrier at key as token:snapshot when it is absent
// (Created), and otherwise compares snapshots exactly: Aligned when the key
// holds the same snapshot, Mismatch (with the holder's token and snapshot)
// for any other, a stale one of an earlier run included. ttl <= 0 means
// DefaultTTL; the TTL applies only when the key is created. A worker must
// not act on its inputs after a Mismatch.
func (b *Barrier) Check(ctx context.Context, key, token, snapshot string, ttl time.Duration) (Result, error) {
	return b.b.Check(ctx, key, token, snapshot, ttl)
}

// Verify compares snapshot with the barrier at key without ever creating
// it: Aligned, Mismatch, or Missing when the key is absent.
func (b *Barrier) Verify(ctx context.Context, key, snapshot string) (Result, error) {
	return b.b.Verify(ctx, key, snapshot)
}

// Advance moves the barrier at key to the next snapshot and renews its TTL
// (ttl <= 0 means DefaultTTL), if token holds it. Otherwise it returns a
// *NotHolderError (errors.Is ErrNotHolder); a missing key is not held.
func (b *Barrier) Advance(ctx context.Context, key, token, next string, ttl time.Duration) error {
	return b.b.Advance(ctx, key, token, next, ttl)
}

// Release deletes the barrier at key if token holds it. An absent key is
// not an error (already released or expired); a key held by another token
// gives a *NotHolderError and is left alone.
func (b *Barrier) Release(ctx context.Context, key, token string) error {
	return b.b.Release(ctx, key, token)
}

// Wait checks the barrier until it answers Created or Aligned, sleeping with
// full-jitter exponential backoff (BackoffCeiling) after each Mismatch (or
// Missing, with VerifyOnly and no Pin; with a Pin, a Missing barrier is
// restored to it and verified at once). After the last retry it stores a
// DeadLetter and returns a *DeadLetteredError with the last Result. A Redis
// error ends the wait at once (wrapping ErrUnavailable when Redis cannot be
// used): do not proceed, and retry the whole job later.
func (b *Barrier) Wait(ctx context.Context, p WaitParams) (Result, error) {
	return b.b.Wait(ctx, p)
}

// NewMetrics registers the barrier's metrics on reg (required; never the
// global registry unless you pass it): oncesync_checkpoint_checks_total{op,
// outcome}, oncesync_checkpoint_key_hit_ratio,
// oncesync_checkpoint_duration_seconds{op} and
// oncesync_checkpoint_dead_letters_total. Set Params.Metrics to the result.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) { return ib.NewMetrics(reg) }

// Key is the Redis key of the named barrier name: hash-tagged, under
// oncesync's namespace (the key `oncesync checkpoint check NAME` uses).
func Key(name string) string { return rediskey.Default().Checkpoint(name) }

// Snapshot is the SHA-256 (hex) of inputs' canonical encoding. Inputs hold
// nil, booleans, strings, integers (any kind, *big.Int), finite floats,
// json.Number, time.Time (the instant, whatever its zone), []byte, slices,
// arrays, maps with string keys and pointers to these; anything else is an
// error wrapping ErrUnhashable. 1 (an integer) and 1.0 (a float) differ.
func Snapshot(inputs map[string]any) (string, error) { return ib.Snapshot(inputs) }

// CheckEvictionPolicy returns an error wrapping ErrEvictingRedis when a
// server behind client may evict keys, unless allowEvicting.
func CheckEvictionPolicy(ctx context.Context, client redis.UniversalClient, allowEvicting bool) error {
	return ib.CheckEvictionPolicy(ctx, client, allowEvicting)
}

// BackoffCeiling is the upper bound of Wait's sleep before retry n
// (0-based); the sleep is uniform below it.
func BackoffCeiling(n int) time.Duration { return ib.BackoffCeiling(n) }
