package sqlite

import (
	"context"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// The ledger (migrations 0003 and 0006). A sync's id is stored once in
// ledger_syncs and rows carry its integer id (sid); a key that is lowercase
// 64-character hex (every real delivery key, SHA-256) is stored as its 32
// bytes, any other key as TEXT. Claims and finishes are appended to
// ledger_log, one row per call, and folded into memory (see ledgerlog.go);
// merges move them into ledger_done (complete entries), ledger (rejected,
// in_doubt, accepted) and ledger_claims (pending entries), a key being in at
// most one of them and its newest log entry overriding all; a released key's
// merge deletes it. Keys cross the SQL boundary as
// JSON strings: hex keys as they are, other keys prefixed with "~" (see
// keyArg), decoded by sqlKey.

// sqlKey decodes a key argument (see keyArg) to its stored form.
func sqlKey(arg string) string {
	return `iif(substr(` + arg + `, 1, 1) = '~', substr(` + arg + `, 2), unhex(` + arg + `))`
}

// sqlSID is the integer id of the sync named by parameter ?1 (NULL if the
// sync has no ledger entries yet).
const sqlSID = `(SELECT id FROM ledger_syncs WHERE sync_id = ?1)`

const (
	ledgerColumns  = `key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at`
	pendingColumns = `key, 'pending', fence, run_id, result, '', attempts, claimed_at, NULL, seen_at`
)

var (
	sqlLedgerTouch = `UPDATE ledger SET seen_at = ?2
		WHERE sid = ` + sqlSID + ` AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?3))`

	sqlLedgerTouchClaims = `UPDATE ledger_claims SET seen_at = ?2
		WHERE sid = ` + sqlSID + ` AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?3))`

	sqlLedgerTouchDone = `UPDATE ledger_done SET seen_at = ?2
		WHERE sid = ` + sqlSID + ` AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?3))`
)

// stmts are the hot path's prepared statements.
type stmts struct {
	getW, getLiveW            *sql.Stmt // table lookups (write pool: see LedgerGet); getLiveW: sqlTableGetLive
	logAppend, touch, touchCl *sql.Stmt
	touchDone                 *sql.Stmt
	metaGet, logTail          *sql.Stmt
	metaGetR, logTailR        *sql.Stmt // LedgerGet's refresh (read pool: see LedgerGet)
	fenceCheck, cursorSave    *sql.Stmt
	runUpdate, runPagePut     *sql.Stmt
	sidGet, sidPut            *sql.Stmt

	// merge upserts (mergeQuery) of mergeSizes[i] rows
	mergeFinal, mergePending, mergeDone [len(mergeSizes)]*sql.Stmt
}

func prepare(ctx context.Context, r, w *sql.DB) (*stmts, error) {
	var st stmts
	type stmtDef struct {
		db  *sql.DB
		dst **sql.Stmt
		q   string
	}
	list := []stmtDef{
		{w, &st.getW, sqlTableGet}, {w, &st.getLiveW, sqlTableGetLive},
		{w, &st.logAppend, sqlLogAppend}, {w, &st.fenceCheck, sqlFenceCheck}, {w, &st.cursorSave, sqlCursorSave},
		{w, &st.runUpdate, sqlRunUpdate}, {w, &st.runPagePut, sqlRunPagePut}, {w, &st.metaGet, sqlMetaGet}, {w, &st.logTail, sqlLogTail},
		{r, &st.metaGetR, sqlMetaGet}, {r, &st.logTailR, sqlLogTail},
		{w, &st.touch, sqlLedgerTouch}, {w, &st.touchCl, sqlLedgerTouchClaims}, {w, &st.touchDone, sqlLedgerTouchDone},
		{w, &st.sidGet, `SELECT id FROM ledger_syncs WHERE sync_id = ?`},
		{w, &st.sidPut, `INSERT INTO ledger_syncs (sync_id) VALUES (?) RETURNING id`},
	}
	for i, n := range mergeSizes {
		list = append(list, stmtDef{w, &st.mergeFinal[i], mergeQuery(mergeFinal, n)}, stmtDef{w, &st.mergePending[i], mergeQuery(mergePending, n)},
			stmtDef{w, &st.mergeDone[i], mergeQuery(mergeDone, n)})
	}
	for _, p := range list {
		var err error
		if *p.dst, err = p.db.PrepareContext(ctx, p.q); err != nil {
			st.close()
			return nil, err
		}
	}
	return &st, nil
}

func (st *stmts) close() {
	all := []*sql.Stmt{st.getW, st.getLiveW, st.logAppend, st.fenceCheck, st.cursorSave, st.runUpdate, st.runPagePut, st.metaGet, st.logTail, st.metaGetR, st.logTailR, st.touch, st.touchCl, st.touchDone, st.sidGet, st.sidPut}
	all = append(append(append(all, st.mergeFinal[:]...), st.mergePending[:]...), st.mergeDone[:]...)
	for _, s := range all {
		if s != nil {
			_ = s.Close()
		}
	}
}

// ledgerSID returns the integer id of syncID in ledger_syncs, adding it if
// it is new (inside the caller's write transaction). Only ids read from the
// table are remembered: a new one may still be rolled back.
func (s *Store) ledgerSID(ctx context.Context, tx *sql.Tx, syncID string) (int64, error) {
	if id, ok := s.knownSID(syncID); ok {
		return id, nil
	}
	var id int64
	err := tx.StmtContext(ctx, s.stmts.sidGet).QueryRowContext(ctx, syncID).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return id, tx.StmtContext(ctx, s.stmts.sidPut).QueryRowContext(ctx, syncID).Scan(&id)
	}
	if err == nil {
		s.rememberSID(syncID, id)
	}
	return id, err
}

