package postgres

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/store"
)

// The ledger statements take a page's keys (or outcomes) as text[] parameters
// expanded by unnest or matched with = ANY: every call is one statement and
// one round trip with a fixed text whatever the page size (prepared once per
// connection by pgx's statement cache), and each row is a primary-key lookup.
// Keys are sent sorted and unique, so concurrent statements lock a sync's
// ledger rows in the same order and ON CONFLICT never meets a key twice.

const ledgerColumns = `key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at`

const (
	// sqlLedgerGet looks each key up by primary key. The subquery is planned
	// on its own (OFFSET 0 keeps it from being merged into a join), so the
	// plan is one index probe per key whatever the statistics say; "key =
	// ANY($2)" let the planner pick a sequential scan on small or freshly
	// grown tables, and with a generic plan's unhashed array that costs
	// rows × keys comparisons.
	sqlLedgerGet = `SELECT e.* FROM unnest($2::text[]) AS k(key)
		CROSS JOIN LATERAL (SELECT ` + ledgerColumns + ` FROM ledger WHERE key = k.key AND sync_id = $1 OFFSET 0) AS e`

	sqlLedgerClaim = `WITH ` + fenceCTE + `,
	c AS (
		` + claimInsert + `
		ON CONFLICT (key, sync_id) DO UPDATE SET
			state = 'pending', fence = excluded.fence, run_id = excluded.run_id, result = excluded.result, message = '',
			attempts = l.attempts + 1, claimed_at = excluded.claimed_at, seen_at = excluded.seen_at
		WHERE l.state = 'rejected' OR (l.state = 'pending' AND l.fence <= excluded.fence)
	)
	SELECT fence FROM f`

	// sqlLedgerClaimAbsent is sqlLedgerClaim for keys the caller read as
	// absent (LedgerClaimParams.Absent): a plain insert, which spares each
	// row ON CONFLICT's look for the key before its insert (a quarter of
	// the claim's server time). A key present after all fails the
	// statement, which then changes nothing, with unique_violation.
	sqlLedgerClaimAbsent = `WITH ` + fenceCTE + `,
	c AS (
		` + claimInsert + `
	)
	SELECT fence FROM f`

	sqlLedgerTouch = `UPDATE ledger SET seen_at = $1 WHERE sync_id = $2 AND key = ANY($3::text[])`

	// sqlLedgerPrune deletes the prunable rows of one window: the $3 rows
	// after ($1, $2) in primary-key order (key, sync_id). It returns the
	// window's size and last row (the next window's lower bound) and how many
	// rows went. The delete reaches the window's prunable rows by their
	// ctid (a TID scan): with a range condition on the key instead, the
	// planner could pick ledger_listed and read every rejected row of the
	// ledger once per window. A row updated since the window read it has a
	// new ctid and is kept (it was seen again, or claimed).
	sqlLedgerPrune = `WITH w AS (
		SELECT key, sync_id, ctid AS t, state, seen_at FROM ledger WHERE (key, sync_id) > ($1::text, $2::text) ORDER BY key, sync_id LIMIT $3
	), last AS (
		SELECT key, sync_id FROM w ORDER BY key DESC, sync_id DESC LIMIT 1
	), d AS (
		DELETE FROM ledger
		WHERE ctid = ANY (ARRAY(SELECT t FROM w WHERE seen_at < $4 AND state IN ('rejected', 'in_doubt')))
		RETURNING 1
	)
	SELECT (SELECT count(*) FROM w), (SELECT count(*) FROM d),
		coalesce((SELECT key FROM last), ''), coalesce((SELECT sync_id FROM last), '')`
)

// ledgerInsertColumns are the columns the claim's and the finish's inserts
// give.
const ledgerInsertColumns = `(sync_id, key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at)`

// claimInsert inserts the keys $5 with their results $6 as pending under
// the fence $2 ($1 the sync, $3 the run, $4 now), unless a newer fence is
// registered (f); sqlLedgerClaim adds its ON CONFLICT to it.
const claimInsert = `INSERT INTO ledger AS l ` + ledgerInsertColumns + `
		SELECT $1::text, k.key, 'pending', $2::bigint, $3::bigint, coalesce(k.result, ''), '', 1, $4::bigint, NULL, $4::bigint
		FROM f, unnest($5::text[], $6::text[]) AS k(key, result)
		WHERE f.fence <= $2::bigint`

