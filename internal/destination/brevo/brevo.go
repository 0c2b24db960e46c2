// Package brevo writes mapped records to Brevo contacts (API v3), on the single
// path (POST /contacts, one call per record) or the bulk path
// (POST /contacts/import, one call per page). Requests conform to Brevo's
// public API spec (brevo/swagger.yaml). Requests go through the shared HTTP
// layer (internal/apiclient).
//
// Failures map to oncesync's catalog: 401/402/403 → destination_auth at once;
// a 3xx is never followed → destination_unavailable (check base_url); 503,
// and connections that never carried the request, are retried in-run with
// backoff (exponential from 1 s, cap 30 s, full jitter), then
// destination_unavailable; a write whose answer was lost (or answered 500,
// 502, 504, 408) is not resent but read back (ErrOutcomeUnknown), reads are
// retried; 429 waits for x-sib-ratelimit-reset (or backs off), then
// destination_rate_limited. Every attempt and wait fits the attempt deadline
// (destination.WithAttemptDeadline). A record whose request provably never
// reached Brevo is returned NotSent. A 4xx for one record's content rejects
// that record with Brevo's message. Error texts never hold the API key or an
// e-mail address.
package brevo

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
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
	DefaultBaseURL     = "https://api.brevo.com/v3"
	DefaultConcurrency = 4
	DefaultTimeout     = 30 * time.Second
	DefaultRateLimit   = 10 // requests per second (Brevo's contacts endpoints)
	DefaultMaxRetries  = 5
	// MaxImportBody is the largest request body sent to /contacts/import:
	// Brevo allows 10 MB and recommends staying around 8 MB.
	MaxImportBody = 8_000_000
	// maxRateLimitWait is the longest a 429 is waited out inside a Write; a
	// later reset (a daily quota) fails the page as rate limited at once.
	maxRateLimitWait = time.Minute
	maxResponseBody  = 4 << 20
)

// Modes.
const (
	ModeSingle = "single"
	ModeBulk   = "bulk"
)

// Params configure a Brevo destination.
type Params struct {
	// BaseURL is the API root (default https://api.brevo.com/v3).
	BaseURL string
	// APIKey is sent in the api-key header. Required.
	APIKey string
	// Mode is "single" (default) or "bulk".
	Mode string
	// ListIDs are the lists contacts are added to (required in bulk mode).
	ListIDs []int64
	// Concurrency bounds in-flight requests on the single path (default 4).
	Concurrency int
	// Timeout bounds one HTTP attempt (default 30 s).
	Timeout time.Duration
	// RateLimit is the client-side limit in requests per second (default 10).
	RateLimit float64
	// HTTPClient is the client used (default: one with its own connection
	// pool). It never follows redirects: a copy is used without them.
	HTTPClient *http.Client
	// Clock tells the time (default clock.Real).
	Clock clock.Clock
	// Sleep waits d or until ctx is done (default: a timer). Tests inject it.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxRetries is the number of in-run retries per request after the first
	// attempt (default 5; negative disables retries).
	MaxRetries int
	// VerifyWait bounds how long Verify waits for running import processes
	// (default 2 min, polled every 2 s through Sleep).
	VerifyWait time.Duration
	// Accounts, when set, shares the account's request budget with the
	// other runs and processes writing to it.
	Accounts destination.AccountPacer
	// AccountName is the destination's `account` ("" when unset): when
	// set, it names the account's shared budget instead of the
	// credential, so a rotated key shares it.
	AccountName string
	// Attributes are the mapped attribute names: each must be one of the
	// account's (attributes.go).
	Attributes []string
	// WriteMode is upsert (default), update, create or mirror
	// (docs/guide.md#write-modes). Update and create write on the single
	// path whatever Mode says: an import always upserts.
	WriteMode destination.WriteMode
}

