package alert

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/clock"
)

// Standard Webhooks headers (https://www.standardwebhooks.com).
const (
	HeaderWebhookID        = "webhook-id"
	HeaderWebhookTimestamp = "webhook-timestamp"
	HeaderWebhookSignature = "webhook-signature"
)

// WebhookSinkParams configures a WebhookSink.
type WebhookSinkParams struct {
	// URL is the http(s) endpoint receiving alerts.
	URL string
	// Secret signs the payloads. "whsec_<base64>" is decoded as Standard
	// Webhooks prescribes; any other value is used as raw key bytes. Empty
	// sends unsigned payloads (webhook-id and webhook-timestamp still set).
	Secret string
	// Client sends the requests; nil uses a client with a 30s timeout. A
	// copy that never follows redirects is used (docs/guide.md#the-sync-pages-and-the-api: a redirect
	// would carry the signed alert elsewhere).
	Client *http.Client
	// Clock stamps webhook-timestamp; nil uses the wall clock.
	Clock clock.Clock
}

// WebhookSink POSTs alerts as JSON signed per the Standard Webhooks scheme.
//
// The body is {"type": "alert.<kind>", "timestamp": ..., "data": {...}}; the
// webhook-id header is the alert id (stable across retries), the
// webhook-timestamp the Unix time of the attempt, and webhook-signature
// "v1,<base64 HMAC-SHA256 of id.timestamp.body>".
type WebhookSink struct {
	url    string
	host   string
	key    []byte
	secret string
	client *http.Client
	clock  clock.Clock
}

// NewWebhookSink returns a WebhookSink; the URL must be absolute http(s).
func NewWebhookSink(p WebhookSinkParams) (*WebhookSink, error) {
	u, err := url.Parse(p.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		// The URL may carry a token: never echo it.
		return nil, fmt.Errorf("alert: webhook: url must be an absolute http(s) URL: %w", ErrInvalidConfig)
	}
	s := &WebhookSink{url: p.URL, host: u.Host, secret: p.Secret, client: p.Client, clock: p.Clock}
	if p.Secret != "" {
		s.key = webhookKey(p.Secret)
	}
	if s.client == nil {
		// A transport of its own: whatever else in the process closes the
		// shared default transport's idle connections (httptest servers do
		// on Close) must not break an alert's request on the wire.
		s.client = apiclient.NewHTTPClient()
		s.client.Timeout = 30 * time.Second
	}
	s.client = apiclient.NoRedirects(s.client)
	if s.clock == nil {
		s.clock = clock.Real{}
	}
	return s, nil
}

// webhookKey decodes a "whsec_<base64>" secret, or returns the raw bytes of
// any other secret.
func webhookKey(secret string) []byte {
	if key, ok := apiclient.SigningKey(secret); ok {
		return key
	}
	return []byte(secret)
}

// Name returns "webhook".
func (*WebhookSink) Name() string { return "webhook" }

// WebhookPayload is the JSON body a WebhookSink sends.
type WebhookPayload struct {
	// Type is "alert." + the alert's kind.
	Type string `json:"type"`
	// Timestamp is when the alert was raised.
	Timestamp time.Time   `json:"timestamp"`
	Data      WebhookData `json:"data"`
}

// WebhookData is the alert inside a WebhookPayload.
type WebhookData struct {
	ID           string    `json:"id"`
	Kind         string    `json:"kind"`
	Severity     Severity  `json:"severity"`
	Workspace    string    `json:"workspace"`
	Sync         string    `json:"sync,omitempty"`
	WhatHappened string    `json:"what_happened"`
	NextStep     string    `json:"next_step"`
	Owner        string    `json:"owner"`
	Link         string    `json:"link,omitempty"`
	At           time.Time `json:"at"`
}

// Payload returns the JSON body sent for a.
func (*WebhookSink) Payload(a Alert) ([]byte, error) {
	return json.Marshal(WebhookPayload{
		Type:      "alert." + a.Kind,
		Timestamp: a.At.UTC(),
		Data: WebhookData{
			ID: a.ID, Kind: a.Kind, Severity: a.Severity, Workspace: a.Workspace, Sync: a.SyncID,
			WhatHappened: a.WhatHappened, NextStep: a.NextStep, Owner: string(a.Owner), Link: a.Link,
			At: a.At.UTC(),
		},
	})
}

// sign returns the webhook-signature value of id, ts and body.
func (s *WebhookSink) sign(id string, ts int64, body []byte) string {
	mac := hmac.New(sha256.New, s.key)
	fmt.Fprintf(mac, "%s.%d.", id, ts)
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// Send POSTs a. A 2xx answer is success; 408, 425, 429 and 5xx are retryable;
// any other status wraps ErrPermanent.
func (s *WebhookSink) Send(ctx context.Context, a Alert) error {
	body, err := s.Payload(a)
	if err != nil {
		return fmt.Errorf("alert: webhook: encode: %w", errors.Join(err, ErrPermanent))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("alert: webhook %s: build request: %w", s.host, errors.Join(ErrPermanent, s.scrub(err)))
	}
	ts := s.clock.Now().Unix()
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "oncesync-alerts")
	req.Header.Set(HeaderWebhookID, a.ID)
	req.Header.Set(HeaderWebhookTimestamp, strconv.FormatInt(ts, 10))
	if s.key != nil {
		req.Header.Set(HeaderWebhookSignature, s.sign(a.ID, ts, body))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return fmt.Errorf("alert: webhook %s: %w", s.host, s.scrub(err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return nil
	case c >= 300 && c < 400:
		// Not followed: the URL is wrong (or hostile); retrying will not help.
		return fmt.Errorf("alert: webhook %s: status %d (redirect not followed; check the url): %w", s.host, c, ErrPermanent)
	case c == http.StatusRequestTimeout, c == http.StatusTooEarly, c == http.StatusTooManyRequests, c >= 500:
		return fmt.Errorf("alert: webhook %s: status %d", s.host, c)
	default:
		return fmt.Errorf("alert: webhook %s: status %d: %w", s.host, c, ErrPermanent)
	}
}

// scrub removes the URL (which may carry a token) and the secret from err.
func (s *WebhookSink) scrub(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		// url.Error's message embeds the full URL; keep only the operation and cause.
		err = &scrubbedError{msg: ue.Op + ": " + ue.Err.Error(), err: err}
	}
	return scrub(err, s.url, s.secret)
}
