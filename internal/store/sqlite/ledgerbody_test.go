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
		if kind == kindClaim { // a claim stores only the key and attempts
			want = logItem{key: want.key, state: store.LedgerPending, attempts: want.attempts, claimedAt: at}
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
		{key: memKeyOf("k"), state: store.LedgerRejected, attempts: 127, claimedAt: 100, message: long},
		{key: memKeyOf(long), state: store.LedgerInDoubt, attempts: 128, claimedAt: 1 << 62},
		{key: memKeyOf("k2"), state: store.LedgerComplete, attempts: math.MaxInt, claimedAt: math.MinInt64 + 1000, result: long},
		{key: memKeyOf("k3"), state: store.LedgerComplete, attempts: 0, claimedAt: 1000},
	}
	for _, kind := range []int{kindClaim, kindFinish} {
		for _, at := range []int64{1000, 0, -5, math.MaxInt64} {
			checkBodySize(t, kind, at, items)
		}
		checkBodySize(t, kind, 7, nil)
	}
}

func FuzzEncodeBodySize(f *testing.F) {
	f.Add(int64(1000), int64(90), 3, "k", "r", "")
	f.Add(int64(-1), int64(math.MaxInt64), math.MaxInt, strings.Repeat("x", 200), "", strings.Repeat("y", 20000))
	f.Fuzz(func(t *testing.T, at, claimedAt int64, attempts int, key, result, message string) {
		if attempts < 0 { // attempts are counts; decodeBody reads them unsigned
			attempts = -(attempts + 1)
		}
		items := []logItem{
			{key: memKeyOf("a" + key), state: store.LedgerRejected, attempts: attempts, claimedAt: claimedAt, result: result, message: message},
			{key: memKeyOf(storetest.HashedKeys(2, 1)[0]), state: store.LedgerComplete, attempts: 1, claimedAt: at},
		}
		checkBodySize(t, kindFinish, at, items)
		checkBodySize(t, kindClaim, at, items)
	})
}
