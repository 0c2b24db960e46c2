// Package brevo writes mapped records to Brevo contacts (API v3), on the single
// path (POST /contacts, one call per record) or the bulk path
// (POST /contacts/import, one call per page). Requests conform to Brevo's
// public API spec (brevo/swagger.yaml).
//
// Failures map to oncesync's catalog: 401/402/403 → destination_auth at once;
// 5xx, 408, timeouts and connection errors are retried in-run with backoff
// (exponential from 1 s, cap 30 s, full jitter), then destination_unavailable;
// 429 waits for x-sib-ratelimit-reset (or backs off), then
// destination_rate_limited. A 4xx for one record's content rejects that record
// with Brevo's message. Error texts never hold the API key or an e-mail address.
package brevo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

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
	// HTTPClient is the client used (default: a new http.Client).
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
}

// Destination writes to Brevo. It is safe for concurrent use.
type Destination struct {
	base       string
	apiKey     string
	mode       string
	listIDs    []int64
	conc       int
	timeout    time.Duration
	client     *http.Client
	ownClient  bool
	clock      clock.Clock
	sleep      func(context.Context, time.Duration) error
	maxRetries int
	verifyWait time.Duration
	limiter    *limiter
	maxBody    int
}

var _ destination.Destination = (*Destination)(nil)

// New returns a Brevo destination. Invalid parameters are reported as
// failure.InvalidSyncDefinition.
func New(p Params) (*Destination, error) {
	d := &Destination{
		base:       strings.TrimRight(p.BaseURL, "/"),
		apiKey:     p.APIKey,
		mode:       p.Mode,
		listIDs:    append([]int64(nil), p.ListIDs...),
		conc:       p.Concurrency,
		timeout:    p.Timeout,
		client:     p.HTTPClient,
		clock:      p.Clock,
		sleep:      p.Sleep,
		maxRetries: p.MaxRetries,
		verifyWait: p.VerifyWait,
		maxBody:    MaxImportBody,
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
	if d.timeout <= 0 {
		d.timeout = DefaultTimeout
	}
	if d.client == nil {
		d.client = &http.Client{}
		d.ownClient = true
	}
	if d.clock == nil {
		d.clock = clock.Real{}
	}
	if d.sleep == nil {
		d.sleep = sleepCtx
	}
	switch {
	case d.maxRetries == 0:
		d.maxRetries = DefaultMaxRetries
	case d.maxRetries < 0:
		d.maxRetries = 0
	}
	if d.verifyWait <= 0 {
		d.verifyWait = 2 * time.Minute
	}
	rl := p.RateLimit
	if rl <= 0 {
		rl = DefaultRateLimit
	}
	d.limiter = newLimiter(d.clock, rl)
	return d, nil
}

// Capability reports CapVerify: Brevo can be asked whether a contact landed.
func (d *Destination) Capability() destination.Capability { return destination.CapVerify }

// Close releases idle connections of a client New created.
func (d *Destination) Close() error {
	if d.ownClient {
		d.client.CloseIdleConnections()
	}
	return nil
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// request is one API call. path is relative to the base URL and already
// escaped; route is its template, used in errors ("GET /contacts/{identifier}").
type request struct {
	method string
	path   string
	route  string
	query  url.Values
	body   []byte
}

type response struct {
	status int
	body   []byte
	header http.Header
}

// do sends req with rate limiting and in-run retries. It returns the 2xx
// response, an *APIError for a 4xx the caller must judge (not 401/402/403/408/
// 429), or a *failure.Error (auth, unavailable, rate limited, interrupted).
func (d *Destination) do(ctx context.Context, req request) (*response, error) {
	var (
		lastErr     error
		rateLimited bool
	)
	for attempt := 0; ; attempt++ {
		if err := d.sleep(ctx, d.limiter.reserve()); err != nil {
			return nil, d.interrupted(ctx, err)
		}
		resp, err := d.send(ctx, req)
		var wait time.Duration
		switch {
		case err != nil:
			if ctx.Err() != nil {
				return nil, d.interrupted(ctx, ctx.Err())
			}
			if req.method != http.MethodGet {
				// The write may have been applied and only its answer lost:
				// resending it here could write twice. Leave it to the caller
				// to read Brevo back (SPEC §4) before writing again.
				return nil, failure.Wrap(failure.DestinationUnavailable, fmt.Errorf("%w: %w", ErrOutcomeUnknown, d.safe(err)),
					"brevo's answer to %s was lost", req.route)
			}
			lastErr, rateLimited = err, false
			wait = backoff(attempt)
		case resp.status >= 200 && resp.status < 300:
			return resp, nil
		default:
			apiErr := d.apiError(req.route, resp)
			switch {
			case resp.status == http.StatusUnauthorized || resp.status == http.StatusPaymentRequired || resp.status == http.StatusForbidden:
				return nil, failure.Wrap(failure.DestinationAuth, d.safe(apiErr), "brevo refused the account's credentials or plan")
			case resp.status == http.StatusTooManyRequests:
				lastErr, rateLimited = apiErr, true
				wait = backoff(attempt)
				if reset, ok := resetAfter(resp); ok {
					if reset > maxRateLimitWait {
						return nil, failure.Wrap(failure.DestinationRateLimited, d.safe(apiErr),
							"brevo rate limit resets in %s", reset.Round(time.Second))
					}
					wait = reset
				}
			case req.method != http.MethodGet && resp.status != http.StatusServiceUnavailable &&
				(resp.status >= 500 || resp.status == http.StatusRequestTimeout):
				// 500, 502, 504, 408 on a write: it may have been applied.
				return nil, failure.Wrap(failure.DestinationUnavailable, fmt.Errorf("%w: %w", ErrOutcomeUnknown, d.safe(apiErr)),
					"brevo answered %d to %s; the write may have been applied", resp.status, req.route)
			case resp.status >= 500 || resp.status == http.StatusRequestTimeout:
				// 503 (Brevo did not take the request) or a read: safe to retry.
				lastErr, rateLimited = apiErr, false
				wait = backoff(attempt)
			default:
				return nil, apiErr
			}
		}
		if attempt >= d.maxRetries {
			break
		}
		if err := d.sleep(ctx, wait); err != nil {
			return nil, d.interrupted(ctx, err)
		}
	}
	if rateLimited {
		return nil, failure.Wrap(failure.DestinationRateLimited, d.safe(lastErr),
			"brevo kept answering 429 after %d attempts", d.maxRetries+1)
	}
	return nil, failure.Wrap(failure.DestinationUnavailable, d.safe(lastErr),
		"brevo did not answer successfully after %d attempts", d.maxRetries+1)
}

func (d *Destination) interrupted(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	}
	return failure.Wrap(failure.DestinationUnavailable, err, "brevo request interrupted")
}

func (d *Destination) safe(err error) error { return &safeError{err: err, secret: d.apiKey} }

// send makes one HTTP attempt and reads the whole response.
func (d *Destination) send(ctx context.Context, req request) (*response, error) {
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	u := d.base + req.path
	if len(req.query) > 0 {
		u += "?" + req.query.Encode()
	}
	var body io.Reader
	if req.body != nil {
		body = bytes.NewReader(req.body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.method, u, body)
	if err != nil {
		return nil, &transportError{Route: req.route, Err: errors.New("cannot build request")}
	}
	hr.Header.Set("api-key", d.apiKey)
	hr.Header.Set("Accept", "application/json")
	if req.body != nil {
		hr.Header.Set("Content-Type", "application/json")
	}
	res, err := d.client.Do(hr)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &transportError{Route: req.route, Err: err}
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, maxResponseBody))
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, &transportError{Route: req.route, Err: fmt.Errorf("reading response: %w", err)}
	}
	d.observeRateLimit(res.Header)
	return &response{status: res.StatusCode, body: b, header: res.Header}, nil
}

