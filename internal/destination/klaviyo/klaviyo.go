// Package klaviyo writes mapped records to Klaviyo profiles, following
// Klaviyo's public OpenAPI spec of its profile endpoints (revision
// 2026-07-15; internal/fakeklaviyo embeds it and checks every request
// against it), and Klaviyo's API reference for the one list endpoint that
// spec lacks (adding profiles to a list; the fake models it by hand). Every
// request carries the revision header, the private key as "Authorization:
// Klaviyo-API-Key ..." and JSON:API bodies, and goes through the shared HTTP
// layer (internal/apiclient).
//
// Paths (docs/guide.md#write-modes):
//   - upsert, single: POST /api/profile-import, one call per record
//     (created or updated by e-mail), Delivered or Rejected.
//   - upsert or mirror, bulk (the default): one POST
//     /api/profile-bulk-import-jobs per page (at most 10,000 profiles and
//     5 MB a job), adding the profiles to list_id; Klaviyo answers 202 with a
//     job id and every record is Accepted. Outcomes polls that job only and
//     reads its import errors: Delivered, Rejected (Klaviyo's reason, no
//     e-mail address in it), or NotSent for a job that failed whole. A job
//     Klaviyo refuses whole (400, 413, 422) is resent one profile import
//     per record, and the profiles imported are then added to list_id (POST
//     /api/lists/{id}/relationships/profiles, 1000 a call): Delivered once
//     in the list, Rejected, or Accepted under a list-add: reference until
//     Outcomes adds it (writeFallback).
//   - update: the profile is looked up by e-mail (GET /api/profiles with
//     filter equals(email,...)) and patched (PATCH /api/profiles/{id}); none:
//     Delivered, skipped. create: POST /api/profiles; 409 duplicate:
//     Delivered, skipped. Both use one call per record whatever the mode:
//     Klaviyo's bulk job always upserts.
//   - mirror's removals (Remover) take a profile out of list_id, its
//     consent unchanged.
//
// Failures map to oncesync's catalog: 401, 402 and 403 → destination_auth at
// once; a 3xx is never followed; 503 and connections that never carried the
// request are retried in-run; a write whose answer was lost (or answered
// 500, 502, 504, 408) is not resent but read back (Verify); 429 waits for
// Retry-After, then destination_rate_limited. Requests are paced per
// endpoint at Klaviyo's documented steady rates. Error texts never hold the
// API key or an e-mail address.
package klaviyo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// Defaults of Params.
const (
	DefaultBaseURL = "https://a.klaviyo.com"
	// DefaultRevision is the API revision of the spec this package follows.
	DefaultRevision    = "2026-07-15"
	DefaultConcurrency = 4
	DefaultTimeout     = 30 * time.Second
	// DefaultRateLimit paces the profile endpoints (requests per second):
	// Klaviyo's steady 750/min for profile import, create, update and reads.
	DefaultRateLimit = 12
	// jobRate paces the bulk import job endpoints: steady 150/min.
	jobRate = 2.5
	// listsRate paces GET /api/profiles/{id}/relationships/lists: 60/min.
	listsRate = 1
	// listAddRate paces POST /api/lists/{id}/relationships/profiles: steady
	// 150/min (Klaviyo's API reference, Add Profiles to List).
	listAddRate = 2.5
	// maxListAdd is that endpoint's limit of profiles per call.
	maxListAdd = 1000
	// MaxJobProfiles and MaxJobBody are a bulk import job's limits (10,000
	// profiles, 5 MB; a margin is kept under the latter).
	MaxJobProfiles = 10_000
	MaxJobBody     = 4_900_000
	// maxProfileBytes is Klaviyo's limit of one profile's payload ("100KB",
	// read in decimal units, the stricter reading).
	maxProfileBytes  = 100_000
	maxRateLimitWait = time.Minute
	// DefaultErrorsWait is Params.ErrorsWait's default.
	DefaultErrorsWait = time.Minute
	maxResponseBody   = 4 << 20
)

// Modes.
const (
	ModeSingle = "single"
	ModeBulk   = "bulk"
)

