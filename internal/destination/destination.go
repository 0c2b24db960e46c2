// Package destination defines what oncesync writes to. Connectors live in
// sub-packages (destination/brevo, destination/webhook) and each passes the
// shared acceptance suite in destination/destinationtest.
package destination

import (
	"context"
	"time"
)

// Capability is how a destination lets oncesync settle an in-doubt record: one
// whose write was sent but never marked complete because its writer died (SPEC §4).
type Capability int

const (
	// CapNone: the destination can neither be asked nor deduplicate; in-doubt
	// records are shown to a person.
	CapNone Capability = iota
	// CapVerify: the destination can be asked whether a write landed (Verify).
	CapVerify
	// CapIdempotent: resending with the same idempotency key is harmless.
	CapIdempotent
)

func (c Capability) String() string {
	switch c {
	case CapVerify:
		return "verify"
	case CapIdempotent:
		return "idempotent"
	default:
		return "none"
	}
}

// Record is one mapped record to deliver.
type Record struct {
	// Key is the record's delivery key, hex encoded (64 chars). It holds no
	// personal data and is safe to send as an idempotency key.
	Key string
	// Data is the mapped record: the mapping's output (e.g. {"email": ...,
	// "attributes": {...}} for Brevo).
	Data map[string]any
}

// Outcome is what happened to one record.
type Outcome int

const (
	// Delivered: the destination accepted the record.
	Delivered Outcome = iota
	// Rejected: the destination refused this record for its own content (a 4xx
	// for that record); Message holds the destination's reason.
	Rejected
)

// Result is the outcome of one record.
type Result struct {
	Key     string
	Outcome Outcome
	// Ref is the destination's reference (contact id, process id, ...), if any.
	Ref string
	// Message is the destination's rejection message (Rejected only).
	Message string
}

// Destination writes records.
type Destination interface {
	// Capability says how in-doubt records are settled.
	Capability() Capability
	// Write delivers recs (one page's claimed records) and returns one Result per
	// record, in any order. A non-nil error means the page as a whole could not
	// be written; it is a *failure.Error carrying destination_auth,
	// destination_unavailable or destination_rate_limited, and the records are
	// left pending. In-run retries and rate limiting happen inside Write.
	Write(ctx context.Context, recs []Record) ([]Result, error)
	// Verify reports, for each record, whether a write with exactly this data
	// already landed, returning the keys that did (with their Ref). since is the
	// earliest time the in-doubt write may have happened. Only called when
	// Capability is CapVerify.
	Verify(ctx context.Context, recs []Record, since time.Time) (map[string]string, error)
	Close() error
}
