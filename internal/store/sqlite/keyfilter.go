package sqlite

import (
	"context"
	"database/sql"
	"encoding/binary"
	"hash/maphash"
	"math/bits"
)

// keyFilter is a Bloom filter of the keys one sync has in ledger and
// ledger_claims, so a lookup of keys the tables cannot hold (every key of a
// first sync) skips the tables. It is complete as of the merges memory has
// observed: built from a scan of the tables, then given the keys of every
// merge whose log rows memory had applied (memLedger.observeMerge); a merge
// whose rows memory never saw, or more keys than it was sized for, drops it
// (it is rebuilt on the next lookup). Deleted keys (prune, a released key's
// merge) only leave false positives, and a released key is not added.
type keyFilter struct {
	bits     []uint64
	mask     uint64
	n, limit int
}

// filterBitsPerKey and filterProbes give about 0.24 % false positives.
const (
	filterBitsPerKey = 16
	filterProbes     = 4
	filterMinKeys    = 1 << 14
)

// newKeyFilter returns a filter sized for twice n keys (at least filterMinKeys).
func newKeyFilter(n int) *keyFilter {
	limit := max(2*n, filterMinKeys)
	nbits := uint64(1) << bits.Len64(uint64(limit*filterBitsPerKey-1))
	return &keyFilter{bits: make([]uint64, nbits/64), mask: nbits - 1, limit: limit}
}

// probes returns two independent hashes of a memory key: the key's own bytes
// for a hex key (a SHA-256), maphash otherwise.
func probes[K string | []byte](seed maphash.Seed, mk K) (uint64, uint64) {
	if mk[0] == 'h' && len(mk) == 33 {
		return binary.LittleEndian.Uint64([]byte(mk[1:9])), binary.LittleEndian.Uint64([]byte(mk[9:17])) | 1
	}
	var h uint64
	switch k := any(mk).(type) {
	case string:
		h = maphash.String(seed, k)
	case []byte:
		h = maphash.Bytes(seed, k)
	}
	return h, bits.RotateLeft64(h, 32) | 1
}

// add records mk; false once the filter holds more keys than it was sized for.
func (f *keyFilter) add(seed maphash.Seed, mk string) bool {
	return f.addProbes(probes(seed, mk))
}

// addBytes is add of a memory key held in a byte slice.
func (f *keyFilter) addBytes(seed maphash.Seed, mk []byte) bool {
	return f.addProbes(probes(seed, mk))
}

func (f *keyFilter) addProbes(h1, h2 uint64) bool {
	for i := range uint64(filterProbes) {
		b := (h1 + i*h2) & f.mask
		f.bits[b/64] |= 1 << (b % 64)
	}
	f.n++
	return f.n <= f.limit
}

// mayHave is false only for keys never added.
func (f *keyFilter) mayHave(seed maphash.Seed, mk string) bool {
	h1, h2 := probes(seed, mk)
	for i := range uint64(filterProbes) {
		b := (h1 + i*h2) & f.mask
		if f.bits[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

// buildFilter scans sid's keys in ledger, ledger_done and ledger_claims (one snapshot) and
// installs the filter unless memory has seen a merge since that snapshot.
func (s *Store) buildFilter(ctx context.Context, sid int64) error {
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var merged, n int64
	if err := tx.QueryRowContext(ctx, `SELECT merged_through FROM ledger_meta WHERE id = 1`).Scan(&merged); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM ledger WHERE sid = ?1) + (SELECT count(*) FROM ledger_done WHERE sid = ?1) + (SELECT count(*) FROM ledger_claims WHERE sid = ?1)`, sid).Scan(&n); err != nil {
		return err
	}
	f := newKeyFilter(int(n) + 2*s.mergeEntries) // room for merges before a rebuild
	// One query per key type, one column each: in the (sid, key) index
	// every TEXT key sorts before every BLOB key (x'' is the least BLOB).
	for _, q := range []struct {
		sql  string
		blob bool
	}{
		{`SELECT key FROM ledger WHERE sid = ?1 AND key >= x'' UNION ALL SELECT key FROM ledger_done WHERE sid = ?1 AND key >= x''
			UNION ALL SELECT key FROM ledger_claims WHERE sid = ?1 AND key >= x''`, true},
		{`SELECT key FROM ledger WHERE sid = ?1 AND key < x'' UNION ALL SELECT key FROM ledger_done WHERE sid = ?1 AND key < x''
			UNION ALL SELECT key FROM ledger_claims WHERE sid = ?1 AND key < x''`, false},
	} {
		if err := addStoredKeys(ctx, tx, q.sql, sid, q.blob, s.mem.seed, f); err != nil {
			return err
		}
	}
	s.mem.installFilter(sid, merged, f)
	return nil
}

// addStoredKeys adds the keys query returns (one column: keys of sid, BLOB
// keys if blob, TEXT keys otherwise) to f.
func addStoredKeys(ctx context.Context, tx *sql.Tx, query string, sid int64, blob bool, seed maphash.Seed, f *keyFilter) error {
	rows, err := tx.QueryContext(ctx, query, sid)
	if err != nil {
		return err
	}
	defer rows.Close()
	var mk []byte
	for rows.Next() {
		var k sql.RawBytes
		if err := rows.Scan(&k); err != nil {
			return err
		}
		if blob {
			mk = append(append(mk[:0], 'h'), k...)
		} else {
			mk = append(append(mk[:0], 't'), k...)
		}
		f.addBytes(seed, mk)
	}
	return rows.Err()
}
