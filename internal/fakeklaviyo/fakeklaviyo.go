// Package fakeklaviyo is a Klaviyo-compatible HTTP server for tests, demos
// and benchmarks (`oncesync fake-klaviyo`): the profile endpoints oncesync's
// klaviyo destination uses, faithful to Klaviyo's public OpenAPI spec of
// them (klaviyo-profiles.json, revision 2026-07-15, MIT), which it embeds.
//
// What it models of Klaviyo, and why:
//   - Every request can be checked against the spec with kin-openapi
//     (Options.Validate: route, parameters, the required revision header,
//     the Authorization header's "Klaviyo-API-Key <key>" form, JSON:API
//     bodies), and every response of the fake too (Options.ValidateResponses,
//     violations listed by SpecErrors), so the fake cannot drift from the
//     spec without a test noticing.
//   - Authentication: a missing or malformed Authorization header, or a key
//     other than Options.APIKey, is answered 401 in Klaviyo's error shape
//     ({"errors":[{id,status,code,title,detail,source}]}).
//   - The revision header: a malformed revision, or one later than the
//     spec's, is answered 400 (Klaviyo refuses revisions it does not know).
//   - Rate limits (Options.EnforceRateLimits): per account (API key) and
//     per operation, the burst (1 s) and steady (1 min) fixed windows of
//     the spec's x-klaviyo-ratelimit (e.g. profile import 75/s and 750/m,
//     bulk import jobs 10/s and 150/m), as Klaviyo's "Rate limits, status
//     codes, and errors" guide describes them: past either, 429 with
//     Retry-After (whole seconds to the window's end); other answers carry
//     RateLimit-Limit, RateLimit-Remaining and RateLimit-Reset of the steady
//     window.
//   - POST /api/profile-import creates (201) or updates (200) the profile
//     found by email, else external_id, else phone_number; a field set to
//     null is cleared, an absent one left alone; properties are merged key
//     by key; a custom property's integer keeps every digit, other numbers
//     are doubles (the property types of Klaviyo's data model guide:
//     "strings, integers, floats, dates, booleans, arrays/lists, or
//     JSON"). POST /api/profiles creates, or answers 409 duplicate_profile
//     with the existing profile's id in meta.duplicate_profile_id. PATCH
//     /api/profiles/{id} updates (404 when unknown).
//   - GET /api/profiles filters with equals(field,"v") and any(field,["a","b"])
//     on email, external_id, phone_number and id (as the spec's filter
//     parameter allows), 100 a page at most, cursor pagination.
//   - POST /api/profile-bulk-import-jobs (at most 10,000 profiles, 5 MB)
//     answers 202 with a job id; the job is queued for the first half of
//     Options.JobDelay, processing for the second, then complete, applied
//     lazily the first time the fake is touched after its delay (so tests
//     with a fake clock need no sleep). A job does not clear a field sent
//     as null (Klaviyo's bulk import guide: "does not support setting fields
//     to null to clear them"); a profile import does. Profiles it refuses (an invalid or
//     Options.RefuseEmails address, a phone_number not in E.164 form, no identifier, a share picked by
//     Options.JobSkipRate) are listed by GET
//     /api/profile-bulk-import-jobs/{id}/import-errors with a JSON pointer to
//     the profile in the job and its original payload, and counted in
//     failed_count. A job may fail whole (Options.JobFailRate): it ends
//     "cancelled" (the spec's statuses are queued, processing, complete and
//     cancelled) with nothing of it applied, or its first profiles
//     (Options.JobFailApplies, counted in completed_count; Klaviyo does
//     not document which a cancelled job applied, nor that it applied
//     none), for a share of jobs (JobFailRate) or the first ones
//     (JobFailFirst). GET
//     /api/profile-bulk-import-jobs/{id}/relationships/profiles lists the
//     profiles a job created or updated, a cancelled one's too, each once:
//     two profiles of one job whose e-mails differ only in case (or that
//     share an external_id or phone_number) are one profile, listed once,
//     so the list does not say which of the two was applied. As unkind as
//     the spec allows, an import error's original_payload may be null
//     (OmitErrorPayload: only its JSON pointer names the profile), and the
//     errors may be listed late (ErrorsListedAfter) or never
//     (ErrorsNeverListed) while failed_count counts them at once: the spec
//     promises no agreement between the two. A job may also be refused whole
//     before it is queued (Options.JobRefuseRate): 400, as Klaviyo answers a
//     job whose body it will not take. Profiles are added to the job's lists.
//   - POST /api/profile-subscription-bulk-delete-jobs (at most 100 profiles)
//     unsubscribes from email marketing and removes from the given list, as
//     the spec documents, including its warnings: a profile not in the list
//     is unsubscribed globally, a profile not found is created and then
//     unsubscribed (both counted: GlobalUnsubscribes). The job is applied
//     before the 202, or UnsubscribeDelay after it, as Klaviyo queues it
//     (the spec gives it no id to poll); whether a profile is in the list is
//     decided when it is applied.
//   - GET /api/profiles/{id}/relationships/lists lists a profile's lists.
//   - POST /api/lists/{id}/relationships/profiles adds profiles, by id, to a
//     list (204); GET /api/lists/{id} reads a list; GET
//     /api/lists/{id}/relationships/profiles lists a list's members, by
//     e-mail filter. The embedded spec has no list endpoints: these are
//     modelled on Klaviyo's API reference ("Add Profiles to List", "Get
//     List", "Get Profile IDs for List"), their requests checked by hand
//     (lists.go).
//   - Faults: 503 storms (ErrorRate), injected 429s (RateLimitRate), slow
//     answers (Latency), slow writes whose answer comes after the write
//     (WriteLatency), writes held past their client's timeout and applied
//     then (HoldWriteRate), answers dropped after the write was applied
//     (DropResponseRate, AfterWrite) or replaced by a 500
//     (ErrorAfterWriteRate), redirects to another origin
//     (RedirectTo), failing jobs and skipped profiles.
//   - Counters (Stats, GET /_stats): duplicate_writes counts a profile
//     written again with exactly what it already had (a replay that should
//     not have happened).
//
// Where it departs from Klaviyo (deliberately): e-mail addresses are stored
// lower-cased; only the attributes of the spec's profile object are kept
// (no subscriptions beyond what unsubscribing sets, no predictive
// analytics); the spec has no list endpoints, so lists exist as ids only
// (Options.Lists: the ones that exist; nil: any), and adding profiles to one
// follows Klaviyo's API reference rather than the spec.
package fakeklaviyo

