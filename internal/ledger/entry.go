package ledger

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/oncesync/oncesync/internal/store"
)

// What a ledger entry's Result holds (opaque to the store; written by the
// runner, read by it and by the pages that show records to a person).
//
// A slot's complete entry holds its last delivered state (docs/guide.md#what-a-run-does):
//
//	<generation>.<the first 16 bytes of the record hash, base64url>.<destination ref>
//
// The other entries are keyed by a delivery key and name the slot they
// write by its tag (SlotTag: the slot key's first 16 hex digits; a tag
// two slots share makes a run treat a row as in doubt for nothing, never
// the reverse), so that a run can tell which rows an earlier run left in
// flight even when the row has changed since:
//
//	c1.<tag>                   pending (a claim)
//	c1.<tag>.<to>              a mirror's claim: to is the handle the write
//	                           goes to and the row's identity (HandleRef's
//	                           encoding), so that a run can remove it should
//	                           the row be gone or changed before its outcome
//	                           is known; a mirror's accepted entry keeps it
//	                           as its Message (AcceptedTo)
//	a1.<tag>.<ref>             accepted, ref being the destination's process
//	r1.<tag>.<identity>        rejected; the identity lets a keyset source
//	                           re-read the row (docs/guide.md#the-ledger-and-its-retention); "~" + hex when it is
//	                           not printable UTF-8
//	n1.<tag>.<identity>        in_doubt, left for a person
//
// Sixteen bytes of the record hash are enough to tell two versions of one
// row apart (a collision needs 2^64 versions of it) and keep a slot's entry
// short, which is what the embedded ledger's merges write.

const SlotHashLen = 16

// SlotState is a slot's last delivered state: the generation and the
// (short) record hash of its last delivery, and the destination's reference.
type SlotState struct {
	Gen  int64
	Hash [SlotHashLen]byte
	Ref  string
}

// ShortHash is the part of a record hash a slot keeps.
func ShortHash(h [32]byte) (s [SlotHashLen]byte) {
	copy(s[:], h[:SlotHashLen])
	return s
}

// hashEnc writes a slot's hash in 22 characters (unpadded base64url):
// merges write one per row, so every byte counts.
var hashEnc = base64.RawURLEncoding

// hashChars is the length of an encoded hash.
var hashChars = hashEnc.EncodedLen(SlotHashLen)

// Encode is s as its complete entry's Result: "<generation>.<hash>.<ref>"
// (a slot key never held anything else, so no version prefix is needed;
// the ref may hold dots, the other fields do not).
func (s SlotState) Encode() string {
	var buf [96]byte // on the stack for the usual ref: one allocation, the string
	b := buf[:0]
	b = strconv.AppendInt(b, s.Gen, 10)
	b = append(b, '.')
	b = hashEnc.AppendEncode(b, s.Hash[:])
	b = append(b, '.')
	b = append(b, s.Ref...)
	return string(b)
}

// DecodeSlot reads a slot's complete entry; ok is false for anything else
// (no entry, another state, another form).
func DecodeSlot(e store.LedgerEntry, found bool) (s SlotState, ok bool) {
	if !found || e.State != store.LedgerComplete {
		return s, false
	}
	g, rest, ok := strings.Cut(e.Result, ".")
	if !ok {
		return s, false
	}
	gen, err := strconv.ParseInt(g, 10, 64)
	if err != nil || gen < 1 || len(rest) < hashChars+1 || rest[hashChars] != '.' {
		return s, false
	}
	if n, err := hashEnc.Decode(s.Hash[:], []byte(rest[:hashChars])); err != nil || n != SlotHashLen {
		return s, false
	}
	s.Gen, s.Ref = gen, rest[hashChars+1:]
	return s, true
}

// The Results of delivery-key entries.

// tagLen is the length of a slot's tag.
const tagLen = 16

// SlotTagLen is the length of a slot's tag (SlotTag), in hex digits.
const SlotTagLen = tagLen

// SlotTag is the short name of a slot in the Results of delivery-key
// entries (the first 16 hex digits of its key). Claims write one per
// record, so it is kept short; it only has to tell slots apart among a
// sync's entries in flight.
func SlotTag(slot string) string {
	if len(slot) <= tagLen {
		return slot
	}
	return slot[:tagLen]
}

// ClaimResult is a pending claim's Result.
func ClaimResult(slot string) string { return "c1." + SlotTag(slot) }

