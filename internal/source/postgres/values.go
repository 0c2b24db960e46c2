package postgres

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// Layouts of PostgreSQL's ISO DateStyle output (forced for every session).
const (
	pgTimestampLayout = "2006-01-02 15:04:05.999999999"
	// isoLocalLayout is RFC 3339 without a zone, for timestamp without time zone.
	isoLocalLayout = "2006-01-02T15:04:05.999999999"
)

// pgTimestamptzLayouts are the zone forms PostgreSQL prints: "+00", "+05:30"
// and, for historical local mean times, "+00:09:21".
var pgTimestamptzLayouts = []string{
	pgTimestampLayout + "Z07",
	pgTimestampLayout + "Z07:00",
	pgTimestampLayout + "Z07:00:00",
}

// convert turns PostgreSQL's text output of a value of type oid into a
// JSON-friendly Go value (see the package documentation for the mapping).
// text is only read; the result never aliases it. A nil text is SQL NULL.
func convert(oid uint32, text []byte) any {
	if text == nil {
		return nil
	}
	switch oid {
	case pgtype.BoolOID:
		return len(text) == 1 && text[0] == 't'
	case pgtype.Int2OID, pgtype.Int4OID, pgtype.Int8OID, pgtype.OIDOID:
		if n, err := strconv.ParseInt(string(text), 10, 64); err == nil {
			return n
		}
	case pgtype.Float4OID, pgtype.Float8OID, pgtype.NumericOID:
		s := string(text)
		if isJSONNumber(s) {
			return json.Number(s)
		}
		return s // NaN, Infinity, -Infinity
	case pgtype.TimestamptzOID:
		for _, layout := range pgTimestamptzLayouts {
			if t, err := time.Parse(layout, string(text)); err == nil {
				return t.UTC().Format(time.RFC3339Nano)
			}
		}
		// infinity, -infinity, BC dates, years past 9999: PostgreSQL's text.
	case pgtype.TimestampOID:
		if t, err := time.Parse(pgTimestampLayout, string(text)); err == nil {
			return t.Format(isoLocalLayout)
		}
	case pgtype.JSONOID, pgtype.JSONBOID:
		dec := json.NewDecoder(bytes.NewReader(text))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil {
			return v
		}
	case pgtype.ByteaOID:
		if h, ok := bytes.CutPrefix(text, []byte(`\x`)); ok {
			b := make([]byte, hex.DecodedLen(len(h)))
			if _, err := hex.Decode(b, h); err == nil {
				return base64.StdEncoding.EncodeToString(b)
			}
		}
	}
	return string(text)
}

// isJSONNumber reports whether s is a number in JSON's grammar.
func isJSONNumber(s string) bool {
	if s == "" {
		return false
	}
	i := 0
	if s[i] == '-' {
		i++
	}
	digits := func() int {
		n := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
			n++
		}
		return n
	}
	start := i
	if n := digits(); n == 0 || (n > 1 && s[start] == '0') {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			return false
		}
	}
	return i == len(s)
}

// normalizeQuery returns q with comments removed and every run of whitespace
// outside quoted literals and identifiers collapsed to one space, trimmed and
// without trailing semicolons. Two queries that differ only in layout and
// comments normalise alike (and so get the same source ID).
func normalizeQuery(q string) string {
	var b strings.Builder
	space := false
	emit := func(s string) {
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteString(s)
	}
	for i := 0; i < len(q); {
		c := q[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			space = true
			i++
		case c == '-' && strings.HasPrefix(q[i:], "--"):
			end := strings.IndexByte(q[i:], '\n')
			if end < 0 {
				end = len(q) - i
			}
			space = true
			i += end
		case c == '/' && strings.HasPrefix(q[i:], "/*"):
			// Block comments nest in PostgreSQL.
			depth, j := 1, i+2
			for j < len(q) && depth > 0 {
				switch {
				case strings.HasPrefix(q[j:], "/*"):
					depth++
					j += 2
				case strings.HasPrefix(q[j:], "*/"):
					depth--
					j += 2
				default:
					j++
				}
			}
			space = true
			i = j
		case c == '\'' || c == '"':
			j := i + 1
			for j < len(q) {
				if q[j] == c {
					if j+1 < len(q) && q[j+1] == c { // doubled quote
						j += 2
						continue
					}
					j++
					break
				}
				j++
			}
			emit(q[i:j])
			i = j
		case c == '$' && (i == 0 || !isIdentByte(q[i-1])):
			if tag, ok := dollarTag(q[i:]); ok {
				end := strings.Index(q[i+len(tag):], tag)
				j := len(q)
				if end >= 0 {
					j = i + len(tag) + end + len(tag)
				}
				emit(q[i:j])
				i = j
				continue
			}
			emit(q[i : i+1])
			i++
		default:
			j := i + 1
			for j < len(q) && !strings.ContainsRune(" \t\n\r\f\v'\"$-/", rune(q[j])) {
				j++
			}
			emit(q[i:j])
			i = j
		}
	}
	return strings.TrimRight(b.String(), "; ")
}

// dollarTag returns the opening tag of a dollar-quoted string at the start of
// s ("$$" or "$name$").
func dollarTag(s string) (string, bool) {
	for j := 1; j < len(s); j++ {
		switch c := s[j]; {
		case c == '$':
			return s[:j+1], true
		case c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80 || (j > 1 && c >= '0' && c <= '9'):
		default:
			return "", false
		}
	}
	return "", false
}

func isIdentByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}
