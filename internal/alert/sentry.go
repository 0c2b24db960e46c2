package alert

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/getsentry/sentry-go"

	"github.com/oncesync/oncesync/internal/apiclient"
)

// SentrySinkParams configures a SentrySink.
type SentrySinkParams struct {
	// DSN is the project's Sentry DSN (a secret).
	DSN string
	// Environment and Release tag every event (Release defaults to "oncesync").
	Environment string
	Release     string
	// FlushTimeout bounds how long Send waits for the event to be delivered
	// when ctx has no earlier deadline (default 10s).
	FlushTimeout time.Duration
	// HTTPTransport sends the requests; nil uses http.DefaultTransport.
	// A redirect answer is an error, never followed (docs/guide.md#the-sync-pages-and-the-api: it would
	// carry the DSN's key and the event elsewhere).
	HTTPTransport http.RoundTripper
}

// SentrySink captures alerts as Sentry events through a dedicated
// sentry.Client and Hub (never the global hub), so oncesync's alerts do not
// mix with any other Sentry use in the process.
//
// The event id is the alert id, so Sentry deduplicates retried deliveries;
// the event is tagged workspace, sync, kind, severity and owner, and
// fingerprinted by kind, workspace and sync so one sync's incidents group
// together.
type SentrySink struct {
	client  *sentry.Client
	hub     *sentry.Hub
	timeout time.Duration
	rec     *sentryRecorder
	dsn     string
	mu      sync.Mutex // one Send at a time: Flush is client-wide.
}

// NewSentrySink returns a SentrySink for p.DSN.
func NewSentrySink(p SentrySinkParams) (*SentrySink, error) {
	if p.DSN == "" {
		return nil, fmt.Errorf("alert: sentry: dsn is required: %w", ErrInvalidConfig)
	}
	if _, err := sentry.NewDsn(p.DSN); err != nil {
		// The parse error may quote the DSN: never include it.
		return nil, fmt.Errorf("alert: sentry: dsn is not a valid Sentry DSN: %w", ErrInvalidConfig)
	}
	if p.Release == "" {
		p.Release = "oncesync"
	}
	if p.FlushTimeout <= 0 {
		p.FlushTimeout = 10 * time.Second
	}
	base := p.HTTPTransport
	if base == nil {
		base = http.DefaultTransport
	}
	// sentry-go builds its own http.Client, which follows redirects: refuse
	// them at the transport.
	rec := &sentryRecorder{base: apiclient.RefuseRedirects(base), outcomes: map[string]error{}}
	client, err := sentry.NewClient(sentry.ClientOptions{
		Dsn:                  p.DSN,
		Environment:          p.Environment,
		Release:              p.Release,
		HTTPTransport:        rec,
		DisableClientReports: true,
		SampleRate:           1,
	})
	if err != nil {
		return nil, fmt.Errorf("alert: sentry: %w", errors.Join(ErrInvalidConfig, scrub(err, p.DSN)))
	}
	return &SentrySink{
		client:  client,
		hub:     sentry.NewHub(client, sentry.NewScope()),
		timeout: p.FlushTimeout,
		rec:     rec,
		dsn:     p.DSN,
	}, nil
}

// Name returns "sentry".
func (*SentrySink) Name() string { return "sentry" }

// Send captures a and waits (Flush) until Sentry accepted it, ctx is done or
// the flush timeout passed.
func (s *SentrySink) Send(ctx context.Context, a Alert) error {
	s.mu.Lock()
	defer s.mu.Unlock()

	ev := sentry.NewEvent()
	ev.EventID = sentryEventID(a.ID)
	ev.Level = sentryLevel(a.Severity)
	ev.Message = a.WhatHappened
	ev.Timestamp = a.At
	ev.Logger = "oncesync.alert"
	ev.Fingerprint = []string{"oncesync", a.Kind, a.Workspace, a.SyncID}
	ev.Tags = map[string]string{
		"workspace": a.Workspace,
		"sync":      a.SyncID,
		"kind":      a.Kind,
		"severity":  string(a.Severity),
		"owner":     string(a.Owner),
		"alert_id":  a.ID,
	}
	ev.Contexts["alert"] = sentry.Context{
		"what_happened": a.WhatHappened,
		"next_step":     a.NextStep,
		"owner":         string(a.Owner),
		"link":          a.Link,
	}

	s.rec.forget(string(ev.EventID))
	if id := s.hub.CaptureEvent(ev); id == nil {
		return errors.New("alert: sentry: event dropped by the client")
	}
	fctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if !s.hub.FlushWithContext(fctx) {
		return fmt.Errorf("alert: sentry: event not delivered before the deadline: %w", context.Cause(fctx))
	}
	err, ok := s.rec.take(string(ev.EventID))
	if !ok {
		return errors.New("alert: sentry: event not sent (dropped by the transport, e.g. rate limited)")
	}
	if err != nil {
		return fmt.Errorf("alert: sentry: %w", scrub(err, s.dsn))
	}
	return nil
}

// Close flushes pending events (bounded by ctx) and releases the client.
func (s *SentrySink) Close(ctx context.Context) error {
	s.client.FlushWithContext(ctx)
	s.client.Close()
	return nil
}

// sentryEventID returns id when it is a valid Sentry event id (32 hex
// digits, as NewID makes), else a fresh random one.
func sentryEventID(id string) sentry.EventID {
	if len(id) == 32 {
		if _, err := hex.DecodeString(id); err == nil {
			return sentry.EventID(id)
		}
	}
	return sentry.EventID(NewID())
}

func sentryLevel(s Severity) sentry.Level {
	switch s {
	case SeverityCritical:
		return sentry.LevelError
	case SeverityWarning:
		return sentry.LevelWarning
	default:
		return sentry.LevelInfo
	}
}

// sentryRecorder wraps the HTTP transport of the Sentry client and records
// the outcome of each envelope by event id: sentry-go's transports do not
// report delivery failures to the caller, and a Sink must, to be retried.
type sentryRecorder struct {
	base     http.RoundTripper
	mu       sync.Mutex
	outcomes map[string]error
}

func (r *sentryRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	id := envelopeEventID(req)
	resp, err := r.base.RoundTrip(req)
	if id == "" {
		return resp, err
	}
	var outcome error
	switch {
	case err != nil:
		var ue *url.Error
		if errors.As(err, &ue) {
			outcome = ue.Err // without the URL
		} else {
			outcome = err
		}
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		outcome = fmt.Errorf("status %d", resp.StatusCode)
	}
	r.mu.Lock()
	if len(r.outcomes) > 1000 {
		clear(r.outcomes)
	}
	r.outcomes[id] = outcome
	r.mu.Unlock()
	return resp, err
}

func (r *sentryRecorder) forget(id string) {
	r.mu.Lock()
	delete(r.outcomes, id)
	r.mu.Unlock()
}

func (r *sentryRecorder) take(id string) (error, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	err, ok := r.outcomes[id]
	delete(r.outcomes, id)
	return err, ok
}

// envelopeEventID reads the event_id of the envelope header (its first line).
func envelopeEventID(req *http.Request) string {
	if req.GetBody == nil {
		return ""
	}
	body, err := req.GetBody()
	if err != nil {
		return ""
	}
	defer body.Close()
	line, err := bufio.NewReader(io.LimitReader(body, 64<<10)).ReadBytes('\n')
	if err != nil && len(line) == 0 {
		return ""
	}
	var h struct {
		EventID string `json:"event_id"`
	}
	if json.Unmarshal(bytes.TrimSpace(line), &h) != nil {
		return ""
	}
	return h.EventID
}