import (
	"time"

	"net/http"

	"github.com/oncesync/oncesync/internal/clock"
)

// Options configure the fake. The zero value is a well-behaved Klaviyo that
// accepts any key and does not enforce rate limits.
type Options struct {
	// APIKey, when set, is the only private key accepted (else 401), with
	// OtherAPIKeys.
	APIKey string
	// OtherAPIKeys are more private keys of the same account (a rotation:
	// the old key and the new); they share its rate limits.
	OtherAPIKeys []string
	// AccountID is the account's id (GET /api/accounts); empty: one made up
	// for this Server, so that two fakes are two accounts.
	AccountID string
	// NoAccountsScope answers GET /api/accounts 403 permission_denied, as
	// Klaviyo does for a key without the accounts:read scope.
	NoAccountsScope bool
	// Validate checks every /api request against the spec; one that does not
	// conform is answered 400 and counted (Stats.Invalid).
	Validate bool
	// ValidateResponses checks every answer of the fake against the spec;
	// violations are kept (SpecErrors).
	ValidateResponses bool
	// EnforceRateLimits enforces the spec's per-operation burst and steady
	// limits per API key.
	EnforceRateLimits bool
	// Latency is added to every /api request (a real sleep).
	Latency time.Duration
	// WriteLatency is added after a write is applied, before its answer (a
	// real sleep): a client that times out leaves the write applied.
	WriteLatency time.Duration
	// HoldWriteRate is the fraction (0..1) of write requests (POST, PATCH
	// and DELETE under /api) held HoldWrite once their body arrived, before
	// they are handled. A held request is handled even when its client gave
	// up meanwhile: the write (or the bulk job) lands after the client's
	// timeout, as a server that does not watch its clients does.
	HoldWriteRate float64
	// HoldWrite is how long a held write waits (see HoldWriteRate).
	HoldWrite time.Duration
	// ErrorRate is the fraction of /api requests answered 503 before
	// anything is applied.
	ErrorRate float64
	// RateLimitRate is the fraction of /api requests answered 429.
	RateLimitRate float64
	// ErrorAfterWriteRate is the fraction of writes applied and then
	// answered 500 (the client cannot tell whether they were applied).
	ErrorAfterWriteRate float64
	// DropResponseRate is the fraction of writes applied whose connection is
	// then cut without an answer.
	DropResponseRate float64
	// AfterWrite, when set, runs after a write is applied, before its answer.
	AfterWrite func(r *http.Request)
	// RedirectTo, when set, is an origin every /api request is redirected to
	// (307, same path).
	RedirectTo string
	// RefuseEmails are refused: 400 on single writes, an import error in a
	// bulk job.
	RefuseEmails []string
	// Lists are the account's list ids (nil: every id exists).
	Lists []string
	// JobDelay is how long a bulk import job runs before it is applied (0:
	// applied before the 202).
	JobDelay time.Duration
	// UnsubscribeDelay is how long an unsubscribe job (POST
	// /api/profile-subscription-bulk-delete-jobs) waits before it is
	// applied (0: before the 202). Klaviyo queues it: a profile it finds
	// outside the list then, because an earlier job took it out, is
	// unsubscribed globally.
	UnsubscribeDelay time.Duration
	// JobSkipRate is the fraction of a job's valid profiles it refuses
	// (listed as import errors).
	JobSkipRate float64
	// JobFailRate is the fraction of jobs that fail whole (cancelled,
	// nothing applied unless JobFailApplies).
	JobFailRate float64
	// JobFailApplies is the fraction of a failing job's profiles (its
	// first ones) applied before it is cancelled: Klaviyo does not document
	// that a cancelled job applied nothing, and its completed_count says
	// how many it did.
	JobFailApplies float64
	// JobRefuseRate is the fraction of bulk import job requests refused
	// whole with 400 before anything is queued (a client then has to send
	// the profiles another way).
	JobRefuseRate float64
	// JobFailFirst makes the first JobFailFirst jobs of the Server fail
	// whole (as JobFailRate, with JobFailApplies), and no later one by
	// this option: a test can cancel a page's job and let its resend
	// through.
	JobFailFirst int
	// OmitErrorPayload leaves import errors' original_payload null (the
	// spec makes it nullable): the profile is named by its JSON pointer only.
	OmitErrorPayload bool
	// ErrorsListedAfter is how long after a job ended its import errors
	// are listed (GET .../import-errors answers an empty list until then),
	// while its failed_count counts them at once. Klaviyo documents neither
	// that the two agree nor when the errors are listed.
	ErrorsListedAfter time.Duration
	// ErrorsNeverListed: a job's import errors are counted in failed_count
	// and never listed (GET .../import-errors answers an empty list).
	ErrorsNeverListed bool
	// Standing is the account's standing from the start (standing.go): ""
	// or "ok", revoked (401) or forbidden (403). Server.SetStanding and
	// POST /_standing change it mid-run.
	Standing string
	// Seed makes fault injection reproducible (0: random).
	Seed int64
	// Clock tells the time of windows, jobs and timestamps (nil: the wall
	// clock). Latency always sleeps for real.
	Clock clock.Clock
}