// readSID returns the id of syncID outside any transaction; false if the
// sync has no ledger entries.
func (s *Store) readSID(ctx context.Context, syncID string) (int64, bool, error) {
	if id, ok := s.knownSID(syncID); ok {
		return id, true, nil
	}
	var id int64
	err := s.stmts.sidGet.QueryRowContext(ctx, syncID).Scan(&id)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, err
	}
	s.rememberSID(syncID, id)
	return id, true, nil
}

func (s *Store) knownSID(syncID string) (int64, bool) {
	s.mem.mu.Lock()
	defer s.mem.mu.Unlock()
	id, ok := s.mem.sids[syncID]
	return id, ok
}

func (s *Store) rememberSID(syncID string, id int64) {
	s.mem.mu.Lock()
	defer s.mem.mu.Unlock()
	s.mem.sids[syncID] = id
}

// hexVal maps a lowercase hex digit to its value and every other byte to
// 0xff (uppercase digits are not hex keys: "AB" and "ab" are different keys).
var hexVal = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for c := '0'; c <= '9'; c++ {
		t[c] = byte(c - '0')
	}
	for c := 'a'; c <= 'f'; c++ {
		t[c] = byte(c - 'a' + 10)
	}
	return t
}()

// decodeHexKey decodes k into dst if k is a hex key (64 lowercase hex
// digits) and reports whether it was; it validates and decodes in one pass.
// dst is clobbered when k is not a hex key.
func decodeHexKey(dst *[32]byte, k string) bool {
	if len(k) != 64 {
		return false
	}
	var bad byte
	for i := range dst {
		hi, lo := hexVal[k[2*i]], hexVal[k[2*i+1]]
		bad |= hi | lo
		dst[i] = hi<<4 | lo
	}
	return bad&0x80 == 0
}

