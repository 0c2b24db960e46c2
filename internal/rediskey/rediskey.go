// Package rediskey builds every Redis key oncesync uses, in this one file (the
// model is asynq's base package): nothing else in oncesync formats a key.
//
// Layout:
//
//	<namespace>:v1:{sync:<id>}:<name>
//
// where:
//   - namespace defaults to "oncesync"; a deployment (or a test) sharing one
//     Redis with another picks its own with New.
//   - v1 is the key-format version. A change to the layout or to a value's
//     encoding bumps it, so old and new workers never misread each other's
//     keys. (Fences survive a bump because the store's registered fence, not
//     Redis, is the source of truth: see package redislease.)
//   - {sync:<id>} is the hash tag. Redis Cluster and go-redis Ring place a key
//     by the part between the first "{" and the next "}", so every key of one
//     sync lands in one slot/shard and a Lua script may touch all of them,
//     while different syncs spread over the shards.
//
// An id made only of [A-Za-z0-9._-] (at most 128 bytes) is used as is, so keys
// stay readable in redis-cli. Any other id (empty, too long, or holding "{",
// "}", ":", spaces, non-ASCII...) is replaced by "~" and the hex SHA-256 of
// the id: "~" is not in the plain alphabet, so a hashed id never equals a
// plain one, and no id can end the hash tag early or smuggle in another tag.
package rediskey

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
)

// Version is the key-format version embedded in every key.
const Version = "v1"

// DefaultNamespace is the first segment of every key unless New picks another.
const DefaultNamespace = "oncesync"

// maxPlainID is the longest id used verbatim; longer ones are hashed.
const maxPlainID = 128

// ErrInvalidNamespace: the namespace is empty, too long or has characters
// outside [A-Za-z0-9._-].
var ErrInvalidNamespace = errors.New("invalid redis key namespace")

// Space builds keys under one namespace. The zero Space uses DefaultNamespace.
// A Space is a small immutable value, safe to copy and share.
type Space struct {
	prefix string // "<namespace>:v1:"; "" means the default
}

// Default returns the Space of DefaultNamespace.
func Default() Space { return Space{} }

// New returns the Space of namespace, which must be 1 to 64 characters from
// [A-Za-z0-9._-] (no hash-tag braces, no ":").
func New(namespace string) (Space, error) {
	if namespace == "" || len(namespace) > 64 || !plain(namespace) {
		return Space{}, fmt.Errorf("%w: %q (want 1-64 characters from A-Z a-z 0-9 . _ -)", ErrInvalidNamespace, namespace)
	}
	return Space{prefix: namespace + ":" + Version + ":"}, nil
}

// Prefix is the start shared by every key of s ("oncesync:v1:"), for SCAN
// MATCH patterns in tools and tests.
func (s Space) Prefix() string {
	if s.prefix == "" {
		return DefaultNamespace + ":" + Version + ":"
	}
	return s.prefix
}

// SyncTag is the hash tag of a sync's keys, braces included ("{sync:<id>}").
// Keys built with the same SyncTag share a Redis Cluster slot and a Ring shard.
func (s Space) SyncTag(syncID string) string {
	return "{sync:" + escapeID(syncID) + "}"
}

func (s Space) syncKey(syncID, name string) string {
	return s.Prefix() + s.SyncTag(syncID) + ":" + name
}

// Lease is the key of a sync's lease (docs/guide.md#the-store-and-the-leases): a hash with fields token,
// fence, holder, run_id and granted_at_us (Redis time, µs since the epoch),
// carrying a PX expiry of the lease TTL. The key's absence means the lease is
// free; it is written, extended and deleted only by redislease's scripts.
func (s Space) Lease(syncID string) string { return s.syncKey(syncID, "lease") }

// Fence is the key of a sync's fence counter (docs/guide.md#the-store-and-the-leases): an integer INCRed on
// every lease grant. It never expires: fences must only grow. If it is lost
// anyway (flush, failover to a lagging replica), redislease raises it past the
// fence registered in the store before handing out a grant.
func (s Space) Fence(syncID string) string { return s.syncKey(syncID, "fence") }

// FenceStored is the key of the highest fence of a sync that redislease saw
// registered in the store (docs/guide.md#a-store-that-went-back-in-time): an
// integer, only raised, no expiry. A store whose registered fence is below
// it lost committed writes (restored from a backup, failed over to a standby
// that missed them), and redislease grants no lease of the sync on it.
func (s Space) FenceStored(syncID string) string { return s.syncKey(syncID, "fence-stored") }

// LeaseLoss is the key of a sync's lease quarantine (docs/guide.md#the-store-and-the-leases): a string,
// the Redis time (µs since the epoch) at which redislease noticed that
// Redis had lost the sync's lease data (its fence counter behind the fence
// registered in the store), with a PX expiry of the lease TTL. While it
// exists no lease of the sync is granted: a holder from before the loss may
// still be writing until its own TTL runs out. It lives on Redis like the
// data it guards, so a second loss takes it too and is noticed afresh.
func (s Space) LeaseLoss(syncID string) string { return s.syncKey(syncID, "lease-loss") }

