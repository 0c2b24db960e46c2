package deadman

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// Heartbeats are the outside half of docs/guide.md#telling-silence-from-outside: a dead-man that lives in the
// scheduler dies with it, so each sync may name a heartbeat URL an outside
// monitor watches (the healthchecks.io / Cronitor convention). After every
// successful run oncesync POSTs to the URL, after every failed one to the
// URL with "/fail" appended to its path; skipped and interrupted runs send
// nothing. A heartbeat never blocks or fails a run: Beat returns at once,
// the request has its own timeout and a few retries, and redirects are not
// followed. The URL usually holds the monitor's token, so it appears in no
// log line or error: only its host does.

// Heartbeat defaults.
const (
	// HeartbeatTimeout bounds one attempt.
	HeartbeatTimeout = 10 * time.Second
	// HeartbeatAttempts is the number of attempts of one heartbeat.
	HeartbeatAttempts = 3
	// HeartbeatBackoff is the wait before the second attempt; it doubles.
	HeartbeatBackoff = time.Second
)

// ErrHeartbeat is wrapped by every failed heartbeat (see HeartbeatError).
var ErrHeartbeat = errors.New("heartbeat not delivered")

// HeartbeatError is a heartbeat that failed after its attempts. It names
// the monitor's host only.
type HeartbeatError struct {
	SyncID   string
	RunID    int64
	Host     string
	Attempts int
	// Status is the last HTTP status (0: no answer).
	Status int
	// Err is the last cause, with the URL taken out.
	Err error
}

