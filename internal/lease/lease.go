// Package lease grants one run at a time the right to work a sync (docs/guide.md#the-store-and-the-leases).
//
// Every grant carries a fence that grows with each grant and is registered in
// the store; the store refuses cursor and ledger writes carrying an older
// fence, so a run that lost its lease (paused, partitioned, slow) can never
// move the cursor or claim keys after another run took over.
package lease

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// Sentinel errors.
var (
	// ErrHeld: another live run holds the sync's lease. It is the store's
	// sentinel: the product has one pair, whichever store holds the lease.
	ErrHeld = store.ErrLeaseHeld
	// ErrLost: the lease is no longer this run's (store.ErrLeaseLost).
	ErrLost = store.ErrLeaseLost
	// ErrQuarantined: the lease store lost its data (Redis restarted empty,
	// flushed, failed over to a replica that missed writes) and grants no
	// lease of the sync until one TTL after the loss was noticed: a holder
	// from before the loss may still be writing until then (docs/guide.md#the-store-and-the-leases). It is
	// temporary; asking again after the TTL gets a grant.
	ErrQuarantined = errors.New("lease store lost its data")
)

// QuarantineError is ErrQuarantined with the times, on the lease store's
// clock, of the notice and of the quarantine's end (zero when unknown).
type QuarantineError struct {
	SyncID    string
	NoticedAt time.Time
	Until     time.Time
	Cause     QuarantineCause
}

// QuarantineCause is what the lease store lost.
type QuarantineCause string

const (
	// CauseLost (the zero value): the lease's data, fence counter included.
	CauseLost QuarantineCause = ""
	// CauseSwitch: a server switch (Redis restarted from its persistence
	// files, or a replica took over): the lease's data came back, maybe
	// without its holder's last renewals.
	CauseSwitch QuarantineCause = "switch"
	// CauseVanished: the lease's key alone, before its end (deleted, or
	// evicted by Redis's maxmemory-policy).
	CauseVanished QuarantineCause = "vanished"
)

func (e *QuarantineError) Error() string {
	var msg string
	switch e.Cause {
	case CauseSwitch:
		msg = fmt.Sprintf("the lease store restarted or failed over and may have lost the last renewals of sync %q's lease", e.SyncID)
	case CauseVanished:
		msg = fmt.Sprintf("the lease of sync %q vanished from the lease store before its end (deleted, evicted by Redis's maxmemory-policy, or released by an oncesync from before 2026-12-04 running beside this one)", e.SyncID)
	default:
		msg = fmt.Sprintf("the lease store lost the lease data of sync %q", e.SyncID)
	}
	if !e.NoticedAt.IsZero() {
		msg += " (noticed at " + e.NoticedAt.UTC().Format(time.RFC3339) + ")"
	}
	if e.Until.IsZero() {
		return msg + "; no lease is granted until one lease TTL after the loss was noticed"
	}
	return msg + "; no lease is granted before " + e.Until.UTC().Format(time.RFC3339) +
		", when any run that held it before the loss has stopped writing"
}

func (e *QuarantineError) Unwrap() error { return ErrQuarantined }

// Grant is what the lease store granted (Hold wraps it in a Held).
type Grant struct {
	SyncID    string
	Token     string
	Fence     int64
	ExpiresAt time.Time
	// FreeFor is how long the lease had been free when granted
	// (store.Lease.FreeFor): zero when unknown.
	FreeFor time.Duration
	// Store is the store the lease lives in, for an embedded lease (SQL);
	// nil for one in Redis.
	Store store.Leases
}

// AcquireParams asks for a sync's lease.
type AcquireParams struct {
	SyncID string
	RunID  int64
	TTL    time.Duration
}

// Manager grants, renews and releases leases.
type Manager interface {
	Acquire(ctx context.Context, p AcquireParams) (Grant, error)
	// Renew extends g by ttl if it is still held; ErrLost otherwise.
	Renew(ctx context.Context, g Grant, ttl time.Duration) (Grant, error)
	Release(ctx context.Context, g Grant) error
}

// FenceChecker is a Manager whose grants the store's fence does not follow
// alone (Redis: another key space on the same store may grant the sync
// too). CheckFence answers ErrLost once the store registered a fence above
// g's; any other error leaves the lease as it is. Held's background
// renewal calls it, so that a holder stops within one renewal interval; a
// checkpoint needs none (its own transaction is fenced).
type FenceChecker interface {
	CheckFence(ctx context.Context, g Grant) error
}

// HeldError is ErrHeld with the current holder (host and pid; no secrets).
type HeldError struct{ Holder string }

func (e *HeldError) Error() string { return fmt.Sprintf("lease held by %s", e.Holder) }
func (e *HeldError) Unwrap() error { return ErrHeld }

// NewToken returns a random lease token.
func NewToken() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on supported platforms
	}
	return hex.EncodeToString(b[:])
}

// SQL is the store-backed lease of embedded mode. A lease whose holder is a
// dead process on this same machine (same host, boot and PID namespace) is
// taken over at once instead of waiting for its TTL: on one machine a
// `kill -9`'d run is resumed immediately. Anything else waits for expiry.
type SQL struct {
	Store store.Leases
	// Self describes this process; defaults to ThisProcess().
	Self Process
}

