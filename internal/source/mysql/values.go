package mysql

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Layouts of MySQL's text output of temporal values, and the ones records
// carry: the PostgreSQL source's, so the same row reads the same from both.
const (
	myDatetimeLayout = "2006-01-02 15:04:05.999999"
	// isoLocalLayout is RFC 3339 without a zone, for DATETIME (PostgreSQL's
	// timestamp without time zone).
	isoLocalLayout = "2006-01-02T15:04:05.999999999"
)

// kind is what a column type (the driver's DatabaseTypeName) is to a
// record, a cursor and an id.
type kind int

const (
	kindText      kind = iota // CHAR, VARCHAR, TEXT, ENUM, SET, TIME, DATE and the unknown
	kindInt                   // TINYINT ... BIGINT, YEAR (int64 from the driver)
	kindUint                  // UNSIGNED BIGINT (uint64 from the driver); smaller unsigned ints arrive as int64
	kindFloat                 // FLOAT (float32)
	kindDouble                // DOUBLE (float64)
	kindDecimal               // DECIMAL
	kindDatetime              // DATETIME
	kindTimestamp             // TIMESTAMP (printed in the session's zone, UTC)
	kindJSON                  // JSON (MySQL; MariaDB's JSON is LONGTEXT and reads as text)
	kindBinary                // BINARY, VARBINARY, BLOBs, GEOMETRY
	kindBit                   // BIT
)

func kindOf(typeName string) kind {
	switch typeName {
	case "TINYINT", "SMALLINT", "MEDIUMINT", "INT", "BIGINT", "YEAR",
		"UNSIGNED TINYINT", "UNSIGNED SMALLINT", "UNSIGNED MEDIUMINT", "UNSIGNED INT":
		return kindInt
	case "UNSIGNED BIGINT":
		return kindUint
	case "FLOAT":
		return kindFloat
	case "DOUBLE":
		return kindDouble
	case "DECIMAL":
		return kindDecimal
	case "DATETIME":
		return kindDatetime
	case "TIMESTAMP":
		return kindTimestamp
	case "JSON":
		return kindJSON
	case "BINARY", "VARBINARY", "TINYBLOB", "BLOB", "MEDIUMBLOB", "LONGBLOB", "GEOMETRY", "VECTOR":
		return kindBinary
	case "BIT":
		return kindBit
	}
	return kindText
}

// convert turns a value as the driver scans it from the text protocol
// (int64, uint64, float32, float64, []byte or nil) into the JSON-friendly
// Go value the PostgreSQL source gives for the same logical value (see the
// package documentation). The result never aliases v.
func convert(k kind, v any) any {
	switch v := v.(type) {
	case nil:
		return nil
	case int64:
		return v
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v)
		}
		return json.Number(strconv.FormatUint(v, 10))
	case float32:
		return json.Number(strconv.FormatFloat(float64(v), 'g', -1, 32))
	case float64:
		if k == kindFloat {
			// A FLOAT read as a DOUBLE (readFloatsExactly): its own
			// shortest digits (0.1, not 0.10000000149011612).
			return json.Number(strconv.FormatFloat(float64(float32(v)), 'g', -1, 32))
		}
		return json.Number(formatDouble(v))
	case []byte:
		return convertBytes(k, v)
	}
	return v
}

