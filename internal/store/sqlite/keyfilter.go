package sqlite

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Key filters. A sync's key filter is a Bloom filter of the keys it has in
// ledger, ledger_done and ledger_claims, so a lookup of keys the tables
// cannot hold (every key of a first sync) skips the tables. It is split into
// parts by key (partOf), each persisted in ledger_filter (migration 0019):
// every merge adds the keys it writes to their parts' rows in its own
// transaction (addToFilters), so a row always holds every key of its part
// that the tables hold (deleted keys only leave false positives). A part
// with no row (a store from before 0019, a part no merge has written yet) is
// built from a scan of its key range, which is all one row's keys.
//
// In memory (memLedger.filters), a sync's filter is complete as of the merges
// memory has observed: read from ledger_filter in one snapshot (loadFilter),
// then given the keys of every merge whose log rows memory had applied
// (memLedger.observeMerge); a merge whose rows memory never saw, or a part
// holding more keys than it was sized for, drops it (it is read again at the
// next lookup). Reading it costs 1.5 to 3 bytes per key, against a scan of
// every key that each process paid before (docs/PERFORMANCE.md#ledger-growth).

// filterBitsPerKey and filterProbes give about 0.6 % false positives at a
// part's capacity, 0.06 % at half of it (a part is built for twice its
// keys). A merge rewrites the parts it touches, so the bits per key are
// bytes a merge writes: 12 rather than 16.
const (
	filterBitsPerKey = 12
	filterProbes     = 4
	// textPart is the part of TEXT keys; hex keys are in part
	// (first byte of the key), 0 to 255.
	textPart    = 256
	filterParts = textPart + 1
	// partMinKeys is the least capacity of a part (768 bytes of bits).
	partMinKeys = 512
	// partGrowKeys is the least room a part is built with: what four
	// merges of DefaultLedgerMergeEntries hashed keys add to it. A full
	// part is rebuilt from a scan of its keys, so a small part built for
	// only twice its keys was rebuilt every merge or two. A sync's filter
	// is then at least 257 x 1,536 bytes in memory (the scan-built filter
	// of before was at least 512 KiB).
	partGrowKeys = 4 * DefaultLedgerMergeEntries / 256
)

var errBadFilter = errors.New("ledger_filter: malformed part")

// keyFilter is one part's Bloom filter of nbits bits; n keys were added,
// limit is its capacity. A probe's bit is its hash scaled to nbits (the
// high word of hash * nbits), so any whole number of words is a valid size.
type keyFilter struct {
	bits     []uint64
	nbits    uint64
	n, limit int
}

// newKeyFilter returns a filter sized for twice n keys (at least
// partMinKeys, and room for partGrowKeys more).
func newKeyFilter(n int) *keyFilter {
	limit := max(2*n, n+partGrowKeys, partMinKeys)
	words := (limit*filterBitsPerKey + 63) / 64
	return &keyFilter{bits: make([]uint64, words), nbits: uint64(64 * words), limit: 64 * words / filterBitsPerKey}
}

// bit is the i-th probe's bit of the key hashed to h1, h2.
func (f *keyFilter) bit(h1, h2, i uint64) uint64 {
	b, _ := bits.Mul64(h1+i*h2, f.nbits)
	return b
}

// partOf is the part of a memory key.
func partOf[K string | []byte](mk K) int {
	if mk[0] == 'h' {
		return int(mk[1])
	}
	return textPart
}

// probes returns two independent hashes of a memory key. They are persisted
// (ledger_filter), so they depend on the key alone: bytes 8 to 24 of a hex
// key (a SHA-256; its first byte names the part, so it is not used), the
// SHA-256 of any other key.
func probes[K string | []byte](mk K) (uint64, uint64) {
	if mk[0] == 'h' && len(mk) == 33 {
		return binary.LittleEndian.Uint64([]byte(mk[9:17])), binary.LittleEndian.Uint64([]byte(mk[17:25])) | 1
	}
	sum := sha256.Sum256([]byte(mk))
	return binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16]) | 1
}

// add records the key of probes h1, h2; false once the filter holds more
// keys than it was sized for.
func (f *keyFilter) add(h1, h2 uint64) bool {
	for i := range uint64(filterProbes) {
		b := f.bit(h1, h2, i)
		f.bits[b/64] |= 1 << (b % 64)
	}
	f.n++
	return f.n <= f.limit
}

