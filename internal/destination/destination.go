// Package destination defines what oncesync writes to. Connectors live in
// sub-packages (destination/brevo, destination/webhook) and each passes the
// shared acceptance suite in destination/destinationtest.
package destination

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"net/http"
	"regexp"
	"sync/atomic"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

// Capability is how a destination lets oncesync settle an in-doubt record: one
// whose write was sent but never marked complete because its writer died (docs/guide.md#the-ledger-and-its-retention).
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
	// Redelivery: the sync delivered an earlier value of this record (its
	// slot has a last delivered state). Only then may a destination read a
	// conflict on the record's own id as the record having moved (Brevo's
	// ext_id: docs/guide.md#an-address-that-changes); on a first delivery
	// the id is another contact's (another sync's, a person's), not ours.
	Redelivery bool
	// EarlierInDoubt: a write of another value of this record is in doubt
	// and may still be applied (a queued import). A read-back that finds
	// this record's values (a row changed back to what the destination
	// held) must not take it as landed while such work of the destination
	// may still write over it: Verify lets the destination's pending work
	// end first.
	EarlierInDoubt bool
	// HeldBefore: the destination held these very values before the write
	// in doubt (the sync delivered them last; a row changed and changed
	// back). A read-back that finds the record untouched since that write
	// (absent from a listing of what changed since) may report it landed
	// under RefUnchanged: the write did not land, and the values are there.
	HeldBefore bool
}

// RefUnchanged is the reference Verify gives a HeldBefore record it found
// untouched since the write in doubt, where it has no reference of its own
// to give: the record's last delivery's stands.
const RefUnchanged = "\x00unchanged"

// Outcome is what happened to one record.
type Outcome int

const (
	// Delivered: the destination accepted the record.
	Delivered Outcome = iota
	// Rejected: the destination refused this record for its own content (a 4xx
	// for that record); Message holds the destination's reason.
	Rejected
	// Accepted: the destination took the record for processing later (an
	// asynchronous bulk import: Brevo's and Klaviyo's 202 with a process or
	// job id, which is Ref). It is not delivered yet: Async.Outcomes tells
	// what became of it (docs/guide.md#the-ledger-and-its-retention, "Asynchronous outcomes").
	Accepted
	// NotSent: the record's request provably never reached the destination
	// (connection refused, a DNS failure, no lease time left to start the
	// attempt). Its claim is released; it is not in doubt (docs/guide.md#the-ledger-and-its-retention).
	NotSent
)

func (o Outcome) String() string {
	switch o {
	case Delivered:
		return "delivered"
	case Rejected:
		return "rejected"
	case Accepted:
		return "accepted"
	case NotSent:
		return "not sent"
	}
	return "unknown"
}

// Result is the outcome of one record.
type Result struct {
	Key     string
	Outcome Outcome
	// Ref is the destination's reference (contact id, process id, ...), if
	// any. For Accepted it is required: the process to ask (Async.Outcomes).
	Ref string
	// Message is the destination's rejection message (Rejected only). It
	// holds no personal data (e-mail addresses are redacted).
	Message string
	// Skipped, on a Delivered result, says why the write mode left the
	// record as the destination had it (SkipNotFound, SkipExists): the
	// destination is as up to date as the sync's write mode allows.
	Skipped string
}

// Checker is implemented by a destination that can test its connection
// without writing anything (`oncesync check`): the credentials, and the
// account's objects the sync names (Brevo's lists). It returns one line per
// thing checked, and an error, with a failure code, at the first failure.
// A line that begins with NotChecked says what could not be checked (a
// notice, not a failure).
type Checker interface {
	Check(ctx context.Context) (checked []string, err error)
}

// NotChecked begins a Checker's line about something it could not check.
const NotChecked = "not checked: "

// AccountTeller is implemented by a destination whose vendor says which
// account a credential reaches (docs/guide.md#changing-a-sync): a new API key
// of the same account then sends nothing again, without destination.account.
type AccountTeller interface {
	// AccountID is the vendor's identifier of the account the destination's
	// credential reaches (its id, or its login where the vendor has no id),
	// prefixed with the vendor's name. The caller keeps only a digest of it. ErrNoAccountID when the vendor
	// will not tell (no such endpoint, a key without the scope); any other
	// error is a *failure.Error, as Write's.
	AccountID(ctx context.Context) (string, error)
}

