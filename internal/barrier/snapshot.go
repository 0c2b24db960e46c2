package barrier

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"math/big"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
)

// ErrUnhashable: Snapshot met a value it has no canonical encoding for (a
// struct, a channel, a function, a map with non-string keys, NaN or an
// infinity, a structure nested deeper than MaxSnapshotDepth).
var ErrUnhashable = errors.New("value has no canonical snapshot encoding")

// MaxSnapshotDepth bounds the nesting of Snapshot's inputs (and so catches
// cyclic maps and slices).
const MaxSnapshotDepth = 64

// snapshotDomain starts every encoding: it names the format and its version,
// so a future encoding never produces a hash equal to this one's.
const snapshotDomain = "oncesync.checkpoint.snapshot/v1\x00"

// Type tags of the canonical encoding.
const (
	tagNull   = 'N'
	tagFalse  = 'F'
	tagTrue   = 'T'
	tagString = 'S'
	tagInt    = 'I'
	tagFloat  = 'D'
	tagTime   = 'Z'
	tagBytes  = 'B'
	tagList   = 'L'
	tagMap    = 'M'
)

// Snapshot returns the hex SHA-256 of the canonical encoding of inputs: the
// reference point workers compare at the barrier. Identical inputs give the
// same hash in every process, whatever its clock, time zone, locale or map
// iteration order; nothing is read from a clock.
//
// The encoding is typed and length-prefixed, so no two different inputs
// share an encoding:
//
//   - nil (and nil pointers and interfaces) → null; a nil slice or map is
//     the empty list or map, as everywhere in Go
//   - bool → true/false
//   - string kinds → string (bytes as they are; no Unicode normalisation)
//   - every integer kind, *big.Int, and json.Number without '.', 'e' or 'E'
//     → integer, by decimal value (int8(1), uint64(1) and json.Number("1")
//     hash alike; the string "1" does not)
//   - float32/float64, and other json.Numbers → float, by IEEE-754 binary64
//     bits with -0 folded into 0 (1.0 is a float, 1 an integer: they differ);
//     NaN and ±Inf are refused
//   - time.Time → the instant (Unix seconds and nanoseconds): the same moment
//     in two time zones hashes alike, and the monotonic reading is ignored
//   - []byte → bytes (distinct from a string with the same bytes)
//   - slices and arrays → list, in order
//   - maps with string keys → map, entries sorted by key bytes
//   - pointers → what they point to
//
// Anything else (structs, channels, funcs, non-string map keys) is refused
// with ErrUnhashable: convert it to a map first, so that what is hashed is
// explicit.
func Snapshot(inputs map[string]any) (string, error) {
	h := sha256.New()
	if err := writeCanonical(h, inputs); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// SnapshotJSON hashes a JSON document with Snapshot's rules: numbers keep
// their literal form's type (1 is an integer, 1.0 and 1e0 are floats). The
// document must be one JSON object.
func SnapshotJSON(r io.Reader) (string, error) {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	var inputs map[string]any
	if err := dec.Decode(&inputs); err != nil {
		return "", fmt.Errorf("snapshot inputs: want one JSON object: %w", err)
	}
	if inputs == nil {
		return "", fmt.Errorf("snapshot inputs: want one JSON object, got null")
	}
	if _, err := dec.Token(); err != io.EOF {
		return "", fmt.Errorf("snapshot inputs: want one JSON object, found more after it")
	}
	return Snapshot(inputs)
}

// CanonicalEncoding returns the bytes Snapshot hashes, for debugging and for
// tests that compare encodings.
func CanonicalEncoding(inputs map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	if err := writeCanonical(&buf, inputs); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func writeCanonical(w io.Writer, inputs map[string]any) error {
	e := &encoder{w: w}
	e.raw([]byte(snapshotDomain))
	if err := e.value(reflect.ValueOf(inputs), 0, "inputs"); err != nil {
		return err
	}
	return e.err
}

type encoder struct {
	w   io.Writer
	err error
	buf [9]byte
}

func (e *encoder) raw(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) tag(t byte) { e.raw([]byte{t}) }

// length writes n as 8 bytes big-endian.
func (e *encoder) length(n int) {
	binary.BigEndian.PutUint64(e.buf[:8], uint64(n))
	e.raw(e.buf[:8])
}

// chunk writes tag, the length of b and b.
func (e *encoder) chunk(tag byte, b []byte) {
	e.tag(tag)
	e.length(len(b))
	e.raw(b)
}

var (
	bigIntType = reflect.TypeFor[big.Int]()
	timeType   = reflect.TypeFor[time.Time]()
	numberType = reflect.TypeFor[json.Number]()
)

func unhashablef(path string, format string, args ...any) error {
	return fmt.Errorf("snapshot %s: %w: %s", path, ErrUnhashable, fmt.Sprintf(format, args...))
}

func (e *encoder) value(v reflect.Value, depth int, path string) error {
	if depth > MaxSnapshotDepth {
		return unhashablef(path, "nested deeper than %d levels (a cycle?)", MaxSnapshotDepth)
	}
	// Unwrap interfaces and pointers; nil anywhere is null.
	for v.IsValid() && (v.Kind() == reflect.Interface || v.Kind() == reflect.Pointer) {
		if v.IsNil() {
			e.tag(tagNull)
			return nil
		}
		if v.Kind() == reflect.Pointer && v.Type().Elem() == bigIntType {
			e.chunk(tagInt, []byte(v.Interface().(*big.Int).String()))
			return nil
		}
		v = v.Elem()
	}
	if !v.IsValid() {
		e.tag(tagNull)
		return nil
	}
	switch t := v.Type(); {
	case t == timeType:
		tm := v.Interface().(time.Time)
		var b [12]byte
		binary.BigEndian.PutUint64(b[:8], uint64(tm.Unix()))
		binary.BigEndian.PutUint32(b[8:], uint32(tm.Nanosecond()))
		e.chunk(tagTime, b[:])
		return nil
	case t == bigIntType:
		bi := v.Interface().(big.Int)
		e.chunk(tagInt, []byte(bi.String()))
		return nil
	case t == numberType:
		return e.number(json.Number(v.String()), path)
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		e.chunk(tagBytes, v.Bytes())
		return nil
	}
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			e.tag(tagTrue)
		} else {
			e.tag(tagFalse)
		}
	case reflect.String:
		e.chunk(tagString, []byte(v.String()))
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		e.chunk(tagInt, strconv.AppendInt(nil, v.Int(), 10))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		e.chunk(tagInt, strconv.AppendUint(nil, v.Uint(), 10))
	case reflect.Float32, reflect.Float64:
		return e.float(v.Float(), path)
	case reflect.Slice, reflect.Array:
		e.tag(tagList)
		e.length(v.Len())
		for i := range v.Len() {
			if err := e.value(v.Index(i), depth+1, path+"["+strconv.Itoa(i)+"]"); err != nil {
				return err
			}
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return unhashablef(path, "map keys of type %s (want strings)", v.Type().Key())
		}
		keys := v.MapKeys()
		slices.SortFunc(keys, func(a, b reflect.Value) int { return strings.Compare(a.String(), b.String()) })
		e.tag(tagMap)
		e.length(len(keys))
		for _, k := range keys {
			e.chunk(tagString, []byte(k.String()))
			if err := e.value(v.MapIndex(k), depth+1, path+"."+strconv.Quote(k.String())); err != nil {
				return err
			}
		}
	default:
		return unhashablef(path, "values of type %s (convert to a map, list or scalar)", v.Type())
	}
	return nil
}

func (e *encoder) float(f float64, path string) error {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return unhashablef(path, "%v is not a comparable number", f)
	}
	if f == 0 {
		f = 0 // fold -0 into +0
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], math.Float64bits(f))
	e.chunk(tagFloat, b[:])
	return nil
}

// number encodes a JSON number: an integer literal by its decimal value (any
// size), anything else as a float.
func (e *encoder) number(n json.Number, path string) error {
	s := n.String()
	if !strings.ContainsAny(s, ".eE") {
		bi, ok := new(big.Int).SetString(s, 10)
		if !ok {
			return unhashablef(path, "number %q", s)
		}
		e.chunk(tagInt, []byte(bi.String()))
		return nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return unhashablef(path, "number %q: %v", s, err)
	}
	return e.float(f, path)
}
