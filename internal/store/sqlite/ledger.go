package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// The ledger statements take a page's keys (or outcomes) as one JSON array
// parameter expanded by json_each (jsonb_each for outcomes, so each object is
// parsed once): every call is one statement with a fixed text whatever the
// page size (no variable limit, no chunking, one prepared statement), and each
// row is a primary-key lookup.

const (
	sqlLedgerGet = `SELECT ` + ledgerColumns + ` FROM ledger
		WHERE sync_id = ?1 AND key IN (SELECT value FROM json_each(?2))`

	sqlLedgerClaim = `INSERT INTO ledger
			(sync_id, key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at)
		SELECT ?1, j.value, 'pending', ?2, ?3, '', '', 1, ?4, NULL, ?4 FROM json_each(?5) AS j WHERE true
		ON CONFLICT (sync_id, key) DO UPDATE SET
			state = 'pending', fence = excluded.fence, run_id = excluded.run_id, message = '',
			attempts = ledger.attempts + 1, claimed_at = excluded.claimed_at, seen_at = excluded.seen_at
		WHERE ledger.state = 'rejected' OR (ledger.state = 'pending' AND ledger.fence <= excluded.fence)`

	// Keys are unique in the array (LedgerFinish keeps a key's last outcome).
	sqlLedgerFinish = `INSERT INTO ledger
			(sync_id, key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at)
		SELECT ?1, j.value->>'k', j.value->>'s', ?2, ?3, j.value->>'r', j.value->>'m', 1, ?4,
			CASE WHEN j.value->>'s' = 'complete' THEN ?4 END, ?4
		FROM jsonb_each(?5) AS j WHERE true
		ON CONFLICT (sync_id, key) DO UPDATE SET
			state = excluded.state, fence = excluded.fence, run_id = excluded.run_id,
			result = excluded.result, message = excluded.message,
			completed_at = excluded.completed_at, seen_at = excluded.seen_at`

	sqlLedgerTouch = `UPDATE ledger SET seen_at = ?1
		WHERE sync_id = ?2 AND key IN (SELECT value FROM json_each(?3))`
)

// stmts are the hot path's prepared statements.
type stmts struct {
	get, claim, finish, touch *sql.Stmt
}

func prepare(ctx context.Context, r, w *sql.DB) (*stmts, error) {
	var (
		st  stmts
		err error
	)
	if st.get, err = r.PrepareContext(ctx, sqlLedgerGet); err != nil {
		return nil, err
	}
	for _, p := range []struct {
		dst **sql.Stmt
		q   string
	}{{&st.claim, sqlLedgerClaim}, {&st.finish, sqlLedgerFinish}, {&st.touch, sqlLedgerTouch}} {
		if *p.dst, err = w.PrepareContext(ctx, p.q); err != nil {
			st.close()
			return nil, err
		}
	}
	return &st, nil
}

func (st *stmts) close() {
	for _, s := range []*sql.Stmt{st.get, st.claim, st.finish, st.touch} {
		if s != nil {
			_ = s.Close()
		}
	}
}

const ledgerColumns = `key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at`

func scanLedger(sc rowScanner) (store.LedgerEntry, error) {
	var (
		e             store.LedgerEntry
		state         string
		claimed, seen int64
		completed     sql.NullInt64
	)
	if err := sc.Scan(&e.Key, &state, &e.Fence, &e.RunID, &e.Result, &e.Message, &e.Attempts, &claimed, &completed, &seen); err != nil {
		return store.LedgerEntry{}, err
	}
	e.State = store.LedgerState(state)
	e.ClaimedAt = fromNanos(claimed)
	e.CompletedAt = fromNullNanos(completed)
	e.SeenAt = fromNanos(seen)
	return e, nil
}

// keysJSON encodes keys, dropping duplicates, as a JSON array.
func keysJSON(keys []string) (string, error) {
	seen := make(map[string]struct{}, len(keys))
	uniq := make([]string, 0, len(keys))
	for _, k := range keys {
		if k == "" {
			return "", invalidf("empty ledger key")
		}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		uniq = append(uniq, k)
	}
	b, err := json.Marshal(uniq)
	return string(b), err
}

