package sqlite

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

// refMemKeyOf is memKeyOf as first written (a validation loop, then
// hex.Decode): the reference the one-pass decoder must match.
func refMemKeyOf(k string) string {
	hexKey := len(k) == 64
	for i := 0; hexKey && i < len(k); i++ {
		c := k[i]
		hexKey = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')
	}
	if !hexKey {
		return "t" + k
	}
	b, err := hex.DecodeString(k)
	if err != nil {
		panic(err)
	}
	return "h" + string(b)
}

func memKeyCases() []string {
	h := storetest.HashedKeys(7, 1)[0]
	cases := []string{"", "k", "text-key", h, strings.ToUpper(h), h[:63], h + "0", strings.Repeat("0", 64),
		strings.Repeat("f", 64), strings.Repeat("g", 64), "~" + h[1:], h[:32] + "é" + h[34:]}
	// Every byte value in every position class (first, odd, even, last).
	for c := range 256 {
		for _, pos := range []int{0, 1, 30, 63} {
			b := []byte(h)
			b[pos] = byte(c)
			cases = append(cases, string(b))
		}
	}
	return cases
}

func TestMemKeyOfMatchesReference(t *testing.T) {
	for _, k := range memKeyCases() {
		got, want := memKeyOf(k), refMemKeyOf(k)
		if got != want {
			t.Fatalf("memKeyOf(%q) = %x, want %x", k, got, want)
		}
		if isHexKey(k) != (want[0] == 'h') {
			t.Fatalf("isHexKey(%q) = %v", k, isHexKey(k))
		}
		if want[0] == 'h' && argOfMem(got) != k {
			t.Fatalf("argOfMem(memKeyOf(%q)) = %q", k, argOfMem(got))
		}
	}
}

func FuzzMemKeyOf(f *testing.F) {
	for _, k := range memKeyCases()[:12] {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, k string) {
		if got, want := memKeyOf(k), refMemKeyOf(k); got != want {
			t.Fatalf("memKeyOf(%q) = %x, want %x", k, got, want)
		}
	})
}

func BenchmarkMemKeys500(b *testing.B) {
	keys := storetest.HashedKeys(1, 500)
	for b.Loop() {
		_ = memKeys(keys)
	}
}

// TestKeyFilterBuiltFromTables: a filter built from the tables (one query
// for BLOB keys, one for TEXT keys) holds every key of both tables, of both
// kinds, and lookups through it find every entry.
func TestKeyFilterBuiltFromTables(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	hexKeys := storetest.HashedKeys(3, 40)
	textKeys := []string{"k", "text-key", strings.ToUpper(hexKeys[0]), hexKeys[1][:63], "é", "~x", "0"}
	final := append(append([]string{}, hexKeys[:20]...), textKeys[:4]...)
	pending := append(append([]string{}, hexKeys[20:]...), textKeys[4:]...)
	lb.claim(t, lb.a, append(append([]string{}, final...), pending...))
	lb.finish(t, lb.a, final, store.LedgerComplete, "r")
	if err := lb.a.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, lb.a, "ledger_claims"); n != len(pending) {
		t.Fatalf("ledger_claims holds %d rows, want %d", n, len(pending))
	}
	// b never read the log: its filter comes from the tables alone. (Its
	// first lookup drops the filter it built: memory then sees a merge of
	// rows it never applied. The second builds one it keeps.)
	all := append(append([]string{}, final...), pending...)
	lb.get(t, lb.b, all)
	got := lb.get(t, lb.b, all)
	f := lb.b.mem.filters[1]
	if f == nil {
		t.Fatal("b has no key filter")
	}
	if n := filterKeys(f); n != len(all) {
		t.Fatalf("b's filter holds %d keys, want %d", n, len(all))
	}
	for _, k := range all {
		if !f.mayHave(memKeyOf(k)) {
			t.Errorf("filter lacks %q", k)
		}
		if _, ok := got[k]; !ok {
			t.Errorf("LedgerGet lacks %q", k)
		}
	}
}

func TestProbesOfStringAndBytesAgree(t *testing.T) {
	for _, k := range memKeyCases() {
		mk := memKeyOf(k)
		a1, a2 := probes(mk)
		b1, b2 := probes([]byte(mk))
		if a1 != b1 || a2 != b2 {
			t.Fatalf("probes(%q): string %x %x, bytes %x %x", mk, a1, a2, b1, b2)
		}
	}
}
