package parquet_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"

	"github.com/oncesync/oncesync/internal/source"
)

// changeCtx is a context that runs change the at-th time the source asks
// whether it is done: while a page is being read, between two of its
// rows.
type changeCtx struct {
	context.Context
	n, at  int
	change func()
}

func (c *changeCtx) Err() error {
	c.n++
	if c.n == c.at {
		c.change()
	}
	return c.Context.Err()
}

// TestWrittenOverMidPage: a file written over in place (truncated and
// written again, as pandas' to_parquet, pyarrow's write_table and DuckDB's
// COPY do) while a page is read from it fails that page with ErrChanged,
// as docs/recovery.md#source_changed_during_run says: the page is not
// sent. Before, the page was returned (the last one ending the pass as if
// the file had been read: its rows read before the write held the old
// values), or, when the pages read after the write no longer matched the
// footer read before it, the run failed with ErrInvalid, the file said to
// be damaged. The same holds for a file of a directory that the page has
// gone past. A page read while no file changes is read whole.
func TestWrittenOverMidPage(t *testing.T) {
	t.Parallel()
	const n = 3000
	rowsOf := func(tag string, changed int, reverse bool) []contact {
		out := make([]contact, n)
		for i := range out {
			id := i
			if reverse {
				id = n - 1 - i
			}
			name := fmt.Sprintf("old-%05d", id)
			if id < changed {
				name = fmt.Sprintf("%s-%05d", tag, id)
			}
			out[i] = contact{ID: fmt.Sprintf("%05d", id), Email: fmt.Sprintf("u%05d@example.test", id), Name: name, Note: "n"}
		}
		return out
	}
	// Small pages, so a page of the source reads the file's as it goes.
	write := func(t *testing.T, path string, rows []contact) {
		t.Helper()
		if err := pq.WriteFile(path, rows, pq.PageBufferSize(2048)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name string
		// files are the source's files (the first is written over) or, for
		// one, the file itself.
		files []string
		// now is what the first file is written over with (nil: nothing).
		now []contact
	}{
		{"rows read before the write changed", []string{"a.parquet"}, rowsOf("new", 10, false)},
		{"every row changed", []string{"a.parquet"}, rowsOf("new", n, true)},
		{"a file of the directory the page went past", []string{"a.parquet", "b.parquet"}, rowsOf("new", 10, false)},
		{"not written over", []string{"a.parquet", "b.parquet"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := dir
			if len(tc.files) == 1 {
				path = filepath.Join(dir, tc.files[0])
			}
			for _, name := range tc.files {
				write(t, filepath.Join(dir, name), rowsOf("", 0, false))
			}
			first := filepath.Join(dir, tc.files[0])
			// Written an hour ago: the write below is seen by its time.
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(first, old, old); err != nil {
				t.Fatal(err)
			}
			var now []byte
			if tc.now != nil {
				tmp := filepath.Join(t.TempDir(), "now.parquet")
				write(t, tmp, tc.now)
				var err error
				if now, err = os.ReadFile(tmp); err != nil {
					t.Fatal(err)
				}
			}
			ctx := &changeCtx{Context: context.Background(), at: 200, change: func() {
				if now == nil {
					return
				}
				if err := os.WriteFile(first, now, 0o600); err != nil {
					t.Error(err)
				}
			}}
			src := open(t, path)
			size := n * len(tc.files)
			page, err := src.ReadPage(ctx, "", size)
			if ctx.n < ctx.at {
				t.Fatalf("the file was not written over while the page was read (%d checks)", ctx.n)
			}
			if tc.now == nil {
				if err != nil || !page.End || len(page.Records) != size {
					t.Fatalf("page: End %v, %d records, %v; want the end, %d records", page.End, len(page.Records), err, size)
				}
				return
			}
			if !errors.Is(err, source.ErrChanged) {
				var names []string
				for _, r := range page.Records[:min(3, len(page.Records))] {
					names = append(names, fmt.Sprint(r.Fields["name"]))
				}
				t.Fatalf("page: End %v, %d records (names %v), err %v; want ErrChanged", page.End, len(page.Records), names, err)
			}
			// The next pass reads the file as it is now.
			got := readAll(t, open(t, path), "", 1000)
			want := slices.Clone(tc.now)
			if len(tc.files) > 1 {
				want = append(want, rowsOf("", 0, false)...)
			}
			if len(got) != len(want) {
				t.Fatalf("next pass: %d records, want %d", len(got), len(want))
			}
			for i, w := range want {
				if got[i].Fields["id"] != w.ID || got[i].Fields["name"] != w.Name {
					t.Fatalf("next pass, record %d: %v, want %+v", i, got[i].Fields, w)
				}
			}
		})
	}
}
