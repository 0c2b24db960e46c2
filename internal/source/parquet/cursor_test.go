package parquet

import (
	"errors"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
)

// FuzzCursor: a string parseCursor accepts encodes back to itself, and one
// it refuses is source.ErrBadCursor.
func FuzzCursor(f *testing.F) {
	f.Add(position{file: "part-00001.parquet", row: 12, recno: 40, sum: [sumLen]byte{1, 2}}.String())
	f.Add(position{file: "a:b c%.parquet", row: 0, recno: 0}.String())
	f.Add("q1:x:1:0:00000000000000000000000000000000")
	f.Add("f1:0:0:e3b0c44298fc1c149afbf4c8996fb924")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := parseCursor(s)
		if err != nil {
			if !errors.Is(err, source.ErrBadCursor) {
				t.Fatalf("parseCursor(%q): %v, not ErrBadCursor", s, err)
			}
			return
		}
		if p.String() != s || p.row > p.recno || p.file == "" {
			t.Fatalf("parseCursor(%q) = %+v, which encodes as %q", s, p, p.String())
		}
	})
}
