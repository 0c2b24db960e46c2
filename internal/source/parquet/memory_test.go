package parquet_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/oncesync/oncesync/internal/source/parquet"
)

// writeLarge writes n rows of about 60 bytes in row groups of 50,000 rows,
// as a warehouse export would, with a GenericWriter so the test's own
// memory stays small.
func writeLarge(tb testing.TB, path string, n int) {
	tb.Helper()
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := pq.NewGenericWriter[contact](f, pq.MaxRowsPerRowGroup(50_000))
	rows := make([]contact, 0, 1000)
	for i := range n {
		rows = append(rows, contact{ID: fmt.Sprint(i), Email: fmt.Sprintf("user%d@example.test", i), Name: fmt.Sprintf("Name %d, Jr.", i), Note: "pro"})
		if len(rows) == cap(rows) || i == n-1 {
			if _, err := w.Write(rows); err != nil {
				tb.Fatal(err)
			}
			rows = rows[:0]
		}
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
}

// pagedMemory pages through path and returns the records read and the
// largest live heap seen (after a GC, sampled every 50 pages).
func pagedMemory(t *testing.T, path string, size int) (records int, maxLive uint64) {
	t.Helper()
	src, err := parquet.New(parquet.Params{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var ms runtime.MemStats
	// Twice: the writer's pooled buffers survive one collection.
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	cursor := ""
	for pages := 1; ; pages++ {
		page, err := src.ReadPage(context.Background(), cursor, size)
		if err != nil {
			t.Fatal(err)
		}
		records += len(page.Records)
		if pages%50 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			maxLive = max(maxLive, ms.HeapAlloc-min(base, ms.HeapAlloc))
			if testing.Verbose() && pages%1000 == 0 {
				t.Logf("page %d: heap %d KB (base %d KB)", pages, ms.HeapAlloc>>10, base>>10)
			}
		}
		if page.End {
			return records, maxLive
		}
		cursor = page.Next
	}
}

// TestMemoryBoundedByPage pages through a directory of large files: the
// live heap stays within a bound far below the data's size (a whole file
// loaded would exceed it many times). With -short or -race the files hold
// 200,000 rows instead of 1,000,000.
func TestMemoryBoundedByPage(t *testing.T) {
	// Not parallel: it measures the process's heap.
	n := 1_000_000
	if testing.Short() || raceEnabled {
		n = 200_000
	}
	dir := t.TempDir()
	writeLarge(t, filepath.Join(dir, "part-0.parquet"), n/2)
	writeLarge(t, filepath.Join(dir, "part-1.parquet"), n/2)
	var size int64
	for _, name := range []string{"part-0.parquet", "part-1.parquet"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		size += fi.Size()
	}
	records, live := pagedMemory(t, dir, 500)
	t.Logf("%d rows, %d KB of Parquet: largest live heap %d KB", records, size>>10, live>>10)
	if records != n {
		t.Fatalf("read %d records, want %d", records, n)
	}
	// A page of 500 records holds well under 1 MB, parquet-go's pages and
	// read buffers a few hundred KB per column; the Parquet alone is larger
	// than the bound (and decoded rows take several times their encoding).
	const bound = 6 << 20
	if live > bound || size < bound {
		t.Errorf("live heap reached %d KB reading %d rows (%d KB of Parquet); want under %d KB", live>>10, n, size>>10, bound>>10)
	}
}