// observeRateLimit pauses the limiter until the reset when Brevo says the
// window is spent.
func (d *Destination) observeRateLimit(h http.Header) {
	rem := strings.TrimSpace(h.Get("x-sib-ratelimit-remaining"))
	if rem == "" {
		return
	}
	if n, err := strconv.ParseFloat(rem, 64); err != nil || n > 0 {
		return
	}
	reset, ok := parseReset(h.Get("x-sib-ratelimit-reset"))
	if !ok {
		reset = time.Second
	}
	d.limiter.pause(min(reset, maxRateLimitWait))
}

// resetAfter reads how long to wait after a 429: x-sib-ratelimit-reset
// (seconds), else Retry-After (seconds).
func resetAfter(r *response) (time.Duration, bool) {
	if d, ok := parseReset(r.header.Get("x-sib-ratelimit-reset")); ok {
		return d, true
	}
	return parseReset(r.header.Get("Retry-After"))
}

func parseReset(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > 1e6 {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

func (d *Destination) apiError(route string, r *response) *APIError {
	e := &APIError{Route: route, Status: r.status}
	if code, msg, ok := DecodeError(r.body); ok {
		e.Code, e.Message = code, msg
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

// runParallel calls fn(i) for i in [0,n) with at most conc in flight and
// stops starting new calls once one fails; it returns the first error.
func runParallel(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
		next     = make(chan int)
		handed   int
	)
	for range min(conc, n) {
		wg.Go(func() {
			for i := range next {
				if err := fn(ctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
				}
			}
		})
	}
feed:
	for i := range n {
		select {
		case next <- i:
			handed++
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if firstErr == nil && handed < n {
		// The parent was cancelled before every index was handed out.
		return ctx.Err()
	}
	return firstErr
}
