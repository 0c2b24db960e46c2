// Package fakehubspot is a HubSpot-compatible HTTP server for tests, demos
// and benches (`oncesync fake-hubspot`): the CRM v3 contacts batch endpoints
// oncesync uses, written from HubSpot's public API documentation (the
// "Contacts" batch reference pages, "API usage guidelines and limits" and
// "API error responses"). HubSpot's OpenAPI spec cannot be shipped, so the
// request shapes below are checked by hand, as strictly as those pages allow.
//
// API CONTRACT (other packages depend on it; extend, do not break):
//
//	srv := fakehubspot.New(fakehubspot.Options{...}) // an http.Handler
//	srv.Stats() Stats                                // also GET /_stats as JSON
//	srv.Contact(idValue) (Contact, bool)             // by email or a unique property value
//	srv.Put(props)                                   // seed a contact (tests)
//	fakehubspot.Serve(ctx, addr, opts, ready)        // `oncesync fake-hubspot`
//	fakehubspot.RegisterFlags(fs, &opts)             // its flags
//
// What it models:
//   - POST /crm/v3/objects/contacts/batch/{upsert,read,create,update,archive}
//     with HubSpot's bodies: inputs of at most 100 (more is a 400
//     VALIDATION_ERROR), idProperty (email or a property with
//     hasUniqueValue), properties as a map of strings. Unknown fields, wrong
//     types, properties the account does not define and read-only
//     properties are refused with HubSpot's error JSON ({status, message,
//     correlationId, category, context}).
//   - Partial failures: upsert and update answer 207 Multi-Status with
//     results for the inputs applied and errors[] (each naming its inputs in
//     context.ids) for invalid property values, invalid e-mail addresses
//     and, for update, contacts not found (OBJECT_NOT_FOUND); read lists
//     missing ids as OBJECT_NOT_FOUND errors with 207. Messages name the
//     value, e-mail addresses included, as HubSpot's do.
//   - batch/create refuses a whole batch with 409 CONFLICT when one input's
//     email or unique value already exists ("Contact already exists.
//     Existing ID: N"), and with 400 when one input is invalid: nothing of it
//     is created.
//   - batch/upsert and batch/update by a custom idProperty refuse an input
//     whose email another contact holds (an error CONFLICT "Contact already
//     exists. Existing ID: N" for that input): HubSpot's contacts guide calls
//     the e-mail "the primary unique identifier to avoid duplicate contacts".
//   - batch/archive answers 204 and ignores ids already archived or unknown.
//   - Secondary e-mail addresses and merges (Server.Merge, POST
//     /crm/v3/objects/contacts/merge {primaryObjectId, objectIdToMerge}):
//     merging keeps the primary contact's e-mail and adds the other's as a
//     secondary address in hs_additional_emails (HubSpot's "Merge contacts"
//     article: "The secondary contact's email address will be added as a
//     secondary email address"); the most recent value of each other
//     property is kept. A secondary address finds its contact as the
//     primary one does ("Secondary email addresses can be used to look up
//     contacts in the same way primary email addresses can", a HubSpot
//     developer's answer on the developer forum): batch/read by email
//     answers the contact (its email property the primary address),
//     batch/upsert and batch/update by email write to it, and batch/create
//     refuses the address with 409 ("you would not be able to create a new
//     contact record with the email address of the old contact record that
//     was merged"). A read by a merged-away contact's id answers the
//     contact it was merged into, under that contact's id (HubSpot's
//     community: batch/read "id in the response ... is different from the
//     id in my original request ... the contact was merged").
//   - GET /crm/v3/properties/contacts[/{name}]: HubSpot's default contact
//     properties plus Options.Properties (for `oncesync check`).
//   - Authorization: Bearer <private app token>; anything else is 401
//     INVALID_AUTHENTICATION.
//   - The ten-second rolling limit per account (Options.RateLimit per
//     10 s: 100 for Free/Starter private apps, 190 for Professional and
//     Enterprise): every API answer carries X-HubSpot-RateLimit-Max,
//     -Remaining and -Interval-Milliseconds; past it, 429 with errorType
//     RATE_LIMIT and policyName TEN_SECONDLY_ROLLING.
//   - Faults: 5xx (ErrorRate, FailFirst), 429 storms (RateLimitFirst),
//     latency, slow writes applied after their caller gave up
//     (WriteLatency), writes held past their client's timeout and applied
//     then (HoldWriteRate), stalls (BeforeWrite), applied-but-unanswered
//     writes (DropResponseRate, DropFirst, AfterWrite), redirects
//     (RedirectTo).
//   - Counters: requests, contacts_written, duplicate_writes (a contact
//     written again with exactly the properties it already had), etc.
//
// Where HubSpot's documentation is unclear, and what the fake chose:
//   - Whether batch/upsert and batch/update apply the valid inputs of a batch
//     holding invalid ones: the reference shows 207 with errors[], so the fake
//     applies the valid inputs and names the invalid ones in context.ids.
//     How an error names its inputs is not documented; context.ids is what
//     HubSpot shows for OBJECT_NOT_FOUND.
//   - batch/create's conflict: the fake refuses the whole batch (409), as
//     HubSpot's community threads report.
//   - Retry-After on 429: not documented; the fake sends it (whole seconds
//     until the oldest request leaves the window, or Options.RateLimitWait)
//     besides the X-HubSpot-RateLimit-* headers.
//   - 503: not documented; the fake's injected 5xx (ErrorStatus, default
//     503) are answered before anything is applied. A 502/504 (HubSpot's
//     documented timeouts) may follow an applied write: set ErrorStatus and
//     DropResponseRate to model that.
//   - Values: HubSpot stores every property as a string; the fake checks
//     numbers (digits, an optional "-" and one "." only: no exponent, no "+",
//     as HubSpot's changelog "Upcoming: A change for number properties in
//     CRM APIs" says; it answers 400, the fake a 207 naming the input),
//     bool (true/false), dates (epoch
//     milliseconds or ISO 8601; a date property's must be midnight UTC, as
//     HubSpot's timestamps FAQ says) and e-mail syntax. It keeps a date as
//     YYYY-MM-DD and a datetime as an ISO 8601 instant in UTC whichever form
//     was sent ("Time values are represented in ISO 8601 format in
//     responses"), and lower-cases e-mail addresses as HubSpot does.
//   - Surrounding white space: a value of a property that is not text (type
//     string), or an option of an enumeration's value, beginning or ending
//     with white space or an invisible character refuses the whole batch
//     with 400 VALIDATION_ERROR (LEADING_TRAILING_WHITESPACE): HubSpot's
//     changelog "Breaking Change: Enhanced Validations for Non-String
//     Properties in HubSpot's CRMObject APIs" (from 2025-04-07) says 400,
//     not which characters are "invisible": the fake takes Unicode white
//     space and format characters (surroundingSpace). A text property's
//     value is kept as sent, spaces included (that page is about
//     non-string values only).
//   - Enumerations: a value is one or more of the property's options,
//     ";" separated (HubSpot's FAQ "How do I set multiple values for
//     checkbox properties": "value1;value3;value4"; its changelog of
//     2023-05: "values can only include options that exactly match one or
//     more of the options set for the property", "alpha;delta" invalid).
//     How HubSpot keeps such a value is not documented: the fake keeps the
//     options once each, in their display order, so "b;a" reads back "a;b"
//     and a client comparing text would see a value it did not send.
//   - lifecyclestage only moves forward: a write of an earlier stage than the
//     contact's is ignored, the rest of the input applied and the answer a
//     success. A HubSpot developer on its developer forum ("Update Lifecycle
//     Stage Using API": a 204 and no change): "Normally the lifecycle stage
//     cannot move backwards ... You'd need to first set the value to ""
//     (empty string), then (in a separate request) set the earlier
//     lifecycle stage value." The order is the options' display order.
//   - The daily limit is not counted: Options.Standing "daily" (and POST
//     /_standing?state=daily) answers as an account whose limit is spent
//     (standing.go), with revoked (401) and forbidden (403) beside it.
package fakehubspot

