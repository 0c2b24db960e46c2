package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/bits"
	"slices"
	"strings"
	"sync"

	"github.com/oncesync/oncesync/internal/store"
)

// The ledger log (migration 0006, docs/PERFORMANCE.md "Ledger log").
//
// A claim or a finish appends one row to ledger_log holding the page's
// entries (logRecord, encoded in body); it is durable when its transaction
// commits, like before. Each Store folds the log into memory (memLedger), so
// a lookup reads a key's newest log entry from memory and only keys absent
// from the log from the tables. When the log holds mergeEntries entries, a
// merge writes the fold into ledger_done (complete, compact: ledgerdone.go),
// ledger (rejected, in_doubt, accepted) and ledger_claims (pending), sorted
// by key, deletes released keys where they may be, deletes the merged log
// rows and records merged_through and a new generation in ledger_meta: in
// the background, one key range per transaction (ledgermerge.go), or inline
// in one transaction (mergeTx). Touch, prune and list merge inline first and
// then work on the tables.
//
// Several Stores (processes) may share the file: every lookup first reads
// ledger_meta and the log rows it has not applied yet (refresh); a merge by
// another Store shows up as a larger merged_through, and the entries it
// merged are dropped from memory only once a snapshot that contains the
// merge has been seen. A reader whose memory was cut by a merge newer than
// its own snapshot retries (LedgerGet).
//
// Invariant: memLedger.lastSeq = S means every log row with seq <= S has
// been applied; rows are applied in seq order, each once.

// DefaultLedgerMergeEntries is how many log entries trigger a merge (1<<16
// measured a peak RSS of 204 MiB for a 1,000,000-row source; 1<<15, 130). Memory
// holds at most about this many entries (a few hundred bytes each) per
// process, and a merge writes each ledger leaf it touches once.
const DefaultLedgerMergeEntries = 1 << 16

// cacheMax bounds the lookups LedgerGet keeps for the claim that follows it.
const cacheMax = 1 << 14

const (
	kindClaim  = 1
	kindFinish = 2
)

// memEntry is a key's newest state (from the log, or read from the tables
// with seq 0). Times are unix nanoseconds; completedAt 0 means none. A
// released key held in memory is a tombstone: state LedgerReleased, read as
// absent, merged as deletes.
type memEntry struct {
	seq                            int64
	state                          store.LedgerState
	fence, runID                   int64
	attempts                       int
	result, message                string
	claimedAt, completedAt, seenAt int64
	may                            uint8 // see "Where a key may be"
}

// found reports whether e is an entry rather than the zero memEntry that
// stands for an absent key, or a tombstone (a released key reads as absent).
func (e memEntry) found() bool { return e.state != "" && e.state != store.LedgerReleased }

// Where a key may be. Each entry carries may: the tables that may hold a row
// of its key when the entry is merged, other than the one the merge writes
// (for an entry read from the tables: the table it was read from). The merge
// deletes the key from those tables only, so a merge of a key no table holds
// (a first claim, a first complete entry) touches no other table, and a
// released key (a tombstone) is deleted only where it may be.
//
// A writer computes may from the key's newest entry prev in its write
// transaction (mayUnder): prev's may, plus prev's own table if prev is a log
// entry that a merge may write before the new one is merged. Merges write a
// key's newest entry of the log rows up to their through (mergeKeys); an
// inline merge commits at once (memory then no longer holds prev), and a
// background round registers its through in ledger_meta.round_through in its
// first transaction, before it writes anything. So a prev above
// round_through has not been written and never will be: every merge that
// starts later reads the new entry from the log, which supersedes prev. A
// released key whose claim is still in memory that way is in no table: the
// fold just forgets it (apply), and the merge never sees it.
//
// Log bodies from before migration 0009 carry no may: their entries decode
// with inAny (the merge then deletes the key everywhere else, as it did).
const (
	inLedger uint8 = 1 << iota // ledger: rejected, in_doubt, accepted (and complete rows from before 0008)
	inClaims                   // ledger_claims: pending
	inDone                     // ledger_done: complete
	inAny    = inLedger | inClaims | inDone
)

// homeOf is the table a merge writes an entry of state s into (0: none).
func homeOf(s store.LedgerState) uint8 {
	switch s {
	case store.LedgerPending:
		return inClaims
	case store.LedgerComplete:
		return inDone
	case store.LedgerRejected, store.LedgerInDoubt, store.LedgerAccepted:
		return inLedger
	}
	return 0
}

// mayUnder is the may of an entry written over prev (the key's newest
// entry, zero if absent) in a snapshot whose round_through is roundThrough.
func (prev memEntry) mayUnder(roundThrough int64) uint8 {
	m := prev.may
	if prev.seq > 0 && prev.seq <= roundThrough {
		m |= homeOf(prev.state)
	}
	return m
}

func (e memEntry) ledgerEntry(key string) store.LedgerEntry {
	out := store.LedgerEntry{
		Key: key, State: e.state, Fence: e.fence, RunID: e.runID, Result: e.result, Message: e.message,
		Attempts: e.attempts, ClaimedAt: fromNanos(e.claimedAt), SeenAt: fromNanos(e.seenAt),
	}
	if e.completedAt != 0 {
		out.CompletedAt = fromNanos(e.completedAt)
	}
	return out
}

