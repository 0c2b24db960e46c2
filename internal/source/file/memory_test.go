package file_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/oncesync/oncesync/internal/source/file"
)

// writeCSV writes a CSV file of n rows of about 60 bytes and returns its path.
func writeCSV(tb testing.TB, dir string, n int) string {
	tb.Helper()
	path := filepath.Join(dir, fmt.Sprintf("rows-%d.csv", n))
	f, err := os.Create(path)
	if err != nil {
		tb.Fatal(err)
	}
	w := bufio.NewWriter(f)
	fmt.Fprintln(w, "id,email,name,plan")
	for i := range n {
		fmt.Fprintf(w, "%d,user%d@example.test,\"Name %d, Jr.\",pro\n", i, i, i)
	}
	if err := w.Flush(); err != nil {
		tb.Fatal(err)
	}
	if err := f.Close(); err != nil {
		tb.Fatal(err)
	}
	return path
}

// pagedMemory pages through the file and returns the bytes allocated per page
// and the largest live heap seen (after a GC, sampled every 50 pages).
func pagedMemory(t *testing.T, path string, size int) (perPage float64, maxLive uint64) {
	t.Helper()
	src, err := file.New(file.Params{Path: path, Format: file.CSV})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	start, base := ms.TotalAlloc, ms.HeapAlloc
	pages := 0
	cursor := ""
	for {
		page, err := src.ReadPage(context.Background(), cursor, size)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if pages%50 == 0 {
			runtime.GC()
			runtime.ReadMemStats(&ms)
			maxLive = max(maxLive, ms.HeapAlloc-min(base, ms.HeapAlloc))
		}
		if page.End {
			break
		}
		cursor = page.Next
	}
	runtime.ReadMemStats(&ms)
	return float64(ms.TotalAlloc-start) / float64(pages), maxLive
}

// TestMemoryFlat pages a small and a large file: the bytes allocated per page
// and the live heap must not grow with the file size. With -short or -race the
// large file has 200,000 rows instead of 1,000,000.
func TestMemoryFlat(t *testing.T) {
	// Not parallel: it measures the process's heap.
	large := 1_000_000
	if testing.Short() || raceEnabled {
		large = 200_000
	}
	dir := t.TempDir()
	smallPath, largePath := writeCSV(t, dir, 10_000), writeCSV(t, dir, large)
	fi, err := os.Stat(largePath)
	if err != nil {
		t.Fatal(err)
	}
	const size = 500
	smallPerPage, _ := pagedMemory(t, smallPath, size)
	largePerPage, largeLive := pagedMemory(t, largePath, size)
	t.Logf("per page: %.0f B (10,000 rows), %.0f B (%d rows, %d MB); largest live heap %d KB",
		smallPerPage, largePerPage, large, fi.Size()>>20, largeLive>>10)
	if largePerPage > smallPerPage*1.1 {
		t.Errorf("a page of a %d-row file allocates %.0f B, of a 10,000-row file %.0f B: allocation grows with the file",
			large, largePerPage, smallPerPage)
	}
	// A page of 500 records holds well under 1 MB; the read buffers a few
	// hundred KB. The file is far larger than the bound.
	const bound = 4 << 20
	if largeLive > bound || fi.Size() < 2*bound {
		t.Errorf("live heap reached %d KB reading a %d KB file; want under %d KB", largeLive>>10, fi.Size()>>10, bound>>10)
	}
}