// isHexKey reports whether k is stored as bytes: 64 lowercase hex digits.
func isHexKey(k string) bool {
	var b [32]byte
	return decodeHexKey(&b, k)
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

// LedgerGet returns the entries of keys that exist: from memory's fold of
// the log, and from ledger / ledger_claims for the rest. It reads without a
// transaction, each statement seeing a snapshot at least as new as the one
// before: the log tail and ledger_meta (a page or two) through the read pool,
// so that the runner's lookup does not queue for the write connection behind
// a merge transaction or another goroutine's commit; table lookups through
// the write connection (its page cache survives its own commits; a read-pool
// connection rereads every page after any write). Rows of the tail this
// Store appended itself are applied once (memory skips seqs it holds). If a
// merge newer than the log it read cut memory meanwhile, the lookup is
// retried.
func (s *Store) LedgerGet(ctx context.Context, syncID string, keys []string) (map[string]store.LedgerEntry, error) {
	if len(keys) == 0 {
		return map[string]store.LedgerEntry{}, nil
	}
	uniq, err := uniqueKeys(keys)
	if err != nil {
		return nil, err
	}
	for {
		out, retry, err := s.ledgerGet(ctx, syncID, uniq)
		if err != nil {
			return nil, s.mapErr("ledger get", err)
		}
		if !retry {
			return out, nil
		}
	}
}

func (s *Store) ledgerGet(ctx context.Context, syncID string, uniq []string) (map[string]store.LedgerEntry, bool, error) {
	sid, ok, err := s.readSID(ctx, syncID)
	if err != nil || !ok {
		return map[string]store.LedgerEntry{}, false, err
	}
	if !s.mem.hasFilter(sid) {
		// Memory first observes the merges so far: a filter installed
		// before would be dropped by the refresh below (memory would see a
		// merge of log rows it never applied), and read again next time.
		if _, err := s.mem.refresh(ctx, s.stmts.metaGetR, s.stmts.logTailR); err != nil {
			return nil, false, err
		}
		if err := s.loadFilter(ctx, sid); err != nil {
			return nil, false, err
		}
	}
	snap, err := s.mem.refresh(ctx, s.stmts.metaGetR, s.stmts.logTailR)
	if err != nil {
		return nil, false, err
	}
	mks := memKeys(uniq)
	found := s.getEntries(len(mks))
	defer s.putEntries(found)
	looked, tables, err := s.entriesOf(ctx, s.stmts.getW, sid, snap.gen, mks, false, found)
	if err != nil {
		return nil, false, err
	}
	if s.mem.mergedAfter(snap.merged) {
		return nil, true, nil
	}
	if len(looked) > 0 {
		s.mem.cachePut(snap.gen, sid, looked, tables)
	}
	n := 0
	for _, e := range found {
		if e.found() {
			n++
		}
	}
	out := make(map[string]store.LedgerEntry, n) // most keys of a new page are absent
	for i, k := range uniq {
		if e := found[i]; e.found() {
			out[k] = e.ledgerEntry(k)
		}
	}
	return out, false, nil
}

// buildFunc makes the log record of a claim or finish from the current
// entries of its keys (prev[i] is the i-th key's), in a snapshot of
// ledger_meta snap; nil writes nothing.
type buildFunc func(sid, now int64, snap metaSnap, prev []memEntry) *logRecord

// appendFenced is LedgerClaim's transaction (durable; LedgerFinish, lazy,
// runs appendFencedTx beside its settlements in its own): it checks the fence, and unless mks is empty
// refreshes memory, reads the current entries of mks (memory, the cache, the
// tables; those from mks[live:] on without ledger_done, see
// sqlTableGetLive) and appends the record build makes of them (nothing if
// build returns nil). Memory applies the record once the transaction has
// committed; the record is returned.
func (s *Store) appendFenced(ctx context.Context, d durability, op, syncID string, fence int64, mks []string, live int,
	build buildFunc) (*logRecord, error) {
	var rec *logRecord
	err := s.writeWith(ctx, d, op, func(tx *sql.Tx) error {
		var err error
		rec, err = s.appendFencedTx(ctx, tx, syncID, fence, mks, live, build)
		return err
	})
	if err != nil || rec == nil {
		return nil, err
	}
	s.mem.applyOwn(rec)
	return rec, nil
}

// appendFencedTx is appendFenced's transaction body; the caller applies the
// record to memory once tx has committed.
func (s *Store) appendFencedTx(ctx context.Context, tx *sql.Tx, syncID string, fence int64, mks []string, live int,
	build buildFunc) (*logRecord, error) {
	if err := s.checkFence(ctx, tx, syncID, fence); err != nil {
		return nil, err
	}
	if len(mks) == 0 {
		return nil, nil
	}
	sid, err := s.ledgerSID(ctx, tx, syncID)
	if err != nil {
		return nil, err
	}
	snap, err := s.refresh(ctx, tx)
	if err != nil {
		return nil, err
	}
	prev := s.getEntries(len(mks))
	defer s.putEntries(prev) // build keeps nothing of prev
	if _, _, err := s.entriesOf(ctx, tx.StmtContext(ctx, s.stmts.getW), sid, snap.gen, mks[:live], true, prev[:live]); err != nil {
		return nil, err
	}
	if live < len(mks) {
		if _, _, err := s.entriesOf(ctx, tx.StmtContext(ctx, s.stmts.getLiveW), sid, snap.gen, mks[live:], true, prev[live:]); err != nil {
			return nil, err
		}
	}
	rec := build(sid, nanos(s.now()), snap, prev)
	if rec == nil {
		return nil, nil
	}
	return rec, s.appendLog(ctx, tx, rec)
}

// uniqueClaims returns keys without duplicates (first occurrence kept) and,
// when results is set, their Results (a key given twice keeps its last
// one); an empty key, or results not one per key, is refused.
func uniqueClaims(keys, results []string) ([]string, []string, error) {
	if results != nil && len(results) != len(keys) {
		return nil, nil, invalidf("ledger claim: %d results for %d keys", len(results), len(keys))
	}
	index := make(map[string]int, len(keys))
	uniq := make([]string, 0, len(keys))
	var res []string
	if results != nil {
		res = make([]string, 0, len(keys))
	}
	for i, k := range keys {
		if k == "" {
			return nil, nil, invalidf("empty ledger key")
		}
		j, dup := index[k]
		if !dup {
			j = len(uniq)
			index[k] = j
			uniq = append(uniq, k)
			if results != nil {
				res = append(res, "")
			}
		}
		if results != nil {
			res[j] = results[i]
		}
	}
	return uniq, res, nil
}

// LedgerClaim claims keys as pending under p.Fence in one transaction: absent
// (or released) keys are claimed with attempts 1; rejected keys and keys
// pending under a fence <= p.Fence with attempts+1; complete, accepted and
// in_doubt keys are left alone. A claimed entry holds its p.Results entry as
// its Result ("" without Results). A stale p.Fence refuses the whole claim
// with ErrFenced and writes nothing.
//
// The claim is one ledger_log row (a few sequential pages whatever the size
// of the ledger), committed with synchronous=FULL like every write, so it is
// durable before the destination call.
func (s *Store) LedgerClaim(ctx context.Context, p store.LedgerClaimParams) error {
	uniq, results, err := uniqueClaims(p.Keys, p.Results)
	if err != nil {
		return err
	}
	mks := memKeys(uniq)
	_, err = s.appendFenced(ctx, durable, "ledger claim", p.SyncID, p.Fence, mks, len(mks),
		func(sid, now int64, snap metaSnap, prev []memEntry) *logRecord {
			items := make([]logItem, 0, len(mks))
			for i, k := range mks {
				e := prev[i]
				attempts := 1
				switch {
				case !e.found():
				case e.state == store.LedgerRejected, e.state == store.LedgerPending && e.fence <= p.Fence:
					attempts = e.attempts + 1
				default: // complete, accepted, in_doubt, or pending under a newer fence
					continue
				}
				it := logItem{key: k, state: store.LedgerPending, attempts: attempts, claimedAt: now, may: e.mayUnder(snap.roundThrough)}
				if results != nil {
					it.result = results[i]
				}
				items = append(items, it)
			}
			if len(items) == 0 {
				return nil
			}
			return &logRecord{sid: sid, kind: kindClaim, fence: p.Fence, runID: p.RunID, at: now, items: items}
		})
	return err
}

// LedgerFinish records outcomes (complete with Result, accepted with Result,
// rejected with Message, in_doubt, or released) in one transaction, fenced
// like a claim. CompletedAt is set for complete entries only; SeenAt moves to
// now; Attempts and ClaimedAt are the key's current entry's (its claim's). A
// key without an entry gets attempts 1. A released key's entry is removed
// unless it is complete (an absent or complete key is left as it is). The
// outcomes are one ledger_log row; when the log has grown to the merge size,
// a background merge round starts (ledgermerge.go).
func (s *Store) LedgerFinish(ctx context.Context, p store.LedgerFinishParams) error {
	f, err := newFinish(p)
	if err != nil {
		return err
	}
	settled := settlements(p)
	var rec *logRecord
	err = s.writeWith(ctx, lazy, "ledger finish", func(tx *sql.Tx) error {
		var err error
		if rec, err = s.appendFencedTx(ctx, tx, p.SyncID, p.Fence, f.mks, f.live, f.build); err != nil {
			return err
		}
		return s.putSettled(ctx, tx, p.SyncID, p.RunID, settled)
	})
	if err != nil || rec == nil {
		return err
	}
	s.mem.applyOwn(rec)
	s.afterFinish(ctx)
	return nil
}

// pendingFinish is a LedgerFinish's log record in the making.
type pendingFinish struct {
	p     store.LedgerFinishParams
	items []logItem // released items last
	mks   []string  // the items' keys
	live  int       // items[live:] are released
}

// newFinish checks p's entries and keeps each key's last outcome.
func newFinish(p store.LedgerFinishParams) (*pendingFinish, error) {
	items := make([]logItem, 0, len(p.Entries))
	index := make(map[string]int, len(p.Entries))
	raw := make([]string, len(p.Entries))
	for i, e := range p.Entries {
		raw[i] = e.Key
	}
	keys := memKeys(raw) // one allocation for the page's keys
	released := 0
	for i, e := range p.Entries {
		if e.Key == "" {
			return nil, invalidf("empty ledger key")
		}
		switch e.State {
		case store.LedgerComplete, store.LedgerRejected, store.LedgerInDoubt, store.LedgerAccepted:
		case store.LedgerReleased:
			released++
		default:
			return nil, invalidf("ledger finish state %q (want complete, accepted, rejected, in_doubt or released)", e.State)
		}
		it := logItem{key: keys[i], state: e.State, result: e.Result, message: e.Message}
		if i, dup := index[e.Key]; dup {
			if items[i].state == store.LedgerReleased {
				released--
			}
			items[i] = it // a key given twice: its last outcome wins
			continue
		}
		index[e.Key] = len(items)
		items = append(items, it)
	}
	if released > 0 {
		// Released keys last: they are looked up without ledger_done.
		slices.SortStableFunc(items, func(a, b logItem) int {
			return cmpBool(a.state == store.LedgerReleased, b.state == store.LedgerReleased)
		})
	}
	mks := make([]string, len(items))
	for i, it := range items {
		mks[i] = it.key
	}
	return &pendingFinish{p: p, items: items, mks: mks, live: len(items) - released}, nil
}

// cmpBool orders false before true.
func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return 1
	}
	return -1
}

