package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// The ledger statements take a page's keys (or outcomes) as one JSON array
// parameter expanded by json_each (jsonb_each for outcomes, so each object is
// parsed once): every call is one statement with a fixed text whatever the
// page size (no variable limit, no chunking, one prepared statement), and each
// row is a primary-key lookup.
//
// Storage (migration 0003): a sync's id is stored once in ledger_syncs and
// rows carry its integer id (sid); a key that is lowercase 64-character hex
// (every real delivery key, SHA-256) is stored as its 32 bytes, any other key
// as TEXT. Keys cross the SQL boundary as JSON strings: hex keys as they are,
// other keys prefixed with "~" (see keyArg), decoded by sqlKey. Pending
// entries live in ledger_claims, final ones (complete, rejected, in_doubt) in
// ledger; a key is in at most one of the two.

// sqlKey decodes a key argument (see keyArg) to its stored form.
func sqlKey(arg string) string {
	return `iif(substr(` + arg + `, 1, 1) = '~', substr(` + arg + `, 2), unhex(` + arg + `))`
}

// sqlSID is the integer id of the sync named by parameter ?1 (NULL if the
// sync has no ledger entries yet).
const sqlSID = `(SELECT id FROM ledger_syncs WHERE sync_id = ?1)`

const (
	ledgerColumns  = `key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at`
	pendingColumns = `key, 'pending', fence, run_id, '', '', attempts, claimed_at, NULL, seen_at`
)

var (
	sqlLedgerGet = `SELECT ` + ledgerColumns + ` FROM ledger
		WHERE sid = ` + sqlSID + ` AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?2))
		UNION ALL
		SELECT ` + pendingColumns + ` FROM ledger_claims
		WHERE sid = ` + sqlSID + ` AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?2))`

	// sqlLedgerFinal returns the keys of ?2 (as given) that have a final
	// entry, with its state: a claim leaves complete and in_doubt alone and
	// moves rejected ones back to pending.
	sqlLedgerFinal = `SELECT j.value, l.state FROM json_each(?2) AS j
		CROSS JOIN ledger AS l ON l.sid = ?1 AND l.key = ` + sqlKey("j.value")  // CROSS: j drives the loop

	// sqlLedgerReclaim moves rejected entries of ?5 to ledger_claims; the
	// caller then deletes them from ledger (sqlLedgerDropRejected).
	sqlLedgerReclaim = `INSERT INTO ledger_claims (sid, key, fence, run_id, attempts, claimed_at, seen_at)
		SELECT sid, key, ?2, ?3, attempts + 1, ?4, ?4 FROM ledger
		WHERE sid = ?1 AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?5)) AND state = 'rejected'`

	sqlLedgerDropRejected = `DELETE FROM ledger
		WHERE sid = ?1 AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?2)) AND state = 'rejected'`

	// sqlLedgerClaim inserts claims of keys that have no final entry, or
	// re-claims a pending one under a fence >= its own (attempts+1).
	sqlLedgerClaim = `INSERT INTO ledger_claims (sid, key, fence, run_id, attempts, claimed_at, seen_at)
		SELECT ?1, ` + sqlKey("j.value") + `, ?2, ?3, 1, ?4, ?4 FROM json_each(?5) AS j WHERE true
		ON CONFLICT (sid, key) DO UPDATE SET
			fence = excluded.fence, run_id = excluded.run_id, attempts = ledger_claims.attempts + 1,
			claimed_at = excluded.claimed_at, seen_at = excluded.seen_at
		WHERE ledger_claims.fence <= excluded.fence`

	// sqlLedgerFinish writes final entries, taking attempts and claimed_at
	// from the key's claim if it has one (then sqlLedgerUnclaim drops the
	// claim). Keys are unique in the array (LedgerFinish keeps a key's last
	// outcome).
	sqlLedgerFinish = `INSERT INTO ledger
			(sid, key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at)
		SELECT ?1, j.key, j.s, ?2, ?3, j.r, j.m, coalesce(c.attempts, 1), coalesce(c.claimed_at, ?4),
			CASE WHEN j.s = 'complete' THEN ?4 END, ?4
		FROM (SELECT ` + sqlKey("value->>'k'") + ` AS key, value->>'s' AS s, value->>'r' AS r, value->>'m' AS m
			FROM jsonb_each(?5)) AS j
		LEFT JOIN ledger_claims AS c ON c.sid = ?1 AND c.key = j.key
		WHERE true
		ON CONFLICT (sid, key) DO UPDATE SET
			state = excluded.state, fence = excluded.fence, run_id = excluded.run_id,
			result = excluded.result, message = excluded.message,
			completed_at = excluded.completed_at, seen_at = excluded.seen_at`

	sqlLedgerUnclaim = `DELETE FROM ledger_claims
		WHERE sid = ?1 AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?2))`

	sqlLedgerTouch = `UPDATE ledger SET seen_at = ?2
		WHERE sid = ` + sqlSID + ` AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?3))`

	sqlLedgerTouchClaims = `UPDATE ledger_claims SET seen_at = ?2
		WHERE sid = ` + sqlSID + ` AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?3))`
)