// mayHave is false only for keys never added.
func (f *keyFilter) mayHave(h1, h2 uint64) bool {
	for i := range uint64(filterProbes) {
		b := f.bit(h1, h2, i)
		if f.bits[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

// encode is f's bits, little-endian, as ledger_filter stores them.
func (f *keyFilter) encode() []byte {
	b := make([]byte, 8*len(f.bits))
	for i, w := range f.bits {
		binary.LittleEndian.PutUint64(b[8*i:], w)
	}
	return b
}

// decodeKeyFilter is the part stored as n and b.
func decodeKeyFilter(n int64, b []byte) (*keyFilter, error) {
	words := len(b) / 8
	if len(b)%8 != 0 || words == 0 || n < 0 {
		return nil, errBadFilter
	}
	f := &keyFilter{bits: make([]uint64, words), nbits: uint64(64 * words), n: int(n), limit: 64 * words / filterBitsPerKey}
	for i := range f.bits {
		f.bits[i] = binary.LittleEndian.Uint64(b[8*i:])
	}
	return f, nil
}

// syncFilter is a sync's key filter: one keyFilter per part.
type syncFilter struct {
	parts [filterParts]*keyFilter
}

// mayHave is false only for keys of no part's filter.
func (f *syncFilter) mayHave(mk string) bool {
	h1, h2 := probes(mk)
	return f.parts[partOf(mk)].mayHave(h1, h2)
}

// add records mk; false once its part holds more keys than it was sized for.
func (f *syncFilter) add(mk string) bool {
	h1, h2 := probes(mk)
	return f.parts[partOf(mk)].add(h1, h2)
}

// partRange is the key range of part p in the (sid, key) indexes: hex keys
// are 32-byte BLOBs, and every TEXT key sorts before every BLOB (the empty
// BLOB is the least BLOB, the empty string the least TEXT).
func partRange(p int) (lo, hi any) {
	switch {
	case p == textPart:
		return "", []byte{}
	case p == 255:
		return []byte{255}, bytes.Repeat([]byte{255}, 33)
	}
	return []byte{byte(p)}, []byte{byte(p + 1)}
}

const (
	sqlFilterGet = `SELECT n, bits FROM ledger_filter WHERE sid = ? AND part = ?`
	sqlFilterAll = `SELECT part, n, bits FROM ledger_filter WHERE sid = ?`
	sqlFilterPut = `INSERT INTO ledger_filter (sid, part, n, bits) VALUES (?, ?, ?, ?)
		ON CONFLICT (sid, part) DO UPDATE SET n = excluded.n, bits = excluded.bits`
	sqlPartKeys = `SELECT key FROM ledger WHERE sid = ?1 AND key >= ?2 AND key < ?3
		UNION ALL SELECT key FROM ledger_done WHERE sid = ?1 AND key >= ?2 AND key < ?3
		UNION ALL SELECT key FROM ledger_claims WHERE sid = ?1 AND key >= ?2 AND key < ?3`
)

// scanPart builds part p of sid from the keys the tables hold, read through
// tx.
func scanPart(ctx context.Context, tx *sql.Tx, sid int64, p int) (*keyFilter, error) {
	lo, hi := partRange(p)
	rows, err := tx.QueryContext(ctx, sqlPartKeys, sid, lo, hi)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var (
		hs [][2]uint64
		mk []byte
	)
	for rows.Next() {
		var k sql.RawBytes
		if err := rows.Scan(&k); err != nil {
			return nil, err
		}
		if p == textPart {
			mk = append(append(mk[:0], 't'), k...)
		} else {
			mk = append(append(mk[:0], 'h'), k...)
		}
		if partOf(mk) != p {
			return nil, fmt.Errorf("ledger key %x out of filter part %d", k, p)
		}
		h1, h2 := probes(mk)
		hs = append(hs, [2]uint64{h1, h2})
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	f := newKeyFilter(len(hs))
	for _, h := range hs {
		f.add(h[0], h[1])
	}
	return f, nil
}

// loadFilter reads sid's filter (its parts in ledger_filter, a scan for the
// parts without a row) in one snapshot, and installs it unless memory has
// seen a merge since that snapshot.
func (s *Store) loadFilter(ctx context.Context, sid int64) error {
	tx, err := s.r.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()
	var merged int64
	if err := tx.QueryRowContext(ctx, `SELECT merged_through FROM ledger_meta WHERE id = 1`).Scan(&merged); err != nil {
		return err
	}
	f := &syncFilter{}
	rows, err := tx.QueryContext(ctx, sqlFilterAll, sid)
	if err != nil {
		return err
	}
	for rows.Next() {
		var (
			p, n int64
			b    sql.RawBytes
		)
		if err := rows.Scan(&p, &n, &b); err != nil {
			rows.Close()
			return err
		}
		if p < 0 || p >= filterParts {
			rows.Close()
			return errBadFilter
		}
		if f.parts[p], err = decodeKeyFilter(n, b); err != nil {
			rows.Close()
			return fmt.Errorf("sync %d part %d: %w", sid, p, err)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	for p := range f.parts {
		if f.parts[p] == nil {
			if f.parts[p], err = scanPart(ctx, tx, sid, p); err != nil {
				return err
			}
		}
	}
	s.mem.installFilter(sid, merged, f)
	return nil
}

// filterKey names one part of one sync's filter.
type filterKey struct {
	sid  int64
	part int
}

// addToFilters adds the keys a merge transaction wrote (after writing them,
// inside tx) to their parts in ledger_filter. A part without a row, or one
// that would hold more keys than it was sized for, is built again from a
// scan of its key range, which the keys just written are part of.
func (s *Store) addToFilters(ctx context.Context, tx *sql.Tx, added map[filterKey][]string) error {
	for fk, keys := range added {
		var (
			n int64
			b []byte
			f *keyFilter
		)
		err := tx.QueryRowContext(ctx, sqlFilterGet, fk.sid, fk.part).Scan(&n, &b)
		switch {
		case errors.Is(err, sql.ErrNoRows):
		case err != nil:
			return err
		default:
			if f, err = decodeKeyFilter(n, b); err != nil {
				return fmt.Errorf("sync %d part %d: %w", fk.sid, fk.part, err)
			}
			for _, k := range keys {
				if !f.add(probes(k)) {
					f = nil
					break
				}
			}
		}
		if f == nil {
			if f, err = scanPart(ctx, tx, fk.sid, fk.part); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, sqlFilterPut, fk.sid, fk.part, f.n, f.encode()); err != nil {
			return err
		}
	}
	return nil
}