// build is appendFenced's build for the finish. It drops the released items
// that remove nothing (an absent, released or complete key), in place: it
// runs once per pendingFinish.
func (f *pendingFinish) build(sid, now int64, snap metaSnap, prev []memEntry) *logRecord {
	items := f.items[:0]
	for i, it := range f.items {
		e := prev[i]
		it.may = e.mayUnder(snap.roundThrough)
		switch {
		case it.state == store.LedgerReleased:
			if !e.found() || e.state == store.LedgerComplete {
				continue
			}
			it.attempts, it.claimedAt, it.result, it.message = 0, now, "", ""
		case e.found():
			it.attempts, it.claimedAt = e.attempts, e.claimedAt
		default:
			it.attempts, it.claimedAt = 1, now
		}
		items = append(items, it)
	}
	f.items = items
	if len(items) == 0 {
		return nil
	}
	return &logRecord{sid: sid, kind: kindFinish, fence: f.p.Fence, runID: f.p.RunID, at: now, items: items}
}

// afterFinish merges the log, or starts a background round, once a finish
// has grown it to the merge size.
func (s *Store) afterFinish(ctx context.Context) {
	switch n := s.mem.size(); {
	case n >= mergeBackpressure*s.mergeEntries, n >= s.mergeEntries && s.syncMerge:
		// The outcomes are durable already; a merge that fails now is tried
		// again after the next finish (and before any touch, prune or list).
		_ = s.mergeLog(ctx)
	case n >= s.mergeEntries:
		s.startMerge()
	}
}