// finishInsert inserts the outcomes given by the parameters keys, states,
// results and messages (arrays) as claimInsert inserts claims.
func finishInsert(keys, states, results, messages string) string {
	return `INSERT INTO ledger AS l ` + ledgerInsertColumns + `
		SELECT $1::text, u.k, u.s, $2::bigint, $3::bigint, u.r, u.m, 1, $4::bigint,
			CASE WHEN u.s = 'complete' THEN $4::bigint END, $4::bigint
		FROM f, unnest(` + keys + `::text[], ` + states + `::text[], ` + results + `::text[], ` + messages + `::text[]) AS u(k, s, r, m)
		WHERE f.fence <= $2::bigint`
}

// sqlLedgerFinish upserts the outcomes ($5-$8), inserts those of keys
// the caller read as absent ($10-$13, store.LedgerFinish.Absent: no
// ON CONFLICT look before each insert; one present after all fails the
// statement with unique_violation) and deletes the released keys ($9)
// but complete ones, in one statement (the three sets are disjoint: a
// key's last outcome is in one of them).
var sqlLedgerFinish = `WITH ` + fenceCTE + `,
	x AS (
		` + finishInsert("$5", "$6", "$7", "$8") + `
		ON CONFLICT (key, sync_id) DO UPDATE SET
			state = excluded.state, fence = excluded.fence, run_id = excluded.run_id,
			result = excluded.result, message = excluded.message,
			completed_at = excluded.completed_at, seen_at = excluded.seen_at
	),
	n AS (
		` + finishInsert("$10", "$11", "$12", "$13") + `
	),
	d AS (
		DELETE FROM ledger AS l USING f
		WHERE f.fence <= $2::bigint AND l.key = ANY($9::text[]) AND l.sync_id = $1::text AND l.state <> 'complete'
	)
	SELECT fence FROM f`

// scanLedger reads an entry whose times are put on the Store's clock by
// adding toLocal (the Store's clock less the one they were written on).
func scanLedger(sc pgx.Row, toLocal time.Duration) (store.LedgerEntry, error) {
	var (
		e             store.LedgerEntry
		state         string
		claimed, seen int64
		completed     *int64
	)
	if err := sc.Scan(&e.Key, &state, &e.Fence, &e.RunID, &e.Result, &e.Message, &e.Attempts, &claimed, &completed, &seen); err != nil {
		return store.LedgerEntry{}, err
	}
	e.State = store.LedgerState(state)
	e.ClaimedAt = fromNanos(claimed).Add(toLocal)
	e.CompletedAt = shifted(fromNullNanos(completed), toLocal)
	e.SeenAt = fromNanos(seen).Add(toLocal)
	return e, nil
}

// uniqueKeys returns keys sorted, without duplicates; an empty key is refused.
func uniqueKeys(keys []string) ([]string, error) {
	out := slices.Clone(keys)
	for _, k := range out {
		if k == "" {
			return nil, invalidf("empty ledger key")
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
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
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, sqlLedgerGet, syncID, uniq)
	if err != nil {
		return nil, mapErr("ledger get", err)
	}
	defer rows.Close()
	for rows.Next() {
		e, err := scanLedger(rows, -off)
		if err != nil {
			return nil, mapErr("ledger get", err)
		}
		out[e.Key] = e
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr("ledger get", err)
	}
	return out, nil
}

// uniqueClaims returns keys sorted, without duplicates, with their Results
// (a key given twice keeps its last one; nil without p.Results: the claim
// then binds NULL, which unnest pads as NULLs, instead of an array of empty
// strings); an empty key, or Results not one per key, is refused.
func uniqueClaims(p store.LedgerClaimParams) ([]string, []string, error) {
	if p.Results == nil {
		keys, err := uniqueKeys(p.Keys)
		return keys, nil, err
	}
	if len(p.Results) != len(p.Keys) {
		return nil, nil, invalidf("ledger claim: %d results for %d keys", len(p.Results), len(p.Keys))
	}
	order := make([]int, len(p.Keys))
	for i, k := range p.Keys {
		if k == "" {
			return nil, nil, invalidf("empty ledger key")
		}
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return strings.Compare(p.Keys[a], p.Keys[b]) })
	keys := make([]string, 0, len(order))
	results := make([]string, 0, len(order))
	for _, i := range order {
		if n := len(keys); n > 0 && keys[n-1] == p.Keys[i] {
			results[n-1] = p.Results[i] // stable order: a later occurrence
			continue
		}
		keys, results = append(keys, p.Keys[i]), append(results, p.Results[i])
	}
	return keys, results, nil
}

