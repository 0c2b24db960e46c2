// Package webhook writes mapped records to an HTTP endpoint as JSON: one POST
// per record (single mode) or one per page (bulk mode), each carrying an
// Idempotency-Key header so that resending an in-doubt record is harmless
// (CapIdempotent). With a Secret, requests are signed the Standard Webhooks
// way (webhook-id, webhook-timestamp, webhook-signature "v1,<base64 HMAC-SHA256>").
// Requests go through the shared HTTP layer (internal/apiclient).
//
// Answers: 2xx → delivered; 401/402/403 → destination_auth at once; a 3xx is
// never followed → invalid_sync_definition for a permanent one (301, 308),
// else destination_unavailable (check url); 408, 409, 5xx,
// timeouts and connection errors → retried in-run with backoff (exponential
// from 1 s, cap 30 s, full jitter), then destination_unavailable; 429 → waits
// Retry-After (or backs off), then destination_rate_limited; 410 fails at
// once with invalid_sync_definition, not sent; any other 4xx rejects the
// record(s) with the response body (first 500 bytes, secrets taken out) as
// message, after a bulk page refused with 400, 413 or 422 was split down to
// the records refused alone.
// Every attempt and wait fits the attempt deadline
// (destination.WithAttemptDeadline). Records whose request provably never
// reached the endpoint are returned NotSent. Errors never hold the URL's path
// or query, header values, or the secret.
package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// Defaults of Params.
const (
	DefaultConcurrency = 4
	DefaultTimeout     = 30 * time.Second
	DefaultMaxRetries  = 5
	// MaxMessageLen is the longest rejection message kept from a response body.
	MaxMessageLen = 500

	maxRetryAfter   = time.Minute
	maxResponseBody = 1 << 20
)

// Modes.
const (
	ModeSingle = "single"
	ModeBulk   = "bulk"
)