import (
	"net/http"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
)

// Options configure the fake. The zero value is a well-behaved HubSpot
// account accepting any non-empty bearer token, at 100 requests per 10 s.
type Options struct {
	// Token, when set, is the only bearer token accepted (else 401), with
	// OtherTokens.
	Token string
	// OtherTokens are more tokens of the same account (a private app's
	// token rotated: the old and the new one).
	OtherTokens []string
	// PortalID is the account's id (GET /account-info/v3/details's
	// portalId); 0: one made up for this Server, so that two fakes are two
	// accounts.
	PortalID int64
	// Properties are custom contact properties the account defines, besides
	// HubSpot's defaults (email, firstname, lastname, ...).
	Properties []Property
	// PropertyFlags are --property values (NAME[:TYPE][:unique]) Serve adds
	// to Properties.
	PropertyFlags []string
	// RateLimit is the requests allowed per rolling 10 s (0: 100; negative:
	// unlimited, headers still sent).
	RateLimit int
	// RateLimitWait, when positive, is the Retry-After of every 429.
	RateLimitWait time.Duration
	// RateLimitFirst answers the first N API requests 429 (a storm that ends).
	RateLimitFirst int
	// Latency is added to every API request.
	Latency time.Duration
	// WriteLatency delays applying each write, even when the client has
	// given up meanwhile: a slow HubSpot applies a write after its caller
	// timed out (the caller must not take that for "not written").
	WriteLatency time.Duration
	// HoldWriteRate is the fraction (0..1) of write requests (batch/upsert,
	// create, update and archive) held HoldWrite once their body arrived,
	// before they are handled. A held request is handled even when its
	// client gave up meanwhile, as a server that does not watch its clients
	// does: the write lands after its caller's timeout, in one piece.
	HoldWriteRate float64
	// HoldWrite is how long a held write waits (see HoldWriteRate).
	HoldWrite time.Duration
	// ErrorRate is the fraction (0..1) of API requests answered ErrorStatus.
	ErrorRate float64
	// FailFirst answers the first N API requests ErrorStatus.
	FailFirst int
	// FailAll answers every API request ErrorStatus.
	FailAll bool
	// ErrorStatus is the status of injected errors (default 503), answered
	// before anything is applied.
	ErrorStatus int
	// DropResponseRate is the fraction (0..1) of writes applied whose
	// connection is then cut without an answer.
	DropResponseRate float64
	// DropFirst cuts the answer of the first N writes, after applying them.
	DropFirst int
	// RedirectTo, when set, answers every API request 307 to this origin.
	RedirectTo string
	// RefuseEmails are refused as invalid e-mail addresses (per input).
	RefuseEmails []string
	// BeforeWrite, when set, is called before a write is applied (a test
	// stalls or kills a client while its request is on the wire).
	BeforeWrite func(r *http.Request)
	// AfterWrite, when set, is called after a write is applied and before
	// its answer is sent.
	AfterWrite func(r *http.Request)
	// Clock tells the time of the rate-limit window and timestamps (nil:
	// the wall clock). Latency always sleeps for real.
	Clock clock.Clock
	// Standing is the account's standing from the start (standing.go): ""
	// or "ok", revoked (401), forbidden (403 MISSING_SCOPES) or daily (429
	// DAILY). Server.SetStanding and POST /_standing change it mid-run.
	Standing string
	// Seed makes fault injection reproducible (0: random).
	Seed int64
	// Scopes are the private app's scopes, as POST
	// /oauth/v2/private-apps/get/access-token-info lists them (nil: those
	// a sync needs, DefaultScopes). Without crm.objects.contacts.write,
	// every batch write (not a read) is answered 403 MISSING_SCOPES, as
	// HubSpot answers a token that may read contacts but not write them.
	Scopes []string
}

