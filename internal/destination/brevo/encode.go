package brevo

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/oncesync/oncesync/internal/jsonenc"
)

// The bulk path builds its request bodies by appending bytes instead of
// json.Marshal (reflection, then a second pass re-validating every item as a
// json.RawMessage). The bytes are exactly json.Marshal's: sorted map keys,
// HTML-safe string escaping, Marshal's float format, the struct field order
// and omitempty rules of the request types (TestImportBodyMatchesMarshal and
// FuzzImportBodyMatchesMarshal compare them with json.Marshal).

// maxFastDepth bounds the nesting appendJSON follows; deeper values (or a
// cyclic map, which json.Marshal refuses) go to json.Marshal.
const maxFastDepth = 100

// encodeAttrs returns json.Marshal(attrs). It uses appendJSON and falls back
// to json.Marshal for a type appendJSON does not handle, so its result and
// its error are always json.Marshal's.
func encodeAttrs(attrs map[string]any) ([]byte, error) {
	if b, ok := appendJSON(make([]byte, 0, 64), attrs, 0); ok {
		return b, nil
	}
	return json.Marshal(attrs)
}

// appendJSON appends the bytes json.Marshal produces for v, for the types a
// mapped record holds: nil, string, bool, int, int64, float64, float32,
// json.Number, map[string]any and []any. ok is false for any other type, a
// NaN or infinite float, an invalid json.Number, or nesting deeper than
// maxFastDepth; the caller then uses json.Marshal (which may refuse the value).
func appendJSON(dst []byte, v any, depth int) (_ []byte, ok bool) {
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
	case json.Number:
		s := string(x)
		if s == "" {
			s = "0" // json.Marshal's choice for an empty Number
		}
		if !validNumber(s) {
			return dst, false
		}
		return append(dst, s...), true
	case map[string]any:
		if x == nil {
			return append(dst, "null"...), true
		}
		if depth >= maxFastDepth {
			return dst, false
		}
		if len(x) == 0 {
			return append(dst, "{}"...), true
		}
		var small [8]string
		keys := small[:0]
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
			if dst, ok = appendJSON(dst, x[k], depth+1); !ok {
				return dst, false
			}
		}
		return append(dst, '}'), true
	case []any:
		if x == nil {
			return append(dst, "null"...), true
		}
		if depth >= maxFastDepth {
			return dst, false
		}
		dst = append(dst, '[')
		for i, e := range x {
			if i > 0 {
				dst = append(dst, ',')
			}
			if dst, ok = appendJSON(dst, e, depth+1); !ok {
				return dst, false
			}
		}
		return append(dst, ']'), true
	}
	return dst, false
}