// Destination writes to Brevo. It is safe for concurrent use.
type Destination struct {
	base       string
	apiKey     string
	mode       string
	listIDs    []int64
	conc       int
	ownClient  bool
	sleep      func(context.Context, time.Duration) error
	verifyWait time.Duration
	limiter    *apiclient.AccountLimiter // the /contacts routes' budget
	others     *apiclient.AccountLimiter // the other routes' budget (rateBucket)
	api        *apiclient.Client         // /contacts routes, whose rate-limit headers pace the limiter
	other      *apiclient.Client         // the other routes (/account, /processes): another budget (rateBucket)
	reports    *apiclient.Client         // import reports: larger bodies, maybe another origin (outcomes.go)
	maxBody    int
	writeMode  destination.WriteMode
	attrs      []string // mapped attribute names, sorted

	attrMu      sync.Mutex // ensureAttributes
	attrChecked bool
	attrErr     error
	attrTypes   map[string]attrType // typedAttributes, once checked

	clock clock.Clock
	board processBoard // processes.go
}

var (
	_ destination.Destination = (*Destination)(nil)
	_ destination.Judge       = (*Destination)(nil)
)

// New returns a Brevo destination. Invalid parameters are reported as
// failure.InvalidSyncDefinition.
func New(p Params) (*Destination, error) {
	d := &Destination{
		base:       strings.TrimRight(p.BaseURL, "/"),
		apiKey:     p.APIKey,
		mode:       p.Mode,
		listIDs:    append([]int64(nil), p.ListIDs...),
		conc:       p.Concurrency,
		sleep:      p.Sleep,
		verifyWait: p.VerifyWait,
		maxBody:    MaxImportBody,
		writeMode:  p.WriteMode,
		attrs:      slices.Sorted(slices.Values(p.Attributes)),
	}
	switch d.writeMode {
	case "":
		d.writeMode = destination.Upsert
	case destination.Upsert, destination.Update, destination.Create:
	case destination.Mirror:
		if len(d.listIDs) == 0 {
			return nil, failure.New(failure.InvalidSyncDefinition, "brevo write_mode mirror needs list_ids: a removed record is taken off the sync's lists")
		}
	default:
		return nil, failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("brevo does not support write_mode %q", d.writeMode))
	}
	if d.base == "" {
		d.base = DefaultBaseURL
	}
	if u, err := url.Parse(d.base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, failure.New(failure.InvalidSyncDefinition, "brevo base_url must be an absolute http(s) URL")
	}
	if strings.TrimSpace(d.apiKey) == "" {
		return nil, failure.New(failure.InvalidSyncDefinition, "brevo api_key is empty")
	}
	switch d.mode {
	case "":
		d.mode = ModeSingle
	case ModeSingle, ModeBulk:
	default:
		return nil, failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("brevo mode must be %q or %q", ModeSingle, ModeBulk))
	}
	if d.mode == ModeBulk && len(d.listIDs) == 0 {
		// Brevo's import needs listIds (or a new list, which oncesync does not create).
		return nil, failure.New(failure.InvalidSyncDefinition, "brevo bulk mode needs at least one list id")
	}
	for _, id := range d.listIDs {
		if id <= 0 {
			return nil, failure.New(failure.InvalidSyncDefinition, "brevo list ids must be positive")
		}
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
	d.clock, d.board.waiting = clk, map[int64]time.Time{}
	if d.sleep == nil {
		d.sleep = clock.Sleep
	}
	if d.verifyWait <= 0 {
		d.verifyWait = 2 * time.Minute
	}
	rl := p.RateLimit
	if rl <= 0 {
		rl = DefaultRateLimit
	}
	// Brevo limits an account (10 requests/s on the contacts endpoints):
	// every sync and process writing to one shares its budget.
	d.limiter = apiclient.NewAccountLimiter(clk, p.Accounts, destination.Account("brevo", d.base, destination.Budget(d.apiKey, p.AccountName)),
		destination.Limit{Rate: rl, Burst: 1})
	d.others = apiclient.NewAccountLimiter(clk, p.Accounts, destination.Account("brevo-other-routes", d.base, destination.Budget(d.apiKey, p.AccountName)),
		destination.Limit{Rate: rl, Burst: 1})
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxRetries := p.MaxRetries
	if maxRetries == 0 {
		maxRetries = DefaultMaxRetries
	}
	api := apiclient.Params{
		Name:       "brevo",
		URLSetting: "base_url",
		AuthDetail: "brevo refused the account's credentials or plan",
		Client:     client,
		Timeout:    timeout,
		MaxRetries: maxRetries,
		MaxBody:    maxResponseBody,
		MaxWait:    maxRateLimitWait,
		Clock:      clk,
		Sleep:      d.sleep,
		Pacer:      d.limiter,
		Classify:   classify,
		Own:        own,
		Wait:       resetAfter,
		Observe: func(r *apiclient.Response) {
			observeLimit(d.limiter, r)
			observeRateLimit(d.limiter, r)
		},
		StatusError: func(route string, r *apiclient.Response) error {
			return d.apiError(route, &response{status: r.Status, body: r.Body, header: r.Header})
		},
		Secrets: []string{d.apiKey},
	}
	d.api = apiclient.New(api)
	// The other routes' headers count their own (hourly) budget: they pause
	// their own limiter, never the contacts' (rateBucket).
	api.Pacer = d.others
	api.Observe = func(r *apiclient.Response) {
		observeRateLimit(d.others, r)
		d.board.observe(r.Header, clk.Now())
	}
	d.other = apiclient.New(api)
	d.reports = apiclient.New(apiclient.Params{
		Name:       "brevo",
		URLSetting: "base_url",
		Client:     client,
		Timeout:    timeout,
		MaxRetries: maxRetries,
		MaxBody:    maxReportBytes + 1, // one byte more tells an oversized report
		MaxWait:    maxRateLimitWait,
		Clock:      clk,
		Sleep:      d.sleep,
		Classify:   classify,
		Wait:       resetAfter,
		Secrets:    []string{d.apiKey},
	})
	return d, nil
}

