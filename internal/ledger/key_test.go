package ledger

import (
	"encoding/hex"
	"strings"
	"testing"
)

func TestKeys(t *testing.T) {
	t.Parallel()
	rec := map[string]any{"email": "ada@example.com", "attributes": map[string]any{"FIRSTNAME": "Ada"}}
	rh, err := RecordHash(rec)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("stable", func(t *testing.T) {
		t.Parallel()
		rh2, _ := RecordHash(map[string]any{"attributes": map[string]any{"FIRSTNAME": "Ada"}, "email": "ada@example.com"})
		if rh != rh2 {
			t.Fatal("record hash depends on map order")
		}
		if Positional("s", "src", "c", 3, rh) != Positional("s", "src", "c", 3, rh2) {
			t.Fatal("positional key not stable")
		}
	})

	t.Run("every field matters", func(t *testing.T) {
		t.Parallel()
		other, _ := RecordHash(map[string]any{"email": "ada@example.com", "attributes": map[string]any{"FIRSTNAME": "Adb"}})
		base := Positional("s", "src", "c", 3, rh)
		for name, k := range map[string]string{
			"sync":     Positional("s2", "src", "c", 3, rh),
			"source":   Positional("s", "src2", "c", 3, rh),
			"cursor":   Positional("s", "src", "c2", 3, rh),
			"position": Positional("s", "src", "c", 4, rh),
			"record":   Positional("s", "src", "c", 3, other),
		} {
			if k == base {
				t.Errorf("changing %s did not change the key", name)
			}
		}
		if Identity("s", "src", "42", rh) == Identity("s", "src", "42", other) {
			t.Error("identity key ignores the record")
		}
		if Identity("s", "src", "42", rh) == Identity("s", "src", "43", rh) {
			t.Error("identity key ignores the identity")
		}
	})

	t.Run("length prefixed", func(t *testing.T) {
		t.Parallel()
		// Without length prefixes ("ab","c") and ("a","bc") would collide.
		if Identity("ab", "c", "x", rh) == Identity("a", "bc", "x", rh) {
			t.Fatal("field boundaries are ambiguous")
		}
		if Positional("s", "src", "", 0, rh) == Identity("s", "src", "", rh) {
			t.Fatal("positional and identity keys share a space")
		}
	})

	t.Run("no personal data", func(t *testing.T) {
		t.Parallel()
		k := Identity("s", "src", "ada@example.com", rh)
		if strings.Contains(k, "ada") || len(k) != 64 {
			t.Fatalf("key %q is not an opaque 64-char hash", k)
		}
	})
}

