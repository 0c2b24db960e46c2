package ledger

import (
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

func TestSlotStateRoundTrip(t *testing.T) {
	t.Parallel()
	rh, _ := RecordHash(map[string]any{"email": "ada@example.com"})
	for _, st := range []SlotState{
		{Gen: 1, Hash: ShortHash(rh)},
		{Gen: 7, Hash: ShortHash(rh), Ref: "12345"},
		{Gen: 1 << 40, Hash: ShortHash(rh), Ref: "a.b.c"}, // a ref may hold dots
	} {
		e := store.LedgerEntry{State: store.LedgerComplete, Result: st.Encode()}
		got, ok := DecodeSlot(e, true)
		if !ok || got != st {
			t.Errorf("DecodeSlot(%q) = %+v, %v; want %+v", e.Result, got, ok, st)
		}
	}
	for name, e := range map[string]store.LedgerEntry{
		"legacy ref":  {State: store.LedgerComplete, Result: "12345"},
		"pending":     {State: store.LedgerPending, Result: SlotState{Gen: 1}.Encode()},
		"gen 0":       {State: store.LedgerComplete, Result: "0." + strings.Repeat("A", 22) + "."},
		"short hash":  {State: store.LedgerComplete, Result: "1.abc."},
		"bad base64":  {State: store.LedgerComplete, Result: "1." + strings.Repeat("*", 22) + "."},
		"no ref dot":  {State: store.LedgerComplete, Result: "1." + strings.Repeat("A", 22)},
		"empty":       {State: store.LedgerComplete},
		"other state": {State: store.LedgerRejected, Result: "1." + strings.Repeat("A", 22) + "."},
	} {
		if _, ok := DecodeSlot(e, true); ok {
			t.Errorf("%s: DecodeSlot accepted %q", name, e.Result)
		}
	}
	if _, ok := DecodeSlot(store.LedgerEntry{State: store.LedgerComplete, Result: SlotState{Gen: 1}.Encode()}, false); ok {
		t.Error("DecodeSlot of an absent entry")
	}
}

func TestEntryResults(t *testing.T) {
	t.Parallel()
	slot := Slot("s", "src", "42")
	tag := SlotTag(slot)
	if len(tag) != 16 || tag != slot[:16] {
		t.Errorf("SlotTag(%s) = %q", slot, tag)
	}
	if got, rest, ok := EntryTag(ClaimResult(slot)); !ok || got != tag || rest != "" {
		t.Errorf("claim: %q %q %v", got, rest, ok)
	}
	if got, rest, ok := EntryTag(AcceptedResult(slot, "991")); !ok || got != tag || rest != "991" {
		t.Errorf("accepted: %q %q %v", got, rest, ok)
	}
	if ref := AcceptedRef(store.LedgerEntry{State: store.LedgerAccepted, Result: AcceptedResult(slot, "991")}); ref != "991" {
		t.Errorf("AcceptedRef = %q", ref)
	}
	// A mirror's claims and accepted entries name the handle they write to,
	// in forms a binary from before handles reads as plain ones.
	for _, ref := range []string{"991", "job.with.dots"} {
		claim := store.LedgerEntry{State: store.LedgerPending, Result: ClaimResultTo(slot, "Ann.B@example.com", "4.2")}
		acc := store.LedgerEntry{State: store.LedgerAccepted, Result: AcceptedResult(slot, ref), Message: AcceptedTo("Ann.B@example.com", "4.2")}
		for _, e := range []store.LedgerEntry{claim, acc} {
			if h, id, ok := EntryHandle(e); !ok || h != "Ann.B@example.com" || id != "4.2" {
				t.Errorf("%s: handle %q identity %q %v", e.Result, h, id, ok)
			}
			if got, _, ok := EntryTag(e.Result); !ok || got != tag {
				t.Errorf("%s: tag %q %v", e.Result, got, ok)
			}
		}
		if !strings.HasPrefix(claim.Result, "c1."+tag+".") {
			t.Errorf("a mirror's claim %q is not of the c1 form", claim.Result)
		}
		if got := AcceptedRef(acc); got != ref {
			t.Errorf("AcceptedRef(%s) = %q", acc.Result, got)
		}
	}
	for _, e := range []store.LedgerEntry{
		{State: store.LedgerAccepted, Result: AcceptedResult(slot, "991")},
		{State: store.LedgerPending, Result: ClaimResult(slot)},
		{State: store.LedgerRejected, Result: RejectedResult(slot, "4"), Message: AcceptedTo("a@b.c", "4")},
	} {
		if _, _, ok := EntryHandle(e); ok {
			t.Errorf("%+v named a handle", e)
		}
	}
	for _, id := range []string{"42", "ann@example.com", "", "~tilde", "nul\x00byte", "\xff\xfe", "dots.in.it"} {
		for name, res := range map[string]string{"rejected": RejectedResult(slot, id), "in doubt": InDoubtResult(slot, id), "resend": ResendResult(InDoubtResult(slot, id))} {
			// An empty identity is one too (a text key of ''): read
			// again by it when refused, as any other.
			got, ok := EntryIdentity(store.LedgerEntry{Result: res})
			if !ok || got != id {
				t.Errorf("%s %q: identity %q, %v", name, id, got, ok)
			}
			if s, _, ok := EntryTag(res); !ok || s != tag {
				t.Errorf("%s %q: slot %q, %v", name, id, s, ok)
			}
		}
	}
	if !strings.HasPrefix(ResendResult(InDoubtResult(slot, "1")), "r1.") {
		t.Error("a resend is not a rejected entry")
	}
	for _, legacy := range []string{"", "12345", "verified", "c1.short"} {
		if _, _, ok := EntryTag(legacy); ok {
			t.Errorf("EntryTag accepted %q", legacy)
		}
	}
}

func TestMovedRef(t *testing.T) {
	ref := MovedRef("a@example.com", "42")
	h, id, ok := RefMoved(ref)
	if !ok || h != "a@example.com" || id != "42" {
		t.Fatalf("RefMoved(%q) = %q, %q, %v", ref, h, id, ok)
	}
	if _, _, ok := RefHandle(ref); ok {
		t.Error("a moved handle reads as a slot's own handle")
	}
	if _, _, ok := RefMoved(HandleRef("a@example.com", "42")); ok {
		t.Error("a slot's handle reads as a moved one")
	}
	if !RefSettled(SettledRef("42")) || RefSettled(ref) || RefSettled(RemovedRef("42")) {
		t.Error("SettledRef is not told apart")
	}
	if Moved("s", "slot", 2) == Moved("s", "slot", 3) || Moved("s", "slot", 2) == Removal("s", "slot", 2) {
		t.Error("moved keys collide")
	}
}

// TestRefsWithClaimTimes: h2 and m2 keep the delivering write's claim time
// (to the millisecond) and read as h1 and m1 do; a zero time writes h1/m1.
func TestRefsWithClaimTimes(t *testing.T) {
	at := time.Date(2026, 12, 7, 10, 30, 1, 234_567_890, time.UTC)
	ref := HandleRefAt("a@example.com", "42", at)
	if !strings.HasPrefix(ref, "h2:") {
		t.Fatalf("HandleRefAt = %q", ref)
	}
	h, id, got, ok := RefHandleAt(ref)
	if !ok || h != "a@example.com" || id != "42" || !got.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("RefHandleAt(%q) = %q, %q, %v, %v", ref, h, id, got, ok)
	}
	if h, id, ok := RefHandle(ref); !ok || h != "a@example.com" || id != "42" {
		t.Fatalf("RefHandle(%q) = %q, %q, %v", ref, h, id, ok)
	}
	if _, _, ok := RefMoved(ref); ok {
		t.Error("an h2 handle reads as a moved one")
	}
	if HandleRefAt("a@example.com", "42", time.Time{}) != HandleRef("a@example.com", "42") {
		t.Error("a zero claim time does not give h1")
	}
	if _, _, got, ok := RefHandleAt(HandleRef("a@example.com", "42")); !ok || !got.IsZero() {
		t.Errorf("an h1 ref reads with time %v, %v", got, ok)
	}
	m := MovedRefAt("a@example.com", "42", at)
	mh, mid, mat, ok := RefMovedAt(m)
	if !strings.HasPrefix(m, "m2:") || !ok || mh != "a@example.com" || mid != "42" || !mat.Equal(at.Truncate(time.Millisecond)) {
		t.Fatalf("RefMovedAt(%q) = %q, %q, %v, %v", m, mh, mid, mat, ok)
	}
	if _, _, ok := RefHandle(m); ok {
		t.Error("an m2 ref reads as a slot's own handle")
	}
	if MovedRefAt("a@example.com", "42", time.Time{}) != MovedRef("a@example.com", "42") {
		t.Error("a zero claim time does not give m1")
	}
	for _, bad := range []string{"h2:YQ:NDI", "h2:YQ:NDI:!", "m2:YQ:NDI:"} {
		if _, _, _, ok := RefHandleAt(bad); ok && strings.HasPrefix(bad, "h2") {
			t.Errorf("RefHandleAt accepted %q", bad)
		}
		if _, _, _, ok := RefMovedAt(bad); ok {
			t.Errorf("RefMovedAt accepted %q", bad)
		}
	}
}