// A memory key is "h" + the 32 bytes of a lowercase hex key, or "t" + any
// other key: the two forms never collide (as BLOB and TEXT do not in SQL).
func memKeyOf(k string) string {
	var b [33]byte
	if decodeHexKey((*[32]byte)(b[1:]), k) {
		b[0] = 'h'
		return string(b[:])
	}
	return "t" + k
}

// memKeys is keys in memory form. The keys share one allocation (substrings
// of one string), not one each: a page's keys are merged, and so released,
// together.
func memKeys(keys []string) []string {
	size := 0
	for _, k := range keys {
		if isHexKey(k) {
			size += 33
		} else {
			size += 1 + len(k)
		}
	}
	b := make([]byte, 0, size)
	ends := make([]int, len(keys))
	for i, k := range keys {
		var h [32]byte
		if decodeHexKey(&h, k) {
			b = append(b, 'h')
			b = append(b, h[:]...)
		} else {
			b = append(b, 't')
			b = append(b, k...)
		}
		ends[i] = len(b)
	}
	all := string(b)
	mks := make([]string, len(keys))
	start := 0
	for i, end := range ends {
		mks[i] = all[start:end]
		start = end
	}
	return mks
}

// argOfMem is a memory key as the SQL statements take it (see keyArg).
func argOfMem(mk string) string {
	if mk[0] == 'h' {
		return hex.EncodeToString([]byte(mk[1:]))
	}
	return "~" + mk[1:]
}

// memKeyOfStored turns a key read from ledger or ledger_claims into its
// memory form.
func memKeyOfStored(v any) (string, error) {
	switch k := v.(type) {
	case []byte:
		return "h" + string(k), nil
	case string:
		return "t" + k, nil
	}
	return "", fmt.Errorf("ledger key of type %T", v)
}

// logItem is one entry of a log record: for a claim, the key, its attempts
// and its Result; for a finish, also the outcome and the claim's time. A
// released item carries only its key and may.
type logItem struct {
	key             string // memory form
	state           store.LedgerState
	attempts        int
	claimedAt       int64
	result, message string
	may             uint8
}

// logRecord is one ledger_log row.
type logRecord struct {
	seq, sid         int64
	kind             int
	fence, runID, at int64
	items            []logItem
}

// Log bodies (ledger_log.body). Since migration 0009 a body is
//
//	0x00, then per item: uvarint len + key, uvarint attempts, then
//	  claim:  byte may, uvarint len + result
//	  finish: byte state code | may<<3, varint at - claimed_at,
//	          uvarint len + result, uvarint len + message
//
// with the state codes of stateCodes (a released item has attempts 0 and
// claimed_at = at). A body from before it has no leading 0x00 (it starts with
// its first key's length, and keys are never empty); its items are a claim's
// uvarint len + key, uvarint attempts, or a finish's uvarint len + key,
// uvarint attempts, state letter ('c', 'r', 'i'), varint at - claimed_at,
// uvarint len + result, uvarint len + message, and they decode with may
// inAny. TestLogBodyGolden pins both.
const bodyV1 = 0x00

var stateCodes = [...]store.LedgerState{1: store.LedgerComplete, 2: store.LedgerRejected, 3: store.LedgerInDoubt,
	4: store.LedgerAccepted, 5: store.LedgerReleased}

// stateCode is s's code in stateCodes.
func stateCode(s store.LedgerState) byte {
	switch s {
	case store.LedgerComplete:
		return 1
	case store.LedgerRejected:
		return 2
	case store.LedgerInDoubt:
		return 3
	case store.LedgerAccepted:
		return 4
	case store.LedgerReleased:
		return 5
	}
	panic(fmt.Sprintf("ledger log: no code for state %q", s)) // newFinish admits no other state
}

func encodeBody(kind int, at int64, items []logItem) []byte {
	size := 1 // exactly, so b is allocated once
	for _, it := range items {
		size += uvarintLen(uint64(len(it.key))) + len(it.key) + uvarintLen(uint64(it.attempts)) + 1 +
			uvarintLen(uint64(len(it.result))) + len(it.result)
		if kind == kindFinish {
			d := at - it.claimedAt
			size += uvarintLen(uint64(d<<1)^uint64(d>>63)) + // binary.AppendVarint's zig-zag form
				uvarintLen(uint64(len(it.message))) + len(it.message)
		}
	}
	b := make([]byte, 0, size)
	b = append(b, bodyV1)
	for _, it := range items {
		b = binary.AppendUvarint(b, uint64(len(it.key)))
		b = append(b, it.key...)
		b = binary.AppendUvarint(b, uint64(it.attempts))
		if kind == kindClaim {
			b = append(b, it.may)
			b = binary.AppendUvarint(b, uint64(len(it.result)))
			b = append(b, it.result...)
			continue
		}
		b = append(b, stateCode(it.state)|it.may<<3)
		b = binary.AppendVarint(b, at-it.claimedAt)
		b = binary.AppendUvarint(b, uint64(len(it.result)))
		b = append(b, it.result...)
		b = binary.AppendUvarint(b, uint64(len(it.message)))
		b = append(b, it.message...)
	}
	return b
}