// AcceptedResult is an accepted entry's Result: ref is the process.
func AcceptedResult(slot, ref string) string { return "a1." + SlotTag(slot) + "." + ref }

// ClaimResultTo is a mirror's claim Result: the write goes to handle, for
// the row of identity (docs/guide.md#write-modes). It keeps the c1 form, the
// handle after the tag, which a binary from before handles were written
// there reads as a plain claim (processes of two versions share a
// deployment while it is upgraded).
func ClaimResultTo(slot, handle, identity string) string {
	return "c1." + SlotTag(slot) + "." + encodeTo(handle, identity)
}

// A sync that is not a mirror keeps no handle in clear, but its writes in
// flight name their handle's key (HandleKey): a run that finds one an
// earlier run left waits for it before it writes another row to that
// contact (runner/handle.go). In a claim's Result and an accepted entry's
// Message it follows '#', which no encodeTo form holds, so that EntryHandle
// (and a binary from before keys) reads it as no handle.
const keyMark = "#"

// HandleKey is the key of handle for syncID's entries: a digest salted with
// the sync, case-folded, that tells two writes to one contact apart from
// others without naming it.
func HandleKey(syncID, handle string) string {
	sum := sha256.Sum256([]byte(syncID + "\x00" + strings.ToLower(handle)))
	return hex.EncodeToString(sum[:8])
}

// ClaimResultKeyed is the claim Result of a write to the handle whose key
// is key, for a sync that is not a mirror.
func ClaimResultKeyed(slot, key string) string {
	return "c1." + SlotTag(slot) + "." + keyMark + key
}

// AcceptedKeyed is the Message of an accepted entry of a write to the
// handle whose key is key, for a sync that is not a mirror.
func AcceptedKeyed(key string) string { return keyMark + key }

// EntryHandleKey is the key (HandleKey) of the handle a write in flight goes
// to: a mirror's (EntryHandle) or another sync's (ClaimResultKeyed,
// AcceptedKeyed); ok is false when the entry names none.
func EntryHandleKey(syncID string, e store.LedgerEntry) (string, bool) {
	if h, _, ok := EntryHandle(e); ok {
		return HandleKey(syncID, h), true
	}
	var named string
	switch {
	case strings.HasPrefix(e.Result, "c1."):
		_, named, _ = EntryTag(e.Result)
	case strings.HasPrefix(e.Result, "a1.") && e.State == store.LedgerAccepted:
		named = e.Message
	}
	key, ok := strings.CutPrefix(named, keyMark)
	return key, ok && key != ""
}

// AcceptedTo is the Message of a mirror's accepted entry (its Result stays
// AcceptedResult, which an older binary reads): the handle the process is
// writing to, for the row of identity.
func AcceptedTo(handle, identity string) string { return HandleRef(handle, identity) }

// encodeTo is a handle and an identity in characters that hold no '.'.
func encodeTo(handle, identity string) string {
	return refEnc.EncodeToString([]byte(handle)) + ":" + refEnc.EncodeToString([]byte(identity))
}

// EntryHandle is the handle a mirror's claim (ClaimResultTo) or accepted
// entry (AcceptedTo) writes to and its row's identity; ok is false for any
// other entry, and for a mirror's entries written before handles were.
func EntryHandle(e store.LedgerEntry) (handle, identity string, ok bool) {
	switch {
	case strings.HasPrefix(e.Result, "c1."):
		_, rest, ok := EntryTag(e.Result)
		if !ok || rest == "" {
			return "", "", false
		}
		return RefHandle(handlePrefix + rest)
	case strings.HasPrefix(e.Result, "a1.") && e.State == store.LedgerAccepted:
		return RefHandle(e.Message)
	}
	return "", "", false
}

// InDoubtResult is the Result of an entry left in doubt for a person.
func InDoubtResult(slot, identity string) string {
	return "n1." + SlotTag(slot) + "." + encodeIdentity(identity)
}

// RejectedResult is a rejected entry's Result.
func RejectedResult(slot, identity string) string {
	return "r1." + SlotTag(slot) + "." + encodeIdentity(identity)
}

// ResendResult is the Result of an in-doubt entry a person marks to send
// again: rejected, naming the same slot and identity, so that a keyset
// source reads the row again (docs/guide.md#the-ledger-and-its-retention).
func ResendResult(inDoubt string) string {
	if rest, ok := strings.CutPrefix(inDoubt, "n1."); ok {
		return "r1." + rest
	}
	return inDoubt
}