// TestEntryHandleKey: a write in flight names its handle's key (a mirror's
// entries by their handle in clear, another sync's by the key alone), and
// the key holds no handle in clear.
func TestEntryHandleKey(t *testing.T) {
	slot := strings.Repeat("ab", 32)
	k := HandleKey("s1", "A@Example.com")
	if k != HandleKey("s1", "a@example.com") || k == HandleKey("s2", "a@example.com") || strings.Contains(k, "example") {
		t.Fatalf("HandleKey = %q: not case-folded, not salted by the sync, or in clear", k)
	}
	for _, e := range []store.LedgerEntry{
		{State: store.LedgerPending, Result: ClaimResultTo(slot, "a@example.com", "7")},
		{State: store.LedgerPending, Result: ClaimResultKeyed(slot, k)},
		{State: store.LedgerAccepted, Result: AcceptedResult(slot, "42"), Message: AcceptedTo("a@example.com", "7")},
		{State: store.LedgerAccepted, Result: AcceptedResult(slot, "42"), Message: AcceptedKeyed(k)},
	} {
		if got, ok := EntryHandleKey("s1", e); !ok || got != k {
			t.Errorf("EntryHandleKey(%+v) = %q, %v; want %q", e, got, ok, k)
		}
	}
	keyed := store.LedgerEntry{State: store.LedgerPending, Result: ClaimResultKeyed(slot, k)}
	if _, _, ok := EntryHandle(keyed); ok {
		t.Error("a keyed claim reads as a mirror's handle")
	}
	if tag, _, ok := EntryTag(keyed.Result); !ok || tag != SlotTag(slot) {
		t.Errorf("a keyed claim's tag = %q, %v", tag, ok)
	}
	for _, e := range []store.LedgerEntry{
		{State: store.LedgerPending, Result: ClaimResult(slot)},
		{State: store.LedgerAccepted, Result: AcceptedResult(slot, "42"), Message: RetryAcceptedMessage(slot, "7")},
	} {
		if got, ok := EntryHandleKey("s1", e); ok {
			t.Errorf("EntryHandleKey(%+v) = %q, want none", e, got)
		}
	}
}
