package sqlite

import (
	"encoding/binary"
	"errors"

	"github.com/oncesync/oncesync/internal/store"
)

// The compact form of a complete ledger entry (migration 0008, table
// ledger_done): the key and seen_at are columns, the rest is one blob v:
//
//	flags byte (doneCompleted: completed_at is set)
//	varint fence, varint run_id, uvarint attempts, varint claimed_at,
//	[varint completed_at - claimed_at], uvarint len + result, uvarint len + message
//
// Times are unix nanoseconds, as in the other tables.

const doneCompleted = 1

var errBadDone = errors.New("ledger_done: malformed value")

// appendDone appends e's value blob to b.
func appendDone(b []byte, e memEntry) []byte {
	var flags byte
	if e.completedAt != 0 {
		flags |= doneCompleted
	}
	b = append(b, flags)
	b = binary.AppendVarint(b, e.fence)
	b = binary.AppendVarint(b, e.runID)
	b = binary.AppendUvarint(b, uint64(max(e.attempts, 0)))
	b = binary.AppendVarint(b, e.claimedAt)
	if flags&doneCompleted != 0 {
		b = binary.AppendVarint(b, e.completedAt-e.claimedAt)
	}
	b = binary.AppendUvarint(b, uint64(len(e.result)))
	b = append(b, e.result...)
	b = binary.AppendUvarint(b, uint64(len(e.message)))
	return append(b, e.message...)
}

// decodeDone is the complete entry of value blob v, last seen at seenAt.
func decodeDone(v []byte, seenAt int64) (memEntry, error) {
	e := memEntry{state: store.LedgerComplete, seenAt: seenAt}
	if len(v) == 0 || v[0]&^doneCompleted != 0 {
		return memEntry{}, errBadDone
	}
	flags := v[0]
	v = v[1:]
	varint := func() (int64, bool) {
		x, n := binary.Varint(v)
		if n <= 0 {
			return 0, false
		}
		v = v[n:]
		return x, true
	}
	str := func() (string, bool) {
		s, rest, ok := cutString(v)
		if ok {
			v = rest
		}
		return s, ok
	}
	var ok bool
	if e.fence, ok = varint(); !ok {
		return memEntry{}, errBadDone
	}
	if e.runID, ok = varint(); !ok {
		return memEntry{}, errBadDone
	}
	a, n := binary.Uvarint(v)
	if n <= 0 || a > 1<<31 {
		return memEntry{}, errBadDone
	}
	v = v[n:]
	e.attempts = int(a)
	if e.claimedAt, ok = varint(); !ok {
		return memEntry{}, errBadDone
	}
	if flags&doneCompleted != 0 {
		d, ok := varint()
		if !ok {
			return memEntry{}, errBadDone
		}
		e.completedAt = e.claimedAt + d
	}
	if e.result, ok = str(); !ok {
		return memEntry{}, errBadDone
	}
	if e.message, ok = str(); !ok || len(v) != 0 {
		return memEntry{}, errBadDone
	}
	return e, nil
}
