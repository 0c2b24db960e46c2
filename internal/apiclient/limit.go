package apiclient

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
)

// Limiter paces requests at a steady rate (GCRA with a burst of one) and
// holds every request back while the server has said its window is spent
// (Pause). It is a Pacer.
//
// It reserves a send time per request instead of polling, so it works with a
// fake clock and an injected Sleep that returns at once.
type Limiter struct {
	clock    clock.Clock
	interval time.Duration

	mu          sync.Mutex
	tat         time.Time // theoretical arrival time of the next request
	pausedUntil time.Time
}

// NewLimiter returns a Limiter of perSecond requests per second (> 0).
func NewLimiter(c clock.Clock, perSecond float64) *Limiter {
	return &Limiter{clock: c, interval: time.Duration(float64(time.Second) / perSecond)}
}

// Reserve returns how long the caller must wait before sending.
func (l *Limiter) Reserve(context.Context) (time.Duration, error) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	sendAt := now
	if l.tat.After(sendAt) {
		sendAt = l.tat
	}
	if l.pausedUntil.After(sendAt) {
		sendAt = l.pausedUntil
	}
	l.tat = sendAt.Add(l.interval)
	return sendAt.Sub(now), nil
}

// SetRate paces the next requests at perSecond (> 0).
func (l *Limiter) SetRate(perSecond float64) {
	l.mu.Lock()
	l.interval = time.Duration(float64(time.Second) / perSecond)
	l.mu.Unlock()
}

// Pause holds requests back until now+d.
func (l *Limiter) Pause(d time.Duration) {
	until := l.clock.Now().Add(d)
	l.mu.Lock()
	if until.After(l.pausedUntil) {
		l.pausedUntil = until
	}
	l.mu.Unlock()
}

// Backoff bounds (docs/guide.md#running-on-a-schedule-serve-and-worker, docs/guide.md#the-checkpoint-barrier: exponential from 1 s, capped at 30 s, full jitter).
const (
	BackoffBase = time.Second
	BackoffCap  = 30 * time.Second
)

// Backoff returns the full-jitter wait before retry number attempt
// (0-based): uniform in [0, min(1 s << attempt, 30 s)].
func Backoff(attempt int) time.Duration {
	d := BackoffCap
	if attempt < 5 { // 1s << 5 = 32s > cap
		d = min(BackoffBase<<attempt, BackoffCap)
	}
	return rand.N(d + 1)
}

// RetryAfter parses a Retry-After value: delay seconds (a fraction too) or
// an HTTP date, read against now. ok is false when v is empty or invalid.
func RetryAfter(v string, now time.Time) (time.Duration, bool) {
	if d, ok := ParseSeconds(v); ok {
		return d, true
	}
	if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil && f > maxSeconds {
		// Longer than any wait taken: as long as the bound, so that it
		// fails at once rather than read as "no wait asked".
		return maxSeconds * time.Second, true
	}
	t, err := http.ParseTime(strings.TrimSpace(v))
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// maxSeconds bounds a number of seconds read from a header (about 11 days).
const maxSeconds = 1e6

// ParseSeconds parses a non-negative number of seconds (up to 1e6) such as
// a rate-limit reset header.
func ParseSeconds(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || f < 0 || f > maxSeconds {
		return 0, false
	}
	return time.Duration(f * float64(time.Second)), true
}

// NewHTTPClient returns a client with its own connection pool (a clone of
// http.DefaultTransport), so that closing its idle connections (a
// destination's Close) cannot cut a connection another client is reusing.
//
// Like every Go tool it goes through HTTPS_PROXY, HTTP_PROXY and NO_PROXY
// (the default transport's ProxyFromEnvironment); a proxy that refuses
// to connect it (a CONNECT answered 407 or 403) fails with a
// *ProxyError, which net/http would give as a bare status text.
func NewHTTPClient() *http.Client {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		c := t.Clone()
		c.OnProxyConnectResponse = proxyConnectResponse
		return &http.Client{Transport: c}
	}
	return &http.Client{}
}

// ProxyError is a proxy's refusal to open a tunnel (its answer to
// CONNECT): the request never reached the server.
type ProxyError struct {
	// Proxy is the proxy's host and port, never its user or password.
	Proxy  string
	Status int
}

func (e *ProxyError) Error() string {
	return fmt.Sprintf("the proxy %s answered CONNECT with HTTP %d %s", e.Proxy, e.Status, http.StatusText(e.Status))
}

// refusesOncesync reports whether the proxy's answer will be the same on
// every attempt: it wants credentials (407) or forbids the destination
// (403), which only a change of HTTPS_PROXY, NO_PROXY or the proxy's
// rules alters.
func (e *ProxyError) refusesOncesync() bool {
	return e.Status == http.StatusProxyAuthRequired || e.Status == http.StatusForbidden
}

