package file_test

import (
	"context"
	"testing"

	"github.com/oncesync/oncesync/internal/source/file"
)

// BenchmarkCSVPaging reads a 200,000-row CSV file in pages of 500, one whole
// pass per iteration.
func BenchmarkCSVPaging(b *testing.B) {
	const rows, size = 200_000, 500
	path := writeCSV(b, b.TempDir(), rows)
	src, err := file.New(file.Params{Path: path, Format: file.CSV})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	// A context that can end, as a run's is: each call on the file is then
	// made in a goroutine of its own (source.File).
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b.ReportAllocs()
	passes := 0
	for b.Loop() {
		n, cursor := 0, ""
		for {
			page, err := src.ReadPage(ctx, cursor, size)
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

// BenchmarkCSVPage reads one page of 500 per iteration from files of 10,000 and
// 1,000,000 rows: B/op and allocs/op are the same, whatever the file size.
func BenchmarkCSVPage(b *testing.B) {
	for _, bc := range []struct {
		name string
		rows int
	}{{"rows=10000", 10_000}, {"rows=1000000", 1_000_000}} {
		b.Run(bc.name, func(b *testing.B) {
			path := writeCSV(b, b.TempDir(), bc.rows)
			src, err := file.New(file.Params{Path: path, Format: file.CSV})
			if err != nil {
				b.Fatal(err)
			}
			defer src.Close()
			b.ReportAllocs()
			cursor := ""
			for b.Loop() {
				page, err := src.ReadPage(context.Background(), cursor, 500)
				if err != nil {
					b.Fatal(err)
				}
				cursor = page.Next
			}
		})
	}
}