// Params configure a Klaviyo destination.
type Params struct {
	// BaseURL is the API root (default https://a.klaviyo.com).
	BaseURL string
	// APIKey is the private API key. Required.
	APIKey string
	// Revision is the revision header (default DefaultRevision).
	Revision string
	// ListID is the sync's list: bulk jobs add profiles to it, mirror
	// removals take them out of it. Required in bulk mode.
	ListID string
	// Mode is "bulk" (default) or "single".
	Mode string
	// WriteMode is upsert (default), update, create or mirror.
	WriteMode destination.WriteMode
	// Concurrency bounds in-flight requests of one-call-per-record paths.
	Concurrency int
	// Timeout bounds one HTTP attempt (default 30 s).
	Timeout time.Duration
	// RateLimit paces the profile endpoints, requests per second (default
	// 12); the job and list endpoints are paced in proportion.
	RateLimit  float64
	HTTPClient *http.Client
	// Accounts, when set, shares the account's request budgets with the
	// other runs and processes writing to it.
	Accounts destination.AccountPacer
	// AccountName is the destination's `account` ("" when unset): when
	// set, it names the account's shared budget instead of the
	// credential, so a rotated key shares it.
	AccountName string
	Clock       clock.Clock
	Sleep       func(ctx context.Context, d time.Duration) error
	// MaxRetries is the number of in-run retries (default 5; negative: none).
	MaxRetries int
	// VerifyWait bounds how long Verify waits for running bulk import jobs
	// (default 2 min, polled every 2 s through Sleep).
	VerifyWait time.Duration
	// ErrorsWait is how long after a bulk import job ended Outcomes waits
	// for import errors its failed_count counts and its import-errors list
	// does not hold yet (default 1 min; Klaviyo may list them late or
	// never): until then the job is not done; after, the records it cannot
	// prove delivered are not (outcomes.go).
	ErrorsWait time.Duration
}

// Destination writes to Klaviyo. It is safe for concurrent use.
type Destination struct {
	base, apiKey, revision, listID, mode string
	writeMode                            destination.WriteMode
	conc                                 int
	ownClient                            bool
	sleep                                func(context.Context, time.Duration) error
	verifyWait, errorsWait               time.Duration
	clock                                clock.Clock
	profiles, jobs, lists, listAdds      *apiclient.Client

	// answered holds the ids of the bulk import jobs whose 202 this
	// Destination read: their records are accepted under them, so none can
	// be the job of a write in doubt (waitJobs).
	mu       sync.Mutex
	answered map[string]bool
	// missing holds when this Destination first saw a job's import errors
	// fall short of its failed_count, for a job that does not say when it
	// ended (errorsWaitOver).
	missing map[string]time.Time
}

// maxAnswered bounds answered; past it the set starts over, which only
// makes waitJobs more careful.
const maxAnswered = 100_000

func (d *Destination) noteAnswered(id string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.answered == nil || len(d.answered) >= maxAnswered {
		d.answered = map[string]bool{}
	}
	d.answered[id] = true
}

func (d *Destination) wasAnswered(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.answered[id]
}

var (
	_ destination.Destination = (*Destination)(nil)
	_ destination.Judge       = (*Destination)(nil)
	_ destination.Async       = (*Destination)(nil)
	_ destination.Remover     = (*Destination)(nil)
	_ destination.Checker     = (*Destination)(nil)
)