// formatDouble is v's shortest digits as PostgreSQL prints a double
// precision: fixed-point for a decimal exponent from -4 to 14, else
// exponential (1234567, 1e+15, 1e-05), so a sync reading the same value
// from either database sends it alike. A FLOAT's (a real's) thresholds are
// -4 and 5, which strconv's 'g' has already.
func formatDouble(v float64) string {
	s := strconv.FormatFloat(v, 'g', -1, 64)
	i := strings.IndexByte(s, 'e')
	if i < 0 {
		return s
	}
	if exp, err := strconv.Atoi(s[i+1:]); err == nil && exp >= -4 && exp < 15 {
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return s
}

func convertBytes(k kind, b []byte) any {
	switch k {
	case kindDecimal:
		if n := canonicalDecimal(string(b)); isJSONNumber(n) {
			return json.Number(n)
		}
	case kindDatetime:
		if t, err := time.Parse(myDatetimeLayout, string(b)); err == nil {
			return t.Format(isoLocalLayout)
		}
		// Zero dates ("0000-00-00 00:00:00") keep MySQL's text.
	case kindTimestamp:
		if t, err := time.Parse(myDatetimeLayout, string(b)); err == nil {
			return t.UTC().Format(time.RFC3339Nano)
		}
	case kindJSON:
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err == nil {
			return v
		}
	case kindBinary:
		return base64.StdEncoding.EncodeToString(b)
	case kindBit:
		if len(b) <= 8 {
			var buf [8]byte
			copy(buf[8-len(b):], b)
			n := binary.BigEndian.Uint64(buf[:])
			if n <= math.MaxInt64 {
				return int64(n)
			}
			return json.Number(strconv.FormatUint(n, 10))
		}
		return base64.StdEncoding.EncodeToString(b)
	case kindInt:
		// The driver parses integers; a []byte here is a type it does not
		// know as one.
		if n, err := strconv.ParseInt(string(b), 10, 64); err == nil {
			return n
		}
	}
	return string(b)
}

// canonicalDecimal is a DECIMAL's text without the zeros ZEROFILL pads
// its integer part with ("000012.50" is 12.50): the digits MySQL prints
// for the value without ZEROFILL, and PostgreSQL for a numeric. The
// fraction, the scale, is kept.
func canonicalDecimal(s string) string {
	sign, digits := "", s
	if strings.HasPrefix(digits, "-") {
		sign, digits = "-", digits[1:]
	}
	i := 0
	for i+1 < len(digits) && digits[i] == '0' && digits[i+1] >= '0' && digits[i+1] <= '9' {
		i++
	}
	if i == 0 {
		return s
	}
	return sign + digits[i:]
}

// text is a value as a cursor or a version hash keeps it: MySQL's text for
// numbers and text, a BIT's number in decimal, standard base64 for binary
// strings. ok is false for NULL.
func text(k kind, v any) (string, bool) {
	switch v := v.(type) {
	case nil:
		return "", false
	case int64:
		return strconv.FormatInt(v, 10), true
	case uint64:
		return strconv.FormatUint(v, 10), true
	case float32:
		return strconv.FormatFloat(float64(v), 'g', -1, 32), true
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64), true
	case []byte:
		switch k {
		case kindBinary:
			return base64.StdEncoding.EncodeToString(v), true
		case kindBit:
			// The driver gives a BIT's bits; its literal is its number (an
			// independent check, 2026-12-04: a BIT key's raw bytes made a
			// cursor no page could read).
			if len(v) <= 8 {
				var buf [8]byte
				copy(buf[8-len(v):], v)
				return strconv.FormatUint(binary.BigEndian.Uint64(buf[:]), 10), true
			}
		}
		return string(v), true
	}
	return "", false
}

// size is roughly how many bytes v takes in a record, for max_record_bytes.
func size(v any) int {
	if b, ok := v.([]byte); ok {
		return len(b)
	}
	return 8
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

// quoteIdent quotes a MySQL identifier with backticks (doubling any inside).
func quoteIdent(name string) string {
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// strLiteral is s as a character-string literal that needs no escaping
// whatever the server's sql_mode: a hex literal with a charset introducer,
// so it takes the collation of the column it is compared with.
func strLiteral(s string) string {
	return "_utf8mb4 X'" + hexString(s) + "'"
}

// binLiteral is b as a binary-string literal.
func binLiteral(b []byte) string {
	return "X'" + hexString(string(b)) + "'"
}

func hexString(s string) string {
	const digits = "0123456789ABCDEF"
	out := make([]byte, 2*len(s))
	for i := 0; i < len(s); i++ {
		out[2*i] = digits[s[i]>>4]
		out[2*i+1] = digits[s[i]&15]
	}
	return string(out)
}

// literal is the SQL literal of a value of kind k whose text (as text
// prints it) is t, for keyset conditions and ids. Only text that is exactly
// a value of the kind passes (the literal is built from validated text, so
// nothing is ever interpolated raw); ok is false otherwise.
func literal(k kind, t string) (string, bool) {
	switch k {
	case kindInt, kindBit:
		n, err := strconv.ParseInt(t, 10, 64)
		if err != nil || strconv.FormatInt(n, 10) != t {
			if k == kindBit {
				u, err := strconv.ParseUint(t, 10, 64)
				return t, err == nil && strconv.FormatUint(u, 10) == t
			}
			return "", false
		}
		return t, true
	case kindUint:
		n, err := strconv.ParseUint(t, 10, 64)
		return t, err == nil && strconv.FormatUint(n, 10) == t
	case kindDouble:
		f, err := strconv.ParseFloat(t, 64)
		if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || strconv.FormatFloat(f, 'g', -1, 64) != t {
			return "", false
		}
		if !strings.ContainsAny(t, "eE") {
			t += "e0" // an approximate-value (DOUBLE) literal, not a DECIMAL one
		}
		return t, true
	case kindDecimal:
		if !isDecimal(t) {
			return "", false
		}
		return t, true
	case kindBinary:
		b, err := base64.StdEncoding.DecodeString(t)
		if err != nil {
			return "", false
		}
		return binLiteral(b), true
	}
	// Text and temporal values: compared with a DATETIME, DATE or TIME
	// column, a string constant is converted to the column's type. Text
	// comes over a utf8mb4 connection, so other bytes are no value.
	return strLiteral(t), utf8.ValidString(t)
}

// isDecimal reports whether s is a DECIMAL as MySQL prints it: digits, an
// optional sign and fraction.
func isDecimal(s string) bool {
	s = strings.TrimPrefix(s, "-")
	intPart, frac, hasFrac := strings.Cut(s, ".")
	if intPart == "" || (hasFrac && frac == "") {
		return false
	}
	for _, part := range []string{intPart, frac} {
		for i := 0; i < len(part); i++ {
			if part[i] < '0' || part[i] > '9' {
				return false
			}
		}
	}
	return true
}
