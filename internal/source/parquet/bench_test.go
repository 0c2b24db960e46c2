package parquet_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/oncesync/oncesync/internal/source/parquet"
)

// BenchmarkParquetPaging reads a 200,000-row Parquet file (row groups of
// 50,000) in pages of 500, one whole pass per iteration: next to
// BenchmarkCSVPaging in internal/source/file.
func BenchmarkParquetPaging(b *testing.B) {
	const rows, size = 200_000, 500
	path := filepath.Join(b.TempDir(), "rows.parquet")
	writeLarge(b, path, rows)
	src, err := parquet.New(parquet.Params{Path: path})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	b.ReportAllocs()
	passes := 0
	for b.Loop() {
		n, cursor := 0, ""
		for {
			page, err := src.ReadPage(context.Background(), cursor, size)
			if err != nil {
				b.Fatal(err)
			}
			n += len(page.Records)
			if page.End {
				break
			}
			cursor = page.Next
		}
		if n != rows {
			b.Fatalf("read %d records, want %d", n, rows)
		}
		passes++
	}
	b.ReportMetric(float64(rows*passes)/b.Elapsed().Seconds(), "records/s")
}