// ErrNoAccountID is AccountID's answer when the vendor will not say which
// account the credential reaches.
var ErrNoAccountID = errors.New("the destination does not say which account its credential reaches")

// Judge is implemented by a destination that can tell, without a request,
// which records its Write would reject before sending them (a dry run
// counts them; it reads only the source and the ledger). refused[i] is why
// recs[i] would be rejected, "" when it would be sent.
type Judge interface {
	Judge(ctx context.Context, recs []Record) (refused []string, err error)
}

// Destination writes records.
type Destination interface {
	// Capability says how in-doubt records are settled.
	Capability() Capability
	// Write delivers recs (one page's claimed records) and returns one Result per
	// record, in any order. A non-nil error means the page as a whole could not
	// be written; it is a *failure.Error carrying destination_auth,
	// destination_unavailable, destination_rate_limited or lease_lost, and the
	// results returned with it are those of records already settled
	// (including NotSent for records whose request provably never left);
	// every other record is left pending (in doubt). In-run retries and rate
	// limiting happen inside Write, within the attempt deadline carried by
	// ctx (WithAttemptDeadline).
	Write(ctx context.Context, recs []Record) ([]Result, error)
	// Verify reports, for each record, whether a write with exactly this data
	// already landed, returning the keys that did (with their Ref). since is the
	// earliest time the in-doubt write may have happened. Only called when
	// Capability is CapVerify.
	Verify(ctx context.Context, recs []Record, since time.Time) (map[string]string, error)
	Close() error
}

// Pipelined is implemented by a destination whose Write of one page may run
// while the next page's Write is on the wire: each page's request is a
// separate job at the destination (an asynchronous import), so two in flight
// keep the destination busy while the first one's answer travels back. The
// runner never has two pages holding the same slot in flight, and records
// each page's outcomes in page order (docs/guide.md#what-a-run-does).
// PagesInFlight is how many; 1 (or a destination without this method) means
// one page after another.
type Pipelined interface {
	PagesInFlight() int
}

// Async is implemented by a destination whose writes may answer Accepted.
type Async interface {
	// Outcomes reports what became of recs, accepted under ref (the Ref of
	// their Accepted results), asking about that process only, never every
	// process of the account. done is false while the destination is still
	// processing. Once done, it returns one Result per record of recs:
	// Delivered, Rejected (with the destination's reason, e.g. a row the
	// import skipped), or NotSent for every record when the process failed
	// as a whole (nothing of it was applied: the records are to be sent
	// again). It never writes. recs carry the data they were accepted with,
	// so that a report naming rows by e-mail can be matched to keys.
	Outcomes(ctx context.Context, ref string, recs []Record) (results []Result, done bool, err error)
}

// ErrUnknownRef is wrapped by an Async destination's Outcomes error when it
// does not know ref (a process deleted, expired, or another account's, the
// sync's api key having changed): what became of the records is unknown,
// so the runner settles them as writes in doubt (docs/guide.md#changing-a-sync).
var ErrUnknownRef = errors.New("the destination does not know the process the records were accepted under")

// ErrNotSent is wrapped by errors about requests that provably never reached
// the destination (connection refused, DNS failure, no lease time left).
var ErrNotSent = errors.New("the request never reached the destination")

// ErrNoLeaseTime is wrapped (with ErrNotSent) when an attempt, retry or
// rate-limit wait would not end before the attempt deadline carried by the
// context: the run's lease has no time left for it (docs/guide.md#the-store-and-the-leases).
var ErrNoLeaseTime = errors.New("the run's lease has no time left for another attempt")

type deadlineKey struct{}

// WithAttemptDeadline returns ctx carrying until, the time by which every
// destination attempt must have ended (docs/guide.md#the-store-and-the-leases: a write never outlives its
// lease). until is called before each attempt, retry and wait, so a lease
// renewed in the meantime extends it. A destination starts no attempt that
// cannot end by then, bounds each attempt's own timeout by it, and waits
// (backoff, a 429's reset) only when the wait ends before it.
func WithAttemptDeadline(ctx context.Context, until func() time.Time) context.Context {
	return context.WithValue(ctx, deadlineKey{}, until)
}

