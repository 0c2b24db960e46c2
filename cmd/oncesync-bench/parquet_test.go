package main

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/source/parquet"
)

func readAllRecords(t *testing.T, src source.Source) []source.Record {
	t.Helper()
	defer src.Close()
	var out []source.Record
	cursor := ""
	for {
		page, err := src.ReadPage(context.Background(), cursor, 97)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, page.Records...)
		if page.End {
			return out
		}
		cursor = page.Next
	}
}

// TestParquetDirHoldsTheCSVContacts: the Parquet export the parquet bench
// syncs is the CSV's contacts, row for row, so the two figures compare the
// same work.
func TestParquetDirHoldsTheCSVContacts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 1234
	csvPath, pqDir := filepath.Join(dir, "c.csv"), filepath.Join(dir, "export")
	if err := writeContacts(csvPath, n); err != nil {
		t.Fatal(err)
	}
	if err := writeParquetDir(pqDir, n, 500); err != nil {
		t.Fatal(err)
	}
	cs, err := file.New(file.Params{Path: csvPath, Format: file.CSV})
	if err != nil {
		t.Fatal(err)
	}
	ps, err := parquet.New(parquet.Params{Path: pqDir})
	if err != nil {
		t.Fatal(err)
	}
	want, got := readAllRecords(t, cs), readAllRecords(t, ps)
	if len(want) != n || len(got) != n {
		t.Fatalf("CSV %d records, Parquet %d; want %d each", len(want), len(got), n)
	}
	if files := dirBytes(pqDir); files == 0 {
		t.Fatal("no Parquet files")
	}
	for i := range want {
		for k, w := range want[i].Fields {
			if g := fmt.Sprint(got[i].Fields[k]); g != w {
				t.Fatalf("row %d: %s = %q in Parquet, %q in the CSV", i+1, k, g, w)
			}
		}
	}
}
