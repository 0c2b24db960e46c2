package parquet

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"math"
	"math/big"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	pq "github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/deprecated"
	"github.com/parquet-go/parquet-go/format"
)

// Layouts of the values the PostgreSQL source produces, so a sync reads a
// timestamp alike from either source.
const (
	// isoLocalLayout is RFC 3339 without a zone: a timestamp not adjusted to UTC.
	isoLocalLayout = "2006-01-02T15:04:05.999999999"
	dateLayout     = "2006-01-02"
	timeLayout     = "15:04:05.999999999"
)

// convertFunc turns one non-null leaf value into a Go value of the kinds the
// other sources produce: string, int64, json.Number (floats, decimals, like
// the PostgreSQL source's numeric), bool, JSON values (maps, slices).
type convertFunc func(v pq.Value) any

// converter picks the conversion of a leaf column by its physical and
// logical types (the converted type of older writers where there is no
// logical one).
func converter(t pq.Type) convertFunc {
	lt := t.LogicalType()
	var ct deprecated.ConvertedType = -1
	if c := t.ConvertedType(); c != nil {
		ct = *c
	}
	if lt != nil && lt.Value != nil {
		switch l := lt.Value.(type) {
		case *format.TimestampType:
			unit := l.Unit.Value
			utc := l.IsAdjustedToUTC
			return func(v pq.Value) any { return timestamp(v.Int64(), unit, utc) }
		case *format.DateType:
			return func(v pq.Value) any { return date(int64(v.Int32())) }
		case *format.TimeType:
			unit := l.Unit.Value
			return func(v pq.Value) any {
				n := v.Int64()
				if t.Kind() == pq.Int32 {
					n = int64(v.Int32())
				}
				return time.Unix(0, 0).UTC().Add(time.Duration(n) * unitOf(unit)).Format(timeLayout)
			}
		case *format.DecimalType:
			scale := int(l.Scale)
			return func(v pq.Value) any { return decimal(v, scale) }
		case *format.IntType:
			if !l.IsSigned && l.BitWidth == 64 {
				return func(v pq.Value) any { return json.Number(strconv.FormatUint(v.Uint64(), 10)) }
			}
			if !l.IsSigned && l.BitWidth == 32 {
				return func(v pq.Value) any { return int64(v.Uint32()) }
			}
		case *format.StringType, *format.EnumType:
			return str
		case *format.JsonType:
			return jsonValue
		case *format.UUIDType:
			return uuid
		case *format.Float16Type:
			return float16
		case *format.BsonType:
			return func(v pq.Value) any { return base64.StdEncoding.EncodeToString(v.ByteArray()) }
		}
	}
	switch ct {
	case deprecated.UTF8, deprecated.Enum:
		return str
	case deprecated.Json:
		return jsonValue
	case deprecated.Date:
		return func(v pq.Value) any { return date(int64(v.Int32())) }
	case deprecated.TimestampMillis:
		return func(v pq.Value) any { return timestamp(v.Int64(), &format.MilliSeconds{}, true) }
	case deprecated.TimestampMicros:
		return func(v pq.Value) any { return timestamp(v.Int64(), &format.MicroSeconds{}, true) }
	}
	switch t.Kind() {
	case pq.Boolean:
		return func(v pq.Value) any { return v.Boolean() }
	case pq.Int32:
		return func(v pq.Value) any { return int64(v.Int32()) }
	case pq.Int64:
		return func(v pq.Value) any { return v.Int64() }
	case pq.Int96:
		return func(v pq.Value) any { return int96(v.Int96()) }
	case pq.Float:
		return func(v pq.Value) any { return number(float64(v.Float()), 32) }
	case pq.Double:
		return func(v pq.Value) any { return number(v.Double(), 64) }
	default:
		// Unannotated BYTE_ARRAY: text when it is UTF-8 (writers that
		// leave strings unannotated), else base64 like the PostgreSQL
		// source's bytea.
		return func(v pq.Value) any { return bytesValue(v.ByteArray()) }
	}
}

func str(v pq.Value) any { return string(v.ByteArray()) }

func bytesValue(b []byte) any {
	if utf8.Valid(b) {
		return string(b)
	}
	return base64.StdEncoding.EncodeToString(b)
}

func jsonValue(v pq.Value) any {
	dec := json.NewDecoder(bytes.NewReader(v.ByteArray()))
	dec.UseNumber()
	var out any
	if err := dec.Decode(&out); err == nil {
		return out
	}
	return string(v.ByteArray())
}