// New returns a Klaviyo destination. Invalid parameters are
// failure.InvalidSyncDefinition.
func New(p Params) (*Destination, error) {
	d := &Destination{base: strings.TrimRight(p.BaseURL, "/"), apiKey: p.APIKey, revision: p.Revision,
		listID: strings.TrimSpace(p.ListID), mode: p.Mode, writeMode: p.WriteMode, conc: p.Concurrency,
		sleep: p.Sleep, verifyWait: p.VerifyWait, errorsWait: p.ErrorsWait}
	if d.base == "" {
		d.base = DefaultBaseURL
	}
	if u, err := url.Parse(d.base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, failure.New(failure.InvalidSyncDefinition, "klaviyo base_url must be an absolute http(s) URL")
	}
	if strings.TrimSpace(d.apiKey) == "" {
		return nil, failure.New(failure.InvalidSyncDefinition, "klaviyo api_key is empty")
	}
	if d.revision == "" {
		d.revision = DefaultRevision
	}
	switch d.mode {
	case "":
		d.mode = ModeBulk
	case ModeSingle, ModeBulk:
	default:
		return nil, failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("klaviyo mode must be %q or %q", ModeSingle, ModeBulk))
	}
	switch d.writeMode {
	case "":
		d.writeMode = destination.Upsert
	case destination.Upsert, destination.Update, destination.Create, destination.Mirror:
	default:
		return nil, failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("klaviyo does not support write_mode %q", d.writeMode))
	}
	if d.bulk() && d.listID == "" {
		return nil, failure.New(failure.InvalidSyncDefinition, "klaviyo bulk mode needs list_id")
	}
	if d.writeMode == destination.Mirror && (d.mode != ModeBulk || d.listID == "") {
		return nil, failure.New(failure.InvalidSyncDefinition, "klaviyo write_mode mirror needs mode bulk and list_id")
	}
	if d.conc <= 0 {
		d.conc = DefaultConcurrency
	}
	client := p.HTTPClient
	if client == nil {
		client = apiclient.NewHTTPClient()
		d.ownClient = true
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	if d.sleep == nil {
		d.sleep = clock.Sleep
	}
	if d.verifyWait <= 0 {
		d.verifyWait = 2 * time.Minute
	}
	if d.errorsWait <= 0 {
		d.errorsWait = DefaultErrorsWait
	}
	d.clock = clk
	rate := p.RateLimit
	if rate <= 0 {
		rate = DefaultRateLimit
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	retries := p.MaxRetries
	if retries == 0 {
		retries = apiclient.DefaultMaxRetries
	}
	newClient := func(group string, perSecond float64) *apiclient.Client {
		// Klaviyo limits an account per endpoint group: every sync and
		// process writing with this key shares each group's budget.
		lim := apiclient.NewAccountLimiter(clk, p.Accounts, destination.Account("klaviyo", d.base, destination.Budget(d.apiKey, p.AccountName), group),
			destination.Limit{Rate: perSecond, Burst: 1})
		return apiclient.New(apiclient.Params{
			Name: "klaviyo", URLSetting: "base_url",
			AuthDetail: "klaviyo refused the private API key (or its scopes: profiles, lists and subscriptions are needed)",
			Client:     client, Timeout: timeout, MaxRetries: retries, MaxBody: maxResponseBody, MaxWait: maxRateLimitWait,
			Clock: clk, Sleep: d.sleep, Pacer: lim, Classify: classify, Own: own,
			Observe: func(r *apiclient.Response) { observe(lim, r) },
			StatusError: func(route string, r *apiclient.Response) error {
				return decodeAPIError(route, r.Status, r.Body)
			},
			Secrets: []string{d.apiKey},
		})
	}
	// The job and list endpoints are paced in proportion to the profile
	// endpoints (Klaviyo's steady limits: 150, 60 and 150 against 750 a
	// minute), so rate_limit raises or lowers them all alike.
	scale := rate / DefaultRateLimit
	d.profiles, d.jobs, d.lists = newClient("profiles", rate), newClient("jobs", jobRate*scale), newClient("lists", listsRate*scale)
	d.listAdds = newClient("list-adds", listAddRate*scale)
	return d, nil
}

func (d *Destination) bulk() bool {
	return d.mode == ModeBulk && (d.writeMode == destination.Upsert || d.writeMode == destination.Mirror)
}

// Capability reports CapVerify: a profile can be read back by e-mail.
func (d *Destination) Capability() destination.Capability { return destination.CapVerify }

// Close releases idle connections of a client New created.
func (d *Destination) Close() error {
	if d.ownClient {
		d.profiles.CloseIdleConnections()
	}
	return nil
}

// classify: 401, 402 and 403 are auth; 429 rate limited; 503 says Klaviyo did
// not take the request, so even a write is retried; 500, 502, 504 and 408
// may follow an applied write.
func classify(status int) apiclient.Class {
	switch {
	case apiclient.AccountRefused(status):
		return apiclient.Auth
	case status == http.StatusTooManyRequests:
		return apiclient.RateLimited
	case status == http.StatusServiceUnavailable:
		return apiclient.NotApplied
	case status >= 500 || status == http.StatusRequestTimeout:
		return apiclient.MaybeApplied
	}
	return apiclient.Final
}

// own reports whether r is Klaviyo's own answer (its errors document), so
// that its 503 proves the write was not applied (apiclient.Params.Own).
func own(r *apiclient.Response) bool { return decodeAPIError("", r.Status, r.Body).Klaviyos }

// observe pauses lim until the steady window resets when Klaviyo says it
// is spent (RateLimit-Remaining 0).
func observe(lim *apiclient.AccountLimiter, r *apiclient.Response) {
	rem := strings.TrimSpace(r.Header.Get("RateLimit-Remaining"))
	if rem == "" {
		return
	}
	if n, err := strconv.Atoi(rem); err != nil || n > 0 {
		return
	}
	reset, ok := apiclient.ParseSeconds(r.Header.Get("RateLimit-Reset"))
	if !ok {
		reset = time.Second
	}
	lim.Pause(min(reset, maxRateLimitWait))
}

// request is one API call; path is escaped and relative to the base URL,
// route its template for errors ("GET /api/profiles").
type request struct {
	client *apiclient.Client
	method string
	path   string
	route  string
	query  url.Values
	body   []byte
	// idempotent: a write that changes nothing when applied twice, so its
	// lost answer is retried rather than read back.
	idempotent bool
}

// do sends req. It returns the 2xx answer, an *APIError for a 4xx the
// caller judges, or a *failure.Error (wrapping destination.ErrNotSent when
// Klaviyo provably did not apply the request).
func (d *Destination) do(ctx context.Context, req request) (*apiclient.Response, error) {
	u := d.base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	h := http.Header{}
	h.Set("Authorization", "Klaviyo-API-Key "+d.apiKey)
	h.Set("revision", d.revision)
	h.Set("Accept", "application/vnd.api+json")
	if req.body != nil {
		h.Set("Content-Type", "application/vnd.api+json")
	}
	c := req.client
	if c == nil {
		c = d.profiles
	}
	res, err := c.Do(ctx, apiclient.Request{Method: req.method, URL: u, Route: req.route, Header: h, Body: req.body,
		// A read is safe to repeat; a write whose answer was lost is read
		// back instead (docs/guide.md#the-ledger-and-its-retention).
		Idempotent: req.method == http.MethodGet || req.idempotent})
	if err != nil {
		return nil, err
	}
	if res.Status < 200 || res.Status > 299 {
		return nil, decodeAPIError(req.route, res.Status, res.Body)
	}
	return res, nil
}

func (d *Destination) interrupted(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	}
	return failure.Wrap(failure.DestinationUnavailable, err, "klaviyo request interrupted")
}

