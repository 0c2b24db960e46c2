package shopify

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
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
	// Floor is the instant this pass starts from (RFC 3339), "" for every
	// customer; the pass asks for customers updated from Params.Lookback
	// before it.
	Floor string `json:"f,omitempty"`
	// After is Shopify's cursor after the last customer read in this pass,
	// "" at the pass's start.
	After string `json:"a,omitempty"`
	// Last is the latest updatedAt read.
	Last string `json:"u,omitempty"`
	// Seen are the customers read whose updatedAt is within window of
	// Last, as "unixtime:id:hash" (the newest maxSeen): the next pass skips
	// those it reads unchanged.
	Seen []string `json:"s,omitempty"`
	// Prev is the previous pass's Seen, which this pass skips by.
	Prev []string `json:"p,omitempty"`
	// Start is when this pass began: the Date of Shopify's answer to its
	// first page (Shopify's clock), "" when unknown.
	Start string `json:"t,omitempty"`
	// Settled: every customer updated up to Floor was read by the previous
	// pass, so this one asks for those updated after it, without look-back
	// (see nextPass).
	Settled bool `json:"x,omitempty"`
	// pending are customers read but not yet in Seen: hashing every record
	// read costs, only those still in the window when the cursor is written
	// need it.
	pending []pendingRec
	// window is how far before Last Seen reaches: the source's look-back
	// (Params.Lookback), at least seenWindow; not saved.
	window time.Duration
}

type pendingRec struct {
	rec source.Record
	key string // "" until hashed
	at  time.Time
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
	for _, t := range []string{p.Floor, p.Last, p.Start} {
		if t != "" {
			if _, err := time.Parse(time.RFC3339, t); err != nil {
				return bad("a time in it is not RFC 3339")
			}
		}
	}
	// Re-encoded with a window that prunes nothing: the cursor was pruned
	// to its writer's look-back, which may be longer than this one's.
	p.window = math.MaxInt64
	if p.String() != s {
		return bad("not in canonical form")
	}
	p.window = 0
	return p, nil
}

func seenKey(rec source.Record, at time.Time) string {
	return strconv.FormatInt(at.Unix(), 10) + ":" + fmt.Sprint(rec.Fields["id"]) + ":" + recordHash(rec)
}

func (p *position) last() time.Time {
	t, _ := time.Parse(time.RFC3339, p.Last) // parseCursor checked it
	return t
}

// skip reports whether rec was read already, unchanged, by the previous
// pass; its key when it was.
func (p *position) skip(rec source.Record, at time.Time) (bool, string) {
	if len(p.Prev) == 0 {
		return false, ""
	}
	k := seenKey(rec, at)
	return slices.Contains(p.Prev, k), k
}

// saw records rec, updated at, as read (or skipped: key is its key).
func (p *position) saw(rec source.Record, key string, at time.Time) {
	if p.Last == "" || at.After(p.last()) {
		p.Last = at.UTC().Format(time.RFC3339)
	}
	p.pending = append(p.pending, pendingRec{rec: rec, key: key, at: at})
	if len(p.pending) > 2*maxSeen {
		p.prune(false)
	}
}

// prune forgets what fell out of the window before Last, and keeps the
// newest maxSeen; with hash, it moves pending customers into Seen.
func (p *position) prune(hash bool) {
	from := p.last().Add(-max(p.window, seenWindow))
	seen := p.Seen[:0:0]
	for _, k := range p.Seen {
		unix, _, _ := strings.Cut(k, ":")
		if n, err := strconv.ParseInt(unix, 10, 64); err == nil && !time.Unix(n, 0).Before(from) {
			seen = append(seen, k)
		}
	}
	pending := p.pending[:0:0]
	for _, r := range p.pending {
		if !r.at.Before(from) {
			pending = append(pending, r)
		}
	}
	// The newest maxSeen: pending were read after Seen's.
	if len(pending) > maxSeen {
		pending = pending[len(pending)-maxSeen:]
	}
	if over := len(seen) + len(pending) - maxSeen; over > 0 {
		seen = seen[over:]
	}
	if hash {
		for _, r := range pending {
			k := r.key
			if k == "" {
				k = seenKey(r.rec, r.at)
			}
			if !slices.Contains(seen, k) {
				seen = append(seen, k)
			}
		}
		pending = nil
	}
	p.Seen, p.pending = seen, pending
	if len(p.Seen) == 0 {
		p.Seen = nil
	}
	if len(p.pending) == 0 {
		p.pending = nil
	}
}

// flush moves the pending customers' keys into Seen.
func (p *position) flush() {
	if p.Last != "" {
		p.prune(true)
	}
}

// settleMargin is how much later than the look-back after the last
// instant read a pass must have begun for the next one to skip the
// look-back: Shopify's Date says when its answer left, the search ran a
// little before, and both clocks are read to the second.
const settleMargin = time.Minute

// nextPass is where the next run starts: from the last instant read,
// looking back, less the customers read unchanged. When this pass began
// more than the look-back after that instant, every customer updated up to
// it was indexed before the pass began (the look-back bounds the index's
// lag) and so was read by it: the next pass asks only for customers
// updated after it. Otherwise a quiet store would read again, at every run,
// the customers of its last look-back window beyond the maxSeen the cursor
// remembers (a bulk import of thousands in the same second).
func (p position) nextPass() position {
	p.flush()
	if p.Last == "" {
		return position{Floor: p.Floor, Settled: p.Settled, window: p.window}
	}
	if start, err := time.Parse(time.RFC3339, p.Start); err == nil && !start.Before(p.last().Add(p.window+settleMargin)) {
		return position{Floor: p.Last, Last: p.Last, Settled: true, window: p.window}
	}
	// A customer updated while this pass read sorts by that instant (at or
	// after the pass began) and its id: when the pass was reading customers
	// of that very second, one with a lower id fell before the cursor and
	// was not read. So the next pass starts no later than this one began
	// (TestUpdatedInThePassBelowItsCursor); the customers it reads again
	// unchanged are not written.
	floor := p.Last
	if start, err := time.Parse(time.RFC3339, p.Start); err == nil && start.Before(p.last()) {
		floor = start.UTC().Format(time.RFC3339)
	}
	return position{Floor: floor, Last: p.Last, Prev: p.Seen, window: p.window}
}