// Stats are the fake's counters (GET /_stats).
type Stats struct {
	Requests         int64            `json:"requests"`
	ProfilesWritten  int64            `json:"profiles_written"` // profile writes applied
	DuplicateWrites  int64            `json:"duplicate_writes"` // writes that changed nothing
	Profiles         int64            `json:"profiles"`         // distinct profiles stored
	Refused          int64            `json:"refused"`          // single writes refused for their content
	ByRoute          map[string]int64 `json:"by_route"`
	ByStatus         map[string]int64 `json:"by_status"`
	Invalid          int64            `json:"invalid_requests"`  // requests off the spec
	Dropped          int64            `json:"dropped_responses"` // writes applied, answer cut
	RateLimited      int64            `json:"rate_limited"`      // 429s sent
	JobsCreated      int64            `json:"jobs_created"`
	JobsFailed       int64            `json:"jobs_failed"`
	JobsRefused      int64            `json:"jobs_refused"` // job requests refused whole (JobRefuseRate)
	ImportErrors     int64            `json:"import_errors"`
	ListRemovals     int64            `json:"list_removals"`  // profiles taken out of a list (an unsubscribe job, DELETE /api/lists/{id}/relationships/profiles)
	ListAdditions    int64            `json:"list_additions"` // profiles added to a list by POST /api/lists/{id}/relationships/profiles
	Unsubscribed     int64            `json:"unsubscribed"`
	GlobalUnsubs     int64            `json:"global_unsubscribes"` // profiles unsubscribed outside the list (the spec's warning)
	SpecErrors       int64            `json:"spec_errors"`         // responses of the fake off the spec
	DuplicateExample []string         `json:"duplicate_examples,omitempty"`

	// Held counts the writes held HoldWrite, HeldPending those held now,
	// HeldAbandoned those whose client had given up when they were handled.
	Held          int64 `json:"held_writes"`
	HeldPending   int64 `json:"held_writes_pending"`
	HeldAbandoned int64 `json:"held_writes_abandoned"`
}

const maxDuplicateExamples = 20