// Header names.
const (
	HeaderIdempotencyKey   = "Idempotency-Key"
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// ErrVerifyUnsupported is returned by Verify: a webhook cannot be asked
// whether a write landed; in-doubt records are resent with the same
// Idempotency-Key instead.
var ErrVerifyUnsupported = errors.New("webhook: verify is not supported; resend with the same Idempotency-Key")

// Params configure a webhook destination.
type Params struct {
	// URL receives the POSTs. Required, absolute http(s).
	URL string
	// Mode is "single" (default: one POST per record) or "bulk" (one per page).
	Mode string
	// Headers are added to every request (e.g. Authorization). Their values
	// never appear in errors.
	Headers map[string]string
	// Secret, when set, signs requests (Standard Webhooks). A "whsec_" prefix
	// means the rest is the base64 key; otherwise the bytes are the key.
	Secret string
	// Concurrency bounds in-flight requests in single mode (default 4).
	Concurrency int
	// Timeout bounds one HTTP attempt (default 30 s).
	Timeout time.Duration
	// HTTPClient is the client used (default: one with its own connection
	// pool). It never follows redirects: a copy is used without them.
	HTTPClient *http.Client
	// Clock tells the time (signatures, Retry-After dates; default clock.Real).
	Clock clock.Clock
	// Sleep waits d or until ctx is done (default: a timer). Tests inject it.
	Sleep func(ctx context.Context, d time.Duration) error
	// MaxRetries is the number of in-run retries per request after the first
	// attempt (default 5; negative disables retries).
	MaxRetries int
}

// Destination posts records to a webhook. It is safe for concurrent use.
type Destination struct {
	url       string
	host      string
	mode      string
	headers   map[string]string
	key       []byte
	conc      int
	ownClient bool
	client    *http.Client // the requests' client: Check takes its proxy and TLS settings
	clock     clock.Clock
	api       *apiclient.Client
	secrets   []string // strings redacted from error texts
}

var _ destination.Destination = (*Destination)(nil)

// New returns a webhook destination. Invalid parameters are reported as
// failure.InvalidSyncDefinition.
func New(p Params) (*Destination, error) {
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, failure.New(failure.InvalidSyncDefinition, "webhook url must be an absolute http(s) URL")
	}
	d := &Destination{
		url:     p.URL,
		host:    u.Host,
		mode:    p.Mode,
		headers: make(map[string]string, len(p.Headers)),
		conc:    p.Concurrency,
		clock:   p.Clock,
	}
	switch d.mode {
	case "":
		d.mode = ModeSingle
	case ModeSingle, ModeBulk:
	default:
		return nil, failure.New(failure.InvalidSyncDefinition, fmt.Sprintf("webhook mode must be %q or %q", ModeSingle, ModeBulk))
	}
	for k, v := range p.Headers {
		if k == "" || strings.ContainsAny(k, " \t\r\n:") || strings.ContainsAny(v, "\r\n") {
			return nil, failure.New(failure.InvalidSyncDefinition, "webhook headers must be valid HTTP header names and values")
		}
		d.headers[k] = v
		if len(v) >= 4 {
			d.secrets = append(d.secrets, v)
		}
		// A receiver may echo the credential without its scheme
		// ("Bearer X" as "X"): each long word of the value is one too.
		for _, w := range strings.Fields(v) {
			if len(w) >= 8 && w != v {
				d.secrets = append(d.secrets, w)
			}
		}
	}
	if p.Secret != "" {
		k, ok := apiclient.SigningKey(p.Secret)
		if !ok {
			return nil, failure.New(failure.InvalidSyncDefinition, "webhook secret has a whsec_ prefix but is not valid base64")
		}
		d.key = k
		d.secrets = append(d.secrets, p.Secret)
	}
	if u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			d.secrets = append(d.secrets, pw)
		}
	}
	if d.conc <= 0 {
		d.conc = DefaultConcurrency
	}
	timeout := p.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	maxRetries := p.MaxRetries
	if maxRetries == 0 {
		maxRetries = DefaultMaxRetries
	}
	client := p.HTTPClient
	if client == nil {
		client = apiclient.NewHTTPClient()
		d.ownClient = true
	}
	d.client = client
	if d.clock == nil {
		d.clock = clock.Real{}
	}
	d.api = apiclient.New(apiclient.Params{
		Name:       "webhook",
		Subject:    "the webhook",
		URLSetting: "url",
		Client:     client,
		Timeout:    timeout,
		MaxRetries: maxRetries,
		MaxBody:    maxResponseBody,
		MaxWait:    maxRetryAfter,
		Clock:      d.clock,
		Sleep:      p.Sleep,
		Classify:   classify,
		StatusError: func(_ string, r *apiclient.Response) error {
			return &StatusError{Host: d.host, Status: r.Status}
		},
		Secrets: d.secrets,
	})
	return d, nil
}

// Capability reports CapIdempotent: resending with the same Idempotency-Key
// is harmless for a conforming receiver.
func (d *Destination) Capability() destination.Capability { return destination.CapIdempotent }

// Verify is not supported; it returns ErrVerifyUnsupported.
func (d *Destination) Verify(context.Context, []destination.Record, time.Time) (map[string]string, error) {
	return nil, ErrVerifyUnsupported
}

// Close releases idle connections of a client New created.
func (d *Destination) Close() error {
	if d.ownClient {
		d.api.CloseIdleConnections()
	}
	return nil
}

// bulkBody is the body of a bulk POST.
type bulkBody struct {
	Records []bulkRecord `json:"records"`
}

type bulkRecord struct {
	Key  string         `json:"key"`
	Data map[string]any `json:"data"`
}