// cutString reads a string written as its uvarint length and its bytes
// from the front of b, and returns the rest of b; ok is false if b does not
// start with one.
func cutString(b []byte) (s string, rest []byte, ok bool) {
	l, w := binary.Uvarint(b)
	if w <= 0 || uint64(len(b)-w) < l {
		return "", nil, false
	}
	return string(b[w : w+int(l)]), b[w+int(l):], true
}

// uvarintLen is the length of binary.AppendUvarint(nil, x).
func uvarintLen(x uint64) int { return (bits.Len64(x|1) + 6) / 7 }

var errBadLogBody = errors.New("ledger log: malformed body")

func decodeBody(kind int, at int64, n int, b []byte) ([]logItem, error) {
	v1 := len(b) > 0 && b[0] == bodyV1
	if v1 {
		b = b[1:]
	}
	if n < 0 || n > len(b)/2 { // every item takes at least 2 bytes
		return nil, errBadLogBody
	}
	items := make([]logItem, 0, n)
	str := func() (string, error) {
		s, rest, ok := cutString(b)
		if !ok {
			return "", errBadLogBody
		}
		b = rest
		return s, nil
	}
	uv := func() (uint64, error) {
		v, w := binary.Uvarint(b)
		if w <= 0 {
			return 0, errBadLogBody
		}
		b = b[w:]
		return v, nil
	}
	for len(b) > 0 {
		var it logItem
		var err error
		if it.key, err = str(); err != nil || it.key == "" {
			return nil, errBadLogBody
		}
		a, err := uv()
		if err != nil {
			return nil, err
		}
		it.attempts = int(a)
		it.may = inAny
		if kind == kindClaim {
			it.state, it.claimedAt = store.LedgerPending, at
			if v1 {
				if len(b) == 0 || b[0]&^inAny != 0 {
					return nil, errBadLogBody
				}
				it.may, b = b[0], b[1:]
				if it.result, err = str(); err != nil {
					return nil, err
				}
			}
			items = append(items, it)
			continue
		}
		if len(b) == 0 {
			return nil, errBadLogBody
		}
		switch c := b[0]; {
		case !v1 && c == 'c':
			it.state = store.LedgerComplete
		case !v1 && c == 'r':
			it.state = store.LedgerRejected
		case !v1 && c == 'i':
			it.state = store.LedgerInDoubt
		case v1 && int(c&7) < len(stateCodes) && stateCodes[c&7] != "" && c>>3&^inAny == 0:
			it.state, it.may = stateCodes[c&7], c>>3
		default:
			return nil, errBadLogBody
		}
		b = b[1:]
		d, w := binary.Varint(b)
		if w <= 0 {
			return nil, errBadLogBody
		}
		b = b[w:]
		it.claimedAt = at - d
		if it.result, err = str(); err != nil {
			return nil, err
		}
		if it.message, err = str(); err != nil {
			return nil, err
		}
		items = append(items, it)
	}
	if len(items) != n {
		return nil, errBadLogBody
	}
	return items, nil
}

// cached is a lookup in ledger / ledger_claims made by LedgerGet.
type cached struct {
	found bool
	e     memEntry
}

// memLedger is a Store's fold of the log. All fields are guarded by mu.
type memLedger struct {
	mu            sync.Mutex
	lastSeq       int64
	mergedThrough int64
	entries       map[int64]map[string]memEntry // sid -> memory key -> newest entry
	n             int

	// cache holds table lookups LedgerGet made in a snapshot of generation
	// cacheGen, for the claim that follows; valid while the generation is.
	cacheGen int64
	cache    map[int64]map[string]cached
	cacheN   int

	sids map[string]int64 // sync id -> ledger_syncs.id (rows are never deleted)

	// filters are the syncs' key filters (keyfilter.go).
	filters map[int64]*syncFilter
}

func newMemLedger() *memLedger {
	return &memLedger{
		entries: map[int64]map[string]memEntry{},
		cache:   map[int64]map[string]cached{},
		sids:    map[string]int64{},
		filters: map[int64]*syncFilter{},
	}
}

// size is the number of entries held.
func (m *memLedger) size() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n
}

// observeMerge drops what a merge through seq moved into the tables. The
// caller holds mu.
func (m *memLedger) observeMerge(through int64) {
	if through <= m.mergedThrough {
		return
	}
	m.mergedThrough = through
	// The merge wrote the entries of log rows <= through: if memory applied
	// all of them, they are the entries dropped below, and the filters stay
	// complete; otherwise the filters cannot know what was merged.
	if m.lastSeq < through {
		m.lastSeq = through
		m.filters = map[int64]*syncFilter{}
	}
	for sid, es := range m.entries {
		f := m.filters[sid]
		// The survivors go to a new map: deleting most of a map's keys
		// leaves it at its peak size and full of deleted slots, which every
		// lookup of an absent key (most of a run's) probes through. It is
		// made at the size this one reached, which the next round's
		// entries will reach again: growing a map of that size step by
		// step rehashes every entry at each step.
		kept := make(map[string]memEntry, len(es))
		for k, e := range es {
			if e.seq > through {
				kept[k] = e
				continue
			}
			m.n--
			// A tombstone's merge deleted its key: nothing to add.
			if f != nil && e.state != store.LedgerReleased && !f.add(k) {
				delete(m.filters, sid) // a part is full: read again when next needed
				f = nil
			}
		}
		if len(kept) == 0 {
			delete(m.entries, sid)
		} else {
			m.entries[sid] = kept
		}
	}
	m.cache, m.cacheN = map[int64]map[string]cached{}, 0
}

