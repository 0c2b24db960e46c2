// Package fakebrevo is a Brevo-compatible HTTP server for demos, tests and
// users' own tests (`oncesync fake-brevo`). It is faithful to Brevo's public
// API spec for the contact endpoints oncesync uses, sends Brevo's rate-limit
// headers, injects faults on demand and counts duplicate writes.
//
// API CONTRACT (other packages depend on it; extend, do not break):
//
//	srv := fakebrevo.New(fakebrevo.Options{...})    // an http.Handler
//	srv.Stats() Stats                               // also GET /_stats as JSON
//	srv.Contact(email) (Contact, bool)              // a stored contact
//	srv.Reset()                                     // also POST /_reset
//	srv.SetStanding(state) error                    // also POST /_standing?state=STATE (standing.go)
//	srv.Reports()                                   // import reports, for another origin
//	fakebrevo.Serve(ctx, addr, opts, ready)         // `oncesync fake-brevo`
//	fakebrevo.RegisterFlags(fs, &opts)              // its flags
//	fakebrevo.NewValidator(); ValidatingProxy(next) // spec checks for tests
//
// An SMS number is kept in Brevo's form (digits with the country code) and
// belongs to one contact: another contact's number is refused by a single
// write and skipped by an import (phone.go).
//
// Imports are as unkind as Brevo documents them (imports.go says what is
// modelled and why): POST /v3/contacts/import answers 202 with a processId;
// the process runs after a delay (queued, then in_process), skips the rows
// it refuses and lists them in CSV reports whose URLs GET /v3/processes/{id}
// shows in info.import once completed; the reports may be served from
// another origin (Options.ReportBaseURL, Server.Reports); a process may fail
// whole (status failed, nothing applied). A write may be held past its
// client's timeout and applied all the same (HoldWriteRate), as a server
// that does not watch its clients does.
//
// Where the fake departs from Brevo (each is deliberate):
//   - Only jsonBody imports are supported (no fileUrl, fileBody).
//   - Imports complete lazily: a process's contacts are written the first
//     time the fake is touched after its delay (any request, Stats or
//     Contact), so tests with a fake clock need no sleep.
//   - Contacts must have an email (no SMS-only contacts). Attribute names are
//     upper-cased and every attribute is accepted (Brevo ignores attributes
//     the account does not define). GET and PUT /v3/contacts/{identifier}
//     take an email or a numeric ID, as the embedded spec says, and also
//     honour newer Brevo's identifierType query parameter (email_id,
//     contact_id, ext_id). GET returns empty statistics. GET /v3/contacts refuses segmentId and filter.
//   - Rate limits are fixed windows: one second for /v3/contacts*
//     (RateLimitPerSecond), one hour for the other routes
//     (OtherRateLimitPerHour); an unenforced limit reports
//     x-sib-ratelimit-limit 1000000. No Retry-After header: the spec does not
//     document one.
package fakebrevo