// stmts are the hot path's prepared statements.
type stmts struct {
	get                                 *sql.Stmt // read pool
	final, reclaim, dropRejected, claim *sql.Stmt
	finish, unclaim, touch, touchClaims *sql.Stmt
	sidGet, sidPut                      *sql.Stmt
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
	}{
		{&st.final, sqlLedgerFinal}, {&st.reclaim, sqlLedgerReclaim}, {&st.dropRejected, sqlLedgerDropRejected},
		{&st.claim, sqlLedgerClaim}, {&st.finish, sqlLedgerFinish}, {&st.unclaim, sqlLedgerUnclaim},
		{&st.touch, sqlLedgerTouch}, {&st.touchClaims, sqlLedgerTouchClaims},
		{&st.sidGet, `SELECT id FROM ledger_syncs WHERE sync_id = ?`},
		{&st.sidPut, `INSERT INTO ledger_syncs (sync_id) VALUES (?) RETURNING id`},
	} {
		if *p.dst, err = w.PrepareContext(ctx, p.q); err != nil {
			st.close()
			return nil, err
		}
	}
	return &st, nil
}

func (st *stmts) close() {
	for _, s := range []*sql.Stmt{st.get, st.final, st.reclaim, st.dropRejected, st.claim,
		st.finish, st.unclaim, st.touch, st.touchClaims, st.sidGet, st.sidPut} {
		if s != nil {
			_ = s.Close()
		}
	}
}

// ledgerSID returns the integer id of syncID in ledger_syncs, adding it if
// it is new (inside the caller's write transaction).
func (s *Store) ledgerSID(ctx context.Context, tx *sql.Tx, syncID string) (int64, error) {
	var id int64
	err := tx.StmtContext(ctx, s.stmts.sidGet).QueryRowContext(ctx, syncID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		err = tx.StmtContext(ctx, s.stmts.sidPut).QueryRowContext(ctx, syncID).Scan(&id)
	}
	return id, err
}