// AttemptDeadline returns the deadline ctx carries (WithAttemptDeadline),
// read now; ok is false when it carries none.
func AttemptDeadline(ctx context.Context) (t time.Time, ok bool) {
	f, ok := ctx.Value(deadlineKey{}).(func() time.Time)
	if !ok || f == nil {
		return time.Time{}, false
	}
	return f(), true
}

type checkKey struct{}

// WithCheck returns ctx for a connection check (Checker: `oncesync check`,
// the sync page's Test connection). A person waits on it, so a request
// that gets no answer within its attempt's timeout (the destination's
// timeout) is not tried again: the check fails at once and says so, where
// a run's retries and backoff would keep it silent for minutes.
func WithCheck(ctx context.Context) context.Context {
	return context.WithValue(ctx, checkKey{}, true)
}

// Checking reports whether ctx is a connection check's (WithCheck).
func Checking(ctx context.Context) bool {
	v, _ := ctx.Value(checkKey{}).(bool)
	return v
}

type waitKey struct{}

// Wait is a pause a destination makes before its next request: a rate
// limit's, a Retry-After's, or a backoff after a failure.
type Wait struct {
	Route string        // the request waited for, as "POST /v3/contacts/import"
	For   time.Duration // how long
	Why   string        // "the rate limit", "asked by the destination (Retry-After)", "a backoff after a failure"
}

// WithWaitNotice returns ctx carrying f, told of each wait of NoticeAfter or
// longer a destination makes for a call with ctx: a run that sleeps a
// minute on a 429's Retry-After says so, instead of looking hung.
func WithWaitNotice(ctx context.Context, f func(Wait)) context.Context {
	return context.WithValue(ctx, waitKey{}, f)
}

// NoticeAfter is the shortest wait told to WithWaitNotice's function.
const NoticeAfter = 2 * time.Second

// NoteWait tells ctx's WithWaitNotice function of w, if w is that long.
func NoteWait(ctx context.Context, w Wait) {
	if f, ok := ctx.Value(waitKey{}).(func(Wait)); ok && f != nil && w.For >= NoticeAfter {
		f(w)
	}
}

type requestsKey struct{}

// WithRequestCount returns ctx counting in n every request a destination
// makes for it (retries, read-backs and report downloads included), so a
// run's figures count HTTP requests, not calls of Write.
func WithRequestCount(ctx context.Context, n *atomic.Int64) context.Context {
	return context.WithValue(ctx, requestsKey{}, n)
}

// CountRequest counts one request that may have reached the destination in
// ctx's count (WithRequestCount), if it carries one.
func CountRequest(ctx context.Context) {
	if n, ok := ctx.Value(requestsKey{}).(*atomic.Int64); ok && n != nil {
		n.Add(1)
	}
}

// Options are what the process gives a destination beyond its
// configuration: a connector's constructor takes them.
type Options struct {
	// Clock tells the time (nil: the wall clock).
	Clock clock.Clock
	// HTTPClient is the client used (nil: the connector's own).
	HTTPClient *http.Client
	// Sleep is how the destination waits between in-run retries and for its
	// rate limit (nil: a timer). Tests shrink the waits with it.
	Sleep func(ctx context.Context, d time.Duration) error
	// Accounts, when set, shares each account's request budget with the
	// other runs and processes writing to it (nil: the destination paces
	// itself alone).
	Accounts AccountPacer
}

// emailRE matches what looks like an e-mail address (or a URL's user
// information).
// A backslash ends it too: JSON quoted in a message (\"a@x.com\") keeps
// its escapes.
var emailRE = regexp.MustCompile(`[^\s@"'<>(),;:/\\\[\]]+@[^\s@"'<>(),;:/\\\[\]]+`)

// Redact replaces anything in s that looks like an e-mail address with
// "[email]": a destination's messages name contacts, and are stored and
// shown (docs/guide.md#the-sync-pages-and-the-api).
func Redact(s string) string { return emailRE.ReplaceAllString(s, "[email]") }