// apply folds rec into memory unless it was applied already. The caller
// holds mu.
func (m *memLedger) apply(rec *logRecord) {
	if rec.seq <= m.lastSeq {
		return
	}
	if rec.seq != m.lastSeq+1 {
		// The rows between were merged and deleted before memory read
		// them: the filters cannot know which keys that merge wrote.
		m.filters = map[int64]*syncFilter{}
	}
	m.lastSeq = rec.seq
	es := m.entries[rec.sid]
	if es == nil {
		es = make(map[string]memEntry, len(rec.items))
		m.entries[rec.sid] = es
	}
	for _, it := range rec.items {
		if it.state == store.LedgerReleased && it.may == 0 {
			// No table may hold the key (see "Where a key may be"): it
			// leaves memory, and no merge ever sees it.
			if _, ok := es[it.key]; ok {
				delete(es, it.key)
				m.n--
			}
			continue
		}
		e := memEntry{
			seq: rec.seq, state: it.state, fence: rec.fence, runID: rec.runID, attempts: it.attempts,
			result: it.result, message: it.message, claimedAt: it.claimedAt, seenAt: rec.at, may: it.may,
		}
		if it.state == store.LedgerComplete {
			e.completedAt = rec.at
		}
		if _, ok := es[it.key]; !ok {
			m.n++
		}
		es[it.key] = e
	}
}

// applyOwn folds a record this Store just committed.
func (m *memLedger) applyOwn(rec *logRecord) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.apply(rec)
}

// merged records a merge this Store committed.
func (m *memLedger) merged(through int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.observeMerge(through)
}

// mergedAfter reports whether memory saw a merge newer than through.
func (m *memLedger) mergedAfter(through int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mergedThrough > through
}

// cachePut keeps lookups made in a snapshot of generation gen.
func (m *memLedger) cachePut(gen, sid int64, keys []string, found map[string]memEntry) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if gen != m.cacheGen || m.cacheN+len(keys) > cacheMax {
		m.cache, m.cacheN, m.cacheGen = map[int64]map[string]cached{}, 0, gen
	}
	c := m.cache[sid]
	if c == nil {
		c = make(map[string]cached, len(keys))
		m.cache[sid] = c
	}
	for _, k := range keys {
		e, ok := found[k]
		if _, had := c[k]; !had {
			m.cacheN++
		}
		c[k] = cached{found: ok, e: e}
	}
}

// installFilter makes f sid's filter if it is complete: built in a snapshot
// merged through merged, and memory has seen no later merge.
func (m *memLedger) installFilter(sid, merged int64, f *syncFilter) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.mergedThrough <= merged {
		m.filters[sid] = f
	}
}

// hasFilter reports whether sid has a key filter.
func (m *memLedger) hasFilter(sid int64) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.filters[sid] != nil
}

// lookup sets out[i] to the entry of keys[i] known in memory (or, when gen
// is the cache's generation, in the cache), leaving out[i] absent (see
// memEntry.found) otherwise, and returns the indexes of the keys to read
// from the tables: those the sync's key filter, if it has one, does not
// rule out. keys are distinct.
func (m *memLedger) lookup(sid, gen int64, keys []string, useCache bool, out []memEntry) []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	var miss []int
	es := m.entries[sid]
	f := m.filters[sid]
	var c map[string]cached
	if useCache && gen == m.cacheGen {
		c = m.cache[sid]
	}
	for i, k := range keys {
		if e, ok := es[k]; ok {
			out[i] = e
			continue
		}
		if hit, ok := c[k]; ok {
			if hit.found {
				out[i] = hit.e
			}
			continue
		}
		if f != nil && !f.mayHave(k) {
			continue
		}
		miss = append(miss, i)
	}
	return miss
}

const (
	sqlMetaGet = `SELECT merged_through, generation, round_through FROM ledger_meta WHERE id = 1`
	sqlLogTail = `SELECT seq, sid, kind, fence, run_id, at, n, body FROM ledger_log WHERE seq > ? ORDER BY seq`
)

// metaSnap is ledger_meta as a snapshot read it.
type metaSnap struct {
	merged       int64 // merged_through
	gen          int64 // generation
	roundThrough int64 // round_through (see "Where a key may be")
}

// refresh applies the log rows memory has not applied yet, reading through
// tx (nil: the write connection outside a transaction), and returns the
// snapshot's ledger_meta.
func (s *Store) refresh(ctx context.Context, tx *sql.Tx) (metaSnap, error) {
	meta, tail := s.stmts.metaGet, s.stmts.logTail
	if tx != nil {
		meta, tail = tx.StmtContext(ctx, meta), tx.StmtContext(ctx, tail)
	}
	return s.mem.refresh(ctx, meta, tail)
}

