package parquet_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	pq "github.com/parquet-go/parquet-go"
)

// TestLocalTimestampAndUUID: a TIMESTAMP not adjusted to UTC reads as the
// PostgreSQL source reads a timestamp without time zone (no zone), a UUID
// in its canonical form, an unannotated binary that is not UTF-8 as base64.
func TestLocalTimestampAndUUID(t *testing.T) {
	t.Parallel()
	schema := pq.NewSchema("row", pq.Group{
		"local": pq.TimestampAdjusted(pq.Millisecond, false),
		"uuid":  pq.UUID(),
		"bin":   pq.Leaf(pq.ByteArrayType),
	})
	path := filepath.Join(t.TempDir(), "local.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := pq.NewWriter(f, schema)
	at := time.Date(2024, 5, 1, 10, 0, 0, 5e6, time.UTC).UnixMilli()
	uuid := []byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}
	row := pq.Row{pq.ValueOf([]byte{0xff, 0xfe}).Level(0, 0, 0), pq.ValueOf(at).Level(0, 0, 1), pq.FixedLenByteArrayValue(uuid).Level(0, 0, 2)}
	if _, err := w.WriteRows([]pq.Row{row}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	got := readAll(t, open(t, path), "", 10)
	want := map[string]any{"local": "2024-05-01T10:00:00.005", "uuid": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "bin": "//4="}
	if len(got) != 1 || !reflect.DeepEqual(got[0].Fields, want) {
		t.Fatalf("got %#v, want %#v", got, want)
	}
}