// Capability reports CapVerify: Brevo can be asked whether a contact landed.
func (d *Destination) Capability() destination.Capability { return destination.CapVerify }

// PagesInFlight is 2 on the bulk path: an import is a process of its own at
// Brevo, so the next page's import is sent while the last one's answer and
// process are read (docs/guide.md#what-a-run-does). The single path keeps its
// concurrency within one page.
func (d *Destination) PagesInFlight() int {
	if d.imports() {
		return 2
	}
	return 1
}

// imports reports whether pages go out as imports: bulk mode, except the
// update and create write modes, which take the single path because an
// import always upserts (docs/guide.md#write-modes).
func (d *Destination) imports() bool {
	return d.mode == ModeBulk && d.writeMode != destination.Update && d.writeMode != destination.Create
}

// Close releases idle connections of a client New created.
func (d *Destination) Close() error {
	if d.ownClient {
		d.api.CloseIdleConnections()
	}
	return nil
}

// request is one API call. path is relative to the base URL and already
// escaped; route is its template, used in errors ("GET /contacts/{identifier}").
type request struct {
	method string
	path   string
	route  string
	query  url.Values
	body   []byte
	// idempotent: a write that changes nothing when applied twice (a
	// removal from the lists), retried in-run after a lost answer as a
	// read is.
	idempotent bool
}

type response struct {
	status int
	body   []byte
	header http.Header
}

// do sends req through the shared HTTP layer (rate limiting, in-run
// retries, attempt deadlines, no redirects). It returns the 2xx response,
// an *APIError for a 4xx the caller must judge (not 401/402/403/408/429),
// or a *failure.Error (auth, unavailable, rate limited, interrupted, lease
// lost), which wraps destination.ErrNotSent when Brevo provably did not
// apply the request.
func (d *Destination) do(ctx context.Context, req request) (*response, error) {
	u := d.base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	h := http.Header{}
	h.Set("api-key", d.apiKey)
	h.Set("Accept", "application/json")
	if req.body != nil {
		h.Set("Content-Type", "application/json")
	}
	res, err := d.client(req.path).Do(ctx, apiclient.Request{
		Method: req.method, URL: u, Route: req.route, Header: h, Body: req.body,
		// A read is safe to repeat; a write whose answer was lost is not
		// (it may have been applied): Brevo is read back first (docs/guide.md#the-ledger-and-its-retention).
		Idempotent: req.method == http.MethodGet || req.idempotent,
	})
	if err != nil {
		return nil, err
	}
	r := &response{status: res.Status, body: res.Body, header: res.Header}
	if r.status < 200 || r.status > 299 {
		return nil, d.apiError(req.route, r)
	}
	return r, nil
}

// Brevo has one rate limit for the routes under /contacts (10 requests a
// second on its general tier) and another for every other route (100
// requests an hour: /account, /processes), each answered with its own
// x-sib-ratelimit-* headers (developers.brevo.com/docs/api-limits). So each
// bucket has its own limiter, paused by its own headers: a spent hourly
// budget of process reads holds the next process read (a minute at most,
// then Brevo is asked again), never the contact writes.

