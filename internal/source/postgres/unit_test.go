package postgres

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/oncesync/oncesync/internal/source"
)

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	tests := []position{
		{{Type: "int8", Text: "42"}},
		{{Type: "timestamptz", Text: "2024-05-01 10:00:00.123456+00"}, {Type: "uuid", Text: "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"}},
		{{Type: "text", Text: "O'Brien, \"Pat\"\n<&> 🚀"}, {Type: "16385", Text: ""}},
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
	if (position{}).String() != "" {
		t.Fatal("the start position is not the empty cursor")
	}
}

func TestNormalizeQuery(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"SELECT 1", "SELECT 1"},
		{"  SELECT\n\t1 ;\n", "SELECT 1"},
		{"SELECT a -- comment\nFROM t", "SELECT a FROM t"},
		{"SELECT a/* c /* nested */ still */FROM t", "SELECT a FROM t"},
		{"SELECT 'a  -- b' FROM t", "SELECT 'a  -- b' FROM t"},
		{"SELECT 'it''s  x', \"Col  Name\" FROM t", "SELECT 'it''s  x', \"Col  Name\" FROM t"},
		{"SELECT $x$ a  -- b $x$, $1 FROM t", "SELECT $x$ a  -- b $x$, $1 FROM t"},
		{"SELECT a-b, a/b FROM t", "SELECT a-b, a/b FROM t"},
		{"SELECT a;;", "SELECT a"},
	}
	for _, tt := range tests {
		if got := normalizeQuery(tt.in); got != tt.want {
			t.Errorf("normalizeQuery(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
	if normalizeQuery("SELECT 'a b'") == normalizeQuery("SELECT 'a  b'") {
		t.Error("whitespace inside a literal is collapsed")
	}
}

func TestIsJSONNumber(t *testing.T) {
	t.Parallel()
	for s, want := range map[string]bool{
		"0": true, "-0": true, "12.50": true, "1e+300": true, "1E-5": true, "123456789012345678901234567890": true,
		"": false, "01": false, ".5": false, "5.": false, "1e": false, "NaN": false, "Infinity": false, "-": false, "+1": false,
	} {
		if got := isJSONNumber(s); got != want {
			t.Errorf("isJSONNumber(%q) = %v", s, got)
		}
	}
}

func TestConvertFallbacks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		oid  uint32
		text string
		want any
	}{
		{pgtype.TimestamptzOID, "2024-05-01 10:00:00+05:30", "2024-05-01T04:30:00Z"},
		{pgtype.TimestamptzOID, "1880-01-01 00:00:00+00:09:21", "1879-12-31T23:50:39Z"},
		{pgtype.TimestamptzOID, "0044-03-15 12:00:00+00 BC", "0044-03-15 12:00:00+00 BC"},
		{pgtype.TimestampOID, "-infinity", "-infinity"},
		{pgtype.Float8OID, "-Infinity", "-Infinity"},
		{pgtype.NumericOID, "-0.000", json.Number("-0.000")},
		{pgtype.BoolOID, "f", false},
		{pgtype.ByteaOID, `\x`, ""},
		{pgtype.Int8OID, "-9223372036854775808", int64(-9223372036854775808)},
	}
	for _, tt := range tests {
		if got := convert(tt.oid, []byte(tt.text)); !reflect.DeepEqual(got, tt.want) {
			t.Errorf("convert(%d, %q) = %#v, want %#v", tt.oid, tt.text, got, tt.want)
		}
	}
	if got := convert(pgtype.TextOID, nil); got != nil {
		t.Errorf("NULL: %#v", got)
	}
}

// TestInputText: an id passes for the types checked in Go only when it is a
// value's exact rendering (what convert returns, printed by fmt.Sprint), and
// reads back as that value; other types go to the server unchecked.
func TestInputText(t *testing.T) {
	t.Parallel()
	// Values as PostgreSQL prints them: each rendering must pass, and read
	// back as text (bool: as its rendering, which boolin reads too).
	for _, v := range []struct {
		oid        uint32
		out, input string
	}{
		{pgtype.Int2OID, "-32768", "-32768"},
		{pgtype.Int4OID, "2147483647", "2147483647"},
		{pgtype.Int8OID, "-9223372036854775808", "-9223372036854775808"},
		{pgtype.OIDOID, "4294967295", "4294967295"},
		{pgtype.BoolOID, "t", "true"},
		{pgtype.BoolOID, "f", "false"},
		{pgtype.UUIDOID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"},
		{pgtype.TextOID, " O'Brien, \"Pat\" {1,2} 🚀 ", " O'Brien, \"Pat\" {1,2} 🚀 "},
		{pgtype.BPCharOID, "ab ", "ab "},
		{pgtype.ByteaOID, `\x00ff10`, `\x00ff10`},
		{pgtype.ByteaOID, `\x`, `\x`},
	} {
		id := fmt.Sprint(convert(v.oid, []byte(v.out)))
		p, ok := inputText(v.oid, id)
		if !ok || !p.checked || p.text != v.input || p.id != id {
			t.Errorf("inputText(%d, %q) = %+v, %v; want checked input %q", v.oid, id, p, ok, v.input)
		}
	}
	for _, v := range []struct {
		oid uint32
		id  string
	}{
		{pgtype.Int2OID, "32768"}, {pgtype.Int4OID, "2147483648"}, {pgtype.Int4OID, "07"}, {pgtype.Int4OID, "+7"},
		{pgtype.Int4OID, " 7"}, {pgtype.Int4OID, "-0"}, {pgtype.Int8OID, "1_000"}, {pgtype.Int8OID, ""},
		{pgtype.OIDOID, "-1"}, {pgtype.BoolOID, "t"}, {pgtype.BoolOID, "TRUE"},
		{pgtype.UUIDOID, "A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11"}, {pgtype.UUIDOID, "a0eebc999c0b4ef8bb6d6bb9bd380a11"},
		{pgtype.UUIDOID, "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a1g"},
		{pgtype.TextOID, "a\x00b"}, {pgtype.VarcharOID, "\xff"}, {pgtype.ByteaOID, "AP8"}, {pgtype.ByteaOID, `\x00`},
		{pgtype.NumericOID, "1\x00"},
	} {
		if p, ok := inputText(v.oid, v.id); ok {
			t.Errorf("inputText(%d, %q) = %+v; want no match", v.oid, v.id, p)
		}
	}
	// Unchecked types: the server's input function decides.
	for _, id := range []string{"12.50", "not a number", "2024-05-01T10:00:00Z"} {
		if p, ok := inputText(pgtype.NumericOID, id); !ok || p.checked || p.text != id {
			t.Errorf("inputText(numeric, %q) = %+v, %v; want it unchecked", id, p, ok)
		}
	}
	// Repeated ids are sent once.
	if got := inputTexts(pgtype.Int8OID, []string{"1", "x", "1", "2"}); len(got) != 2 || got[0].id != "1" || got[1].id != "2" {
		t.Errorf("inputTexts: %+v", got)
	}
}
