package mysql

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/source"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []position{
		{{Type: "BIGINT", Text: "42"}},
		{{Type: "DATETIME", Text: "2024-05-01 10:00:00.123456"}, {Type: "CHAR", Text: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}},
		{{Type: "VARCHAR", Text: "O'Brien, \"Pat\"\n<&> 🚀"}, {Type: "VARBINARY", Text: ""}},
	}
	for _, p := range tests {
		s := p.String()
		got, err := parseCursor(s, len(p))
		if err != nil {
			t.Fatalf("parseCursor(%q): %v", s, err)
		}
		if !reflect.DeepEqual(got, p) {
			t.Fatalf("round trip: %v, want %v", got, p)
		}
		if _, err := parseCursor(s, len(p)+1); !errors.Is(err, source.ErrBadCursor) {
			t.Fatalf("wrong arity accepted: %v", err)
		}
	}
	if p, err := parseCursor("", 2); err != nil || p != nil {
		t.Fatalf(`parseCursor(""): %v, %v`, p, err)
	}
}

func TestNormalizeQuery(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"  SELECT\n\t1 ;\n", "SELECT 1"},
		{"SELECT a -- comment\nFROM t", "SELECT a FROM t"},
		{"SELECT a # comment\nFROM t", "SELECT a FROM t"},
		{"SELECT a/* c */FROM t", "SELECT a FROM t"},
		{"SELECT /*+ MAX_EXECUTION_TIME(1000) */ a FROM t", "SELECT /*+ MAX_EXECUTION_TIME(1000) */ a FROM t"},
		{"SELECT 'a  -- b', 'it\\'s  x', `Col  Name` FROM t", "SELECT 'a  -- b', 'it\\'s  x', `Col  Name` FROM t"},
		{"SELECT a--b FROM t", "SELECT a--b FROM t"},
		{"SELECT a;;", "SELECT a"},
	}
	for _, tt := range tests {
		if got := normalizeQuery(tt.in); got != tt.want {
			t.Errorf("normalizeQuery(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// TestLiteral: only exact values of a kind become literals, and strings
// never appear in the SQL as they are.
func TestLiteral(t *testing.T) {
	t.Parallel()
	tests := []struct {
		k    kind
		text string
		want string
		ok   bool
	}{
		{kindInt, "-42", "-42", true},
		{kindInt, "042", "", false},
		{kindInt, "1 OR 1=1", "", false},
		{kindUint, "18446744073709551615", "18446744073709551615", true},
		{kindUint, "-1", "", false},
		{kindDouble, "0.1", "0.1e0", true},
		{kindDouble, "1e+300", "1e+300", true},
		{kindDouble, "0.10", "", false},
		{kindDecimal, "-12.50", "-12.50", true},
		{kindDecimal, "12.", "", false},
		{kindDecimal, "1e5", "", false},
		{kindText, "it's", "_utf8mb4 X'69742773'", true},
		{kindText, "\xff", "", false},
		{kindBinary, "AP8Q", "X'00FF10'", true},
		{kindBinary, "not base64", "", false},
	}
	for _, tt := range tests {
		got, ok := literal(tt.k, tt.text)
		if ok != tt.ok || (ok && got != tt.want) {
			t.Errorf("literal(%d, %q) = %q, %v; want %q, %v", tt.k, tt.text, got, ok, tt.want, tt.ok)
		}
	}
}

func TestConvertFallbacks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		k    kind
		v    any
		want any
	}{
		{kindDecimal, []byte("12.50"), json.Number("12.50")},
		{kindDecimal, []byte("000012.50"), json.Number("12.50")}, // ZEROFILL
		{kindDecimal, []byte("0000000.000"), json.Number("0.000")},
		{kindDecimal, []byte("000007"), json.Number("7")},
		{kindDecimal, []byte("-0.50"), json.Number("-0.50")},
		{kindDecimal, []byte("0"), json.Number("0")},
		{kindDatetime, []byte("0000-00-00 00:00:00"), "0000-00-00 00:00:00"},
		{kindTimestamp, []byte("2024-05-01 10:00:00.000001"), "2024-05-01T10:00:00.000001Z"},
		{kindJSON, []byte("not json"), "not json"},
		{kindBit, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, json.Number("18446744073709551615")},
		{kindText, []byte("plain"), "plain"},
		{kindInt, uint64(7), int64(7)},
		{kindDouble, float64(1e300), json.Number("1e+300")},
		{kindFloat, float32(0.1), json.Number("0.1")},
	}
	for _, tt := range tests {
		if got := convert(tt.k, tt.v); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("convert(%d, %#v) = %#v, want %#v", tt.k, tt.v, got, tt.want)
		}
	}
}

// TestDescribeCursor: a keyset cursor in words, by its columns.
func TestDescribeCursor(t *testing.T) {
	t.Parallel()
	c := &Config{CursorColumn: "updated_at"}
	cur := position{{Type: "DATETIME", Text: "2024-05-01 10:00:00.000000"}, {Type: "BIGINT", Text: "42"}}.String()
	for _, tc := range []struct {
		src    *config.Source
		cursor string
		want   string
	}{
		{&config.Source{Identity: "id"}, cur, "after updated_at = 2024-05-01 10:00:00.000000, id = 42"},
		{&config.Source{Identity: "id"}, "", "start of the source"},
		{&config.Source{Identity: "updated_at"}, cur, "a cursor this oncesync cannot read"},
	} {
		if got := c.DescribeCursor(tc.src, tc.cursor); got != tc.want {
			t.Errorf("DescribeCursor(%q) = %q, want %q", tc.cursor, got, tc.want)
		}
	}
}