import (
	"net/http"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

// Options configure the fake. The zero value is a well-behaved Brevo that
// accepts any non-empty api-key.
type Options struct {
	// APIKey, when set, is the only api-key header value accepted (else 401),
	// with OtherAPIKeys.
	APIKey string
	// OtherAPIKeys are more keys of the same account, as Brevo lets an
	// account hold several (a key rotation: the old and the new key).
	OtherAPIKeys []string
	// AccountLogin is the account's login e-mail (GET /v3/account's email,
	// which no two Brevo accounts share); empty: one made up for this
	// Server, so that two fakes are two accounts.
	AccountLogin string
	// Latency is added to every request.
	Latency time.Duration
	// ErrorRate is the fraction of API requests answered 503 (0..1).
	ErrorRate float64
	// RateLimitRate is the fraction of API requests answered 429 (0..1).
	RateLimitRate float64
	// RateLimitPerSecond, when > 0, enforces Brevo's per-second limit on
	// /v3/contacts* (429 past it); x-sib-ratelimit-* headers are always sent.
	RateLimitPerSecond int
	// SlidingRateWindow counts RateLimitPerSecond over the second before
	// each request instead of per calendar second. Brevo documents a limit
	// per second, not how its window moves; the sliding one is the
	// stricter reading: requests sent exactly at the limit and bunched by
	// the network's jitter find one too many in some second.
	SlidingRateWindow bool
	// OtherRateLimitPerHour, when > 0, enforces Brevo's hourly limit on the
	// endpoints outside /v3/contacts* (/v3/account, /v3/processes...): 100
	// requests an hour on Brevo's general tier, 200 on the advanced one.
	OtherRateLimitPerHour int
	// DropResponseRate is the fraction of write requests whose write is
	// applied and whose connection is then cut before any response.
	DropResponseRate float64
	// HoldWriteRate is the fraction (0..1) of write requests (POST, PUT and
	// DELETE of /v3/contacts*, imports included) the fake holds for
	// HoldWrite once their body has arrived, before handling them. A held
	// request is handled even when its client has given up meanwhile: a
	// server does not undo work because the client stopped waiting, so the
	// write (or the import's process) lands after the client's timeout.
	HoldWriteRate float64
	// HoldWrite is how long a held write waits (see HoldWriteRate).
	HoldWrite time.Duration
	// RefuseEmails are refused with 400 invalid_parameter on POST and PUT
	// /v3/contacts; an import row with one is skipped by the process and
	// listed in its invalid_emails report, as Brevo does with an invalid
	// address.
	RefuseEmails []string
	// Attributes are the account's contact attributes (attributes.go): a
	// write's attributes outside them are dropped, as Brevo drops them. nil:
	// DefaultAttributes; WithAttributes adds to them.
	Attributes []Attribute
	// AnyAttribute stores every attribute a write names and does not list
	// them (GET /contacts/attributes answers 404, as a Brevo-compatible
	// server that does not model attributes): `oncesync fake-brevo` without
	// --attribute, so that a mapping tried against it needs no setup.
	AnyAttribute bool
	// Lists are the account's contact lists (GET /v3/contacts/lists/{id});
	// nil: every list id from 1 up exists.
	Lists []int64
	// ProcessDelay is how long an import process stays queued/in_process
	// before its contacts are written (0 = written before the 202).
	ProcessDelay time.Duration
	// ImportRowDelay is added to ProcessDelay for each row of an import, so
	// that a large import (a person's file) runs long while small ones
	// finish quickly.
	ImportRowDelay time.Duration
	// ImportSkipRate is the fraction (0..1) of an import's otherwise valid
	// rows its process skips, listed in the invalid_emails report.
	ImportSkipRate float64
	// ImportFailRate is the fraction (0..1) of import processes that fail
	// whole: status failed, nothing of them applied.
	ImportFailRate float64
	// ReportBaseURL, when set, is the absolute URL under which import report
	// URLs are published (serve Server.Reports there): another origin, as
	// Brevo's reports are. Empty: the fake's own origin, under ReportPath.
	ReportBaseURL string
	// ReportListen, for Serve only: an address on which to serve the import
	// reports as another origin (it sets ReportBaseURL).
	ReportListen string
	// ConflictAnswer is the form of the answer to an identifier conflict (an
	// e-mail, ext_id or SMS number another contact holds): ConflictCurrent
	// (duplicate_parameter with metadata.duplicate_identifiers),
	// ConflictInvalidParameter (the same with invalid_parameter) or
	// ConflictLegacy ("Contact already exist", no metadata). See conflict.go.
	ConflictAnswer string
	// Validate checks every /v3 request against Brevo's embedded API spec and
	// answers 400 with the validation error when it does not conform.
	Validate bool
	// Standing is the account's standing from the start (standing.go):
	// "" or "ok", revoked (401), no-credits (402), forbidden (403
	// permission_denied) or unvalidated (403 account_under_validation).
	// Server.SetStanding and POST /_standing?state=STATE change it mid-run.
	Standing string
	// Seed makes fault injection reproducible (0 = a random seed).
	Seed int64
	// AfterWrite, when set, is called after a write is applied and before its
	// response is sent (tests use it to kill a client in the in-doubt window).
	AfterWrite func(r *http.Request)
	// Clock tells the time for rate-limit windows, import processes and
	// contact timestamps (nil = the wall clock). Latency always sleeps for real.
	Clock clock.Clock
}

// Stats are the fake's counters (GET /_stats).
type Stats struct {
	Requests        int64            `json:"requests"`          // every /v3 request
	ContactsWritten int64            `json:"contacts_written"`  // contact writes applied
	DuplicateWrites int64            `json:"duplicate_writes"`  // writes of a contact with exactly the attributes (and lists) it already had
	Contacts        int64            `json:"contacts"`          // distinct contacts stored
	Refused         int64            `json:"refused"`           // records refused (400)
	ByRoute         map[string]int64 `json:"by_route"`          // "POST /v3/contacts/import" -> count
	ByStatus        map[string]int64 `json:"by_status"`         // "202" -> count
	Invalid         int64            `json:"invalid_requests"`  // requests that failed spec validation
	Dropped         int64            `json:"dropped_responses"` // writes applied whose connection was then cut
	// Held counts the writes held HoldWrite before they were handled,
	// HeldPending those held now, and HeldAbandoned those whose client had
	// given up by the time they were handled.
	Held          int64 `json:"held_writes"`
	HeldPending   int64 `json:"held_writes_pending"`
	HeldAbandoned int64 `json:"held_writes_abandoned"`
	// Import processes: rows they skipped (listed in their reports), processes
	// that failed whole, and report downloads served.
	ImportRowsSkipped int64 `json:"import_rows_skipped"`
	ImportsFailed     int64 `json:"imports_failed"`
	ReportRequests    int64 `json:"report_requests"`
	// ValuesDropped counts attribute values a write carried and the account
	// did not keep: an attribute it does not define, or a value not of the
	// attribute's type (attributes.go).
	ValuesDropped int64 `json:"attribute_values_dropped"`
	// DuplicateExamples names the first duplicate writes (contact e-mail,
	// how it was written, when), so a test that sees one can tell which
	// record and which path wrote it twice.
	DuplicateExamples []string `json:"duplicate_examples,omitempty"`
}

// maxDuplicateExamples bounds Stats.DuplicateExamples.
const maxDuplicateExamples = 20