// DefaultScopes are a sync's private app's scopes.
var DefaultScopes = []string{"crm.objects.contacts.read", "crm.objects.contacts.write", "crm.schemas.contacts.read"}

// writeScope is the scope HubSpot asks of contact writes.
const writeScope = "crm.objects.contacts.write"

// Property is a contact property definition.
type Property struct {
	Name string `json:"name"`
	// Type is HubSpot's type: string, number, bool, date, datetime, enumeration.
	Type string `json:"type"`
	// Unique: hasUniqueValue (may be an idProperty).
	Unique bool `json:"hasUniqueValue"`
	// ReadOnly: modificationMetadata.readOnlyValue.
	ReadOnly bool `json:"-"`
	// Options are an enumeration's values, in their display order (its
	// options[].value and displayOrder); another value is refused.
	Options []string `json:"-"`
	// FieldType is how HubSpot's forms show the property (fieldType);
	// empty: what its Type implies (an enumeration's is "select";
	// "checkbox" is a multiple-choice one).
	FieldType string `json:"-"`
}

// lifecycleStages are the default options of lifecyclestage, in their
// order.
var lifecycleStages = []string{"subscriber", "lead", "marketingqualifiedlead", "salesqualifiedlead",
	"opportunity", "customer", "evangelist", "other"}

