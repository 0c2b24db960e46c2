package mysql

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/oncesync/oncesync/internal/source"
)

// cursorPrefix versions the cursor format so it can change later.
const cursorPrefix = "my1:"

// keyValue is one column of a keyset position: the value's text (MySQL's
// text output; standard base64 for binary strings) and its column's type as
// the driver names it ("BIGINT", "DATETIME", "VARCHAR").
type keyValue struct {
	Type string
	Text string
}

// position is a decoded cursor: the keyset (cursor_column[, identity]) of the
// last row read. The zero position (no values) is the start of the source.
//
// Encoded as "my1:" + unpadded base64url of a JSON array of [type, text]
// pairs, e.g. [["DATETIME","2024-05-01 10:00:00.123456"],["BIGINT","42"]].
// The text is what MySQL prints for the value, which reads back exactly as a
// literal of the column's type (see literal), so datetimes, decimals and text
// round-trip without loss.
type position []keyValue

func (p position) String() string { return p.withHigh(keyValue{}) }

// highTag prefixes the type of a cursor's optional last pair: the largest
// cursor_column value when the pass began (see "Rows committed late" in the
// package documentation), kept in the cursors of the pass's later pages.
const highTag = "high:"

// withHigh is p's cursor carrying the pass's high mark (none when
// high.Type is ""): [..., ["high:DATETIME", "2024-05-01 10:00:00"]].
func (p position) withHigh(high keyValue) string {
	if len(p) == 0 {
		return ""
	}
	pairs := make([][2]string, len(p), len(p)+1)
	for i, kv := range p {
		pairs[i] = [2]string{kv.Type, kv.Text}
	}
	if high.Type != "" {
		pairs = append(pairs, [2]string{highTag + high.Type, high.Text})
	}
	b, err := json.Marshal(pairs)
	if err != nil {
		// Marshalling [][2]string cannot fail.
		panic(err)
	}
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// parseCursor decodes s, which must hold exactly want key values. Only the
// canonical encoding is accepted, so one position has one cursor string (the
// cursor is part of positional delivery keys).
func parseCursor(s string, want int) (position, error) {
	p, _, err := parsePass(s, want)
	return p, err
}

// parsePass is parseCursor that also returns the pass's high mark (Type ""
// when the cursor has none: the start of a pass, or a cursor of an earlier
// oncesync).
func parsePass(s string, want int) (position, keyValue, error) {
	if s == "" {
		return nil, keyValue{}, nil
	}
	bad := func(why string) (position, keyValue, error) {
		return nil, keyValue{}, fmt.Errorf("%w: %s", source.ErrBadCursor, why)
	}
	rest, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok {
		return bad("not a mysql cursor (want prefix " + cursorPrefix + ")")
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return bad("not base64url")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var pairs [][]*string
	if err := dec.Decode(&pairs); err != nil || dec.More() {
		return bad("not a JSON array of [type, value] pairs")
	}
	var high keyValue
	if n := len(pairs); n == want+1 && len(pairs[n-1]) == 2 && pairs[n-1][0] != nil && pairs[n-1][1] != nil {
		if typ, ok := strings.CutPrefix(*pairs[n-1][0], highTag); ok && typ != "" {
			high = keyValue{Type: typ, Text: *pairs[n-1][1]}
			pairs = pairs[:want]
		}
	}
	if len(pairs) != want {
		return bad(fmt.Sprintf("%d key values, want %d (cursor_column and identity changed?)", len(pairs), want))
	}
	p := make(position, len(pairs))
	for i, pair := range pairs {
		if len(pair) != 2 || pair[0] == nil || pair[1] == nil || *pair[0] == "" || strings.HasPrefix(*pair[0], highTag) {
			return bad("not a JSON array of [type, value] pairs")
		}
		p[i] = keyValue{Type: *pair[0], Text: *pair[1]}
	}
	if p.withHigh(high) != s {
		return bad("not in canonical form")
	}
	return p, high, nil
}
