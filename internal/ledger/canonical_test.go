package ledger

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
	"time"
)

// canonicalCases are records whose canonical JSON must equal json.Marshal's.
func canonicalCases() []map[string]any {
	return []map[string]any{
		{},
		{"email": "ann@example.com", "FIRSTNAME": "Ann", "n": 3.0, "ok": true, "none": nil},
		{"html": "<a href=\"x\">&amp;</a>", "ctl": "\x00\x01\b\f\n\r\t\x1f\\", "sep": "\u2028\u2029", "bad": "\xff\xfe ok \xc3"},
		{"floats": []any{0.0, -0.0, 1e-7, 1e-6, 123456789.0, 1e20, 1e21, 1.5e300, -2.5e-10, float32(3.14), float32(1e-7), float32(1e22)}},
		{"ints": []any{0, -1, int64(math.MaxInt64), int64(math.MinInt64)}},
		{"nested": map[string]any{"z": []any{map[string]any{"b": 1.0, "a": "x"}, nil, []any{}}, "a": map[string]any{}}},
		{"nilmap": map[string]any(nil), "nilslice": []any(nil), "ünïcode": "日本語 €"},
		{"b": "2", "a": "1", "aa": "3", "A": "0", "_": "4"},
	}
}

func TestCanonicalMatchesMarshal(t *testing.T) {
	for i, c := range canonicalCases() {
		want, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendCanonical(nil, c)
		if !ok {
			t.Fatalf("case %d: fast path refused %v", i, c)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

// TestCanonicalFallback: types outside the fast path, and values Marshal
// refuses, go through json.Marshal (the same bytes, or the same error).
func TestCanonicalFallback(t *testing.T) {
	at := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, c := range []map[string]any{
		{"t": at}, {"raw": []byte("x")}, {"n": json.Number("12")}, {"u": uint8(3)}, {"deep": map[string]any{"t": at}},
	} {
		if _, ok := appendCanonical(nil, c); ok {
			t.Fatalf("fast path took %#v", c)
		}
		want, _ := json.Marshal(c)
		got, err := canonicalJSON(c)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("canonicalJSON(%#v) = %s, %v; want %s", c, got, err, want)
		}
	}
	if _, err := RecordHash(map[string]any{"nan": math.NaN()}); err == nil {
		t.Fatal("RecordHash of a NaN: no error (json.Marshal refuses it)")
	}
}

func FuzzCanonicalMatchesMarshal(f *testing.F) {
	f.Add("ann@example.com", "<&>", 1.5, int64(-3), true)
	f.Add("\xff\u2028", "\x00", 1e-7, int64(0), false)
	f.Add("", "日本", 1e21, int64(1<<62), true)
	f.Fuzz(func(t *testing.T, a, b string, x float64, n int64, ok bool) {
		rec := map[string]any{a: b, "x": x, "n": n, "ok": ok, "list": []any{a, x, map[string]any{b: a}}}
		want, werr := json.Marshal(rec)
		got, gerr := canonicalJSON(rec)
		if (werr != nil) != (gerr != nil) || !bytes.Equal(got, want) {
			t.Fatalf("canonicalJSON = %q, %v; json.Marshal = %q, %v", got, gerr, want, werr)
		}
	})
}
