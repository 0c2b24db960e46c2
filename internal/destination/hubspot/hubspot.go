// Package hubspot writes mapped records to HubSpot contacts through the CRM
// v3 batch endpoints (POST /crm/v3/objects/contacts/batch/...), with a
// private app's token (Authorization: Bearer). Requests go through the
// shared HTTP layer (internal/apiclient).
//
// Records are identified by id_property: email (the default) or a custom
// property with unique values. Both paths use the batch endpoints: bulk
// sends a page in batches of at most 100 inputs, one batch after the other
// (a contact named twice in a page goes in two batches, in page order);
// single sends batches of one, Concurrency at a time. The write mode picks
// the endpoint (docs/guide.md#write-modes): upsert and mirror batch/upsert,
// update batch/update (a contact not found is Delivered, skipped), create
// batch/create (HubSpot refuses a whole batch holding an existing contact
// with 409: it is split into batches of one, and an existing contact is
// Delivered, skipped). Mirror removes contacts by archiving them (Remove),
// never a contact a person merged (it holds another record's data).
// A value is sent in the form HubSpot takes for its property's type
// (asSent): a value that is not text without white space at its ends, a
// number in plain decimal notation.
// HubSpot ignores a lifecyclestage that moves a contact back: such a stage
// is cleared first (batch/update by contact id), after a batch/read of the
// page's contacts' stages.
//
// Failures map to oncesync's catalog: 401/402/403 → destination_auth at once; a
// 3xx is never followed; 429 waits for Retry-After (HubSpot's ten-second
// rolling limit; the DAILY policy fails the page as rate limited at once)
// and X-HubSpot-RateLimit-Remaining 0 pauses the client's limiter; 503 and
// connections that never carried the request are retried; a write whose
// answer was lost (or answered 500, 502, 504, 408) is not resent but left
// in doubt, settled by Verify (batch/read by id_property, comparing every
// mapped property; an e-mail also finds the contact it was merged into, as
// a secondary address). A 207 answer settles its inputs one by one: an input
// HubSpot refused is Rejected with HubSpot's message, e-mail addresses
// redacted. A 400 for a batch of several inputs is resent as batches of one
// so only the bad record is rejected. Error texts never hold the token or
// an e-mail address.
package hubspot

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
	DefaultBaseURL     = "https://api.hubapi.com"
	DefaultIDProperty  = "email"
	DefaultConcurrency = 4
	// DefaultRateLimit is requests per second: HubSpot allows private apps
	// of Free and Starter accounts 100 per rolling 10 s (190 on
	// Professional and Enterprise).
	DefaultRateLimit = 10
	// MaxBatch is HubSpot's largest batch of inputs.
	MaxBatch = 100
	// MaxValueChars is the longest property value HubSpot takes (its
	// knowledge base, "Property field types in HubSpot": 65,536 characters
	// for a value added through the CRM); a longer one is refused.
	MaxValueChars    = 65536
	maxRateLimitWait = time.Minute
	maxResponseBody  = 8 << 20
)

// Modes.
const (
	ModeSingle = "single"
	ModeBulk   = "bulk"
)

// Params configure a HubSpot destination.
type Params struct {
	// BaseURL is the API root (default https://api.hubapi.com).
	BaseURL string
	// Token is the private app's access token. Required.
	Token string
	// IDProperty identifies contacts: email or a unique custom property.
	IDProperty string
	// Properties are the mapped HubSpot properties (mapping.attributes'
	// names), checked by Check.
	Properties []string
	// Mode is "bulk" (default) or "single".
	Mode string
	// WriteMode is upsert (default), update, create or mirror.
	WriteMode string
	// Concurrency bounds batches in flight on the single path (default 4).
	Concurrency int
	// Timeout bounds one HTTP attempt (default 30 s).
	Timeout time.Duration
	// RateLimit is the client-side limit in requests per second (default 10).
	RateLimit float64
	// HTTPClient is the client used (default: its own). Redirects are never
	// followed.
	HTTPClient *http.Client
	// Accounts, when set, shares the account's request budget with the
	// other runs and processes writing to it.
	Accounts destination.AccountPacer
	// AccountName is the destination's `account` ("" when unset): when
	// set, it names the account's shared budget instead of the
	// credential, so a rotated key shares it.
	AccountName string
	// Clock tells the time (default clock.Real).
	Clock clock.Clock
	// Sleep waits d or until ctx is done (default: a timer).
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxRetries is the number of in-run retries after the first attempt
	// (default 5; negative: none).
	MaxRetries int
}