func uuid(v pq.Value) any {
	b := v.ByteArray()
	if len(b) != 16 {
		return base64.StdEncoding.EncodeToString(b)
	}
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// float16 decodes an IEEE half-precision float (little-endian, as Parquet
// stores it).
func float16(v pq.Value) any {
	b := v.ByteArray()
	if len(b) != 2 {
		return base64.StdEncoding.EncodeToString(b)
	}
	h := binary.LittleEndian.Uint16(b)
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	frac := uint32(h) & 0x3ff
	var f float32
	switch {
	case exp == 0:
		f = float32(frac) / 1024 * float32(math.Pow(2, -14))
		if sign != 0 {
			f = -f
		}
	case exp == 0x1f:
		f = math.Float32frombits(sign | 0x7f800000 | frac<<13)
	default:
		f = math.Float32frombits(sign | (exp+127-15)<<23 | frac<<13)
	}
	return number(float64(f), 32)
}

// number is a finite float as a json.Number with the digits the PostgreSQL
// source gives a double precision (bits 64) or a real (bits 32), and NaN
// and the infinities as PostgreSQL spells them.
//
// PostgreSQL prints a float's shortest digits that give it back, in
// fixed-point for a decimal exponent from -4 to 14 (a double precision) or
// to 5 (a real), exponential beyond (1234567, 1e+15, 1e-05; a real's
// 1.234567e+06). strconv's 'g' has a real's thresholds for both, so a
// DOUBLE from a million up read 1.234567e+06: an amount, or an id or a
// phone number that pandas wrote as float64 because a row lacked it
// (5.551234567e+09), reached the destination in another spelling than the
// same value read from the database.
func number(f float64, bits int) any {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	s := strconv.FormatFloat(f, 'g', -1, bits)
	if bits == 64 {
		if i := strings.IndexByte(s, 'e'); i >= 0 {
			if exp, err := strconv.Atoi(s[i+1:]); err == nil && exp >= -4 && exp < 15 {
				s = strconv.FormatFloat(f, 'f', -1, 64)
			}
		}
	}
	return json.Number(s)
}

func unitOf(u format.TimeUnitValue) time.Duration {
	if u == nil {
		return time.Millisecond
	}
	return u.Duration()
}

// timestamp formats n units since the epoch as the PostgreSQL source formats
// timestamptz (UTC, RFC 3339) or, not adjusted to UTC, timestamp.
func timestamp(n int64, unit format.TimeUnitValue, utc bool) string {
	var t time.Time
	switch d := unitOf(unit); d {
	case time.Nanosecond:
		t = time.Unix(0, n)
	case time.Microsecond:
		t = time.UnixMicro(n)
	default:
		t = time.UnixMilli(n)
	}
	t = t.UTC()
	if utc {
		return t.Format(time.RFC3339Nano)
	}
	return t.Format(isoLocalLayout)
}

func date(days int64) string {
	return time.Unix(days*86400, 0).UTC().Format(dateLayout)
}

// int96 is the legacy Impala/Spark timestamp: nanoseconds of the day, then
// the Julian day; written by those engines in UTC.
func int96(i deprecated.Int96) string {
	nanos := int64(i[1])<<32 | int64(i[0])
	julian := int64(i[2])
	const unixEpochJulian = 2440588
	t := time.Unix((julian-unixEpochJulian)*86400, nanos).UTC()
	return t.Format(time.RFC3339Nano)
}

// decimal renders a DECIMAL (INT32, INT64 or big-endian two's complement
// bytes) with its scale, as a json.Number.
func decimal(v pq.Value, scale int) any {
	var n big.Int
	switch v.Kind() {
	case pq.Int32:
		n.SetInt64(int64(v.Int32()))
	case pq.Int64:
		n.SetInt64(v.Int64())
	default:
		b := v.ByteArray()
		n.SetBytes(b)
		if len(b) > 0 && b[0]&0x80 != 0 {
			// Negative: subtract 2^(8*len).
			var m big.Int
			m.Lsh(big.NewInt(1), uint(8*len(b)))
			n.Sub(&n, &m)
		}
	}
	s := n.String()
	if scale <= 0 {
		return json.Number(s)
	}
	neg := s[0] == '-'
	if neg {
		s = s[1:]
	}
	for len(s) <= scale {
		s = "0" + s
	}
	s = s[:len(s)-scale] + "." + s[len(s)-scale:]
	if neg {
		s = "-" + s
	}
	return json.Number(s)
}