// LedgerClaim claims keys as pending under p.Fence in one statement: absent
// (or released) keys are inserted (attempts 1); rejected keys and keys
// pending under a fence <= p.Fence become pending under p.Fence with
// attempts+1; complete, accepted and in_doubt keys are left alone. A claimed
// entry holds its p.Results entry as its Result. A stale p.Fence refuses the
// whole claim with ErrFenced and writes nothing. With p.Absent the keys
// are inserted without ON CONFLICT first, and claimed again with it when
// one was present after all (the server then logs that unique_violation).
func (s *Store) LedgerClaim(ctx context.Context, p store.LedgerClaimParams) error {
	if err := checkFenceArgs(p.SyncID, p.Fence); err != nil {
		return err
	}
	uniq, results, err := uniqueClaims(p)
	if err != nil {
		return err
	}
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return err
	}
	var (
		registered int64
		now        = nanos(s.now().Add(off))
		upsert     = !p.Absent
	)
	if p.Absent {
		err = s.pool.QueryRow(ctx, sqlLedgerClaimAbsent, p.SyncID, p.Fence, p.RunID, now, uniq, results).Scan(&registered)
		upsert = isUniqueViolation(err) // present after all: claimed as without Absent
	}
	if upsert {
		err = s.pool.QueryRow(ctx, sqlLedgerClaim, p.SyncID, p.Fence, p.RunID, now, uniq, results).Scan(&registered)
	}
	if err != nil {
		return mapErr("ledger claim", err)
	}
	if registered > p.Fence {
		return fencedError(p.SyncID, p.Fence, registered)
	}
	return nil
}

// LedgerFinish records outcomes (complete or accepted with Result, rejected
// with Message, in_doubt, or released) in one statement, fenced like a claim.
// CompletedAt is set for complete entries only; SeenAt moves to now. A key
// that was never claimed is inserted with attempts 1. A released key's entry
// is deleted unless it is complete. A key given twice keeps its last outcome.
func (s *Store) LedgerFinish(ctx context.Context, p store.LedgerFinishParams) error {
	err := s.ledgerFinishOnce(ctx, p)
	if isUniqueViolation(err) && anyAbsent(p.Entries) {
		err = s.ledgerFinishOnce(ctx, withoutAbsent(p)) // one was present after all
	}
	return err
}

func (s *Store) ledgerFinishOnce(ctx context.Context, p store.LedgerFinishParams) error {
	// Read before any transaction holds a connection of the pool.
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return err
	}
	if settled := s.settledArgs(p); settled != nil {
		return s.ledgerFinishSettled(ctx, p, settled, off)
	}
	return s.ledgerFinish(ctx, s.pool, p, off)
}

// anyAbsent reports whether an entry says its key was read as absent.
func anyAbsent(es []store.LedgerFinish) bool {
	for _, e := range es {
		if e.Absent {
			return true
		}
	}
	return false
}

// withoutAbsent is p with no entry said to be absent: what is written again
// when one was present after all.
func withoutAbsent(p store.LedgerFinishParams) store.LedgerFinishParams {
	es := slices.Clone(p.Entries)
	for i := range es {
		es[i].Absent = false
	}
	p.Entries = es
	return p
}

// ledgerFinish is LedgerFinish's statement on the pool, or in the caller's
// transaction.
func (s *Store) ledgerFinish(ctx context.Context, q querier, p store.LedgerFinishParams, off time.Duration) error {
	args, check, err := s.finishStmt(p, off)
	if err != nil {
		return err
	}
	return check(q.QueryRow(ctx, sqlLedgerFinish, args...))
}