func (e *HeartbeatError) Error() string {
	what := "no answer"
	if e.Status != 0 {
		what = fmt.Sprintf("answered %d", e.Status)
	}
	msg := fmt.Sprintf("heartbeat of sync %s run %d to %s: %s after %d attempt(s)", e.SyncID, e.RunID, e.Host, what, e.Attempts)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Unwrap returns ErrHeartbeat and the cause.
func (e *HeartbeatError) Unwrap() []error { return []error{ErrHeartbeat, e.Err} }

// HeartbeatParams configure Heartbeats.
type HeartbeatParams struct {
	// Client sends the requests (nil: a plain client). Redirects are never
	// followed, whatever the client says: a 3xx is an error.
	Client *http.Client
	// Logger receives a warning per heartbeat that failed (nil: discarded).
	Logger *slog.Logger
	// Timeout, Attempts and Backoff default to HeartbeatTimeout,
	// HeartbeatAttempts and HeartbeatBackoff.
	Timeout  time.Duration
	Attempts int
	Backoff  time.Duration
	// Sleep waits between attempts (nil: a timer); tests shrink it.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Heartbeats sends heartbeats in the background. A nil *Heartbeats sends
// nothing.
type Heartbeats struct {
	p      HeartbeatParams
	client *http.Client
	log    *slog.Logger
	base   context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// NewHeartbeats returns a sender; Close waits for the heartbeats in flight.
func NewHeartbeats(p HeartbeatParams) *Heartbeats {
	if p.Timeout <= 0 {
		p.Timeout = HeartbeatTimeout
	}
	if p.Attempts <= 0 {
		p.Attempts = HeartbeatAttempts
	}
	if p.Backoff <= 0 {
		p.Backoff = HeartbeatBackoff
	}
	if p.Sleep == nil {
		p.Sleep = clock.Sleep
	}
	var c http.Client
	if p.Client != nil {
		c = *p.Client
	}
	// A redirect would carry the token (and the run's summary) to another
	// place nobody configured.
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	h := &Heartbeats{p: p, client: &c, log: p.Logger}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	h.base, h.cancel = context.WithCancel(context.Background())
	return h
}

// HeartbeatTarget is where run's heartbeat goes: rawURL for a succeeded
// run, rawURL with "/fail" appended to its path for a failed one (a query
// string is kept). ok is false when the run sends none (no URL, or a run
// that neither succeeded nor failed).
func HeartbeatTarget(rawURL string, run store.Run) (target string, ok bool) {
	if rawURL == "" {
		return "", false
	}
	switch run.State {
	case store.RunSucceeded:
		return rawURL, true
	case store.RunFailed:
		u, err := url.Parse(rawURL)
		if err != nil {
			return "", false
		}
		return u.JoinPath("fail").String(), true
	}
	return "", false
}

// Beat sends run's heartbeat to rawURL in the background and returns at
// once; a failure is logged. ctx's values are kept, not its cancellation:
// the run that ended must still be told.
func (h *Heartbeats) Beat(ctx context.Context, syncID, rawURL string, run store.Run) {
	if h == nil {
		return
	}
	if _, ok := HeartbeatTarget(rawURL, run); !ok {
		return
	}
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		if err := h.Send(ctx, syncID, rawURL, run); err != nil {
			h.log.Warn("heartbeat failed; the run is not affected", "sync", syncID, "run", run.ID, "err", err)
		}
	}()
}

// Send sends run's heartbeat and waits for the outcome: nil when the
// monitor answered 2xx (or the run sends none), else a *HeartbeatError.
func (h *Heartbeats) Send(ctx context.Context, syncID, rawURL string, run store.Run) error {
	target, ok := HeartbeatTarget(rawURL, run)
	if !ok {
		return nil
	}
	herr := &HeartbeatError{SyncID: syncID, RunID: run.ID, Host: hostOf(rawURL)}
	ctx, stop := mergeCancel(context.WithoutCancel(ctx), h.base)
	defer stop()
	body := heartbeatBody(syncID, run)
	wait := h.p.Backoff
	for attempt := 1; ; attempt++ {
		herr.Attempts = attempt
		status, retry, err := h.attempt(ctx, target, body)
		herr.Status, herr.Err = status, err
		if err == nil {
			return nil
		}
		if !retry || attempt >= h.p.Attempts {
			return herr
		}
		if serr := h.p.Sleep(ctx, wait); serr != nil {
			return herr
		}
		wait *= 2
	}
}

// attempt makes one request. retry says whether another attempt may help
// (no answer, 429, 5xx).
func (h *Heartbeats) attempt(ctx context.Context, target, body string) (status int, retry bool, err error) {
	actx, cancel := context.WithTimeout(ctx, h.p.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(actx, http.MethodPost, target, strings.NewReader(body))
	if err != nil {
		return 0, false, errors.New("the heartbeat URL does not make a request")
	}
	req.Header.Set("Content-Type", "text/plain; charset=utf-8")
	req.Header.Set("User-Agent", "oncesync")
	resp, err := h.client.Do(req)
	if err != nil {
		return 0, ctx.Err() == nil, withoutURL(err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	switch c := resp.StatusCode; {
	case c >= 200 && c < 300:
		return c, false, nil
	case c >= 300 && c < 400:
		return c, false, errors.New("redirects are not followed: set heartbeat_url to the final URL")
	case c == http.StatusTooManyRequests || c >= 500:
		return c, true, errors.New("the monitor is unavailable")
	default:
		return c, false, errors.New("the monitor refused the request: check heartbeat_url")
	}
}

// Close waits until every heartbeat in flight is done, or ctx ends: then
// it cancels them and returns ctx's error.
func (h *Heartbeats) Close(ctx context.Context) error {
	if h == nil {
		return nil
	}
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	select {
	case <-done:
		h.cancel()
		return nil
	case <-ctx.Done():
		h.cancel()
		<-done
		return ctx.Err()
	}
}

// heartbeatBody is the request's body: healthchecks.io and Cronitor show
// it with the ping. Counts and the failure code only: no record, no detail
// (which could quote a source).
func heartbeatBody(syncID string, r store.Run) string {
	if r.State == store.RunFailed {
		e := failure.Lookup(failure.Code(r.FailureCode))
		return fmt.Sprintf("oncesync: run %d of sync %s failed: %s (owner: %s): %s\n", r.ID, syncID, e.Code, e.Owner, e.WhatHappened)
	}
	return fmt.Sprintf("oncesync: run %d of sync %s succeeded: read %d, written %d, replayed %d, rejected %d, in doubt %d\n",
		r.ID, syncID, r.Read, r.Written, r.Replayed, r.Rejected, r.InDoubt)
}

// hostOf names the monitor in messages: scheme and host, no path or query.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "the heartbeat URL"
	}
	return u.Scheme + "://" + u.Host
}

// withoutURL drops the request URL that net/http puts in its errors.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// mergeCancel is ctx, also cancelled when other is.
func mergeCancel(ctx, other context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(other, cancel)
	return ctx, func() { stop(); cancel() }
}
