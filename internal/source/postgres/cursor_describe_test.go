package postgres

import (
	"testing"

	"github.com/oncesync/oncesync/internal/config"
)

// TestDescribeCursor: a keyset cursor in words, by its columns.
func TestDescribeCursor(t *testing.T) {
	t.Parallel()
	c := &Config{CursorColumn: "updated_at"}
	cur := position{{Type: "timestamptz", Text: "2024-05-01 10:00:00+00"}, {Type: "int8", Text: "42"}}.String()
	for _, tc := range []struct {
		src    *config.Source
		cursor string
		want   string
	}{
		{&config.Source{Identity: "id"}, cur, "after updated_at = 2024-05-01 10:00:00+00, id = 42"},
		{&config.Source{Identity: "id"}, "", "start of the source"},
		{&config.Source{Identity: "updated_at"}, cur, "a cursor this oncesync cannot read"},
	} {
		if got := c.DescribeCursor(tc.src, tc.cursor); got != tc.want {
			t.Errorf("DescribeCursor(%q) = %q, want %q", tc.cursor, got, tc.want)
		}
	}
	byID := &Config{}
	if got := byID.DescribeCursor(&config.Source{Identity: "id"}, position{{Type: "int8", Text: "2000"}}.String()); got != "after id = 2000" {
		t.Errorf("identity as the cursor column: %q", got)
	}
}
