package app

import (
	"testing"

	"github.com/oncesync/oncesync/internal/config"
)

// TestLayoutOf: what names a sync's slots is its layout
// (docs/guide.md#changing-a-sync): the identity and the partitions, and,
// without an identity, the page size (a slot is then a page's cursor and
// a place on it). With an identity the page size is not.
func TestLayoutOf(t *testing.T) {
	sync := func(identity string, partitions, pageSize int) *config.Sync {
		s := &config.Sync{Partitions: partitions}
		s.Source.Identity, s.Source.PageSize = identity, pageSize
		return s
	}
	for _, tc := range []struct {
		name string
		a, b *config.Sync
		same bool
	}{
		{"identity: page size", sync("id", 1, 100), sync("id", 1, 500), true},
		{"partitions 0 is 1", sync("id", 0, 100), sync("id", 1, 100), true},
		{"partitions", sync("id", 1, 100), sync("id", 4, 100), false},
		{"identity", sync("id", 1, 100), sync("email", 1, 100), false},
		{"identity added", sync("", 1, 100), sync("id", 1, 100), false},
		{"no identity: page size", sync("", 1, 100), sync("", 1, 500), false},
	} {
		if got := layoutOf(tc.a) == layoutOf(tc.b); got != tc.same {
			t.Errorf("%s: %q and %q the same: %v, want %v", tc.name, layoutOf(tc.a), layoutOf(tc.b), got, tc.same)
		}
	}
}
