package ledger

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/oncesync/oncesync/internal/jsonenc"
)

// appendCanonical appends the JSON encoding/json's Marshal produces for v
// (byte for byte: sorted object keys, HTML-safe string escaping, Marshal's
// float format), for the types a mapped record holds: string, bool, nil,
// float64, float32, int, int64, map[string]any and []any. ok is false for
// any other type (or a NaN or infinite float); the caller then uses
// json.Marshal, so keys never change with this fast path
// (FuzzCanonicalMatchesMarshal checks it).
func appendCanonical(dst []byte, v any) (_ []byte, ok bool) {
	switch x := v.(type) {
	case nil:
		return append(dst, "null"...), true
	case string:
		return jsonenc.AppendString(dst, x), true
	case bool:
		return strconv.AppendBool(dst, x), true
	case int:
		return strconv.AppendInt(dst, int64(x), 10), true
	case int64:
		return strconv.AppendInt(dst, x, 10), true
	case float64:
		return jsonenc.AppendFloat(dst, x, 64)
	case float32:
		return jsonenc.AppendFloat(dst, float64(x), 32)
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), true
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		dst = append(dst, '{')
		for i, k := range keys {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = jsonenc.AppendString(dst, k)
			dst = append(dst, ':')
			if dst, ok = appendCanonical(dst, x[k]); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	case []any:
		if x == nil {
			return append(dst, "null"...), true
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = appendCanonical(dst, e); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	}
	return dst, false
}

// canonicalJSON is json.Marshal(data), through the fast path when it can.
func canonicalJSON(data map[string]any) ([]byte, error) {
	if b, ok := appendCanonical(make([]byte, 0, 256), data); ok {
		return b, nil
	}
	return json.Marshal(data)
}