// refresh applies the log rows (tail: sqlLogTail) that memory has not, after
// the merge recorded in ledger_meta (meta: sqlMetaGet).
func (m *memLedger) refresh(ctx context.Context, meta, tail *sql.Stmt) (metaSnap, error) {
	// The tail is read before ledger_meta. Outside a transaction (LedgerGet)
	// the two reads may see different snapshots, and only this order is
	// safe: a merge committed between them shows up as a merged_through
	// above the rows applied, so observeMerge knows rows may have been
	// missed (and drops the key filters) instead of believing memory saw
	// every row the merge wrote.
	m.mu.Lock()
	from := m.lastSeq
	m.mu.Unlock()
	if err := m.applyTail(ctx, tail, from); err != nil {
		return metaSnap{}, err
	}
	var snap metaSnap
	if err := meta.QueryRowContext(ctx).Scan(&snap.merged, &snap.gen, &snap.roundThrough); err != nil {
		return metaSnap{}, err
	}
	m.mu.Lock()
	m.observeMerge(snap.merged)
	m.mu.Unlock()
	return snap, nil
}

// applyTail applies the log rows after seq from.
func (m *memLedger) applyTail(ctx context.Context, tail *sql.Stmt, from int64) error {
	rows, err := tail.QueryContext(ctx, from)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			rec  logRecord
			n    int
			body []byte
		)
		if err := rows.Scan(&rec.seq, &rec.sid, &rec.kind, &rec.fence, &rec.runID, &rec.at, &n, &body); err != nil {
			return err
		}
		if rec.items, err = decodeBody(rec.kind, rec.at, n, body); err != nil {
			return fmt.Errorf("ledger log row %d: %w", rec.seq, err)
		}
		m.mu.Lock()
		m.apply(&rec)
		m.mu.Unlock()
	}
	return rows.Err()
}

// ---- SQL ----

var (
	// sqlTableGet reads up to tableGetKeys keys (parameters ?2...; NULL
	// for unused ones) of sync ?1 from ledger, ledger_done and
	// ledger_claims; each key is a primary-key lookup. A ledger_done row
	// comes with its value blob (the last column; NULL for the others).
	sqlTableGet = `SELECT key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at, NULL
		FROM ledger WHERE sid = ?1 AND key IN (` + keyParams(tableGetKeys) + `)
		UNION ALL
		SELECT key, 'complete', 0, 0, '', '', 0, 0, NULL, seen_at, v
		FROM ledger_done WHERE sid = ?1 AND key IN (` + keyParams(tableGetKeys) + `)
		UNION ALL
		SELECT key, 'pending', fence, run_id, result, '', attempts, claimed_at, NULL, seen_at, NULL
		FROM ledger_claims WHERE sid = ?1 AND key IN (` + keyParams(tableGetKeys) + `)`

	// sqlTableGetLive is sqlTableGet without ledger_done, for the keys a
	// finish releases: a key found in neither table is absent or complete,
	// and a release leaves both as they are, so the big table of complete
	// entries is never probed for them.
	sqlTableGetLive = `SELECT key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at, NULL
		FROM ledger WHERE sid = ?1 AND key IN (` + keyParams(tableGetKeys) + `)
		UNION ALL
		SELECT key, 'pending', fence, run_id, result, '', attempts, claimed_at, NULL, seen_at, NULL
		FROM ledger_claims WHERE sid = ?1 AND key IN (` + keyParams(tableGetKeys) + `)`

	sqlLogAppend = `INSERT INTO ledger_log (sid, kind, fence, run_id, at, n, body) VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING seq`

	sqlDropClaims = `DELETE FROM ledger_claims WHERE sid = ?1 AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?2))`
	sqlDropFinal  = `DELETE FROM ledger WHERE sid = ?1 AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?2))`
	sqlDropDone   = `DELETE FROM ledger_done WHERE sid = ?1 AND key IN (SELECT ` + sqlKey("value") + ` FROM json_each(?2))`
)

// tableGetKeys is how many keys one sqlTableGet looks up.
const tableGetKeys = 250

// keyParams is "?2, ?3, ..., ?(n+1)".
func keyParams(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "?%d", i+2)
	}
	return b.String()
}

// storedKey is a memory key as SQL stores it: the 32 bytes of a hex key as
// a BLOB, any other key as TEXT.
func storedKey(mk string) any {
	if mk[0] == 'h' {
		return []byte(mk[1:])
	}
	return mk[1:]
}