// client is the HTTP client of path's rate-limit bucket.
func (d *Destination) client(path string) *apiclient.Client {
	if rateBucket(path) == bucketContacts {
		return d.api
	}
	return d.other
}

// Rate-limit buckets of Brevo's routes.
const (
	bucketContacts = "contacts"
	bucketOther    = "other"
)

// rateBucket is the rate-limit bucket of an API path (relative to the base
// URL).
func rateBucket(path string) string {
	if path == "/contacts" || strings.HasPrefix(path, "/contacts/") {
		return bucketContacts
	}
	return bucketOther
}

// classify: 401, 402 (plan) and 403 are auth; 503 means Brevo did not take
// the request, so even a write is retried; 500, 502, 504 and 408 may follow
// an applied write.
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

// own reports whether r is Brevo's own answer (its error model), so that
// its 503 proves the write was not applied (apiclient.Params.Own).
func own(r *apiclient.Response) bool {
	_, _, ok := DecodeError(r.Body)
	return ok
}

func (d *Destination) interrupted(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	}
	return failure.Wrap(failure.DestinationUnavailable, err, "brevo request interrupted")
}

func (d *Destination) safe(err error) error { return &safeError{err: err, secret: d.apiKey} }

// observeRateLimit pauses l (the limiter of the bucket r answers for)
// until the reset, a minute at most, when Brevo says the window is spent.
func observeRateLimit(l *apiclient.AccountLimiter, r *apiclient.Response) {
	rem := strings.TrimSpace(r.Header.Get("x-sib-ratelimit-remaining"))
	if rem == "" {
		return
	}
	if n, err := strconv.ParseFloat(rem, 64); err != nil || n > 0 {
		return
	}
	reset, ok := sibReset(r.Header)
	if !ok {
		reset = time.Second
	}
	l.Pause(min(reset, maxRateLimitWait))
}

// observeLimit paces the /contacts routes at the account's limit as Brevo
// states it, x-sib-ratelimit-limit requests a second (the contacts
// window is a second: developers.brevo.com/docs/api-limits), when it is
// below rate_limit: an account Brevo limits to 4 a second got 60 % of its
// requests answered 429 at the configured 10.
func observeLimit(l *apiclient.AccountLimiter, r *apiclient.Response) {
	n, err := strconv.ParseFloat(strings.TrimSpace(r.Header.Get("x-sib-ratelimit-limit")), 64)
	if err != nil || n <= 0 {
		return
	}
	l.Observe(n)
}

// resetAfter reads how long to wait after a 429: x-sib-ratelimit-reset
// (seconds), else Retry-After.
func resetAfter(r *apiclient.Response, now time.Time) (time.Duration, bool) {
	if d, ok := sibReset(r.Header); ok {
		return d, true
	}
	return apiclient.RetryAfter(r.Header.Get("Retry-After"), now)
}

// minReset is the shortest wait an x-sib-ratelimit-reset asks for. Brevo
// gives the time left in the window in whole seconds
// (developers.brevo.com/docs/limit-headers): "0" is the window's last
// second, not "send now", and a request sent at once meets the same spent
// window (as `oncesync fake-brevo` answers it).
const minReset = time.Second

// sibReset reads x-sib-ratelimit-reset, at least minReset.
func sibReset(h http.Header) (time.Duration, bool) {
	d, ok := apiclient.ParseSeconds(h.Get("x-sib-ratelimit-reset"))
	return max(d, minReset), ok
}

func (d *Destination) apiError(route string, r *response) *APIError {
	e := &APIError{Route: route, Status: r.status}
	if code, msg, ok := DecodeError(r.body); ok {
		e.Code, e.Message, e.Brevos = code, msg, true
		e.Duplicates = decodeDuplicates(r.body)
	} else {
		e.Message = truncate(strings.TrimSpace(string(r.body)), 200)
	}
	return e
}

func marshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		// Only values built by this package are marshalled; records' data
		// is validated to be JSON-encodable before it gets here.
		panic(fmt.Sprintf("brevo: marshal: %v", err))
	}
	return b
}