// LedgerGet returns the entries of keys that exist, in one query.
func (s *Store) LedgerGet(ctx context.Context, syncID string, keys []string) (map[string]store.LedgerEntry, error) {
	out := make(map[string]store.LedgerEntry, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	arr, err := keysJSON(keys)
	if err != nil {
		return nil, err
	}
	rows, err := s.stmts.get.QueryContext(ctx, syncID, arr)
	if err != nil {
		return nil, s.mapErr("ledger get", err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanLedger(rows)
		if err != nil {
			return nil, s.mapErr("ledger get", err)
		}
		out[e.Key] = e
	}
	if err := rows.Err(); err != nil {
		return nil, s.mapErr("ledger get", err)
	}
	return out, nil
}

// LedgerClaim claims keys as pending under p.Fence in one transaction: absent
// keys are inserted (attempts 1); rejected keys and keys pending under a fence
// <= p.Fence become pending under p.Fence with attempts+1; complete and
// in_doubt keys are left alone. A stale p.Fence refuses the whole claim with
// ErrFenced and writes nothing.
func (s *Store) LedgerClaim(ctx context.Context, p store.LedgerClaimParams) error {
	arr, err := keysJSON(p.Keys)
	if err != nil {
		return err
	}
	return s.write(ctx, "ledger claim", func(tx *sql.Tx) error {
		if err := checkFence(ctx, tx, p.SyncID, p.Fence); err != nil {
			return err
		}
		if len(p.Keys) == 0 {
			return nil
		}
		now := nanos(s.now())
		_, err := tx.StmtContext(ctx, s.stmts.claim).ExecContext(ctx, p.SyncID, p.Fence, p.RunID, now, arr)
		return err
	})
}

type finishJSON struct {
	K string `json:"k"`
	S string `json:"s"`
	R string `json:"r"`
	M string `json:"m"`
}

// LedgerFinish records outcomes (complete with Result, rejected with Message,
// or in_doubt) in one transaction, fenced like a claim. CompletedAt is set for
// complete entries only; SeenAt moves to now. A key that was never claimed is
// inserted with attempts 1.
func (s *Store) LedgerFinish(ctx context.Context, p store.LedgerFinishParams) error {
	items := make([]finishJSON, 0, len(p.Entries))
	index := make(map[string]int, len(p.Entries))
	for _, e := range p.Entries {
		if e.Key == "" {
			return invalidf("empty ledger key")
		}
		switch e.State {
		case store.LedgerComplete, store.LedgerRejected, store.LedgerInDoubt:
		default:
			return invalidf("ledger finish state %q (want complete, rejected or in_doubt)", e.State)
		}
		it := finishJSON{K: e.Key, S: string(e.State), R: e.Result, M: e.Message}
		if i, dup := index[e.Key]; dup {
			items[i] = it // a key given twice: its last outcome wins
			continue
		}
		index[e.Key] = len(items)
		items = append(items, it)
	}
	b, err := json.Marshal(items)
	if err != nil {
		return err
	}
	return s.write(ctx, "ledger finish", func(tx *sql.Tx) error {
		if err := checkFence(ctx, tx, p.SyncID, p.Fence); err != nil {
			return err
		}
		if len(items) == 0 {
			return nil
		}
		now := nanos(s.now())
		_, err := tx.StmtContext(ctx, s.stmts.finish).ExecContext(ctx, p.SyncID, p.Fence, p.RunID, now, string(b))
		return err
	})
}

// LedgerTouch moves SeenAt of keys to now (a replay confirmed them).
func (s *Store) LedgerTouch(ctx context.Context, syncID string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	arr, err := keysJSON(keys)
	if err != nil {
		return err
	}
	return s.write(ctx, "ledger touch", func(tx *sql.Tx) error {
		_, err := tx.StmtContext(ctx, s.stmts.touch).ExecContext(ctx, nanos(s.now()), syncID, arr)
		return err
	})
}

// defaultPruneWindow is how many ledger rows one prune transaction walks, so
// a prune never holds the write lock for long.
const defaultPruneWindow = 5000

// LedgerPrune deletes complete and rejected entries (of every sync) last seen
// before before, and returns how many it deleted. It walks the ledger in
// primary-key order, one short transaction per window of rows.
func (s *Store) LedgerPrune(ctx context.Context, before time.Time) (int64, error) {
	var (
		total             int64
		fromSync, fromKey string // exclusive lower bound of the next window
		first             = true
	)
	for {
		var (
			end   bool
			nSync string
			nKey  string
		)
		err := s.write(ctx, "ledger prune", func(tx *sql.Tx) error {
			// The window is (from, to]; to is the pruneWindow-th row after from.
			err := tx.QueryRowContext(ctx, `SELECT sync_id, key FROM ledger
				WHERE ?1 OR (sync_id, key) > (?2, ?3) ORDER BY sync_id, key LIMIT 1 OFFSET ?4`,
				first, fromSync, fromKey, s.pruneWindow-1).Scan(&nSync, &nKey)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				end = true
			case err != nil:
				return err
			}
			q := `DELETE FROM ledger WHERE (?1 OR (sync_id, key) > (?2, ?3))
				AND (?4 OR (sync_id, key) <= (?5, ?6))
				AND seen_at < ?7 AND state IN ('complete', 'rejected')`
			res, err := tx.ExecContext(ctx, q, first, fromSync, fromKey, end, nSync, nKey, nanos(before))
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			total += n
			return err
		})
		if err != nil {
			return total, err
		}
		if end {
			return total, nil
		}
		first, fromSync, fromKey = false, nSync, nKey
	}
}

// LedgerList returns a sync's entries in state, most recently claimed first;
// limit <= 0 returns all.
func (s *Store) LedgerList(ctx context.Context, syncID string, state store.LedgerState, limit int) ([]store.LedgerEntry, error) {
	q := `SELECT ` + ledgerColumns + ` FROM ledger
		WHERE sync_id = ? AND state = ? ORDER BY claimed_at DESC, key LIMIT ?`
	if state == store.LedgerRejected || state == store.LedgerInDoubt {
		// Repeat the partial index's condition so the planner can use it.
		q = `SELECT ` + ledgerColumns + ` FROM ledger
		WHERE sync_id = ? AND state = ? AND state IN ('rejected', 'in_doubt') ORDER BY claimed_at DESC, key LIMIT ?`
	}
	rows, err := s.r.QueryContext(ctx, q, syncID, string(state), limitArg(limit))
	if err != nil {
		return nil, s.mapErr("ledger list", err)
	}
	defer rows.Close()
	var out []store.LedgerEntry
	for rows.Next() {
		e, err := scanLedger(rows)
		if err != nil {
			return nil, s.mapErr("ledger list", err)
		}
		out = append(out, e)
	}
	return out, s.mapErr("ledger list", rows.Err())
}