// LedgerTouch moves SeenAt of keys to now (a replay confirmed them). It
// merges the log first, then updates the tables.
func (s *Store) LedgerTouch(ctx context.Context, syncID string, keys []string) error {
	if len(keys) == 0 {
		return nil
	}
	uniq, err := uniqueKeys(keys)
	if err != nil {
		return err
	}
	arr := keysJSON(uniq)
	var through int64
	err = s.write(ctx, "ledger touch", func(tx *sql.Tx) error {
		var err error
		if through, err = s.mergeTx(ctx, tx); err != nil {
			return err
		}
		now := nanos(s.now())
		if _, err := tx.StmtContext(ctx, s.stmts.touch).ExecContext(ctx, syncID, now, arr); err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, s.stmts.touchCl).ExecContext(ctx, syncID, now, arr); err != nil {
			return err
		}
		if _, err := tx.StmtContext(ctx, s.stmts.touchDone).ExecContext(ctx, syncID, now, arr); err != nil {
			return err
		}
		return bumpGeneration(ctx, tx)
	})
	if err == nil && through > 0 {
		s.mem.merged(through)
	}
	return err
}

// defaultPruneWindow is how many ledger rows one prune transaction walks, so
// a prune never holds the write lock for long.
const defaultPruneWindow = 5000