// tableGet reads keys (memory form) of sid through stmt (sqlTableGet or
// sqlTableGetLive); each entry's may is the table it was read from.
func tableGet(ctx context.Context, stmt *sql.Stmt, sid int64, keys []string) (map[string]memEntry, error) {
	out := make(map[string]memEntry)
	args := make([]any, 1+tableGetKeys)
	args[0] = sid
	for len(keys) > 0 {
		n := min(len(keys), tableGetKeys)
		for i := range tableGetKeys {
			if i < n {
				args[1+i] = storedKey(keys[i])
			} else {
				args[1+i] = nil
			}
		}
		keys = keys[n:]
		if err := tableGetChunk(ctx, stmt, args, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func tableGetChunk(ctx context.Context, stmt *sql.Stmt, args []any, out map[string]memEntry) error {
	rows, err := stmt.QueryContext(ctx, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var (
			e         memEntry
			key       any
			state     string
			completed sql.NullInt64
			v         []byte
		)
		if err := rows.Scan(&key, &state, &e.fence, &e.runID, &e.result, &e.message, &e.attempts, &e.claimedAt, &completed, &e.seenAt, &v); err != nil {
			return err
		}
		mk, err := memKeyOfStored(key)
		if err != nil {
			return err
		}
		switch {
		case v != nil:
			if e, err = decodeDone(v, e.seenAt); err != nil {
				return err
			}
			e.may = inDone
		case state == string(store.LedgerPending):
			e.state, e.may = store.LedgerPending, inClaims
		default:
			e.state, e.may = store.LedgerState(state), inLedger
			e.completedAt = completed.Int64
		}
		out[mk] = e
	}
	return rows.Err()
}

// entriesOf returns the entries of keys (memory form, distinct) of sid,
// out[i] being keys[i]'s (absent if !out[i].found()): memory first
// (refreshed by the caller), then the cache if useCache, then the tables
// through stmt (sqlTableGet, bound to the caller's transaction if any). It
// also returns the keys it looked up in the tables and those it found there.
// out (len(keys), every entry absent) is the caller's, usually from
// getEntries.
func (s *Store) entriesOf(ctx context.Context, stmt *sql.Stmt, sid, gen int64, keys []string, useCache bool, out []memEntry) (looked []string, tables map[string]memEntry, err error) {
	miss := s.mem.lookup(sid, gen, keys, useCache, out)
	if len(miss) == 0 {
		return nil, nil, nil
	}
	looked = make([]string, len(miss))
	for j, i := range miss {
		looked[j] = keys[i]
	}
	if tables, err = tableGet(ctx, stmt, sid, looked); err != nil {
		return nil, nil, err
	}
	for _, i := range miss {
		if e, ok := tables[keys[i]]; ok {
			out[i] = e
		}
	}
	return looked, tables, nil
}

// getEntries returns n absent entries for entriesOf; putEntries gives them
// back once nothing refers to them. A page's lookups made one slice of n
// memEntry each (about 110 bytes an entry), the larger part of the bytes a
// page allocated in the store (docs/PERFORMANCE.md#fewer-allocations-per-record-2026-12-02).
func (s *Store) getEntries(n int) []memEntry {
	if p, _ := s.entryPool.Get().(*[]memEntry); p != nil && cap(*p) >= n {
		return (*p)[:n] // zero up to cap: putEntries cleared it
	}
	return make([]memEntry, n)
}

// putEntries takes back a slice from getEntries, cleared so that it holds no
// strings and reads absent when reused.
func (s *Store) putEntries(e []memEntry) {
	clear(e)
	s.entryPool.Put(&e)
}

// appendLog writes rec as one log row and sets rec.seq.
func (s *Store) appendLog(ctx context.Context, tx *sql.Tx, rec *logRecord) error {
	body := encodeBody(rec.kind, rec.at, rec.items)
	return tx.StmtContext(ctx, s.stmts.logAppend).QueryRowContext(ctx,
		rec.sid, rec.kind, rec.fence, rec.runID, rec.at, len(rec.items), body).Scan(&rec.seq)
}

// mergeLog merges the log into the tables in its own transaction.
func (s *Store) mergeLog(ctx context.Context) error {
	var through int64
	err := s.write(ctx, "ledger merge", func(tx *sql.Tx) error {
		var err error
		through, err = s.mergeTx(ctx, tx)
		return err
	})
	if err == nil && through > 0 {
		s.mem.merged(through)
	}
	return err
}

// mergeKeys returns the last applied log seq and the keys memory holds,
// sorted by sync and key. Only the keys are copied; entries are read back
// chunk by chunk by writeMerged.
func (m *memLedger) mergeKeys() (int64, []mergeKey) {
	m.mu.Lock()
	through := m.lastSeq
	keys := make([]mergeKey, 0, m.n)
	for sid, es := range m.entries {
		for k := range es {
			keys = append(keys, mergeKey{sid, k})
		}
	}
	m.mu.Unlock()
	slices.SortFunc(keys, func(a, b mergeKey) int {
		if a.sid != b.sid {
			if a.sid < b.sid {
				return -1
			}
			return 1
		}
		return strings.Compare(a.key, b.key)
	})
	return through, keys
}

// writeMerged writes memory's entries of keys whose seq is <= through into
// ledger_done (complete), ledger (rejected, in_doubt, accepted) and
// ledger_claims (pending), in key order, deletes released keys, and drops
// each key's rows from the tables its entry's may names (see "Where a key
// may be"), so a key is in at most one table. An entry replaced by a newer
// log row (seq > through) is skipped: it stays in memory and a later merge
// writes it.
func (s *Store) writeMerged(ctx context.Context, tx *sql.Tx, keys []mergeKey, through int64) error {
	done := &upserter{tx: tx, stmts: &s.stmts.mergeDone, kind: mergeDone}
	final := &upserter{tx: tx, stmts: &s.stmts.mergeFinal, kind: mergeFinal}
	pending := &upserter{tx: tx, stmts: &s.stmts.mergePending, kind: mergePending}
	var dropClaims, dropFinal, dropDone []mergeKey
	added := map[filterKey][]string{} // keys written, for their filter parts
	for len(keys) > 0 {
		n := min(len(keys), mergeChunk)
		rows := make([]mergeRow, 0, n)
		s.mem.mu.Lock()
		for _, k := range keys[:n] {
			if e, ok := s.mem.entries[k.sid][k.key]; ok && e.seq <= through {
				rows = append(rows, mergeRow{k.sid, k.key, e})
			}
		}
		s.mem.mu.Unlock()
		keys = keys[n:]
		for _, r := range rows {
			var u *upserter
			switch r.e.state {
			case store.LedgerPending:
				u = pending
			case store.LedgerComplete:
				u = done
			case store.LedgerReleased: // a tombstone: deletes only
			default:
				u = final
			}
			if u != nil {
				if err := u.add(ctx, r); err != nil {
					return err
				}
				// Every key written, not only new ones: a key whose
				// may names a table is not always in it.
				fk := filterKey{r.sid, partOf(r.key)}
				added[fk] = append(added[fk], r.key)
			}
			k := mergeKey{r.sid, r.key}
			drop := r.e.may &^ homeOf(r.e.state)
			if drop&inClaims != 0 {
				dropClaims = append(dropClaims, k)
			}
			if drop&inLedger != 0 {
				dropFinal = append(dropFinal, k)
			}
			if drop&inDone != 0 {
				dropDone = append(dropDone, k)
			}
		}
	}
	for _, u := range []*upserter{done, final, pending} {
		if err := u.flush(ctx); err != nil {
			return err
		}
	}
	// ledger_claims and ledger are small next to a merge (see presentAmong);
	// ledger_done is not, but only keys that were complete before their
	// newest entry (and log rows from before migration 0009) are dropped
	// from it.
	for _, d := range []struct {
		table, query string
		keys         []mergeKey
	}{{"ledger_claims", sqlDropClaims, dropClaims}, {"ledger", sqlDropFinal, dropFinal}} {
		if len(d.keys) == 0 {
			continue
		}
		stale, err := presentAmong(ctx, tx, d.table, d.keys)
		if err != nil {
			return err
		}
		if err := dropKeys(ctx, tx, d.query, stale); err != nil {
			return err
		}
	}
	if err := dropKeys(ctx, tx, sqlDropDone, dropDone); err != nil {
		return err
	}
	return s.addToFilters(ctx, tx, added)
}

// presentAmong returns the keys of keys that table (ledger_claims or
// ledger) holds. Those tables are small next to a merge's worth of keys:
// ledger_claims holds the claims in flight at earlier merges, a page or
// two, and ledger the rejected, in_doubt and accepted entries. Reading the table once
// (when it holds at most an eighth as many rows as keys) and intersecting
// in memory replaces one index lookup per merged key. A bigger table
// (claims left by many dead runs, complete entries from before migration
// 0008) is not read: every key is returned and the DELETE looks each one
// up.
func presentAmong(ctx context.Context, tx *sql.Tx, table string, keys []mergeKey) ([]mergeKey, error) {
	limit := len(keys) / 8
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM `+table+` LIMIT ?)`, limit+1).Scan(&n); err != nil {
		return nil, err
	}
	if n > limit {
		return keys, nil
	}
	if n == 0 {
		return nil, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT sid, key FROM `+table)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	held := make(map[mergeKey]struct{}, n)
	for rows.Next() {
		var (
			k mergeKey
			v any
		)
		if err := rows.Scan(&k.sid, &v); err != nil {
			return nil, err
		}
		if k.key, err = memKeyOfStored(v); err != nil {
			return nil, err
		}
		held[k] = struct{}{}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []mergeKey
	for _, k := range keys {
		if _, ok := held[k]; ok {
			out = append(out, k)
		}
	}
	return out, nil
}

// dropKeys runs query (sqlDropClaims, sqlDropFinal or sqlDropDone) once per
// sync of keys.
func dropKeys(ctx context.Context, tx *sql.Tx, query string, keys []mergeKey) error {
	bySID := map[int64][]string{}
	for _, k := range keys {
		bySID[k.sid] = append(bySID[k.sid], argOfMem(k.key))
	}
	for sid, ks := range bySID {
		b, err := json.Marshal(ks)
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, query, sid, string(b)); err != nil {
			return err
		}
	}
	return nil
}

// mergeTx writes memory's fold of the whole log into ledger and
// ledger_claims (sorted by sync and key), deletes the log rows and records
// the merge in ledger_meta, inside tx. It returns the last merged seq, or 0
// when the log was empty. The caller calls mem.merged after the commit.
func (s *Store) mergeTx(ctx context.Context, tx *sql.Tx) (int64, error) {
	snap, err := s.refresh(ctx, tx)
	if err != nil {
		return 0, err
	}
	through, keys := s.mem.mergeKeys()
	if through <= snap.merged {
		return 0, nil
	}
	if err := s.writeMerged(ctx, tx, keys, through); err != nil {
		return 0, err
	}
	exec := func(q string, args ...any) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}
	if err := exec(`DELETE FROM ledger_log WHERE seq <= ?`, through); err != nil {
		return 0, err
	}
	if err := exec(`UPDATE ledger_meta SET merged_through = ?, generation = generation + 1 WHERE id = 1`, through); err != nil {
		return 0, err
	}
	return through, nil
}

