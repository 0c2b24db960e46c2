package shopify

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/source"
)

// cursorPrefix versions the cursor format.
const cursorPrefix = "shopify1:"

// position is a decoded cursor. The zero position is the start of the
// first pass (every customer).
//
// Encoded as "shopify1:" + unpadded base64url of its JSON.
type position struct {
	// Floor is the updated_at lower bound of this pass (RFC 3339), "" for
	// every customer.
	Floor string `json:"f,omitempty"`
	// After is Shopify's cursor after the last customer read in this pass,
	// "" at the pass's start.
	After string `json:"a,omitempty"`
	// Last is the updatedAt of the last customer read (the latest: the pass
	// is sorted by it).
	Last string `json:"u,omitempty"`
	// Seen are the customers read whose updatedAt is Last, as "id:hash"
	// (nil past maxSeen: then they are read again).
	Seen []string `json:"s,omitempty"`
	// Full: more than maxSeen customers were read at Last.
	Full bool `json:"x,omitempty"`
	// pending are customers read at Last whose key is not in Seen yet:
	// hashing every record read costs; only those still at Last when the
	// cursor is written need it.
	pending []source.Record
}

func (p position) String() string {
	p.flush()
	if p.Floor == "" && p.After == "" && p.Last == "" {
		return ""
	}
	b, err := json.Marshal(p)
	if err != nil {
		panic(err) // strings and bools always marshal
	}
	return cursorPrefix + base64.RawURLEncoding.EncodeToString(b)
}

// parseCursor decodes s; only the canonical encoding is accepted (the
// cursor is part of positional delivery keys).
func parseCursor(s string) (position, error) {
	if s == "" {
		return position{}, nil
	}
	bad := func(why string) (position, error) {
		return position{}, fmt.Errorf("%w: %s", source.ErrBadCursor, why)
	}
	rest, ok := strings.CutPrefix(s, cursorPrefix)
	if !ok {
		return bad("not a shopify cursor (want prefix " + cursorPrefix + ")")
	}
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if err != nil {
		return bad("not base64url")
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var p position
	if err := dec.Decode(&p); err != nil || dec.More() {
		return bad("not a shopify cursor's JSON")
	}
	for _, t := range []string{p.Floor, p.Last} {
		if t != "" {
			if _, err := time.Parse(time.RFC3339, t); err != nil {
				return bad("a time in it is not RFC 3339")
			}
		}
	}
	if p.String() != s {
		return bad("not in canonical form")
	}
	return p, nil
}

func seenKey(rec source.Record) string { return fmt.Sprint(rec.Fields["id"]) + ":" + recordHash(rec) }

// skip reports whether rec was read already at the pass's boundary: read
// at Floor by the previous pass, unchanged since.
func (p *position) skip(rec source.Record, updated time.Time) bool {
	if p.Floor == "" || updated.Format(time.RFC3339) != p.Last || p.Last != p.Floor {
		return false
	}
	return slices.Contains(p.Seen, seenKey(rec))
}

// saw records rec as read.
func (p *position) saw(rec source.Record, updated time.Time) {
	u := updated.Format(time.RFC3339)
	if u != p.Last {
		// The pass is sorted by updatedAt: a later instant starts a new set.
		p.Last, p.Seen, p.Full, p.pending = u, nil, false, p.pending[:0]
	}
	if p.Full {
		return
	}
	if len(p.Seen)+len(p.pending) >= maxSeen {
		p.Seen, p.Full, p.pending = nil, true, p.pending[:0]
		return
	}
	p.pending = append(p.pending, rec)
}

// flush moves the pending customers' keys into Seen.
func (p *position) flush() {
	for _, rec := range p.pending {
		if k := seenKey(rec); !slices.Contains(p.Seen, k) {
			p.Seen = append(p.Seen, k)
		}
	}
	p.pending = nil
}

// nextPass is where the next run starts: customers updated at or after
// the last instant read, less those read at it.
func (p position) nextPass() position {
	p.flush()
	if p.Last == "" {
		return position{Floor: p.Floor}
	}
	return position{Floor: p.Last, Last: p.Last, Seen: p.Seen, Full: p.Full}
}