// EntryTag returns the tag (SlotTag) of the slot a delivery-key entry's
// Result names, and the rest (the ref of an accepted entry, the encoded
// identity of a rejected one); ok is false for Results written before slots
// existed.
func EntryTag(result string) (tag, rest string, ok bool) {
	if len(result) < 3+tagLen || result[2] != '.' {
		return "", "", false
	}
	switch result[:2] {
	case "c1", "a1", "r1", "n1":
	default:
		return "", "", false
	}
	tag = result[3 : 3+tagLen]
	rest = result[3+tagLen:]
	if rest != "" {
		if rest[0] != '.' {
			return "", "", false
		}
		rest = rest[1:]
	}
	return tag, rest, true
}

// AcceptedRef is the process an accepted entry waits for.
func AcceptedRef(e store.LedgerEntry) string {
	if _, ref, ok := EntryTag(e.Result); ok && strings.HasPrefix(e.Result, "a1.") {
		return ref
	}
	return e.Result // an accepted entry always has the a1 form; be lenient
}

// EntryIdentity is the identity a rejected or in-doubt entry names; ok is
// false when it names none (a positional slot, an entry from before slots).
func EntryIdentity(e store.LedgerEntry) (string, bool) {
	if !strings.HasPrefix(e.Result, "r1.") && !strings.HasPrefix(e.Result, "n1.") {
		return "", false
	}
	_, rest, ok := EntryTag(e.Result)
	if !ok || rest == "" {
		return "", false
	}
	return decodeIdentity(rest)
}

// encodeIdentity keeps printable UTF-8 as it is (it is shown to a person,
// docs/guide.md#the-sync-pages-and-the-api) and hex-encodes anything else, so that every Result is valid
// text for the store.
func encodeIdentity(id string) string {
	// An empty identity (a text key of '') is "~", an empty hex: a bare ""
	// would read as no identity, and the row would never be read again.
	if id != "" && utf8.ValidString(id) && !strings.ContainsAny(id, "\x00") && !strings.HasPrefix(id, "~") {
		return id
	}
	return "~" + hex.EncodeToString([]byte(id))
}

func decodeIdentity(s string) (string, bool) {
	h, ok := strings.CutPrefix(s, "~")
	if !ok {
		return s, true
	}
	b, err := hex.DecodeString(h)
	return string(b), err == nil
}

// A mirror sync's slot keeps in its Ref the record's handle at the
// destination (destination.Remover.Handle: what finds the record there
// once its source row is gone, docs/guide.md#write-modes) and its identity,
// encoded so that neither is stored as plain text:
//
//	h1:<handle, base64url>:<identity, base64url>
//	h2:<handle, base64url>:<identity, base64url>:<claim, unix ms base 36>
//
// h2 also keeps when the write that delivered it was claimed (the store's
// clock): writes to one handle are sent one after another (a run never has
// two slots' writes to one handle in flight, and waits for an earlier run's),
// so the one claimed last is what the destination holds, and a mirror run
// writes again a row whose contact another slot's write reached later
// (docs/RELIABILITY.md, thirty-eighth session). A binary from before h2
// reads such a slot as one without a handle.
//
// A slot whose record a mirror run removed keeps RemovedRef: its hash is
// zero, so the row, should it come back, is sent again.
//
//	x1:<identity, base64url>
//
// The handle a slot left behind when its row moved to another one (Moved's
// entry, complete, under its own key) is kept as MovedRef until a mirror run
// removes it:
//
//	m1:<handle, base64url>:<identity, base64url>
//	m2:<handle, base64url>:<identity, base64url>:<claim, unix ms base 36>
//
// and as SettledRef once that run removed it, or found another row holding
// it (a complete entry is never released, so it stays, inert):
//
//	m0:<identity, base64url>
const (
	handlePrefix   = "h1:"
	handleAtPrefix = "h2:"
	removedPrefix  = "x1:"
	movedPrefix    = "m1:"
	movedAtPrefix  = "m2:"
	settledPrefix  = "m0:"
)

// SettledRef is the Ref of a Moved entry a mirror run settled.
func SettledRef(identity string) string {
	return settledPrefix + refEnc.EncodeToString([]byte(identity))
}

