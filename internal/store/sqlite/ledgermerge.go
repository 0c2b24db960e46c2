package sqlite

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"sync"
	"time"
)

// Background merges. When the log reaches mergeEntries, LedgerFinish starts
// a merge round in a goroutine instead of merging inline: the round takes
// the merge lease (ledger_meta.merge_owner), snapshots memory's keys and the
// last applied seq (through), and writes them in mergeRounds transactions or
// more (at most mergeTxKeys keys each, so that a claim or finish waiting for
// the store's one write connection waits for one short transaction, not an
// eighth of the merge), each one contiguous key range (so each still touches only its share of the
// ledger's leaves, once), then deletes the log rows <= through and records
// the merge. Between its transactions the runner's claims and finishes go
// on, so the merge overlaps the destination calls instead of stalling them.
//
// Every transaction of a round checks, inside the transaction, that the
// lease is still the round's and that merged_through has not moved since the
// round began (a synchronous merge by LedgerTouch, LedgerPrune or LedgerList
// anywhere, or a round of another process after this one's lease expired):
// if either changed, the round stops, and what it wrote is harmless (entries
// of log rows still in the log, never newer than a table row written since,
// because every writer of the tables writes a key's newest entry).
//
// A round's transactions yield to the runner's (see foreground): each waits
// until no claim, finish or checkpoint waits for the write connection, until
// the round falls behind (mergeLag).
//
// If memory grows to mergeBackpressure times mergeEntries (the round cannot
// keep up, or another process holds the lease), LedgerFinish merges inline.

const (
	mergeRounds       = 8                // transactions per round (key ranges), at least
	mergeTxKeys       = 1024             // keys per transaction, at most: the runner's writes wait for one
	mergeLeaseTTL     = 60 * time.Second // a round's lease, renewed by each transaction
	mergeBackpressure = 2
)

var errMergeLost = errors.New("ledger merge: the merge lease or merged_through changed")

// merger runs background merge rounds, one at a time per Store.
type merger struct {
	mu      sync.Mutex
	running bool
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	token   string

	// betweenTx, when set (tests), runs after each transaction of a round.
	betweenTx func(step int)
}

func newMerger() *merger {
	ctx, cancel := context.WithCancel(context.Background())
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return &merger{ctx: ctx, cancel: cancel, token: hex.EncodeToString(b)}
}

// stop cancels a round in progress and waits for it.
func (m *merger) stop() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	m.cancel()
	m.wg.Wait()
}

// startMerge starts a background round unless one is running.
func (s *Store) startMerge() {
	m := s.merger
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.running || m.closed {
		return
	}
	m.running = true
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		// A round that fails (lease held elsewhere, store busy, closed) is
		// started again by a later finish; the log stays durable meanwhile.
		_ = s.mergeRound(m.ctx)
		m.mu.Lock()
		m.running = false
		m.mu.Unlock()
	}()
}

