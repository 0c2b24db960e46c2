// Package ledger builds delivery keys (docs/guide.md#what-a-run-does): the identity of one record's
// delivery, the same whichever run, retry or worker reads the record; and
// slot keys, under which the last delivered state of each row is kept.
//
// Keys are SHA-256 over a length-prefixed tuple, so no two different tuples
// hash alike, and the cursor and record go in only as hashes: a key never
// holds an e-mail address or any other personal data in clear.
package ledger

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
)

// RecordHash is SHA-256 of the canonical JSON of a mapped record (object keys
// sorted, as encoding/json does for maps). Hashing the mapped record, not the
// raw row, means a mapping change produces new keys, so the changed payload is
// sent, while a change to an unmapped column sends nothing.
func RecordHash(data map[string]any) ([32]byte, error) {
	b, err := canonicalJSON(data)
	if err != nil {
		return [32]byte{}, err
	}
	return sha256.Sum256(b), nil
}

// SaltedHash is the hash of a record sent under destination settings other
// than its sync's payload base (docs/guide.md#changing-a-sync):
// SHA-256(record hash, salt), so it never equals the record's plain hash.
func SaltedHash(record [32]byte, salt string) [32]byte { return mixedHash("h1", record, salt) }

// mixedHash is SHA-256(kind, record hash, text): kind keeps a salted hash
// and a skipped one apart for the same text.
func mixedHash(kind string, record [32]byte, text string) [32]byte {
	var buf [128]byte
	b := field(buf[:0], kind)
	b = field(b, string(record[:]))
	b = field(b, text)
	return sha256.Sum256(b)
}

// SkippedHash is the hash a slot keeps for a record its sync's write mode
// left as the destination had it (create: the record exists; update: it
// does not), skip being that reason: SHA-256(record hash, skip). It never
// equals the record's hash, so a run under a mode that would write the
// record sends it (docs/guide.md#changing-a-sync), while one under the
// mode that skipped it compares with this hash and sends nothing.
func SkippedHash(record [32]byte, skip string) [32]byte { return mixedHash("s1", record, skip) }

// Positional is the key of the record at position pos of the page read at
// cursor: SHA-256(sync id, source id, page cursor, position, record hash).
func Positional(syncID, sourceID, cursor string, pos int, record [32]byte) string {
	var buf [256]byte
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(pos))
	b := field(buf[:0], "p1")
	b = field(b, syncID)
	b = field(b, sourceID)
	b = field(b, cursor)
	b = field(b, string(n[:]))
	b = field(b, string(record[:]))
	return hexSum(b)
}

// Identity is the key of a record with a declared identity column:
// SHA-256(sync id, source id, identity, record hash). Rows that move between
// pages keep their key; an unchanged row read again is recognised.
func Identity(syncID, sourceID, identity string, record [32]byte) string {
	var buf [256]byte
	b := field(buf[:0], "i1")
	b = field(b, syncID)
	b = field(b, sourceID)
	b = field(b, identity)
	b = field(b, string(record[:]))
	return hexSum(b)
}

// field appends a length-prefixed field (the hashed tuple is the fields'
// concatenation; it usually fits the callers' stack buffer, so a key costs
// one allocation: its hex string).
func field(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

// hexSum is the lowercase hex of SHA-256(b).
func hexSum(b []byte) string {
	sum := sha256.Sum256(b)
	var out [64]byte
	hex.Encode(out[:], sum[:])
	return string(out[:])
}

// Slot is the key of the last delivered state of the record with identity
// identity (docs/guide.md#what-a-run-does): the slot a delivery of any version of that row writes.
// It is SHA-256 over a tuple of its own kind, so it never equals a delivery
// key.
func Slot(syncID, sourceID, identity string) string {
	var buf [256]byte
	b := field(buf[:0], "s1")
	b = field(b, syncID)
	b = field(b, sourceID)
	b = field(b, identity)
	return hexSum(b)
}

// PositionSlot is the slot of the record at position pos of the page read
// at cursor, for syncs without an identity column.
func PositionSlot(syncID, sourceID, cursor string, pos int) string {
	var buf [256]byte
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(pos))
	b := field(buf[:0], "s2")
	b = field(b, syncID)
	b = field(b, sourceID)
	b = field(b, cursor)
	b = field(b, string(n[:]))
	return hexSum(b)
}

// IdentityGen is the delivery key of the gen-th delivery of a slot with an
// identity (gen counts the values the slot was delivered with). The first
// (gen <= 1) is Identity's key, as before slots existed, so ledgers written
// then still answer for it; a later one has the generation in its hash, so a
// value sent again after the slot held another one (Ann, Anne, Ann) gets a
// key of its own and no destination swallows it as a replay.
func IdentityGen(syncID, sourceID, identity string, record [32]byte, gen int64) string {
	if gen <= 1 {
		return Identity(syncID, sourceID, identity, record)
	}
	var buf [256]byte
	var g [8]byte
	binary.BigEndian.PutUint64(g[:], uint64(gen))
	b := field(buf[:0], "i2")
	b = field(b, syncID)
	b = field(b, sourceID)
	b = field(b, identity)
	b = field(b, string(record[:]))
	b = field(b, string(g[:]))
	return hexSum(b)
}

// PositionalGen is IdentityGen for a positional slot.
func PositionalGen(syncID, sourceID, cursor string, pos int, record [32]byte, gen int64) string {
	if gen <= 1 {
		return Positional(syncID, sourceID, cursor, pos, record)
	}
	var buf [256]byte
	var n, g [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(pos))
	binary.BigEndian.PutUint64(g[:], uint64(gen))
	b := field(buf[:0], "p2")
	b = field(b, syncID)
	b = field(b, sourceID)
	b = field(b, cursor)
	b = field(b, string(n[:]))
	b = field(b, string(record[:]))
	b = field(b, string(g[:]))
	return hexSum(b)
}

// Removal is the key of the removal from the destination of the record a
// mirror sync last delivered to slot with generation gen
// (docs/guide.md#write-modes): a run that dies after asking for the removal
// builds the same key again, and the ledger answers for it.
func Removal(syncID, slot string, gen int64) string { return slotGenKey("r1", syncID, slot, gen) }

// Moved is the key of the handle a mirror sync's slot left behind when its
// generation gen was delivered under another handle (a row whose e-mail
// changed, docs/guide.md#write-modes): the entry keeps the old handle until
// a mirror run removes it from the destination.
func Moved(syncID, slot string, gen int64) string { return slotGenKey("m1", syncID, slot, gen) }

// MovedFrom is the key of the handle a write an earlier run left in flight
// went to (key: a mirror's claim or accepted entry, ClaimResultTo), once the
// row it wrote has changed or is gone before its outcome was known: the
// write may have landed, so the entry keeps the handle until a mirror run
// removes it from the destination or finds a row holding it.
func MovedFrom(syncID, key string) string { return slotGenKey("m2", syncID, key, 0) }

// slotGenKey is the key of kind about generation gen of slot.
func slotGenKey(kind, syncID, slot string, gen int64) string {
	var buf [160]byte
	var g [8]byte
	binary.BigEndian.PutUint64(g[:], uint64(gen))
	b := field(buf[:0], kind)
	b = field(b, syncID)
	b = field(b, slot)
	b = field(b, string(g[:]))
	return hexSum(b)
}