// validNumber is encoding/json's isValidNumber: s is a JSON number literal.
func validNumber(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == '-' {
		s = s[1:]
		if s == "" {
			return false
		}
	}
	switch {
	case s[0] == '0':
		s = s[1:]
	case '1' <= s[0] && s[0] <= '9':
		s = s[1:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	default:
		return false
	}
	if len(s) >= 2 && s[0] == '.' && '0' <= s[1] && s[1] <= '9' {
		s = s[2:]
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	if len(s) >= 2 && (s[0] == 'e' || s[0] == 'E') {
		s = s[1:]
		if s[0] == '+' || s[0] == '-' {
			s = s[1:]
			if s == "" {
				return false
			}
		}
		for len(s) > 0 && '0' <= s[0] && s[0] <= '9' {
			s = s[1:]
		}
	}
	return s == ""
}

// appendImportItem appends c as one element of an import's jsonBody
// (swagger: requestContactImport_jsonBody), as json.Marshal encoded
//
//	struct {
//		Email      string         `json:"email,omitempty"`
//		Attributes map[string]any `json:"attributes,omitempty"`
//	}
//
// with Attributes = importAttrs(c): the item has no field of its own for
// ext_id, so it travels as the EXT_ID attribute. c.attrsJSON is that map
// encoded, empty when it is.
func appendImportItem(dst []byte, c contact) []byte {
	dst = append(dst, '{')
	if c.email != "" {
		dst = append(dst, `"email":`...)
		dst = jsonenc.AppendString(dst, c.email)
	}
	if len(c.attrsJSON) > 0 {
		if c.email != "" {
			dst = append(dst, ',')
		}
		dst = append(dst, `"attributes":`...)
		dst = append(dst, c.attrsJSON...)
	}
	return append(dst, '}')
}

// importPrefix opens the body of POST /contacts/import (swagger:
// requestContactImport); the items follow, comma separated, then
// importSuffix. The field order is json.Marshal's of
//
//	struct {
//		JSONBody                []json.RawMessage `json:"jsonBody"`
//		ListIDs                 []int64           `json:"listIds"`
//		UpdateExistingContacts  bool              `json:"updateExistingContacts"`
//		EmptyContactsAttributes bool              `json:"emptyContactsAttributes"`
//		DisableNotification     bool              `json:"disableNotification"`
//	}
//
// with UpdateExistingContacts, EmptyContactsAttributes and
// DisableNotification true: an empty value erases the attribute, so a value
// cleared in the source is cleared in Brevo
// (docs/guide.md#a-value-cleared-in-the-source).
const importPrefix = `{"jsonBody":[`

// importSuffix closes an import body for the lists listIDs (null when there
// are none, as json.Marshal encodes a nil slice).
func importSuffix(listIDs []int64) []byte {
	dst := append(make([]byte, 0, 96), `],"listIds":`...)
	if listIDs == nil {
		dst = append(dst, "null"...)
	} else {
		dst = append(dst, '[')
		for i, id := range listIDs {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = strconv.AppendInt(dst, id, 10)
		}
		dst = append(dst, ']')
	}
	return append(dst, `,"updateExistingContacts":true,"emptyContactsAttributes":true,"disableNotification":true}`...)
}

// importPage is a page's import items, encoded once, comma separated, in one
// buffer; item n is items[start[n]:end[n]].
type importPage struct {
	items      []byte
	start, end []int
	suffix     []byte
}

// encodeImport encodes the contacts of idx (in order) as import items.
func (w *pageWrite) encodeImport(idx []int) *importPage {
	p := &importPage{
		start:  make([]int, len(idx)),
		end:    make([]int, len(idx)),
		suffix: importSuffix(w.d.listIDs),
	}
	size := 0
	for _, i := range idx {
		c := w.contacts[i]
		size += len(c.email) + len(c.attrsJSON) + 32
	}
	p.items = make([]byte, 0, size)
	for n, i := range idx {
		if n > 0 {
			p.items = append(p.items, ',')
		}
		p.start[n] = len(p.items)
		p.items = appendImportItem(p.items, w.contacts[i])
		p.end[n] = len(p.items)
	}
	return p
}

// span is the items [from, to) of an importPage: one request body.
type span struct{ from, to int }

// chunks splits the page so that each import body stays under maxBody
// bytes; an item too big alone still goes alone, and Brevo judges it.
func (p *importPage) chunks(maxBody int) []span {
	envelope := len(importPrefix) + len(p.suffix)
	var (
		out  []span
		cur  = span{}
		size = envelope
	)
	for n := range p.start {
		l := p.end[n] - p.start[n]
		if cur.to > cur.from {
			l++ // comma
		}
		if cur.to > cur.from && size+l > maxBody {
			out = append(out, cur)
			cur, size = span{from: n, to: n}, envelope
			l--
		}
		cur.to = n + 1
		size += l
	}
	if cur.to > cur.from {
		out = append(out, cur)
	}
	return out
}

// body is the request body of the items in s.
func (p *importPage) body(s span) []byte {
	items := p.items[p.start[s.from]:p.end[s.to-1]]
	b := make([]byte, 0, len(importPrefix)+len(items)+len(p.suffix))
	b = append(b, importPrefix...)
	b = append(b, items...)
	return append(b, p.suffix...)
}