// isHexKey reports whether k is stored as bytes: 64 lowercase hex digits.
func isHexKey(k string) bool {
	if len(k) != 64 {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// keyArg is k as the statements take it (decoded by sqlKey): a hex key as
// it is, any other key behind a "~".
func keyArg(k string) string {
	if isHexKey(k) {
		return k
	}
	return "~" + k
}

// keyOf turns a stored key (BLOB or TEXT) back into the caller's key.
func keyOf(v any) (string, error) {
	switch k := v.(type) {
	case []byte:
		return hex.EncodeToString(k), nil
	case string:
		return k, nil
	}
	return "", fmt.Errorf("ledger key of type %T", v)
}

func scanLedger(sc rowScanner) (store.LedgerEntry, error) {
	var (
		e             store.LedgerEntry
		key           any
		state         string
		claimed, seen int64
		completed     sql.NullInt64
	)
	if err := sc.Scan(&key, &state, &e.Fence, &e.RunID, &e.Result, &e.Message, &e.Attempts, &claimed, &completed, &seen); err != nil {
		return store.LedgerEntry{}, err
	}
	k, err := keyOf(key)
	if err != nil {
		return store.LedgerEntry{}, err
	}
	e.Key = k
	e.State = store.LedgerState(state)
	e.ClaimedAt = fromNanos(claimed)
	e.CompletedAt = fromNullNanos(completed)
	e.SeenAt = fromNanos(seen)
	return e, nil
}

// uniqueKeys returns keys without duplicates (first occurrence kept); an
// empty key is refused.
func uniqueKeys(keys []string) ([]string, error) {
	seen := make(map[string]struct{}, len(keys))
	uniq := make([]string, 0, len(keys))
	for _, k := range keys {
		if k == "" {
			return nil, invalidf("empty ledger key")
		}
		if _, dup := seen[k]; dup {
			continue
		}
		seen[k] = struct{}{}
		uniq = append(uniq, k)
	}
	return uniq, nil
}

// keysJSON encodes keys as a JSON array of key arguments (see keyArg).
func keysJSON(keys []string) string {
	var b strings.Builder
	b.Grow(len(keys) * 67)
	b.WriteByte('[')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		if isHexKey(k) {
			b.WriteByte('"')
			b.WriteString(k)
			b.WriteByte('"')
			continue
		}
		j, _ := json.Marshal(keyArg(k)) // a string always marshals
		b.Write(j)
	}
	b.WriteByte(']')
	return b.String()
}

// LedgerGet returns the entries of keys that exist, in one query.
func (s *Store) LedgerGet(ctx context.Context, syncID string, keys []string) (map[string]store.LedgerEntry, error) {
	out := make(map[string]store.LedgerEntry, len(keys))
	if len(keys) == 0 {
		return out, nil
	}
	uniq, err := uniqueKeys(keys)
	if err != nil {
		return nil, err
	}
	rows, err := s.stmts.get.QueryContext(ctx, syncID, keysJSON(uniq))
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
//
// Claims go to ledger_claims, a table as small as the pages in flight, so a
// claim rewrites a few pages whatever the size of the ledger; the commit is
// synchronous=FULL like every other, so the claim is durable before the
// destination call.
func (s *Store) LedgerClaim(ctx context.Context, p store.LedgerClaimParams) error {
	uniq, err := uniqueKeys(p.Keys)
	if err != nil {
		return err
	}
	return s.write(ctx, "ledger claim", func(tx *sql.Tx) error {
		if err := checkFence(ctx, tx, p.SyncID, p.Fence); err != nil {
			return err
		}
		if len(uniq) == 0 {
			return nil
		}
		sid, err := s.ledgerSID(ctx, tx, p.SyncID)
		if err != nil {
			return err
		}
		arr := keysJSON(uniq)
		rows, err := tx.StmtContext(ctx, s.stmts.final).QueryContext(ctx, sid, arr)
		if err != nil {
			return err
		}
		final := map[string]string{} // key argument -> state
		for rows.Next() {
			var k, state string
			if err := rows.Scan(&k, &state); err != nil {
				_ = rows.Close()
				return err
			}
			final[k] = state
		}
		if err := rows.Close(); err != nil {
			return err
		}
		now := nanos(s.now())
		if len(final) > 0 {
			var fresh, rejected []string
			for _, k := range uniq {
				switch final[keyArg(k)] {
				case "":
					fresh = append(fresh, k)
				case string(store.LedgerRejected):
					rejected = append(rejected, k)
				}
			}
			if len(rejected) > 0 {
				rarr := keysJSON(rejected)
				if _, err := tx.StmtContext(ctx, s.stmts.reclaim).ExecContext(ctx, sid, p.Fence, p.RunID, now, rarr); err != nil {
					return err
				}
				if _, err := tx.StmtContext(ctx, s.stmts.dropRejected).ExecContext(ctx, sid, rarr); err != nil {
					return err
				}
			}
			if len(fresh) == 0 {
				return nil
			}
			arr = keysJSON(fresh)
		}
		_, err = tx.StmtContext(ctx, s.stmts.claim).ExecContext(ctx, sid, p.Fence, p.RunID, now, arr)
		return err
	})
}

// finishItem is one outcome as sqlLedgerFinish reads it.
type finishItem struct {
	K string `json:"k"`
	S string `json:"s"`
	R string `json:"r"`
	M string `json:"m"`
}

// LedgerFinish records outcomes (complete with Result, rejected with Message,
// or in_doubt) in one transaction, fenced like a claim. CompletedAt is set for
// complete entries only; SeenAt moves to now; Attempts and ClaimedAt are the
// claim's. A key that was never claimed is inserted with attempts 1.
func (s *Store) LedgerFinish(ctx context.Context, p store.LedgerFinishParams) error {
	items := make([]finishItem, 0, len(p.Entries))
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
		it := finishItem{K: keyArg(e.Key), S: string(e.State), R: e.Result, M: e.Message}
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
		sid, err := s.ledgerSID(ctx, tx, p.SyncID)
		if err != nil {
			return err
		}
		now := nanos(s.now())
		if _, err := tx.StmtContext(ctx, s.stmts.finish).ExecContext(ctx, sid, p.Fence, p.RunID, now, string(b)); err != nil {
			return err
		}
		keys := make([]string, len(items))
		for i, it := range items {
			keys[i] = it.K
		}
		arr, err := json.Marshal(keys) // already key arguments
		if err != nil {
			return err
		}
		_, err = tx.StmtContext(ctx, s.stmts.unclaim).ExecContext(ctx, sid, string(arr))
		return err
	})
}

