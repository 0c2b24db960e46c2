package parquet_test

import (
	"encoding/json"
	"path/filepath"
	"testing"
)

// amounts is a frame as pandas writes one: an integer column with a missing
// value becomes float64 (a DOUBLE), as do BigQuery's FLOAT64 and
// Snowflake's FLOAT; a float32 column is a FLOAT.
type amounts struct {
	ID     int64    `parquet:"id"`
	Amount float64  `parquet:"amount"`
	Phone  *float64 `parquet:"phone,optional"`
	Ratio  float32  `parquet:"ratio"`
}

// TestFloatDigitsAsPostgreSQL: a DOUBLE reads with the digits the
// PostgreSQL source gives a double precision (fixed-point for a decimal
// exponent from -4 to 14, exponential beyond), a FLOAT with a real's
// (fixed-point from -4 to 5), so the same value sent from a warehouse
// export or from the database reaches the destination alike. Before, every
// DOUBLE from a million up was written in exponential notation
// (1.234567e+06, a phone number 5.551234567e+09).
func TestFloatDigitsAsPostgreSQL(t *testing.T) {
	t.Parallel()
	phone := 5551234567.0
	path := filepath.Join(t.TempDir(), "amounts.parquet")
	writeRows(t, path, []amounts{
		{ID: 1, Amount: 1234567, Phone: &phone, Ratio: 123456},
		{ID: 2, Amount: 1500000.5, Ratio: 1234567},
		{ID: 3, Amount: 1e14, Ratio: 0.0001},
		{ID: 4, Amount: 1e15, Ratio: 0.00001},
		{ID: 5, Amount: 0.0001, Ratio: 0.1},
		{ID: 6, Amount: 0.00001, Ratio: 16777216},
		{ID: 7, Amount: -123456789.25, Ratio: -1e6},
		{ID: 8, Amount: 12345678901234567890, Ratio: 1.5},
	}, 4)
	want := []struct{ amount, phone, ratio any }{
		{json.Number("1234567"), json.Number("5551234567"), json.Number("123456")},
		{json.Number("1500000.5"), nil, json.Number("1.234567e+06")},
		{json.Number("100000000000000"), nil, json.Number("0.0001")},
		{json.Number("1e+15"), nil, json.Number("1e-05")},
		{json.Number("0.0001"), nil, json.Number("0.1")},
		{json.Number("1e-05"), nil, json.Number("1.6777216e+07")},
		{json.Number("-123456789.25"), nil, json.Number("-1e+06")},
		{json.Number("1.2345678901234567e+19"), nil, json.Number("1.5")},
	}
	got := readAll(t, open(t, path), "", 10)
	if len(got) != len(want) {
		t.Fatalf("%d records, want %d", len(got), len(want))
	}
	for i, w := range want {
		f := got[i].Fields
		for _, c := range []struct {
			name      string
			got, want any
		}{{"amount", f["amount"], w.amount}, {"phone", f["phone"], w.phone}, {"ratio", f["ratio"], w.ratio}} {
			if c.got != c.want {
				t.Errorf("record %d: %s = %#v, want %#v", i+1, c.name, c.got, c.want)
			}
		}
	}
}
