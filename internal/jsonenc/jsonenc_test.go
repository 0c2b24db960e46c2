package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"
)

// stringCases are strings json.Marshal escapes in every way it can.
var stringCases = []string{
	"", "plain", "ann@example.com", " ", "/",
	"\x00", "\x01", "\x07", "\b", "\t", "\n", "\v", "\f", "\r", "\x1b", "\x1f", "\x7f",
	"\"", "\\", `a"b\c`, "\x00\x01\b\f\n\r\t\x1f\\",
	"<", ">", "&", "<script>alert(1)</script>", "<a href=\"x\">&amp;</a>",
	"\u2028", "\u2029", "a\u2028b\u2029c", "\u2027\u202a",
	"\xff", "\xfe", "\xc3", "\xe2\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xff\xfe ok \xc3", "a\xffb",
	"é", "日本語", "€", "😀", "\ufffd", "\ufeff", "ünïcode 日本語 € 😀", "\U0010ffff",
}

func checkString(t *testing.T, s string) {
	t.Helper()
	want, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := AppendString(nil, s); !bytes.Equal(got, want) {
		t.Fatalf("AppendString(%q)\n got %s\nwant %s", s, got, want)
	}
	// Appending keeps what dst held.
	if got := AppendString([]byte("x:"), s); !bytes.Equal(got, append([]byte("x:"), want...)) {
		t.Fatalf("AppendString(\"x:\", %q) = %s", s, got)
	}
}

func TestAppendStringMatchesMarshal(t *testing.T) {
	for _, s := range stringCases {
		checkString(t, s)
	}
	// Every byte alone, and every byte between two ASCII letters.
	for b := range 256 {
		checkString(t, string([]byte{byte(b)}))
		checkString(t, string([]byte{'a', byte(b), 'z'}))
	}
}

// floatCases are float64 values at the edges of Marshal's format switch.
var floatCases = []float64{
	0, math.Copysign(0, -1), 1, -1, 0.1, 1.5, 3.14159, 123456789, 1 << 53,
	1e20, 1e21, -1e21, 999999999999999999999, 1e-6, 1e-7, -1e-7, 9.99e-7, 1.5e300, -2.5e-10, 1e-9, 1e-10, 1e100,
	math.MaxFloat64, -math.MaxFloat64, math.SmallestNonzeroFloat64, 2.2250738585072014e-308,
}

// float32Cases are float32 values, encoded with bits=32.
var float32Cases = []float32{
	0, float32(math.Copysign(0, -1)), 1, 0.1, 3.14, 1e-6, 1e-7, 9.99e-7, 1e20, 1e21, 1e22, -1e22, 16777216,
	math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1.17549435e-38,
}

func TestAppendFloatMatchesMarshal(t *testing.T) {
	check := func(v any, f float64, bits int) {
		t.Helper()
		want, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := AppendFloat([]byte("x:"), f, bits)
		if !ok || !bytes.Equal(got, append([]byte("x:"), want...)) {
			t.Fatalf("AppendFloat(%v, %d) = %s, %v; json.Marshal %s", f, bits, got, ok, want)
		}
	}
	for _, f := range floatCases {
		check(f, f, 64)
	}
	for _, f := range float32Cases {
		check(f, float64(f), 32)
	}
}

// TestAppendFloatRefuses: NaN and the infinities (json.Marshal's
// UnsupportedValueError) are refused, and dst comes back as it was.
func TestAppendFloatRefuses(t *testing.T) {
	for _, f := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		for _, bits := range []int{64, 32} {
			if _, err := json.Marshal(f); err == nil {
				t.Fatalf("json.Marshal(%v) accepted", f)
			}
			got, ok := AppendFloat([]byte("x:"), f, bits)
			if ok || string(got) != "x:" {
				t.Fatalf("AppendFloat(%v, %d) = %q, %v; want \"x:\", false", f, bits, got, ok)
			}
		}
	}
}

func FuzzAppendMatchesMarshal(f *testing.F) {
	f.Add("<&>\u2028", 1.5)
	f.Add("\xff\x00\"\\", 1e-7)
	f.Add("日本 😀", 1e21)
	f.Fuzz(func(t *testing.T, s string, x float64) {
		checkString(t, s)
		for _, v := range []struct {
			v    any
			f    float64
			bits int
		}{{x, x, 64}, {float32(x), float64(float32(x)), 32}} {
			want, err := json.Marshal(v.v)
			got, ok := AppendFloat(nil, v.f, v.bits)
			if ok != (err == nil) || ok && !bytes.Equal(got, want) {
				t.Fatalf("AppendFloat(%v, %d) = %s, %v; json.Marshal %s, %v", v.f, v.bits, got, ok, want, err)
			}
		}
	})
}