func proxyConnectResponse(_ context.Context, proxy *url.URL, _ *http.Request, resp *http.Response) error {
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	return &ProxyError{Proxy: proxy.Host, Status: resp.StatusCode}
}

// NoRedirects returns a copy of c (nil: a new client) that never follows a
// redirect: Do returns the 3xx answer itself. Go's client forwards custom
// headers (an api-key) and, on 307/308, the body to wherever a redirect
// points, even another host (docs/guide.md#the-sync-pages-and-the-api).
func NoRedirects(c *http.Client) *http.Client {
	var cp http.Client
	if c != nil {
		cp = *c
	}
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// ErrRedirect is wrapped by the error RefuseRedirects returns.
var ErrRedirect = errors.New("redirect not followed")

// RefuseRedirects wraps next so that a 3xx answer is an error (its body
// closed): a client built around it (a library's, such as Sentry's) cannot
// follow the redirect.
func RefuseRedirects(next http.RoundTripper) http.RoundTripper {
	if next == nil {
		next = http.DefaultTransport
	}
	return refuseRedirects{next: next}
}

type refuseRedirects struct{ next http.RoundTripper }

func (t refuseRedirects) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil {
		return resp, err
	}
	switch resp.StatusCode {
	case http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect: // what http.Client follows
	default:
		return resp, nil
	}
	resp.Body.Close()
	return nil, fmt.Errorf("%w: %w", ErrRedirect, &RedirectError{Route: r.Method + " " + r.URL.Host,
		Status: resp.StatusCode, Location: origin(resp.Header.Get("Location"))})
}

// CloseIdleConnections passes http.Client.CloseIdleConnections on.
func (t refuseRedirects) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// AccountLimiter paces one destination's requests within its account's
// budget (docs/guide.md#one-rate-limit-per-account): through the shared
// destination.AccountPacer when there is one, so every run and process
// writing to the account stays within it together, and through its own
// Limiter when there is none or the shared one fails (with Redis down,
// ratelimit.Fallback already paces the process's runs together instead).
// It is a Pacer.
type AccountLimiter struct {
	local   *Limiter
	shared  destination.AccountPacer
	account string
	base    destination.Limit // as configured (rate_limit)

	mu    sync.Mutex
	limit destination.Limit // base, or lower when the vendor says so (Observe)
}

// AccountHeadroom is the share of an account's limit requests are paced
// at. Sent exactly at the limit, requests reach the vendor with the
// network's jitter, and a vendor that counts them over a sliding second
// (Brevo's stand-in in an independent check) found eleven in some window
// and answered 5.2 % of them 429; a twentieth of headroom leaves room for
// that jitter and uses 95 % of the budget.
const AccountHeadroom = 0.95

// NewAccountLimiter returns the pacer of account under limit (Rate > 0),
// paced at AccountHeadroom of it; shared may be nil.
func NewAccountLimiter(c clock.Clock, shared destination.AccountPacer, account string, limit destination.Limit) *AccountLimiter {
	if limit.Burst < 1 {
		limit.Burst = 1
	}
	limit.Rate *= AccountHeadroom
	return &AccountLimiter{local: NewLimiter(c, limit.Rate), shared: shared, account: account, base: limit, limit: limit}
}

// Observe paces the account at perSecond, the rate its vendor's answers
// advertise (a limit header), when that is below the configured rate; at
// the configured rate again when the vendor's rises back to it. A vendor
// that lowers an account's limit (a plan, a throttled account) would
// otherwise see every process keep the configured pace and answer most of
// it 429 (docs/guide.md#one-rate-limit-per-account).
func (a *AccountLimiter) Observe(perSecond float64) {
	if perSecond <= 0 {
		return
	}
	rate := min(a.base.Rate, perSecond*AccountHeadroom)
	a.mu.Lock()
	changed := rate != a.limit.Rate
	a.limit.Rate = rate
	a.mu.Unlock()
	if changed {
		a.local.SetRate(rate)
	}
}

// current is the limit requests are paced at now.
func (a *AccountLimiter) current() destination.Limit {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.limit
}

// sharedTimeout bounds one call to the shared pacer: past it the request
// is paced locally rather than held up.
const sharedTimeout = 2 * time.Second

// Reserve returns how long to wait before sending one request.
func (a *AccountLimiter) Reserve(ctx context.Context) (time.Duration, error) {
	if a.shared != nil {
		sctx, cancel := context.WithTimeout(ctx, sharedTimeout)
		d, err := a.shared.Reserve(sctx, a.account, a.current())
		cancel()
		if err == nil {
			return d, nil
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
	}
	return a.local.Reserve(ctx)
}

// Pause holds the account's requests back for d, here and, when shared,
// in every process.
func (a *AccountLimiter) Pause(d time.Duration) {
	a.local.Pause(d)
	if a.shared != nil {
		ctx, cancel := context.WithTimeout(context.Background(), sharedTimeout)
		_ = a.shared.Pause(ctx, a.account, d) // the local pause holds this process either way
		cancel()
	}
}