// WriteMode is what a sync's writes do to the destination's records
// (destination.write_mode; docs/guide.md#write-modes).
type WriteMode string

const (
	// Upsert creates a record that is missing and updates one that exists
	// (the default).
	Upsert WriteMode = "upsert"
	// Update only updates records that already exist at the destination; a
	// record that does not is Delivered with Skipped set, never created.
	Update WriteMode = "update"
	// Create only creates records that do not exist yet; one that does is
	// Delivered with Skipped set, never changed.
	Create WriteMode = "create"
	// Mirror upserts, and removes from the destination the records whose
	// source rows disappeared (Remover).
	Mirror WriteMode = "mirror"
)

// WriteModes lists every write mode, in the order messages name them.
var WriteModes = []WriteMode{Upsert, Update, Create, Mirror}

// Skip reasons a destination sets in Result.Skipped.
const (
	SkipNotFound = "not at the destination (write_mode update)"
	SkipExists   = "already at the destination (write_mode create)"
)

// Remover is implemented by a destination that supports write_mode
// mirror: it removes the records whose source rows disappeared (Brevo:
// from the sync's lists; HubSpot: archives them; Klaviyo: takes them out of
// the sync's list). The runner keeps each delivered record's Handle in
// its slot, finds the slots a full read of the source no longer has, claims
// a removal key for each (fenced, like a write) and calls Remove
// (docs/guide.md#write-modes).
type Remover interface {
	// Handle is what Remove needs to find rec at the destination later,
	// when its source row is gone: its identifier there (the e-mail, or the
	// id_property's value). It is kept in the ledger, never logged or shown.
	Handle(rec Record) (string, error)
	// Remove removes the records rms name and returns one Result per
	// removal (Key is the removal's key): Delivered when the record is
	// gone from what the sync owns (including one that was already gone:
	// a removal must be idempotent, so an in-doubt removal is simply sent
	// again), Rejected with the destination's reason, NotSent for requests
	// that provably never left. Errors are as Write's.
	Remove(ctx context.Context, rms []Removal) ([]Result, error)
}

// QueuedRemover is a Remover whose destination queues a removal and
// applies it after answering, where applying one twice can do harm (as
// Klaviyo's bulk unsubscribe job, which oncesync no longer uses, did: it
// unsubscribed globally a profile it found outside the list). A removal an
// earlier run sent, whose answer was not recorded, is not sent again until
// RemovalGrace has passed since that run claimed it: by then the earlier
// one has run, or never will.
type QueuedRemover interface {
	Remover
	RemovalGrace() time.Duration
}

// Removal is one record to remove.
type Removal struct {
	// Key is the removal's delivery key (hex, no personal data).
	Key string
	// Handle is the record's Handle, as kept when it was last delivered.
	Handle string
}

// Limit is a destination account's request budget: Rate requests per
// second on average, and up to Burst at once (at least 1).
type Limit struct {
	Rate  float64
	Burst int
}

// AccountPacer shares a destination account's request budget between every
// run and process writing to it (docs/guide.md#one-rate-limit-per-account):
// a vendor limits an account, not a sync. Destinations reach it through
// apiclient.AccountLimiter, which falls back to pacing alone when it fails.
type AccountPacer interface {
	// Reserve books the account's next request slot under limit and
	// returns how long to wait before sending it.
	Reserve(ctx context.Context, account string, limit Limit) (time.Duration, error)
	// Pause holds every request of the account back for d: the vendor
	// said its window is spent.
	Pause(ctx context.Context, account string, d time.Duration) error
}

// Account names a destination account for an AccountPacer: a hash of the
// destination's kind and of what identifies the account (its address and
// credentials), so no secret is ever a key.
// Budget is the part of an account's key (Account) that names it: its
// credential, or the destination's `account` when the config names one, so
// that a key rotated under the same name (two keys of one account in use
// at once) shares the account's budget (docs/guide.md#one-rate-limit-per-account).
func Budget(credential, name string) string {
	if name != "" {
		return "account:" + name
	}
	return credential
}

func Account(kind string, parts ...string) string {
	h := sha256.New()
	for _, p := range append([]string{kind}, parts...) {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	return kind + "-" + hex.EncodeToString(h.Sum(nil)[:16])
}