// pageFailure turns a 4xx that is not about one record into a page-level
// failure: a revision Klaviyo refuses is the configuration's fault.
func (d *Destination) pageFailure(e *APIError) error {
	if revisionRefused(e) {
		return failure.Wrap(failure.InvalidSyncDefinition, d.safe(e),
			"klaviyo refused revision %q: fix destination.revision (Klaviyo's API reference lists the revisions)", d.revision)
	}
	return failure.Wrap(failure.DestinationUnavailable, d.safe(e), "klaviyo answered HTTP %d to %s; check the destination's base_url", e.Status, e.Route)
}

// revisionRefused says whether e is Klaviyo refusing the revision header:
// its error names the parameter, or, for a revision earlier than the
// operation's first, a 404 "No valid revisions found for method" (seen
// live, klaviyo/klaviyo-swift-sdk#730) that must not read as a missing
// list or an outage.
func revisionRefused(e *APIError) bool {
	if e.Parameter == "revision" || e.Code == "invalid_revision" {
		return true
	}
	return (e.Status == http.StatusBadRequest || e.Status == http.StatusNotFound) &&
		strings.Contains(strings.ToLower(e.Detail+" "+e.Title), "revision")
}

// notFound says whether e is a 404 about the resource (a list, a profile,
// a job), not Klaviyo refusing the revision for the operation.
func notFound(e *APIError) bool {
	return e.Status == http.StatusNotFound && e.Klaviyos && !revisionRefused(e)
}

func (d *Destination) safe(err error) error { return &safeError{err: err, secret: d.apiKey} }

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("klaviyo: marshal: %v", err)) // only this package's values, checked encodable
	}
	return b
}

// Judge says which of recs Write would reject without sending them
// (destination.Judge): those its mapping cannot be read as.
func (d *Destination) Judge(_ context.Context, recs []destination.Record) ([]string, error) {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = parseRecord(r).invalid
	}
	return out, nil
}