// TestKeysGolden pins the keys' bytes: a key that changed between releases
// would make every ledger entry unrecognisable and every record be sent
// again. These values were computed by the first implementation (hash.Hash
// with one Write per field); any rewrite must reproduce them.
func TestKeysGolden(t *testing.T) {
	t.Parallel()
	rh, err := RecordHash(map[string]any{"email": "ada@example.com", "attributes": map[string]any{"FIRSTNAME": "Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct{ got, want string }{
		"record": {hex.EncodeToString(rh[:]), "a03d53b9cf9c5610a958aa66171f5dc61358bcd9fad13899e45e7411dc5dfa64"},
		"positional": {Positional("sync-1", "csv:/data/c.csv", "offset:500", 7, rh),
			"f35bb3ea012afb1bf719c21a93fe2f276cf5e8f484e3fcff5dfd15b94cfecfe4"},
		"identity": {Identity("sync-1", "postgres:db/table", "42", rh),
			"7ef90ed592b5f35d1df4978d9f6e84d6a9f55b51fb8e70a156be0cb00f0cd74e"},
		"positional, empty": {Positional("", "", "", 0, [32]byte{}),
			"92305272200b05060efa0c377526de4bb2fc5fc202c7986222668b7dbc9f8d1b"},
		"identity, empty": {Identity("", "", "", [32]byte{}),
			"f7ab49dad3eedaaf1d282d6aae0cc2d81214095133298bf88f5ad535f62b453d"},
	} {
		if c.got != c.want {
			t.Errorf("%s key = %s, want %s", name, c.got, c.want)
		}
	}
	long := strings.Repeat("x", 1000) // longer than any stack buffer
	if Identity("s", "src", long, rh) == Identity("s", "src", long[:999], rh) {
		t.Error("a long identity's last byte is ignored")
	}
}

func BenchmarkIdentity(b *testing.B) {
	rh, _ := RecordHash(map[string]any{"email": "ada@example.com"})
	b.ReportAllocs()
	for b.Loop() {
		_ = Identity("sync-1", "csv:/data/contacts.csv", "12345", rh)
	}
}

// TestSlotAndGenerationKeys: slots and later generations have keys of
// their own, and the first generation is the pre-slot key (ledgers written
// before slots still answer for it). Golden values pin the bytes.
func TestSlotAndGenerationKeys(t *testing.T) {
	t.Parallel()
	rh, err := RecordHash(map[string]any{"email": "ada@example.com", "attributes": map[string]any{"FIRSTNAME": "Ada"}})
	if err != nil {
		t.Fatal(err)
	}
	if IdentityGen("s", "src", "42", rh, 1) != Identity("s", "src", "42", rh) ||
		IdentityGen("s", "src", "42", rh, 0) != Identity("s", "src", "42", rh) {
		t.Error("generation 1 is not the identity key")
	}
	if PositionalGen("s", "src", "c", 3, rh, 1) != Positional("s", "src", "c", 3, rh) {
		t.Error("generation 1 is not the positional key")
	}
	distinct := map[string]string{}
	for name, k := range map[string]string{
		"identity":        Identity("s", "src", "42", rh),
		"identity gen 2":  IdentityGen("s", "src", "42", rh, 2),
		"identity gen 3":  IdentityGen("s", "src", "42", rh, 3),
		"positional":      Positional("s", "src", "c", 3, rh),
		"positional gen2": PositionalGen("s", "src", "c", 3, rh, 2),
		"slot":            Slot("s", "src", "42"),
		"slot other id":   Slot("s", "src", "43"),
		"position slot":   PositionSlot("s", "src", "c", 3),
		"position slot 4": PositionSlot("s", "src", "c", 4),
	} {
		if other, dup := distinct[k]; dup {
			t.Errorf("%s and %s share a key", name, other)
		}
		distinct[k] = name
	}
	for name, c := range map[string]struct{ got, want string }{
		"slot":           {Slot("sync-1", "postgres:db/table", "42"), "cdab09d51da5bfb2892d0fc307b479ca9df740b1632b7f8583deb27f87809e5a"},
		"position slot":  {PositionSlot("sync-1", "csv:/data/c.csv", "offset:500", 7), "a0818f43bc68dd9c50e4e2b9137fa43c93d06d2a2e9f8f3d038c30e0d8904216"},
		"identity gen 2": {IdentityGen("sync-1", "postgres:db/table", "42", rh, 2), "e40a89da8d3d6ef6c0849b3182c257c36a8a7cac2b22d2ded809bac2054ededb"},
	} {
		if c.got != c.want {
			t.Errorf("%s key = %s, want %s", name, c.got, c.want)
		}
	}
}

// TestSkippedHash: a skipped record's hash is neither its plain hash nor
// its hash under the other skip reason or a payload salt of the same text,
// so a run under another write mode sends it.
func TestSkippedHash(t *testing.T) {
	h, err := RecordHash(map[string]any{"email": "a@example.com"})
	if err != nil {
		t.Fatal(err)
	}
	exists, absent := SkippedHash(h, "exists"), SkippedHash(h, "absent")
	if exists == h || absent == h || exists == absent || exists == SaltedHash(h, "exists") {
		t.Fatal("a skipped hash must differ from the plain, the other reason's and the salted hash")
	}
	if SkippedHash(h, "exists") != exists {
		t.Fatal("SkippedHash must be deterministic")
	}
}