// Acquire implements Manager.
func (m *SQL) Acquire(ctx context.Context, p AcquireParams) (Grant, error) {
	self := m.Self
	if self.PID == 0 {
		self = ThisProcess()
	}
	params := store.LeaseAcquireParams{SyncID: p.SyncID, Token: NewToken(), Holder: self.String(), RunID: p.RunID, TTL: p.TTL}
	l, err := m.Store.LeaseAcquire(ctx, params)
	if errors.Is(err, store.ErrLeaseHeld) {
		cur, gerr := m.Store.LeaseGet(ctx, p.SyncID)
		if gerr != nil {
			return Grant{}, gerr
		}
		if DeadHere(cur.Holder, self) {
			params.TakeOver = cur.Token
			l, err = m.Store.LeaseAcquire(ctx, params)
		}
		if errors.Is(err, store.ErrLeaseHeld) {
			return Grant{}, &HeldError{Holder: cur.Holder}
		}
	}
	if err != nil {
		return Grant{}, err
	}
	return Grant{SyncID: l.SyncID, Token: l.Token, Fence: l.Fence, ExpiresAt: l.ExpiresAt, FreeFor: l.FreeFor, Store: m.Store}, nil
}

// Renew implements Manager.
func (m *SQL) Renew(ctx context.Context, g Grant, ttl time.Duration) (Grant, error) {
	l, err := m.Store.LeaseRenew(ctx, g.SyncID, g.Token, ttl)
	if errors.Is(err, store.ErrLeaseLost) {
		return g, fmt.Errorf("%w: %w", ErrLost, err)
	}
	if err != nil {
		return g, err
	}
	g.ExpiresAt = l.ExpiresAt
	return g, nil
}

// Live is the one liveness rule of a lease row: it is live until it
// expires, unless its holder is a process on this machine (self's host,
// boot and PID namespace) that is no longer running, whose lease is dead at
// once.
func Live(l store.Lease, now time.Time, self Process) bool {
	return l.ExpiresAt.After(now) && !DeadHere(l.Holder, self)
}

// DeadHere reports whether holder (a lease row's Holder) is a process on
// self's machine that is not running: its lease is taken over at once.
func DeadHere(holder string, self Process) bool {
	p, ok := ParseProcess(holder)
	return ok && self.SameMachine(p) && !p.Alive()
}

// Release implements Manager.
func (m *SQL) Release(ctx context.Context, g Grant) error {
	return m.Store.LeaseRelease(ctx, g.SyncID, g.Token)
}

// Process identifies a process well enough to tell, from the same machine,
// whether it is still alive.
type Process struct {
	Host  string
	Boot  string // /proc/sys/kernel/random/boot_id
	PIDNS string // /proc/self/ns/pid link target
	PID   int
}

// ThisProcess describes the current process.
func ThisProcess() Process {
	host, _ := os.Hostname()
	boot, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	ns, _ := os.Readlink("/proc/self/ns/pid")
	return Process{Host: host, Boot: strings.TrimSpace(string(boot)), PIDNS: ns, PID: os.Getpid()}
}

// String encodes p for the lease row ("host=... boot=... pidns=... pid=...").
func (p Process) String() string {
	return fmt.Sprintf("host=%s boot=%s pidns=%s pid=%d", p.Host, p.Boot, p.PIDNS, p.PID)
}

// ParseProcess decodes Process.String.
func ParseProcess(s string) (Process, bool) {
	var p Process
	for _, f := range strings.Fields(s) {
		k, v, ok := strings.Cut(f, "=")
		if !ok {
			return Process{}, false
		}
		switch k {
		case "host":
			p.Host = v
		case "boot":
			p.Boot = v
		case "pidns":
			p.PIDNS = v
		case "pid":
			n, err := strconv.Atoi(v)
			if err != nil {
				return Process{}, false
			}
			p.PID = n
		}
	}
	return p, p.PID > 0
}

// SameMachine reports whether q runs on the same host, boot and PID namespace
// as p, so that q.PID can be checked from here.
func (p Process) SameMachine(q Process) bool {
	return p.Boot != "" && p.PIDNS != "" && p.Host == q.Host && p.Boot == q.Boot && p.PIDNS == q.PIDNS
}

// Alive reports whether the process exists (signal 0) and is not a zombie.
// A worker killed with SIGKILL stays a zombie until its parent reaps it (a
// supervisor that waits later, a shell that never does), and signal 0 still
// finds it, though it can write nothing more: read as alive, its sync waited
// for the lease TTL instead of being taken over at once
// (docs/guide.md#why-a-dead-worker-costs-nothing). Errors other than "no such
// process" count as alive: when unsure, wait for the TTL.
func (p Process) Alive() bool {
	if err := syscall.Kill(p.PID, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.PID) + "/stat")
	if err != nil {
		return true // no /proc, or gone since the signal: the TTL decides
	}
	// "PID (comm) S ...": comm may hold spaces and parentheses, so the state
	// is the field after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return true
	}
	s := b[i+2]
	return s != 'Z' && s != 'X'
}