// LedgerPrune deletes rejected and in_doubt entries (of every sync) last
// seen before before, and returns how many it deleted. Complete entries (a
// slot's last delivered state: it does not expire, docs/guide.md#what-a-run-does), pending and
// accepted ones are kept, so ledger_done and ledger_claims are never walked.
// It walks ledger in primary-key order, one short transaction per window of
// rows, after merging the log. Then it deletes the settlements recorded
// before before (not counted: the count is of ledger entries).
func (s *Store) LedgerPrune(ctx context.Context, before time.Time) (int64, error) {
	if err := s.mergeLog(ctx); err != nil {
		return 0, err
	}
	n, err := s.pruneTable(ctx, "ledger", "AND state IN ('rejected', 'in_doubt')", before)
	if err != nil {
		return n, err
	}
	return n, s.pruneSettled(ctx, before)
}

// Prune statements. A window is the rows after (sid, key) in primary-key
// order, found by a seek on the primary key (the first window starts after
// (-1, an empty blob), before every row). An "OR ?" in the bounds, as these
// statements once had, made SQLite scan the table from its first row at
// every window: a prune cost the square of the table's rows.
const (
	sqlPruneWindowEnd = `SELECT sid, key FROM %s WHERE (sid, key) > (?1, ?2) ORDER BY sid, key LIMIT 1 OFFSET ?3`
	sqlPruneWindow    = `DELETE FROM %s WHERE (sid, key) > (?1, ?2) AND (sid, key) <= (?3, ?4) AND seen_at < ?5 %s`
	sqlPruneLast      = `DELETE FROM %s WHERE (sid, key) > (?1, ?2) AND seen_at < ?5 %s`
)

// pruneTable deletes the rows of table matching cond last seen before
// before, one window of s.pruneWindow rows per transaction.
func (s *Store) pruneTable(ctx context.Context, table, cond string, before time.Time) (int64, error) {
	var (
		total   int64
		fromSID int64 = -1 // exclusive lower bound (fromSID, fromKey) of the next window; sids are positive
		fromKey any   = []byte{}

		qEnd    = fmt.Sprintf(sqlPruneWindowEnd, table)
		qWindow = fmt.Sprintf(sqlPruneWindow, table, cond)
		qLast   = fmt.Sprintf(sqlPruneLast, table, cond)
	)
	for {
		var (
			end  bool
			nSID int64
			nKey any
		)
		err := s.write(ctx, "ledger prune", func(tx *sql.Tx) error {
			// The window is (from, to]; to is the pruneWindow-th row after from.
			err := tx.QueryRowContext(ctx, qEnd, fromSID, fromKey, s.pruneWindow-1).Scan(&nSID, &nKey)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				end = true
			case err != nil:
				return err
			}
			q := qWindow
			if end {
				q = qLast
			}
			res, err := tx.ExecContext(ctx, q, fromSID, fromKey, nSID, nKey, nanos(before))
			if err != nil {
				return err
			}
			n, err := res.RowsAffected()
			if err != nil {
				return err
			}
			total += n
			if n > 0 {
				return bumpGeneration(ctx, tx)
			}
			return nil
		})
		if err != nil {
			return total, err
		}
		if end {
			return total, nil
		}
		fromSID, fromKey = nSID, nKey
	}
}

