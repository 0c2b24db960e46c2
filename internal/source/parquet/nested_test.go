package parquet_test

import (
	"encoding/json"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// address is a STRUCT as BigQuery and Spark export one: its leaves carry the
// same logical types as top-level columns.
type address struct {
	Zip   string    `parquet:"zip"`
	Since int32     `parquet:"since,date"`
	Price int64     `parquet:"price,decimal(2:18)"`
	At    time.Time `parquet:"at,timestamp(microsecond)"`
	Key   [16]byte  `parquet:"key,uuid"`
}

type withNested struct {
	ID    string             `parquet:"id"`
	Since int32              `parquet:"since,date"`
	Price int64              `parquet:"price,decimal(2:18)"`
	At    time.Time          `parquet:"at,timestamp(microsecond)"`
	Key   [16]byte           `parquet:"key,uuid"`
	Home  address            `parquet:"home"`
	Work  *address           `parquet:"work,optional"`
	Past  []address          `parquet:"past,list"`
	Score map[string]string  `parquet:"score"`
	Codes map[int64][]string `parquet:"codes"`
	Grid  [][]int64          `parquet:"grid,list"`
}

// TestNestedValues: a value inside a STRUCT, LIST or MAP reads as the same
// value in a top-level column does (a MAP's keys as text) (a DATE as 2024-05-01, a TIMESTAMP in RFC
// 3339, a DECIMAL as an exact number, a UUID in its canonical form), so a
// destination gets one rendering of a type wherever it sits.
func TestNestedValues(t *testing.T) {
	t.Parallel()
	at := time.Date(2024, 5, 1, 10, 0, 0, 123456000, time.UTC)
	key := [16]byte{0xa0, 0xee, 0xbc, 0x99, 0x9c, 0x0b, 0x4e, 0xf8, 0xbb, 0x6d, 0x6b, 0xb9, 0xbd, 0x38, 0x0a, 0x11}
	a := address{Zip: "75001", Since: 19844, Price: -1250, At: at, Key: key}
	path := filepath.Join(t.TempDir(), "nested.parquet")
	writeRows(t, path, []withNested{
		{ID: "1", Since: 19844, Price: -1250, At: at, Key: key, Home: a, Work: &a, Past: []address{a, a}, Score: map[string]string{"q1": "high"},
			Codes: map[int64][]string{7: {"z", "y"}, 8: {}}, Grid: [][]int64{{1, 2}, {}, {3}}},
		{ID: "2", Since: 19844, Price: -1250, At: at, Key: key, Home: a},
	}, 10)
	got := readAll(t, open(t, path), "", 10)
	if len(got) != 2 {
		t.Fatalf("%d records, want 2", len(got))
	}
	top := got[0].Fields
	want := map[string]any{"zip": "75001", "since": top["since"], "price": top["price"], "at": top["at"], "key": top["key"]}
	if top["since"] != "2024-05-01" || top["price"] != json.Number("-12.50") || top["at"] != "2024-05-01T10:00:00.123456Z" ||
		top["key"] != "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11" {
		t.Fatalf("top-level values: %#v", top)
	}
	for _, tc := range []struct {
		name      string
		got, want any
	}{
		{"home", top["home"], want},
		{"work", top["work"], want},
		{"past", top["past"], []any{want, want}},
		{"score", top["score"], map[string]any{"q1": "high"}},
		{"codes", top["codes"], map[string]any{"7": []any{"z", "y"}, "8": []any{}}},
		{"grid", top["grid"], []any{[]any{int64(1), int64(2)}, []any{}, []any{int64(3)}}},
		{"work of record 2", got[1].Fields["work"], nil},
		{"past of record 2", got[1].Fields["past"], []any{}},
		{"score of record 2", got[1].Fields["score"], map[string]any{}},
	} {
		if !reflect.DeepEqual(tc.got, tc.want) {
			t.Errorf("%s = %#v, want %#v", tc.name, tc.got, tc.want)
		}
	}
}