// finishStmt checks p and returns the arguments of sqlLedgerFinish for it
// and the check of its answer (ErrFenced under a stale fence), so that
// Checkpoint can send it in a batch. off is ClockOffset's.
func (s *Store) finishStmt(p store.LedgerFinishParams, off time.Duration) ([]any, func(pgx.Row) error, error) {
	if err := checkFenceArgs(p.SyncID, p.Fence); err != nil {
		return nil, nil, err
	}
	last := make(map[string]store.LedgerFinish, len(p.Entries))
	for _, e := range p.Entries {
		if e.Key == "" {
			return nil, nil, invalidf("empty ledger key")
		}
		switch e.State {
		case store.LedgerComplete, store.LedgerRejected, store.LedgerInDoubt, store.LedgerAccepted, store.LedgerReleased:
		default:
			return nil, nil, invalidf("ledger finish state %q (want complete, accepted, rejected, in_doubt or released)", e.State)
		}
		last[e.Key] = e
	}
	all := make([]string, 0, len(last))
	for k := range last {
		all = append(all, k)
	}
	slices.Sort(all)
	var ks, released, states, results, messages, nks, nstates, nresults, nmessages []string
	for _, k := range all {
		e := last[k]
		switch {
		case e.State == store.LedgerReleased:
			released = append(released, k)
		case e.Absent:
			nks = append(nks, k)
			nstates, nresults, nmessages = append(nstates, string(e.State)), append(nresults, e.Result), append(nmessages, e.Message)
		default:
			ks = append(ks, k)
			states, results, messages = append(states, string(e.State)), append(results, e.Result), append(messages, e.Message)
		}
	}
	args := []any{p.SyncID, p.Fence, p.RunID, nanos(s.now().Add(off)), ks, states, results, messages, released, nks, nstates, nresults, nmessages}
	return args, func(row pgx.Row) error {
		var registered int64
		if err := row.Scan(&registered); err != nil {
			return mapErr("ledger finish", err)
		}
		if registered > p.Fence {
			return fencedError(p.SyncID, p.Fence, registered)
		}
		return nil
	}, nil
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
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return err
	}
	if _, err := s.pool.Exec(ctx, sqlLedgerTouch, nanos(s.now().Add(off)), syncID, uniq); err != nil {
		return mapErr("ledger touch", err)
	}
	return nil
}

// defaultPruneWindow is how many ledger rows one prune statement walks, so a
// prune never holds many row locks or runs long.
const defaultPruneWindow = 5000

// LedgerPrune deletes rejected and in_doubt entries (of every sync) last
// seen before before, and returns how many it deleted; complete entries (a
// slot's last delivered state, docs/guide.md#what-a-run-does), pending and accepted ones stay. It
// walks the ledger in primary-key order, one short statement (its own
// transaction) per window of rows, so it needs no index on seen_at and each
// step is bounded. Then it deletes the settlements recorded before before
// (not counted: the count is of ledger entries).
func (s *Store) LedgerPrune(ctx context.Context, before time.Time) (int64, error) {
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return 0, err
	}
	var (
		total             int64
		fromKey, fromSync string // exclusive lower bound; ("", "") precedes every row (keys are never empty)
	)
	for {
		var walked, deleted int64
		if err := s.pool.QueryRow(ctx, sqlLedgerPrune, fromKey, fromSync, s.pruneWindow, nanos(before.Add(off))).
			Scan(&walked, &deleted, &fromKey, &fromSync); err != nil {
			return total, mapErr("ledger prune", err)
		}
		total += deleted
		if walked < int64(s.pruneWindow) {
			return total, s.pruneSettled(ctx, before)
		}
	}
}

// sqlListListed lists $1's entries in state $2 (rejected, in_doubt or
// accepted) through the partial index ledger_listed, whose condition it
// repeats so the planner can use it.
const sqlListListed = `SELECT ` + ledgerColumns + ` FROM ledger
		WHERE sync_id = $1 AND state = $2 AND state IN ('rejected', 'in_doubt', 'accepted') ORDER BY claimed_at DESC, key LIMIT $3`

// sqlListPending lists $1's pending entries through the partial index
// ledger_pending, whose condition it repeats so the planner can use it
// ($2 is 'pending').
const sqlListPending = `SELECT ` + ledgerColumns + ` FROM ledger
		WHERE sync_id = $1 AND state = 'pending' AND $2 = 'pending' ORDER BY claimed_at DESC, key LIMIT $3`

// sqlListAny lists $1's entries in state $2: complete ones, which no index
// serves by sync (a mirror's deletion pass reads every complete entry of
// the sync, so it reads the table).
const sqlListAny = `SELECT ` + ledgerColumns + ` FROM ledger
		WHERE sync_id = $1 AND state = $2 ORDER BY claimed_at DESC, key LIMIT $3`

// LedgerList returns a sync's entries in state, most recently claimed first;
// limit <= 0 returns all.
func (s *Store) LedgerList(ctx context.Context, syncID string, state store.LedgerState, limit int) ([]store.LedgerEntry, error) {
	q := sqlListAny
	switch state {
	case store.LedgerRejected, store.LedgerInDoubt, store.LedgerAccepted:
		q = sqlListListed
	case store.LedgerPending:
		q = sqlListPending
	}
	off, err := s.ClockOffset(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, q, syncID, string(state), limitArg(limit))
	if err != nil {
		return nil, mapErr("ledger list", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (store.LedgerEntry, error) { return scanLedger(r, -off) })
	return out, mapErr("ledger list", err)
}