// sqlListListed lists ?1's entries in state ?2 (rejected, in_doubt or
// accepted) through the partial index ledger_listed, whose condition it
// repeats so the planner can use it.
const sqlListListed = `SELECT ` + ledgerColumns + ` FROM ledger
		WHERE sid = ` + sqlSID + ` AND state = ?2 AND state IN ('rejected', 'in_doubt', 'accepted') ORDER BY claimed_at DESC, key LIMIT ?3`

// LedgerList returns a sync's entries in state, most recently claimed first;
// limit <= 0 returns all. It merges the log first (a write), so the tables
// hold every entry.
func (s *Store) LedgerList(ctx context.Context, syncID string, state store.LedgerState, limit int) ([]store.LedgerEntry, error) {
	if err := s.mergeLog(ctx); err != nil {
		return nil, err
	}
	var q string
	switch state {
	case store.LedgerComplete:
		return s.listComplete(ctx, syncID, limit)
	case store.LedgerPending:
		q = `SELECT ` + pendingColumns + ` FROM ledger_claims
		WHERE sid = ` + sqlSID + ` AND ?2 = 'pending' ORDER BY claimed_at DESC, key LIMIT ?3`
	case store.LedgerRejected, store.LedgerInDoubt, store.LedgerAccepted:
		q = sqlListListed
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

// listComplete is LedgerList for complete entries: those of ledger_done
// (decoded here: their claim time is inside the value blob) and those
// ledger still holds from before migration 0008, most recently claimed
// first (ties in key order, TEXT keys before BLOB keys as in SQL).
func (s *Store) listComplete(ctx context.Context, syncID string, limit int) ([]store.LedgerEntry, error) {
	var out []store.LedgerEntry
	rows, err := s.r.QueryContext(ctx, `SELECT key, seen_at, v FROM ledger_done WHERE sid = `+sqlSID, syncID)
	if err != nil {
		return nil, s.mapErr("ledger list", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			key  any
			seen int64
			v    []byte
		)
		if err := rows.Scan(&key, &seen, &v); err != nil {
			return nil, s.mapErr("ledger list", err)
		}
		k, err := keyOf(key)
		if err != nil {
			return nil, s.mapErr("ledger list", err)
		}
		e, err := decodeDone(v, seen)
		if err != nil {
			return nil, s.mapErr("ledger list", err)
		}
		out = append(out, e.ledgerEntry(k))
	}
	if err := rows.Err(); err != nil {
		return nil, s.mapErr("ledger list", err)
	}
	old, err := s.r.QueryContext(ctx, `SELECT `+ledgerColumns+` FROM ledger WHERE sid = `+sqlSID+` AND state = 'complete'`, syncID)
	if err != nil {
		return nil, s.mapErr("ledger list", err)
	}
	defer old.Close()
	for old.Next() {
		e, err := scanLedger(old)
		if err != nil {
			return nil, s.mapErr("ledger list", err)
		}
		out = append(out, e)
	}
	if err := old.Err(); err != nil {
		return nil, s.mapErr("ledger list", err)
	}
	slices.SortFunc(out, func(a, b store.LedgerEntry) int {
		if c := b.ClaimedAt.Compare(a.ClaimedAt); c != 0 {
			return c
		}
		ah, bh := isHexKey(a.Key), isHexKey(b.Key)
		switch {
		case ah != bh && ah:
			return 1
		case ah != bh:
			return -1
		}
		return strings.Compare(a.Key, b.Key)
	})
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