// Stats are the fake's counters (GET /_stats).
type Stats struct {
	Requests        int64 `json:"requests"`         // every API request
	ContactsWritten int64 `json:"contacts_written"` // contact writes applied (created or updated)
	DuplicateWrites int64 `json:"duplicate_writes"` // writes of a contact with exactly the properties it had
	Contacts        int64 `json:"contacts"`         // contacts stored, not archived
	Archived        int64 `json:"archived"`         // contacts archived
	Merged          int64 `json:"merged"`           // contacts merged into another
	// StagesKept counts lifecyclestage values ignored because they would
	// have moved a contact's stage backward.
	StagesKept  int64            `json:"stages_kept"`
	Rejected    int64            `json:"rejected"`     // inputs refused for their content
	RateLimited int64            `json:"rate_limited"` // 429 answers
	Dropped     int64            `json:"dropped_responses"`
	Invalid     int64            `json:"invalid_requests"` // malformed requests (400 for the whole body)
	ByRoute     map[string]int64 `json:"by_route"`
	ByStatus    map[string]int64 `json:"by_status"`
	// DuplicateExamples names the first duplicate writes (contact id, route).
	DuplicateExamples []string `json:"duplicate_examples,omitempty"`

	// Held counts the writes held HoldWrite, HeldPending those held now,
	// HeldAbandoned those whose client had given up when they were handled.
	Held          int64 `json:"held_writes"`
	HeldPending   int64 `json:"held_writes_pending"`
	HeldAbandoned int64 `json:"held_writes_abandoned"`
}

// Contact is a stored contact.
type Contact struct {
	ID         string
	Properties map[string]string
	Archived   bool
	// MergedInto is the id of the contact this one was merged into (Merge):
	// it is no contact of its own any more, and a read by its id answers
	// the contact it was merged into.
	MergedInto string
	Created    time.Time
	Updated    time.Time
	// Writes counts the writes applied to it.
	Writes int
}

// defaultProperties are HubSpot's default contact properties the fake knows.
var defaultProperties = []Property{
	{Name: "email", Type: "string"},
	{Name: "firstname", Type: "string"},
	{Name: "lastname", Type: "string"},
	{Name: "phone", Type: "string"},
	{Name: "mobilephone", Type: "string"},
	{Name: "company", Type: "string"},
	{Name: "website", Type: "string"},
	{Name: "jobtitle", Type: "string"},
	{Name: "address", Type: "string"},
	{Name: "city", Type: "string"},
	{Name: "state", Type: "string"},
	{Name: "zip", Type: "string"},
	{Name: "country", Type: "string"},
	{Name: "lifecyclestage", Type: "enumeration", Options: lifecycleStages},
	{Name: "date_of_birth", Type: "date"},
	{Name: "hs_object_id", Type: "number", Unique: true, ReadOnly: true},
	// HubSpot keeps a contact's secondary e-mail addresses here, ";"
	// separated; it is set by merges and the secondary-email endpoints,
	// not by a property write.
	{Name: "hs_additional_emails", Type: "enumeration", ReadOnly: true},
	{Name: "createdate", Type: "datetime", ReadOnly: true},
	{Name: "lastmodifieddate", Type: "datetime", ReadOnly: true},
}

// MaxBatch is HubSpot's largest batch (inputs per request).
const MaxBatch = 100

// MaxValueChars is the longest property value HubSpot takes: its knowledge
// base ("Property field types in HubSpot"): "When the value is added through
// the CRM, the character limit is 65,536 characters" (only a form's are not
// limited). A longer value is refused as a validation error of its input
// (checkValue, as an invalid number is); the message's words are the fake's
// own.
const MaxValueChars = 65536

// DefaultRateLimit is the private-app limit per 10 s of Free and Starter
// accounts (Professional and Enterprise: 190).
const DefaultRateLimit = 100

// RateLimitInterval is the rolling window of the secondly limit.
const RateLimitInterval = 10 * time.Second
