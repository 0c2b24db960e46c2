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
	f.Add(position{file: "dt=2026-12-01/region=eu/part-0.parquet", row: 3, recno: 9}.String())
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

// TestCursorFileInDirectory: a cursor names a file in a partition
// directory, never one outside the source's directory.
func TestCursorFileInDirectory(t *testing.T) {
	t.Parallel()
	ok := position{file: "dt=2026-12-01/part-0.parquet", row: 1, recno: 1}.String()
	if p, err := parseCursor(ok); err != nil || p.file != "dt=2026-12-01/part-0.parquet" {
		t.Fatalf("parseCursor(%q) = %+v, %v", ok, p, err)
	}
	for _, name := range []string{"../x.parquet", "a/../../x.parquet", "/etc/x.parquet", "a//x.parquet", "a/./x.parquet", "a/"} {
		s := position{file: name, row: 1, recno: 1}.String()
		if _, err := parseCursor(s); !errors.Is(err, source.ErrBadCursor) {
			t.Errorf("parseCursor of file %q: %v, want ErrBadCursor", name, err)
		}
	}
}