// Destination writes to HubSpot. It is safe for concurrent use.
type Destination struct {
	base      string
	token     string
	idProp    string
	props     []string
	mode      string
	writeMode destination.WriteMode
	conc      int
	ownClient bool
	limiter   *apiclient.AccountLimiter
	api       *apiclient.Client

	// defs are the account's contact properties by name, read once for
	// Verify (nil until read).
	defsMu sync.Mutex
	defs   map[string]property
}

var (
	_ destination.Destination = (*Destination)(nil)
	_ destination.Judge       = (*Destination)(nil)
	_ destination.Remover     = (*Destination)(nil)
	_ destination.Checker     = (*Destination)(nil)
)

// New returns a HubSpot destination; bad parameters are
// invalid_sync_definition.
func New(p Params) (*Destination, error) {
	d := &Destination{
		base: strings.TrimRight(p.BaseURL, "/"), token: p.Token, idProp: p.IDProperty,
		props: append([]string(nil), p.Properties...), mode: p.Mode, conc: p.Concurrency,
		writeMode: destination.WriteMode(p.WriteMode),
	}
	if d.base == "" {
		d.base = DefaultBaseURL
	}
	if u, err := url.Parse(d.base); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, failure.New(failure.InvalidSyncDefinition, "hubspot base_url must be an absolute http(s) URL")
	}
	if strings.TrimSpace(d.token) == "" {
		return nil, failure.New(failure.InvalidSyncDefinition, "hubspot token is empty")
	}
	if d.idProp == "" {
		d.idProp = DefaultIDProperty
	}
	switch d.mode {
	case "":
		d.mode = ModeBulk
	case ModeSingle, ModeBulk:
	default:
		return nil, failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("hubspot mode must be %q or %q", ModeSingle, ModeBulk))
	}
	switch d.writeMode {
	case "":
		d.writeMode = destination.Upsert
	case destination.Upsert, destination.Update, destination.Create, destination.Mirror:
	default:
		return nil, failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("hubspot does not support write_mode %q", p.WriteMode))
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
	rl := p.RateLimit
	if rl <= 0 {
		rl = DefaultRateLimit
	}
	// HubSpot limits an account (a rolling ten-second window per private
	// app): every sync and process writing with this token shares it.
	d.limiter = apiclient.NewAccountLimiter(clk, p.Accounts, destination.Account("hubspot", d.base, destination.Budget(d.token, p.AccountName)),
		destination.Limit{Rate: rl, Burst: 1})
	d.api = apiclient.New(apiclient.Params{
		Name:       "hubspot",
		Subject:    "HubSpot",
		URLSetting: "base_url",
		AuthDetail: "HubSpot refused the private app token (check destination.token and the app's crm.objects.contacts scopes)",
		Client:     client,
		Timeout:    p.Timeout,
		MaxRetries: p.MaxRetries,
		MaxBody:    maxResponseBody,
		MaxWait:    maxRateLimitWait,
		Clock:      clk,
		Sleep:      p.Sleep,
		Pacer:      d.limiter,
		Classify:   classify,
		Own:        own,
		Wait:       resetAfter,
		LongWait:   longWait,
		Observe:    d.observeRateLimit,
		StatusError: func(route string, r *apiclient.Response) error {
			return decodeAPIError(route, r.Status, r.Body)
		},
		Secrets: []string{d.token},
	})
	return d, nil
}

// Capability: HubSpot can be read back by id_property (Verify).
func (d *Destination) Capability() destination.Capability { return destination.CapVerify }

// Close releases idle connections of a client New created.
func (d *Destination) Close() error {
	if d.ownClient {
		d.api.CloseIdleConnections()
	}
	return nil
}

// classify: 401, 402 and 403 are auth; 429 the rate limit; 503 says HubSpot did
// not take the request, so even a write is retried; 500, 502, 504 (HubSpot's
// documented timeouts) and 408 may follow an applied write.
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

// own reports whether r is HubSpot's own answer (its error JSON), so that
// its 503 proves the write was not applied (apiclient.Params.Own).
func own(r *apiclient.Response) bool { return decodeAPIError("", r.Status, r.Body).HubSpots }

// dailyWait stands for "not before tomorrow": past MaxWait, so a DAILY 429
// fails the page as rate limited at once.
const dailyWait = 24 * time.Hour