// LeaseEnd is the key of the end of a sync's latest lease (docs/guide.md#the-store-and-the-leases): a string
// "fence:µs:ttl ms:server run id", the Redis time at which the lease granted
// under fence ends (its expiry, as last granted or renewed) or ended (its
// release, TTL 0), and which Redis server wrote it, written by redislease's
// scripts with the lease. No expiry. The next grant reads it to tell how
// long the lease had been free and whether Redis switched servers since.
func (s Space) LeaseEnd(syncID string) string { return s.syncKey(syncID, "lease-end") }

// Barrier is the key of a run's checkpoint barrier (docs/guide.md#the-checkpoint-barrier): a string
// "token:snapshot" with the barrier TTL, shared by the partitions of runID.
func (s Space) Barrier(syncID string, runID int64) string {
	return s.syncKey(syncID, "barrier:"+strconv.FormatInt(runID, 10))
}

// DeadLetter is the key of a sync's checkpoint dead-letter list (docs/guide.md#the-checkpoint-barrier):
// partition work parked after too many barrier mismatches, shown to and
// re-queued by a person. No expiry.
func (s Space) DeadLetter(syncID string) string { return s.syncKey(syncID, "deadletter") }

// AccountRate and AccountPause are the keys of a destination account's
// shared rate limit (docs/guide.md#one-rate-limit-per-account): the GCRA's
// theoretical arrival time and the time until which the vendor asked for a
// pause, both in Redis microseconds with a PX expiry. account is
// destination.Account's hash (no secret). Their hash tag {acct:<account>}
// keeps the pair in one slot for the reserve script.
func (s Space) AccountRate(account string) string {
	return s.Prefix() + "{acct:" + escapeID(account) + "}:rate"
}

// AccountPause: see AccountRate.
func (s Space) AccountPause(account string) string {
	return s.Prefix() + "{acct:" + escapeID(account) + "}:pause"
}

// Checkpoint is the key of a named checkpoint barrier (docs/guide.md#the-checkpoint-barrier) that belongs
// to no sync run, such as the one of `oncesync checkpoint check --key NAME`:
// a string "token:snapshot" with the barrier TTL. Its hash tag is
// {checkpoint:<name>}, the name escaped like a sync id, so different names
// spread over Ring shards and Cluster slots and never collide with a sync's
// keys.
func (s Space) Checkpoint(name string) string {
	return s.Prefix() + "{checkpoint:" + escapeID(name) + "}:barrier"
}

// AccessProbe is the key on which oncesync checks, at start, that Redis lets
// its user run every command it needs (package redislease, CheckAccess): a
// string, a hash or a set for a moment, deleted at once, with a PX expiry
// should a delete be refused. Its hash tag is {probe}.
func (s Space) AccessProbe() string { return s.Prefix() + "{probe}:access" }

// escapeID returns id when it is plain, else "~" + hex SHA-256 of id.
func escapeID(id string) string {
	if id != "" && len(id) <= maxPlainID && plain(id) {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "~" + hex.EncodeToString(sum[:])
}

func plain(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '.', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// deadmanTag is the hash tag of every dead-man key: the markers and their
// index share one Redis Cluster slot and one Ring shard, so one script can
// create (or delete) a marker and index it atomically. Markers are few (one
// per ongoing silence), so one slot holds them all comfortably.
const deadmanTag = "{deadman}"

// DeadmanMarker is the key of the dead-man marker of a workspace or sync
// (docs/guide.md#telling-silence-from-outside): scope is "workspace" or "sync", id the workspace or sync id. The
// value is the marker (JSON), created with SET NX when the silence is alerted
// and deleted by the first successful run after it. No expiry: the marker
// lives as long as the incident. Unlike the per-sync keys above, it carries
// the {deadman} hash tag, shared with DeadmanMarkers.
func (s Space) DeadmanMarker(scope, id string) string {
	return s.Prefix() + deadmanTag + ":marker:" + escapeID(scope) + ":" + escapeID(id)
}

// DeadmanMarkers is the key of the set of every DeadmanMarker key that
// exists, so the hourly check lists the ongoing silences without SCAN.
func (s Space) DeadmanMarkers() string {
	return s.Prefix() + deadmanTag + ":markers"
}

// DeadmanChecked is the key of the record of the latest dead-man check
// (docs/guide.md#telling-silence-from-outside): a hash with fields at_ms (unix milliseconds) and by, updated by
// one script that compares it first, so a process that does not lead can
// claim an overdue check without racing another. No expiry.
func (s Space) DeadmanChecked() string {
	return s.Prefix() + deadmanTag + ":checked"
}