// RefSettled reports whether ref is a SettledRef.
func RefSettled(ref string) bool { return strings.HasPrefix(ref, settledPrefix) }

var refEnc = base64.RawURLEncoding

// HandleRef is a slot's Ref holding handle and the row's identity.
func HandleRef(handle, identity string) string {
	return handlePrefix + encodeTo(handle, identity)
}

// HandleRefAt is HandleRef with the time the delivering write was claimed
// (h2); a zero time gives HandleRef.
func HandleRefAt(handle, identity string, claimed time.Time) string {
	return encodeAt(handlePrefix, handleAtPrefix, handle, identity, claimed)
}

// encodeAt is plain and encodeTo's form, or with a claim time at and the
// time after it.
func encodeAt(plain, at, handle, identity string, claimed time.Time) string {
	if claimed.IsZero() {
		return plain + encodeTo(handle, identity)
	}
	return at + encodeTo(handle, identity) + ":" + strconv.FormatInt(claimed.UnixMilli(), 36)
}

// MovedRef is the Ref of a Moved entry: the handle a slot left behind and
// the row's identity.
func MovedRef(handle, identity string) string {
	return movedPrefix + encodeTo(handle, identity)
}

// MovedRefAt is MovedRef with the time the slot's write to handle was
// claimed (m2); a zero time gives MovedRef.
func MovedRefAt(handle, identity string, claimed time.Time) string {
	return encodeAt(movedPrefix, movedAtPrefix, handle, identity, claimed)
}

// RefMoved is the handle and identity a MovedRef holds; ok is false for any
// other Ref.
func RefMoved(ref string) (handle, identity string, ok bool) {
	handle, identity, _, ok = RefMovedAt(ref)
	return handle, identity, ok
}

// RefMovedAt is RefMoved and the claim time an m2 ref keeps (zero for m1).
func RefMovedAt(ref string) (handle, identity string, claimed time.Time, ok bool) {
	return decodeAt(ref, movedPrefix, movedAtPrefix)
}

// RefHandle is the handle and identity a slot's Ref holds (HandleRef,
// HandleRefAt); ok is false for any other Ref.
func RefHandle(ref string) (handle, identity string, ok bool) {
	handle, identity, _, ok = RefHandleAt(ref)
	return handle, identity, ok
}

// RefHandleAt is RefHandle and the claim time an h2 ref keeps (zero for h1).
func RefHandleAt(ref string) (handle, identity string, claimed time.Time, ok bool) {
	return decodeAt(ref, handlePrefix, handleAtPrefix)
}

// decodeAt reads encodeAt's forms of ref.
func decodeAt(ref, plain, at string) (handle, identity string, claimed time.Time, ok bool) {
	if rest, ok := strings.CutPrefix(ref, plain); ok {
		return decodeTo(rest, false)
	}
	if rest, ok := strings.CutPrefix(ref, at); ok {
		return decodeTo(rest, true)
	}
	return "", "", time.Time{}, false
}

// decodeTo reads encodeTo's form, followed by a claim time when at.
func decodeTo(rest string, at bool) (handle, identity string, claimed time.Time, ok bool) {
	h, id, _ := strings.Cut(rest, ":")
	if at {
		var ms string
		if id, ms, ok = strings.Cut(id, ":"); !ok {
			return "", "", time.Time{}, false
		}
		n, err := strconv.ParseInt(ms, 36, 64)
		if err != nil {
			return "", "", time.Time{}, false
		}
		claimed = time.UnixMilli(n)
	}
	hb, err := refEnc.DecodeString(h)
	if err != nil || len(hb) == 0 {
		return "", "", time.Time{}, false
	}
	ib, err := refEnc.DecodeString(id)
	if err != nil {
		return "", "", time.Time{}, false
	}
	return string(hb), string(ib), claimed, true
}

// RemovedRef is the Ref of a slot whose record was removed.
func RemovedRef(identity string) string {
	return removedPrefix + refEnc.EncodeToString([]byte(identity))
}

// RefRemoved reports whether ref is a RemovedRef, and its identity.
func RefRemoved(ref string) (identity string, ok bool) {
	enc, ok := strings.CutPrefix(ref, removedPrefix)
	if !ok {
		return "", false
	}
	b, err := refEnc.DecodeString(enc)
	if err != nil {
		return "", false
	}
	return string(b), true
}
