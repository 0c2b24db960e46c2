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

func (p position) String() string {
	if len(p) == 0 {
		return ""
	}
	pairs := make([][2]string, len(p))
	for i, kv := range p {
		pairs[i] = [2]string{kv.Type, kv.Text}
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
	if s == "" {
		return nil, nil
	}
	bad := func(why string) (position, error) {
		return nil, fmt.Errorf("%w: %s", source.ErrBadCursor, why)
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
	if len(pairs) != want {
		return bad(fmt.Sprintf("%d key values, want %d (cursor_column and identity changed?)", len(pairs), want))
	}
	p := make(position, len(pairs))
	for i, pair := range pairs {
		if len(pair) != 2 || pair[0] == nil || pair[1] == nil || *pair[0] == "" {
			return bad("not a JSON array of [type, value] pairs")
		}
		p[i] = keyValue{Type: *pair[0], Text: *pair[1]}
	}
	if p.String() != s {
		return bad("not in canonical form")
	}
	return p, nil
}