// BulkIdempotencyKey is the Idempotency-Key of a bulk POST: the hex SHA-256
// of the page's record keys, each followed by a newline.
func BulkIdempotencyKey(keys []string) string {
	h := sha256.New()
	for _, k := range keys {
		io.WriteString(h, k)
		io.WriteString(h, "\n")
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Write posts recs and returns one result per record. On a page-level
// failure the results of records already settled are returned with the error.
func (d *Destination) Write(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	if err := ctx.Err(); err != nil {
		out := make([]destination.Result, len(recs))
		for i, r := range recs {
			out[i] = destination.Result{Key: r.Key, Outcome: destination.NotSent}
		}
		return out, failure.Wrap(failure.DestinationUnavailable, fmt.Errorf("%w: %w", destination.ErrNotSent, err),
			"webhook request interrupted")
	}
	if d.mode == ModeBulk {
		return d.writeBulk(ctx, recs)
	}
	// A record whose POST may have reached the webhook stays in doubt,
	// resent later with the same key (docs/guide.md#the-ledger-and-its-retention).
	out, err := apiclient.WriteEach(ctx, recs, d.conc, nil, func(ctx context.Context, r destination.Record) (destination.Result, error) {
		body, err := json.Marshal(r.Data)
		if err != nil {
			return destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: "record data cannot be encoded as JSON"}, nil
		}
		res, err := d.post(ctx, body, r.Key)
		if err != nil {
			return destination.Result{}, err
		}
		return res.result(r.Key), nil
	})
	if err != nil && failure.CodeOf(err) == failure.Internal {
		err = interrupted(ctx, err)
	}
	return out, err
}

func (d *Destination) writeBulk(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	var (
		out  = make([]destination.Result, 0, len(recs))
		page []bulkRecord
	)
	for _, r := range recs {
		if _, err := json.Marshal(r.Data); err != nil {
			out = append(out, destination.Result{Key: r.Key, Outcome: destination.Rejected,
				Message: "record data cannot be encoded as JSON"})
			continue
		}
		page = append(page, bulkRecord{Key: r.Key, Data: r.Data})
	}
	if len(page) == 0 {
		return out, nil
	}
	return d.postPage(ctx, page, out)
}

// postPage posts page as one bulk POST and appends its records' results to
// out. A page the receiver refused for its size or its content (splitBulk)
// is sent again as two halves, each its own POST with its own key, until a
// refusal is one record's: a bad record never blocks its page, and a page
// over the receiver's body limit still arrives (docs/guide.md#destinations).
// The refused POST was not processed, so the halves cannot write twice. On
// an error, the records of halves not yet posted are NotSent.
func (d *Destination) postPage(ctx context.Context, page []bulkRecord, out []destination.Result) ([]destination.Result, error) {
	keys := make([]string, len(page))
	for i, r := range page {
		keys[i] = r.Key
	}
	body, err := json.Marshal(bulkBody{Records: page})
	if err != nil {
		// Each record encoded alone, so the page does too.
		return out, interrupted(ctx, err)
	}
	res, err := d.post(ctx, body, BulkIdempotencyKey(keys))
	if err != nil {
		if errors.Is(err, destination.ErrNotSent) {
			out = appendNotSent(out, keys)
		}
		return out, err
	}
	if res.rejected && len(page) > 1 && splitBulk(res.status) {
		half := len(page) / 2
		out, err = d.postPage(ctx, page[:half], out)
		if err != nil {
			return appendNotSent(out, keys[half:]), err
		}
		return d.postPage(ctx, page[half:], out)
	}
	for _, k := range keys {
		out = append(out, res.result(k))
	}
	return out, nil
}

// splitBulk reports whether a bulk page refused with status is sent again
// in halves: 413 (the body is over the receiver's limit) and the answers
// of a receiver validating the records (400, 422). Other refusals would
// be the halves' too (404 and 405, the address's, fail before: classify).
func splitBulk(status int) bool {
	return status == http.StatusRequestEntityTooLarge || status == http.StatusBadRequest ||
		status == http.StatusUnprocessableEntity
}

func appendNotSent(out []destination.Result, keys []string) []destination.Result {
	for _, k := range keys {
		out = append(out, destination.Result{Key: k, Outcome: destination.NotSent})
	}
	return out
}

// answer is a final (non-retried) answer to one POST.
type answer struct {
	rejected bool
	status   int
	message  string
	ref      string
}

func (a answer) result(key string) destination.Result {
	if a.rejected {
		return destination.Result{Key: key, Outcome: destination.Rejected, Message: a.message}
	}
	return destination.Result{Key: key, Outcome: destination.Delivered, Ref: a.ref}
}

// StatusError is a non-2xx answer. Its text holds the status and the host
// only (never the body, the URL's path or query, or header values).
type StatusError struct {
	Host   string
	Status int
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("webhook: POST %s: HTTP %d", e.Host, e.Status)
}

// post sends body through the shared HTTP layer and returns the final
// answer, or a *failure.Error (wrapping destination.ErrNotSent when the
// webhook provably did not receive it). Every attempt is resent with the
// same Idempotency-Key, so lost answers and 5xx are retried.
func (d *Destination) post(ctx context.Context, body []byte, idemKey string) (answer, error) {
	h := make(http.Header, len(d.headers)+2)
	for k, v := range d.headers {
		h.Set(k, v)
	}
	h.Set("Content-Type", "application/json")
	h.Set(HeaderIdempotencyKey, idemKey)
	req := apiclient.Request{
		Method: http.MethodPost, URL: d.url, Route: "POST " + d.host, Header: h, Body: body,
		Idempotent: true,
		// A 2xx whose body broke is still a 2xx: the receiver accepted it.
		PartialBodyOK: true,
	}
	if d.key != nil {
		req.Prepare = func(h http.Header) {
			ts := strconv.FormatInt(d.clock.Now().Unix(), 10)
			h.Set(HeaderWebhookID, idemKey)
			h.Set(HeaderWebhookTimestamp, ts)
			h.Set(HeaderWebhookSignature, Sign(d.key, idemKey, ts, body))
		}
	}
	res, err := d.api.Do(ctx, req)
	if err != nil {
		return answer{}, err
	}
	if res.Status >= 200 && res.Status < 300 {
		return answer{ref: refOf(res.Body)}, nil
	}
	return answer{rejected: true, status: res.Status, message: d.message(res.Status, res.Body)}, nil
}

// classify: 401, 402 and 403 are auth (the account, not the records); 429 is rate limited; 410 stops the run (the
// receiver asks the sender to stop, as Standard Webhooks says); 404 and 405
// fail the page as the url's; any other 4xx but 408
// and 409 (a request with this key is in progress) rejects the record(s);
// the rest may have been applied and is retried (the key makes it safe).
func classify(status int) apiclient.Class {
	switch {
	case apiclient.AccountRefused(status):
		return apiclient.Auth
	case status == http.StatusTooManyRequests:
		return apiclient.RateLimited
	case status == http.StatusGone:
		return apiclient.Gone
	case status == http.StatusNotFound || status == http.StatusMethodNotAllowed:
		// The url's, not the records': a receiver refuses a record with
		// 400 or 422 (docs/guide.md#http-answers-proxies-and-tls).
		return apiclient.NoEndpoint
	case status >= 400 && status < 500 && status != http.StatusRequestTimeout && status != http.StatusConflict:
		return apiclient.Final
	}
	return apiclient.MaybeApplied
}

// Sign returns the Standard Webhooks signature header value for one message:
// "v1," + base64(HMAC-SHA256(key, id + "." + timestamp + "." + body)).
func Sign(key []byte, id, timestamp string, body []byte) string {
	m := hmac.New(sha256.New, key)
	io.WriteString(m, id)
	io.WriteString(m, ".")
	io.WriteString(m, timestamp)
	io.WriteString(m, ".")
	m.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// refOf returns the "id" of a JSON object response, if any.
func refOf(body []byte) string {
	var v struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(body, &v) != nil || len(v.ID) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(v.ID, &s) == nil {
		return truncate(s, 200)
	}
	var n json.Number
	if json.Unmarshal(v.ID, &n) == nil {
		return n.String()
	}
	return ""
}

// message is a rejected record's message: the response body, cut to
// MaxMessageLen bytes. A receiver's error page may echo the request, so the
// header values, the secret and the URL's password are taken out.
func (d *Destination) message(status int, body []byte) string {
	m := truncate(strings.TrimSpace(apiclient.HideSecrets(string(body), d.secrets)), MaxMessageLen)
	if m == "" {
		return fmt.Sprintf("HTTP %d", status)
	}
	return m
}

func truncate(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n]
}

func interrupted(ctx context.Context, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	}
	return failure.Wrap(failure.DestinationUnavailable, err, "webhook request interrupted")
}
