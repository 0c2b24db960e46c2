package sqlite

import (
	"encoding/hex"
	"strings"
	"testing"

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