// mergeRow is one entry a merge writes.
type mergeRow struct {
	sid int64
	key string // memory form
	e   memEntry
}

// mergeChunk is how many rows one merge INSERT writes.
const mergeChunk = 256

// mergeKey names one entry of memory.
type mergeKey struct {
	sid int64
	key string // memory form
}

// mergeSizes are the row counts of the merge statements: full chunks of
// mergeChunk rows, and smaller statements for the rest of a transaction's
// rows (at most 3 of each size), so every statement a merge runs is
// prepared once per Store (prepareMerge) instead of once per transaction.
var mergeSizes = [...]int{mergeChunk, 64, 16, 4, 1}

// The tables a merge writes.
type mergeTable int

const (
	mergeFinal   mergeTable = iota // ledger: rejected, in_doubt, accepted
	mergePending                   // ledger_claims
	mergeDone                      // ledger_done: complete
)

// mergeQuery is the upsert of n rows into the table of kind.
func mergeQuery(kind mergeTable, n int) string {
	var table, cols, tuple, conflict string
	switch kind {
	case mergeFinal:
		table, cols, tuple, conflict = "ledger",
			`sid, key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at`,
			`(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			`state = excluded.state, fence = excluded.fence, run_id = excluded.run_id,
			result = excluded.result, message = excluded.message, attempts = excluded.attempts,
			claimed_at = excluded.claimed_at, completed_at = excluded.completed_at, seen_at = excluded.seen_at`
	case mergePending:
		table, cols, tuple, conflict = "ledger_claims",
			`sid, key, fence, run_id, result, attempts, claimed_at, seen_at`, `(?, ?, ?, ?, ?, ?, ?, ?)`,
			`fence = excluded.fence, run_id = excluded.run_id, result = excluded.result, attempts = excluded.attempts,
			claimed_at = excluded.claimed_at, seen_at = excluded.seen_at`
	case mergeDone:
		table, cols, tuple, conflict = "ledger_done", `sid, key, seen_at, v`, `(?, ?, ?, ?)`,
			`seen_at = excluded.seen_at, v = excluded.v`
	}
	return `INSERT INTO ` + table + ` (` + cols + `) VALUES ` +
		strings.TrimSuffix(strings.Repeat(tuple+", ", n), ", ") +
		` ON CONFLICT (sid, key) DO UPDATE SET ` + conflict
}

// upserter writes merged rows (in key order) into the table of its kind,
// mergeChunk rows per statement.
type upserter struct {
	tx    *sql.Tx
	kind  mergeTable
	stmts *[len(mergeSizes)]*sql.Stmt // mergeQuery(kind, mergeSizes[i]), prepared on the write connection
	buf   []mergeRow
	args  []any
	vals  []byte // ledger_done value blobs of one statement
	ends  []int  // where each row's blob ends in vals
}

func (u *upserter) add(ctx context.Context, r mergeRow) error {
	u.buf = append(u.buf, r)
	if len(u.buf) < mergeChunk {
		return nil
	}
	return u.flush(ctx)
}

// flush writes the buffered rows, in as few statements of mergeSizes as fit.
func (u *upserter) flush(ctx context.Context) error {
	rows := u.buf
	u.buf = u.buf[:0]
	for i, size := range mergeSizes {
		for len(rows) >= size {
			if err := u.exec(ctx, u.tx.StmtContext(ctx, u.stmts[i]), rows[:size]); err != nil {
				return err
			}
			rows = rows[size:]
		}
	}
	return nil
}

// exec binds rows to stmt and runs it.
func (u *upserter) exec(ctx context.Context, stmt *sql.Stmt, rows []mergeRow) error {
	defer stmt.Close() // the transaction's copy; the Store's statement stays prepared
	if u.kind == mergeDone {
		// The key and value blobs go into one buffer first, so that no
		// later append moves the slices of it that args hold: ends holds
		// each row's key end and value end.
		u.vals, u.ends = u.vals[:0], u.ends[:0]
		for _, r := range rows {
			if r.key[0] == 'h' {
				u.vals = append(u.vals, r.key[1:]...)
			}
			u.ends = append(u.ends, len(u.vals))
			u.vals = appendDone(u.vals, r.e)
			u.ends = append(u.ends, len(u.vals))
		}
	}
	u.args = u.args[:0]
	start := 0
	for i, r := range rows {
		e := r.e
		switch u.kind {
		case mergeDone:
			kend, vend := u.ends[2*i], u.ends[2*i+1]
			var key any = u.vals[start:kend] // storedKey, without a copy of its own
			if r.key[0] != 'h' {
				key = r.key[1:]
			}
			u.args = append(u.args, r.sid, key, e.seenAt, u.vals[kend:vend])
			start = vend
		case mergePending:
			u.args = append(u.args, r.sid, storedKey(r.key), e.fence, e.runID, e.result, int64(e.attempts), e.claimedAt, e.seenAt)
		default:
			var completed any
			if e.completedAt != 0 {
				completed = e.completedAt
			}
			u.args = append(u.args, r.sid, storedKey(r.key), string(e.state), e.fence, e.runID, e.result, e.message,
				int64(e.attempts), e.claimedAt, completed, e.seenAt)
		}
	}
	_, err := stmt.ExecContext(ctx, u.args...)
	return err
}

// bumpGeneration records a change to the ledger's tables that did not come
// from a merge (touch, prune).
func bumpGeneration(ctx context.Context, tx *sql.Tx) error {
	_, err := tx.ExecContext(ctx, `UPDATE ledger_meta SET generation = generation + 1 WHERE id = 1`)
	return err
}
