package parquet_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	pq "github.com/parquet-go/parquet-go"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/parquet"
)

// FuzzDamagedFile: a Parquet file with bytes changed is read to its end or
// fails with an error of the source's kinds, never a panic.
func FuzzDamagedFile(f *testing.F) {
	var buf bytes.Buffer
	w := pq.NewGenericWriter[typed](&buf, pq.MaxRowsPerRowGroup(2), pq.Compression(&pq.Snappy))
	nick := "Ada"
	if _, err := w.Write([]typed{{ID: 1, Nick: &nick, Tags: []string{"a"}}, {ID: 2}, {ID: 3, Raw: []byte("x")}}); err != nil {
		f.Fatal(err)
	}
	if err := w.Close(); err != nil {
		f.Fatal(err)
	}
	valid := buf.Bytes()
	f.Add(uint32(0), byte(0))
	f.Add(uint32(len(valid)/2), byte(0xff))
	f.Add(uint32(len(valid)-9), byte(1))
	f.Fuzz(func(t *testing.T, at uint32, x byte) {
		data := bytes.Clone(valid)
		data[int(at)%len(data)] ^= x
		path := filepath.Join(t.TempDir(), "f.parquet")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		src, err := parquet.New(parquet.Params{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		cursor := ""
		for range 10 {
			page, err := src.ReadPage(context.Background(), cursor, 2)
			if err != nil {
				if !errors.Is(err, source.ErrInvalid) && !errors.Is(err, source.ErrUnavailable) {
					t.Fatalf("error %v is not ErrInvalid or ErrUnavailable", err)
				}
				return
			}
			if page.End {
				return
			}
			cursor = page.Next
		}
	})
}