// resetAfter reads how long a 429 asks to wait: the DAILY policy (in the
// body) waits until tomorrow, whatever a Retry-After says of the
// ten-second window; otherwise Retry-After; otherwise the backoff.
func resetAfter(r *apiclient.Response, now time.Time) (time.Duration, bool) {
	if daily(r) {
		return dailyWait, true
	}
	if d, ok := apiclient.RetryAfter(r.Header.Get("Retry-After"), now); ok {
		return d, true
	}
	return 0, false
}

// daily reports whether r is HubSpot's 429 for the account's spent daily
// limit (policyName DAILY).
func daily(r *apiclient.Response) bool {
	var b struct {
		PolicyName string `json:"policyName"`
	}
	return json.Unmarshal(r.Body, &b) == nil && strings.EqualFold(b.PolicyName, "DAILY")
}

// longWait is the failure's detail of a DAILY 429: HubSpot does not say
// when the limit resets (midnight in the account's time zone), and
// "resets in 24h" would be made up.
func longWait(route string, r *apiclient.Response, _ time.Duration) string {
	if !daily(r) {
		return ""
	}
	return "HubSpot's daily request limit for this account is spent (policy DAILY, answered to " + route +
		"): it resets at midnight in the HubSpot account's time zone (a daily quota: a lower rate_limit or concurrency does not help; run the sync after that midnight, or raise the account's limit)"
}

// observeRateLimit pauses the limiter when HubSpot says the rolling window
// is spent: for one slot's share of the window, after which the oldest
// request has most likely left it (a 429 with Retry-After covers the rest).
//
// It also paces the account at the window's rate, Max requests per
// Interval, when HubSpot states one below rate_limit (a portal whose
// limit is lowered kept the configured pace and saw up to a third of its
// requests answered 429).
func (d *Destination) observeRateLimit(r *apiclient.Response) {
	interval, err1 := strconv.Atoi(r.Header.Get("X-HubSpot-RateLimit-Interval-Milliseconds"))
	maxN, err2 := strconv.Atoi(r.Header.Get("X-HubSpot-RateLimit-Max"))
	window := err1 == nil && err2 == nil && interval > 0 && maxN > 0
	if window {
		d.limiter.Observe(float64(maxN) / (float64(interval) / 1000))
	}
	rem := strings.TrimSpace(r.Header.Get("X-HubSpot-RateLimit-Remaining"))
	if rem == "" {
		return
	}
	if n, err := strconv.Atoi(rem); err != nil || n > 0 {
		return
	}
	if !window {
		d.limiter.Pause(time.Second)
		return
	}
	d.limiter.Pause(min(time.Duration(interval)*time.Millisecond/time.Duration(maxN), maxRateLimitWait))
}

// call is one API request.
type call struct {
	path       string // under the base URL
	route      string
	body       any
	idempotent bool
	method     string
}

// do sends c and returns the answer for a 2xx or a status the caller
// judges (apiclient.Final), or a *failure.Error.
func (d *Destination) do(ctx context.Context, c call) (*apiclient.Response, error) {
	h := http.Header{}
	h.Set("Authorization", "Bearer "+d.token)
	h.Set("Accept", "application/json")
	var body []byte
	if c.body != nil {
		var err error
		if body, err = json.Marshal(c.body); err != nil {
			return nil, fmt.Errorf("hubspot: encode %s: %w", c.route, err)
		}
		h.Set("Content-Type", "application/json")
	}
	method := c.method
	if method == "" {
		method = http.MethodPost
	}
	return d.api.Do(ctx, apiclient.Request{
		Method: method, URL: d.base + c.path, Route: c.route, Header: h, Body: body, Idempotent: c.idempotent,
	})
}

// unexpected fails a page on an answer that says nothing about records.
func (d *Destination) unexpected(e *APIError) error {
	return failure.Wrap(failure.DestinationUnavailable, e, "HubSpot answered HTTP %d; check the destination's base_url", e.Status)
}

func (d *Destination) interrupted(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	}
	return failure.Wrap(failure.DestinationUnavailable, err, "hubspot request interrupted")
}

// Judge says which of recs Write would reject without sending them
// (destination.Judge): those its mapping cannot be read as.
func (d *Destination) Judge(_ context.Context, recs []destination.Record) ([]string, error) {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = d.parseRecord(r).invalid
	}
	return out, nil
}
