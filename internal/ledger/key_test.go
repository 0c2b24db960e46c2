package ledger

import (
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