// mergeRound runs one background round (see the top of this file).
func (s *Store) mergeRound(ctx context.Context) error {
	var (
		start, through int64
		keys           []mergeKey
	)
	err := s.writeLazy(ctx, "ledger merge", func(tx *sql.Tx) error {
		snap, err := s.refresh(ctx, tx)
		if err != nil {
			return err
		}
		var (
			owner string
			until int64
		)
		if err := tx.QueryRowContext(ctx, `SELECT merge_owner, merge_until FROM ledger_meta WHERE id = 1`).Scan(&owner, &until); err != nil {
			return err
		}
		now := s.now()
		if owner != "" && owner != s.merger.token && until > nanos(now) {
			return errMergeLost // another process's round
		}
		start = snap.merged
		through, keys = s.mem.mergeKeys()
		if through <= snap.merged {
			return nil
		}
		// round_through is registered before the round writes anything
		// (see "Where a key may be" in ledgerlog.go).
		_, err = tx.ExecContext(ctx, `UPDATE ledger_meta SET merge_owner = ?, merge_until = ?,
			round_through = max(round_through, ?) WHERE id = 1`,
			s.merger.token, nanos(now.Add(mergeLeaseTTL)), through)
		return err
	})
	if err != nil || through <= start {
		return err
	}
	s.merger.step(0)
	size := min((len(keys)+mergeRounds-1)/mergeRounds, mergeTxKeys)
	for i := 0; len(keys) > 0; i++ {
		n := min(size, len(keys))
		part := keys[:n]
		keys = keys[n:]
		if s.mem.size() < s.mergeEntries+s.mergeEntries/mergeLag {
			s.fg.pause(ctx)
		}
		if err := s.writeLazyAs(ctx, true, "ledger merge", func(tx *sql.Tx) error {
			if err := s.checkMergeLease(ctx, tx, start); err != nil {
				return err
			}
			return s.writeMerged(ctx, tx, part, through)
		}); err != nil {
			s.releaseMergeLease(start)
			return err
		}
		s.merger.step(i + 1)
	}
	err = s.writeLazy(ctx, "ledger merge", func(tx *sql.Tx) error {
		if err := s.checkMergeLease(ctx, tx, start); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM ledger_log WHERE seq <= ?`, through); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, `UPDATE ledger_meta SET merged_through = ?, generation = generation + 1,
			merge_owner = '', merge_until = 0 WHERE id = 1`, through)
		return err
	})
	if err != nil {
		s.releaseMergeLease(start)
		return err
	}
	s.mem.merged(through)
	return nil
}

// checkMergeLease fails with errMergeLost unless the round's lease is held
// and merged_through is still start; it extends the lease.
func (s *Store) checkMergeLease(ctx context.Context, tx *sql.Tx, start int64) error {
	var (
		owner  string
		merged int64
	)
	if err := tx.QueryRowContext(ctx, `SELECT merge_owner, merged_through FROM ledger_meta WHERE id = 1`).Scan(&owner, &merged); err != nil {
		return err
	}
	if owner != s.merger.token || merged != start {
		return errMergeLost
	}
	_, err := tx.ExecContext(ctx, `UPDATE ledger_meta SET merge_until = ? WHERE id = 1`, nanos(s.now().Add(mergeLeaseTTL)))
	return err
}

// releaseMergeLease gives up the lease after a failed round (best effort:
// an expired lease is free anyway).
func (s *Store) releaseMergeLease(start int64) {
	ctx, cancel := context.WithTimeout(context.Background(), BusyTimeout)
	defer cancel()
	_ = s.writeLazy(ctx, "ledger merge", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE ledger_meta SET merge_owner = '', merge_until = 0 WHERE id = 1 AND merge_owner = ?`, s.merger.token)
		return err
	})
}

func (m *merger) step(i int) {
	if m.betweenTx != nil {
		m.betweenTx(i)
	}
}

// foreground counts the write transactions waiting for the store's one
// write connection other than a background merge round's. A round starts
// each of its transactions only once none waits (or after mergeYield), so a
// claim, finish or checkpoint waits for at most the one merge transaction in
// progress instead of taking turns with the round's: the round fills the
// connection's idle time.
type foreground struct {
	mu      sync.Mutex
	waiting int
	idle    chan struct{} // closed when waiting drops to 0; nil until a round waits
}

// mergeYield bounds how long a round's transaction waits for the foreground
// to pause, so a store that is never idle still merges (memory stays
// bounded: see mergeBackpressure).
const mergeYield = 50 * time.Millisecond

// mergeLag: once memory holds more than mergeEntries plus 1/mergeLag of it
// (the round, started at mergeEntries, falls behind the finishes), its
// transactions stop yielding to the foreground, so memory stays near
// mergeEntries.
const mergeLag = 4

func (f *foreground) enter() {
	f.mu.Lock()
	f.waiting++
	f.mu.Unlock()
}

func (f *foreground) leave() {
	f.mu.Lock()
	f.waiting--
	if f.waiting == 0 && f.idle != nil {
		close(f.idle)
		f.idle = nil
	}
	f.mu.Unlock()
}

// pause waits until no foreground transaction waits for the connection, at
// most mergeYield, or until ctx is done.
func (f *foreground) pause(ctx context.Context) {
	f.mu.Lock()
	if f.waiting == 0 {
		f.mu.Unlock()
		return
	}
	if f.idle == nil {
		f.idle = make(chan struct{})
	}
	ch := f.idle
	f.mu.Unlock()
	t := time.NewTimer(mergeYield)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}