// LedgerTouch moves SeenAt of keys to now (a replay confirmed them).
func (s *Store) LedgerTouch(ctx context.Context, syncID string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	uniq, err := uniqueKeys(keys)
	if err != nil {
		return err
	}
	arr := keysJSON(uniq)
	return s.write(ctx, "ledger touch", func(tx *sql.Tx) error {
		now := nanos(s.now())
		if _, err := tx.StmtContext(ctx, s.stmts.touch).ExecContext(ctx, syncID, now, arr); err != nil {
			return err
		}
		_, err := tx.StmtContext(ctx, s.stmts.touchClaims).ExecContext(ctx, syncID, now, arr)
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
		total   int64
		fromSID int64 // exclusive lower bound (fromSID, fromKey) of the next window
		fromKey any
		first   = true
	)
	for {
		var (
			end  bool
			nSID int64
			nKey any
		)
		err := s.write(ctx, "ledger prune", func(tx *sql.Tx) error {
			// The window is (from, to]; to is the pruneWindow-th row after from.
			err := tx.QueryRowContext(ctx, `SELECT sid, key FROM ledger
				WHERE ?1 OR (sid, key) > (?2, ?3) ORDER BY sid, key LIMIT 1 OFFSET ?4`,
				first, fromSID, fromKey, s.pruneWindow-1).Scan(&nSID, &nKey)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				end = true
			case err != nil:
				return err
			}
			q := `DELETE FROM ledger WHERE (?1 OR (sid, key) > (?2, ?3))
				AND (?4 OR (sid, key) <= (?5, ?6))
				AND seen_at < ?7 AND state IN ('complete', 'rejected')`
			res, err := tx.ExecContext(ctx, q, first, fromSID, fromKey, end, nSID, nKey, nanos(before))
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
		first, fromSID, fromKey = false, nSID, nKey
	}
}

// LedgerList returns a sync's entries in state, most recently claimed first;
// limit <= 0 returns all.
func (s *Store) LedgerList(ctx context.Context, syncID string, state store.LedgerState, limit int) ([]store.LedgerEntry, error) {
	var q string
	switch state {
	case store.LedgerPending:
		q = `SELECT ` + pendingColumns + ` FROM ledger_claims
		WHERE sid = ` + sqlSID + ` AND ?2 = 'pending' ORDER BY claimed_at DESC, key LIMIT ?3`
	case store.LedgerRejected, store.LedgerInDoubt:
		// Repeat the partial index's condition so the planner can use it.
		q = `SELECT ` + ledgerColumns + ` FROM ledger
		WHERE sid = ` + sqlSID + ` AND state = ?2 AND state IN ('rejected', 'in_doubt') ORDER BY claimed_at DESC, key LIMIT ?3`
	default:
		q = `SELECT ` + ledgerColumns + ` FROM ledger
		WHERE sid = ` + sqlSID + ` AND state = ?2 ORDER BY claimed_at DESC, key LIMIT ?3`
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
