package sqlite

import (
	"math"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

// checkBodySize fails unless encodeBody sized its buffer exactly (one
// allocation, nothing to spare) and the body decodes back to items.
func checkBodySize(t *testing.T, kind int, at int64, items []logItem) {
	t.Helper()
	b := encodeBody(kind, at, items)
	if len(b) != cap(b) {
		t.Fatalf("encodeBody: %d bytes in a buffer of %d", len(b), cap(b))
	}
	got, err := decodeBody(kind, at, len(items), b)
	if err != nil {
		t.Fatalf("decodeBody: %v", err)
	}
	for i := range items {
		want := items[i]
		if kind == kindClaim { // a claim stores the key, attempts, may and result
			want = logItem{key: want.key, state: store.LedgerPending, attempts: want.attempts, claimedAt: at, result: want.result, may: want.may}
		}
		if got[i] != want {
			t.Fatalf("item %d: %+v, want %+v", i, got[i], want)
		}
	}
}

func TestEncodeBodyAllocatesExactly(t *testing.T) {
	long := strings.Repeat("m", 300) // a 2-byte length
	items := []logItem{
		{key: memKeyOf(storetest.HashedKeys(1, 1)[0]), state: store.LedgerComplete, attempts: 1, claimedAt: 90, result: "r"},
		{key: memKeyOf("k"), state: store.LedgerRejected, attempts: 127, claimedAt: 100, message: long, may: inAny},
		{key: memKeyOf(long), state: store.LedgerInDoubt, attempts: 128, claimedAt: 1 << 62, may: inDone},
		{key: memKeyOf("k2"), state: store.LedgerComplete, attempts: math.MaxInt, claimedAt: math.MinInt64 + 1000, result: long},
		{key: memKeyOf("k3"), state: store.LedgerComplete, attempts: 0, claimedAt: 1000},
		{key: memKeyOf("k4"), state: store.LedgerAccepted, attempts: 2, claimedAt: 1000, result: "process-1", may: inClaims},
		{key: memKeyOf("k5"), state: store.LedgerReleased, claimedAt: 1000, may: inClaims | inLedger},
	}
	for _, kind := range []int{kindClaim, kindFinish} {
		for _, at := range []int64{1000, 0, -5, math.MaxInt64} {
			checkBodySize(t, kind, at, items)
		}
		checkBodySize(t, kind, 7, nil)
	}
}

func FuzzEncodeBodySize(f *testing.F) {
	f.Add(int64(1000), int64(90), 3, "k", "r", "", byte(2), byte(0))
	f.Add(int64(-1), int64(math.MaxInt64), math.MaxInt, strings.Repeat("x", 200), "", strings.Repeat("y", 20000), byte(5), byte(7))
	f.Fuzz(func(t *testing.T, at, claimedAt int64, attempts int, key, result, message string, code, may byte) {
		if attempts < 0 { // attempts are counts; decodeBody reads them unsigned
			attempts = -(attempts + 1)
		}
		state := stateCodes[1+int(code)%(len(stateCodes)-1)]
		items := []logItem{
			{key: memKeyOf("a" + key), state: state, attempts: attempts, claimedAt: claimedAt, result: result, message: message, may: may & inAny},
			{key: memKeyOf(storetest.HashedKeys(2, 1)[0]), state: store.LedgerComplete, attempts: 1, claimedAt: at},
		}
		checkBodySize(t, kindFinish, at, items)
		checkBodySize(t, kindClaim, at, items)
	})
}

// TestLogBodyGolden pins the bytes of every body kind: those a store writes
// now (a leading 0x00, per-item may bits, claim results, the five finish
// states), and those stores before migration 0009 wrote, which upgraded
// stores still hold in their logs and must read (may inAny).
func TestLogBodyGolden(t *testing.T) {
	t.Parallel()
	hexKey := storetest.HashedKeys(0, 1)[0]
	hk := memKeyOf(hexKey) // "h" + 32 bytes
	hkBytes := "\x21" + hk // uvarint 33, then the key
	const at = 1000
	for _, tc := range []struct {
		name  string
		kind  int
		body  string
		items []logItem
	}{
		{"claim", kindClaim, "\x00" +
			"\x03tk1\x01\x00\x00" + // key "k1", attempts 1, may 0, result ""
			"\x03tk2\x02\x03\x05slot7" + // attempts 2, may ledger|claims, result "slot7"
			hkBytes + "\x01\x04\x00", // a hex key, may done
			[]logItem{
				{key: "tk1", state: store.LedgerPending, attempts: 1, claimedAt: at},
				{key: "tk2", state: store.LedgerPending, attempts: 2, claimedAt: at, result: "slot7", may: inLedger | inClaims},
				{key: hk, state: store.LedgerPending, attempts: 1, claimedAt: at, may: inDone},
			}},
		{"finish", kindFinish, "\x00" +
			"\x03tk1\x01\x01\x14\x02r1\x00" + // complete, may 0, claimed 10 ns before, result "r1"
			"\x03tk2\x02\x22\x00\x00\x03bad" + // rejected, may done (4<<3 | 2), claimed at, message "bad"
			"\x03tk3\x01\x0b\x01\x00\x00" + // in_doubt, may ledger (1<<3 | 3), claimed 1 ns after (zig-zag 1)
			"\x03tk4\x01\x14\x02\x02p9\x00" + // accepted, may claims (2<<3 | 4), claimed 1 ns before, result "p9"
			hkBytes + "\x00\x3d\x00\x00\x00", // released, may every table (7<<3 | 5)
			[]logItem{
				{key: "tk1", state: store.LedgerComplete, attempts: 1, claimedAt: at - 10, result: "r1"},
				{key: "tk2", state: store.LedgerRejected, attempts: 2, claimedAt: at, message: "bad", may: inDone},
				{key: "tk3", state: store.LedgerInDoubt, attempts: 1, claimedAt: at + 1, may: inLedger},
				{key: "tk4", state: store.LedgerAccepted, attempts: 1, claimedAt: at - 1, result: "p9", may: inClaims},
				{key: hk, state: store.LedgerReleased, claimedAt: at, may: inAny},
			}},
	} {
		if got := string(encodeBody(tc.kind, at, tc.items)); got != tc.body {
			t.Errorf("%s: encodeBody = %q, want %q", tc.name, got, tc.body)
		}
		checkDecoded(t, tc.name, tc.kind, at, tc.body, tc.items)
	}

	// Bodies as stores before migration 0009 wrote them.
	checkDecoded(t, "claim before 0009", kindClaim, at,
		"\x03tk1\x01"+hkBytes+"\x03", // key "k1" attempts 1, a hex key attempts 3
		[]logItem{
			{key: "tk1", state: store.LedgerPending, attempts: 1, claimedAt: at, may: inAny},
			{key: hk, state: store.LedgerPending, attempts: 3, claimedAt: at, may: inAny},
		})
	checkDecoded(t, "finish before 0009", kindFinish, at,
		"\x03tk1\x01c\x14\x02r1\x00"+ // complete, claimed 10 ns before, result "r1"
			"\x03tk2\x02r\x00\x00\x03bad"+ // rejected, message "bad"
			hkBytes+"\x01i\x01\x00\x00", // in_doubt, claimed 1 ns after
		[]logItem{
			{key: "tk1", state: store.LedgerComplete, attempts: 1, claimedAt: at - 10, result: "r1", may: inAny},
			{key: "tk2", state: store.LedgerRejected, attempts: 2, claimedAt: at, message: "bad", may: inAny},
			{key: hk, state: store.LedgerInDoubt, attempts: 1, claimedAt: at + 1, may: inAny},
		})

	// What no store ever wrote is refused.
	for name, body := range map[string]string{
		"unknown v1 state":      "\x00\x03tk1\x01\x06\x00\x00\x00",
		"state code 0":          "\x00\x03tk1\x01\x00\x00\x00\x00",
		"v1 may beyond 3 bits":  "\x00\x03tk1\x01\x41\x00\x00\x00",
		"letter in a v1 body":   "\x00\x03tk1\x01c\x00\x00\x00",
		"code in a v0 body":     "\x03tk1\x01\x01\x00\x00\x00",
		"accepted in a v0 body": "\x03tk1\x01a\x00\x00\x00",
	} {
		if items, err := decodeBody(kindFinish, at, 1, []byte(body)); err == nil {
			t.Errorf("%s: decoded %+v", name, items)
		}
	}
	if items, err := decodeBody(kindClaim, at, 1, []byte("\x00\x03tk1\x01\x08\x00")); err == nil {
		t.Errorf("claim may beyond 3 bits: decoded %+v", items)
	}
}

func checkDecoded(t *testing.T, name string, kind int, at int64, body string, want []logItem) {
	t.Helper()
	got, err := decodeBody(kind, at, len(want), []byte(body))
	if err != nil {
		t.Fatalf("%s: decodeBody: %v", name, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: item %d = %+v, want %+v", name, i, got[i], want[i])
		}
	}
}

// TestLedgerDoneGolden pins the bytes of a ledger_done value blob.
func TestLedgerDoneGolden(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		e    memEntry
		blob string
	}{
		{memEntry{state: store.LedgerComplete, fence: 3, runID: 70, attempts: 2, claimedAt: 1000, completedAt: 1500, seenAt: 9, result: "c-1"},
			"\x01" + // flags: completed_at set
				"\x06" + "\x8c\x01" + "\x02" + "\xd0\x0f" + // fence 3, run 70, attempts 2, claimed 1000 (zig-zag varints)
				"\xe8\x07" + "\x03c-1" + "\x00"}, // completed 500 after, result "c-1", message ""
		{memEntry{state: store.LedgerComplete, fence: -1, attempts: 1, claimedAt: -2, seenAt: 9, message: "m"},
			"\x00" + "\x01" + "\x00" + "\x01" + "\x03" + "\x00" + "\x01m"}, // no completed_at
	} {
		if got := string(appendDone(nil, tc.e)); got != tc.blob {
			t.Errorf("appendDone(%+v) = %q, want %q", tc.e, got, tc.blob)
		}
		got, err := decodeDone([]byte(tc.blob), tc.e.seenAt)
		if err != nil || got != tc.e {
			t.Errorf("decodeDone(%q) = %+v, %v; want %+v", tc.blob, got, err, tc.e)
		}
	}
}
