// Package apiclient is the one HTTP layer of oncesync's SaaS connectors
// (destination/brevo, destination/webhook, and the connectors to come): it
// sends one logical request, attempt after attempt, with
//
//   - a rate-limiting hook (Pacer; Limiter is an in-process one),
//   - in-run retries with full-jitter backoff, only for what is safe to retry:
//     an attempt that provably never reached the server, an answer saying the
//     server did not process it (429, and what the connector's Classify says),
//     and, for idempotent requests only, lost or ambiguous answers,
//   - waits for Retry-After or a connector's own rate-limit reset header,
//   - the attempt deadline of the run's lease (destination.AttemptDeadline):
//     no attempt starts that cannot end before it, each attempt's timeout is
//     bounded by it, and no wait is taken that would end after it (docs/guide.md#the-store-and-the-leases),
//   - no redirect ever followed (docs/guide.md#the-sync-pages-and-the-api): a 3xx is an error, so neither
//     credentials nor records are resent to another address,
//   - net/http/httptrace to tell a request that was never completely written
//     (its failure wraps destination.ErrNotSent: not in doubt, docs/guide.md#the-ledger-and-its-retention) from
//     one whose outcome is unknown,
//   - bounded response bodies and error texts scrubbed of secrets, URLs and
//     e-mail addresses,
//   - the injected clock and Sleep, so tests never wait.
//
// Every failure it returns is a *failure.Error carrying a destination code.
package apiclient

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// Defaults of Params.
const (
	DefaultTimeout    = 30 * time.Second
	DefaultMaxRetries = 5
	DefaultMaxBody    = 4 << 20
	// DefaultMaxWait is the longest server-asked wait (a 429's reset) taken
	// inside a request; a later reset (a daily quota) fails at once.
	DefaultMaxWait = time.Minute
	// DefaultMinAttempt is the least lease time an attempt needs to start:
	// one started closer to the deadline would most likely be cut off on
	// the wire and leave its records in doubt for nothing.
	DefaultMinAttempt = time.Second
)

// Class is what a non-2xx, non-3xx answer means for the request.
type Class int

const (
	// Final: the answer is the caller's to judge (a record-level 4xx); Do
	// returns it with a nil error.
	Final Class = iota
	// Auth: the server refused the credentials (or the account's access);
	// not retried; the request was not processed.
	Auth
	// RateLimited: the server asks to slow down (429); retried after its
	// reset (Params.Wait) or a backoff; the request was not processed.
	RateLimited
	// NotApplied: the server says it did not process the request (Brevo's
	// 503); retried with backoff whatever the method.
	NotApplied
	// MaybeApplied: the server may have processed the request (500, 502,
	// 504, 408): retried only when the request is idempotent.
	MaybeApplied
	// Gone: the server takes no more requests at this address (410 Gone,
	// which Standard Webhooks asks senders to take as "stop sending"); not
	// retried; the request was not processed.
	Gone
	// NoEndpoint: nothing at this address takes the request (a webhook's
	// 404 or 405): the address is wrong, not the records it carried, so
	// none is rejected for it; not retried in the run; the request was not
	// processed (docs/guide.md#http-answers-proxies-and-tls).
	NoEndpoint
)

// Pacer paces requests (a client-side rate limit, in-process or shared
// between processes): Reserve returns how long to wait before sending one.
type Pacer interface {
	Reserve(ctx context.Context) (time.Duration, error)
}

// Params configure a Client.
type Params struct {
	// Name prefixes error texts ("brevo", "webhook").
	Name string
	// Subject names the server in failure details ("brevo", "the
	// webhook"); default Name.
	Subject string
	// URLSetting is the configuration key of the server's address, named
	// when a redirect shows it is wrong (default "url").
	URLSetting string
	// Side is the configuration block URLSetting is in: "destination"
	// (the default) or "source" (a source that reads an API: Shopify).
	Side string
	// AuthDetail is the failure detail of an Auth answer (default
	// "<Subject> refused oncesync's credentials").
	AuthDetail string
	// Client sends the requests (default: a new http.Client). It is copied
	// and its CheckRedirect replaced: a redirect is never followed.
	Client *http.Client
	// Timeout bounds one attempt (default 30 s); the attempt deadline
	// bounds it further.
	Timeout time.Duration
	// MaxRetries is the number of retries after the first attempt (0:
	// DefaultMaxRetries; negative: none).
	MaxRetries int
	// MaxBody bounds a response body read (default 4 MiB); the rest is
	// dropped.
	MaxBody int64
	// MaxWait is the longest server-asked wait taken (default 1 min).
	MaxWait time.Duration
	// MinAttempt is the least time before the attempt deadline an attempt
	// needs to start (default 1 s).
	MinAttempt time.Duration
	// Clock tells the time (default clock.Real): attempt deadlines, HTTP
	// dates in Retry-After.
	Clock clock.Clock
	// Sleep waits d or until ctx is done (default: a timer).
	Sleep func(ctx context.Context, d time.Duration) error
	// Pacer, when set, is asked before every attempt.
	Pacer Pacer
	// Classify says what a non-2xx, non-3xx status means (default
	// DefaultClassify).
	Classify func(status int) Class
	// Wait reads how long a RateLimited answer asks to wait (default:
	// Retry-After, in seconds or as an HTTP date).
	Wait func(r *Response, now time.Time) (time.Duration, bool)
	// Own, when set, reports whether an answer is the server's own (its
	// documented error body) rather than an intermediary's: a NotApplied
	// status proves the request was not processed only then. An egress
	// proxy (Envoy, Istio) answers 503 "upstream connect error or
	// disconnect/reset before headers" after it forwarded the request,
	// which the server may have applied (docs/guide.md#http-answers-proxies-and-tls).
	Own func(r *Response) bool
	// LongWait, when set, says what a RateLimited answer asking to wait d
	// past MaxWait means, in the failure's detail ("" for the default:
	// "<Subject>'s rate limit for <route> resets in d"): a vendor's daily
	// quota resets at a time the answer does not give.
	LongWait func(route string, r *Response, d time.Duration) string
	// Observe, when set, sees every answer first (e.g. to pause a Limiter
	// when the server says its window is spent).
	Observe func(r *Response)
	// StatusError builds the error describing a non-2xx answer (default
	// *StatusError). Its text is scrubbed like every other.
	StatusError func(route string, r *Response) error
	// Secrets are strings never shown in an error (API keys, header
	// values, signing secrets).
	Secrets []string
	// Backoff returns the wait before retry number attempt (0-based);
	// default Backoff (full jitter). Tests make it deterministic.
	Backoff func(attempt int) time.Duration
}

// Client sends requests to one API. It is safe for concurrent use.
type Client struct {
	p      Params
	client *http.Client
}

// New returns a Client for p, filling in defaults.
func New(p Params) *Client {
	if p.Subject == "" {
		p.Subject = p.Name
	}
	if p.URLSetting == "" {
		p.URLSetting = "url"
	}
	if p.Side == "" {
		p.Side = "destination"
	}
	if p.AuthDetail == "" {
		p.AuthDetail = p.Subject + " refused oncesync's credentials"
	}
	if p.Timeout <= 0 {
		p.Timeout = DefaultTimeout
	}
	switch {
	case p.MaxRetries == 0:
		p.MaxRetries = DefaultMaxRetries
	case p.MaxRetries < 0:
		p.MaxRetries = 0
	}
	if p.MaxBody <= 0 {
		p.MaxBody = DefaultMaxBody
	}
	if p.MaxWait <= 0 {
		p.MaxWait = DefaultMaxWait
	}
	if p.MinAttempt <= 0 {
		p.MinAttempt = DefaultMinAttempt
	}
	if p.Clock == nil {
		p.Clock = clock.Real{}
	}
	if p.Sleep == nil {
		p.Sleep = clock.Sleep
	}
	if p.Classify == nil {
		p.Classify = DefaultClassify
	}
	if p.Wait == nil {
		p.Wait = func(r *Response, now time.Time) (time.Duration, bool) {
			return RetryAfter(r.Header.Get("Retry-After"), now)
		}
	}
	if p.StatusError == nil {
		p.StatusError = func(route string, r *Response) error {
			return &StatusError{Prefix: p.Name, Route: route, Status: r.Status}
		}
	}
	if p.Backoff == nil {
		p.Backoff = Backoff
	}
	return &Client{p: p, client: NoRedirects(p.Client)}
}

// CloseIdleConnections closes the idle connections of the client's
// transport (shared with Params.Client).
func (c *Client) CloseIdleConnections() { c.client.CloseIdleConnections() }

// AccountRefused reports whether status refuses the account rather than a
// record: 401 (credentials), 402 (the account's plan or credits: a lapsed
// payment, a suspended account) and 403 (its permissions). Such an answer
// says nothing of the records, so none is rejected for it: it is Auth in
// every connector's Classify (docs/recovery.md#destination_auth).
func AccountRefused(status int) bool {
	return status == http.StatusUnauthorized || status == http.StatusPaymentRequired || status == http.StatusForbidden
}

// DefaultClassify: 401, 402 and 403 are Auth (AccountRefused), 429
// RateLimited, 408 and 5xx MaybeApplied, anything else Final.
func DefaultClassify(status int) Class {
	switch {
	case AccountRefused(status):
		return Auth
	case status == http.StatusTooManyRequests:
		return RateLimited
	case status == http.StatusRequestTimeout || status >= 500:
		return MaybeApplied
	}
	return Final
}

// Request is one logical request, sent in as many attempts as needed.
type Request struct {
	Method string
	// URL is the whole address. It never appears in an error: it may hold
	// a token or an e-mail address.
	URL string
	// Route names the request in errors, without identifiers
	// ("POST /contacts", "GET /contacts/{identifier}", "POST host").
	Route  string
	Header http.Header
	Body   []byte
	// Idempotent: sending the request twice is harmless (a read, or a
	// write carrying an idempotency key the server honours). Only then are
	// lost answers and MaybeApplied answers retried.
	Idempotent bool
	// PartialBodyOK: a 2xx whose body broke is still a success (the caller
	// needs nothing from the body). Otherwise it is a lost answer.
	PartialBodyOK bool
	// Prepare, when set, is called on each attempt's headers (a signature
	// stamped with the attempt's time).
	Prepare func(h http.Header)
}

// Response is an answer.
type Response struct {
	Status int
	Header http.Header
	// Body is at most Params.MaxBody bytes.
	Body []byte
}

// state is what the attempts of one Do have established so far.
type state struct {
	// mayHaveApplied: an attempt was completely written and not answered
	// with a status saying it was not processed, so the request may have
	// been applied. Until then every failure wraps destination.ErrNotSent.
	mayHaveApplied bool
}

// Do sends req. It returns the answer for a 2xx or a Final status (the
// caller judges the latter), else a *failure.Error: destination_auth,
// destination_rate_limited, destination_unavailable, or lease_lost when the
// attempt deadline leaves no time for an attempt. The error wraps
// destination.ErrNotSent when the request was provably not applied: no
// attempt was completely written, or each that was got an answer saying it
// was not processed (Auth, Gone, NoEndpoint, RateLimited, NotApplied, 307,
// 308).
func (c *Client) Do(ctx context.Context, req Request) (*Response, error) {
	var (
		st      state
		lastErr error // the last retried attempt's error
		lastCls Class // and its class (RateLimited or not)
		lastNS  bool  // the last retried attempt was never written
		// lastTimeout: the last retried attempt got no answer within
		// this timeout (0: it failed otherwise).
		lastTimeout time.Duration
		// lastStatus: the last retried attempt's answer (0: none).
		lastStatus int
		// asked: the last answer's Retry-After set the wait.
		asked bool
	)
	for attempt := 0; ; attempt++ {
		if c.p.Pacer != nil {
			d, err := c.p.Pacer.Reserve(ctx)
			if err != nil {
				return nil, c.interrupted(ctx, &st, req, err)
			}
			if err := c.wait(ctx, &st, req, d, waitPace, lastErr); err != nil {
				return nil, err
			}
		}
		timeout, err := c.attemptTimeout(ctx, &st, req, lastErr)
		if err != nil {
			return nil, err
		}
		resp, wrote, err := c.send(ctx, req, timeout)
		var wait time.Duration
		switch {
		case errors.Is(err, errSendPastDeadline):
			// Cut before its body's end: no server processes it, but its
			// first bytes may have left; the caller settles it as in doubt.
			st.mayHaveApplied = st.mayHaveApplied || wrote
			return nil, c.noLeaseTime(&st, req, 0, err)
		case err != nil:
			if ctx.Err() != nil {
				if wrote {
					st.mayHaveApplied = true
				}
				return nil, c.interrupted(ctx, &st, req, ctx.Err())
			}
			if errors.Is(err, context.DeadlineExceeded) && destination.Checking(ctx) {
				// A check's silent server is told at once, not after
				// every retry's timeout and backoff (docs/guide.md#commands).
				st.mayHaveApplied = st.mayHaveApplied || wrote
				return nil, c.fail(failure.DestinationUnavailable, &st, err,
					"%s did not answer %s %s (%s.timeout); a check does not try again", c.p.Subject, req.Route, c.noAnswer(timeout), c.p.Side)
			}
			if wrote {
				st.mayHaveApplied = true
				if !req.Idempotent {
					// It may have been applied and only its answer lost:
					// resending could write twice. The caller settles it
					// (docs/guide.md#the-ledger-and-its-retention: read back, or left in doubt).
					if errors.Is(err, context.DeadlineExceeded) {
						return nil, c.fail(failure.DestinationUnavailable, &st, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err),
							"%s did not answer %s %s", c.p.Subject, req.Route, c.noAnswer(timeout))
					}
					return nil, c.fail(failure.DestinationUnavailable, &st, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err),
						"%s's answer to %s was lost", c.p.Subject, req.Route)
				}
			}
			if pe := (*ProxyError)(nil); errors.As(err, &pe) && pe.refusesOncesync() && !wrote {
				// The proxy will answer the same on the next attempt.
				return nil, c.fail(failure.DestinationUnavailable, &st, err,
					"the proxy %s refused to connect oncesync to %s (HTTP %d %s); check HTTPS_PROXY, HTTP_PROXY and NO_PROXY (a proxy's user and password go in its URL); nothing was sent",
					pe.Proxy, hostOf(req.URL), pe.Status, http.StatusText(pe.Status))
			}
			if why, ok := tlsRefused(err); ok && !wrote {
				// The server's certificate (or its want of TLS) will be
				// the same on the next attempt: retrying only delays
				// the failure, and "could not be reached" hid its cause.
				return nil, c.fail(failure.DestinationUnavailable, &st, err,
					"%s's TLS connection was refused (%s: %s); nothing was sent: %s", c.p.Subject, hostOf(req.URL), why, TLSAdvice)
			}
			lastErr, lastCls, lastNS = err, MaybeApplied, !wrote
			lastTimeout, lastStatus = 0, 0
			if errors.Is(err, context.DeadlineExceeded) {
				lastTimeout = timeout
			}
			wait = c.p.Backoff(attempt)
		case resp.Status >= 200 && resp.Status < 300:
			return resp, nil
		case resp.Status >= 300 && resp.Status < 400:
			return nil, c.redirect(&st, req, resp)
		case resp.Status == http.StatusProxyAuthRequired:
			// Only a proxy answers 407 (RFC 9110 §15.5.8): it forwarded
			// nothing, and will not until it gets credentials.
			return nil, c.fail(failure.DestinationUnavailable, &st, c.p.StatusError(req.Route, withoutSentValues(resp, req.Body)),
				"a proxy between oncesync and %s answered %s with HTTP 407 Proxy Authentication Required; check HTTP_PROXY, HTTPS_PROXY and NO_PROXY (a proxy's user and password go in its URL); nothing was sent",
				c.p.Subject, req.Route)
		default:
			cls := c.p.Classify(resp.Status)
			if cls == Final {
				return resp, nil
			}
			if cls == NotApplied && c.p.Own != nil && !c.p.Own(resp) {
				cls = MaybeApplied
			}
			serr := c.p.StatusError(req.Route, withoutSentValues(resp, req.Body))
			if cls == Auth && c.p.Own != nil && !c.p.Own(resp) {
				// A 401, 402 or 403 that is not the vendor's error (an
				// egress proxy's or a gateway's page) says nothing of the
				// account: as destination_auth, owned by the sync's
				// author, it sent a person to the key and paused the sync
				// after breaker_failures runs. Its body is not quoted: a
				// proxy's page may echo the address, an e-mail in it
				// (docs/guide.md#http-answers-proxies-and-tls).
				return nil, c.fail(failure.DestinationUnavailable, &st, serr,
					"something other than %s answered %s with HTTP %d %s, not in %s's words (a proxy's or a gateway's page): check HTTPS_PROXY, HTTP_PROXY and NO_PROXY and what stands between oncesync and %s (docs/guide.md#http-answers-proxies-and-tls)",
					c.p.Subject, req.Route, resp.Status, http.StatusText(resp.Status), c.p.Subject, hostOf(req.URL))
			}
			switch cls {
			case Auth:
				// The answer says which of the account's credentials,
				// plan or permissions was refused (a revoked key, no
				// credits left, a missing scope, an IP address not
				// allowed): the detail keeps it, scrubbed, so that
				// `oncesync status` tells them apart (docs/recovery.md#destination_auth).
				return nil, c.fail(failure.DestinationAuth, &st, serr, "%s (%s)", c.p.AuthDetail, c.reason(serr))
			case Gone:
				// Asking again will not help, and the fix (the address) is
				// the sync's: not retried by the queue, counted by the breaker.
				return nil, c.fail(failure.InvalidSyncDefinition, &st, serr,
					"%s answered %d to %s: it takes no more requests at this address; check the %s's %s",
					c.p.Subject, resp.Status, req.Route, c.p.Side, c.p.URLSetting)
			case NoEndpoint:
				// A receiver not deployed yet, or one moving, comes back:
				// destination_unavailable lets the queue try again later.
				return nil, c.fail(failure.DestinationUnavailable, &st, serr,
					"%s answered %d to %s: nothing takes requests at this address; check the %s's %s",
					c.p.Subject, resp.Status, req.Route, c.p.Side, c.p.URLSetting)
			case RateLimited:
				wait = c.p.Backoff(attempt)
				if d, ok := c.p.Wait(resp, c.p.Clock.Now()); ok {
					if d > c.p.MaxWait {
						if c.p.LongWait != nil {
							if what := c.p.LongWait(req.Route, resp, d); what != "" {
								return nil, c.fail(failure.DestinationRateLimited, &st, serr, "%s", what)
							}
						}
						// The route names the budget: a vendor can have
						// several (Brevo: contacts per second, its other
						// routes per hour).
						return nil, c.fail(failure.DestinationRateLimited, &st, serr,
							"%s's rate limit for %s resets in %s", c.p.Subject, req.Route, d.Round(time.Second))
					}
					if d > 0 {
						wait = d
					} // else "now" (0, a date past): the backoff, so as not to hit it at once
				}
			case NotApplied:
				wait = c.p.Backoff(attempt)
			default: // MaybeApplied
				st.mayHaveApplied = true
				if !req.Idempotent {
					return nil, c.fail(failure.DestinationUnavailable, &st, fmt.Errorf("%w: %w", ErrOutcomeUnknown, serr),
						"%s answered %d to %s; the write may have been applied", c.p.Subject, resp.Status, req.Route)
				}
				wait = c.p.Backoff(attempt)
			}
			asked = false
			if cls != RateLimited {
				// A server shedding load (503) says when to come back
				// (RFC 9110 §10.2.3): sooner hits it while it still
				// sheds, and a return past MaxWait is not waited for in
				// the run, nor worth the retries left
				// (docs/guide.md#http-answers-proxies-and-tls).
				if d, ok := RetryAfter(resp.Header.Get("Retry-After"), c.p.Clock.Now()); ok {
					if d > c.p.MaxWait {
						return nil, c.fail(failure.DestinationUnavailable, &st, serr,
							"%s answered %d to %s and asked to come back in %s", c.p.Subject, resp.Status, req.Route, d.Round(time.Second))
					}
					if d > 0 {
						wait, asked = d, true
					}
				}
			}
			lastErr, lastCls, lastNS, lastTimeout, lastStatus = serr, cls, false, 0, resp.Status
		}
		if attempt >= c.p.MaxRetries {
			break
		}
		kind := waitBackoff
		switch {
		case lastCls == RateLimited:
			kind = waitRateLimit
		case asked:
			kind = waitAsked
		}
		if err := c.wait(ctx, &st, req, wait, kind, lastErr); err != nil {
			return nil, err
		}
	}
	n := c.p.MaxRetries + 1
	switch {
	case lastCls == RateLimited:
		return nil, c.fail(failure.DestinationRateLimited, &st, lastErr,
			"%s kept answering 429 after %d attempts", c.p.Subject, n)
	case lastNS && !st.mayHaveApplied:
		return nil, c.fail(failure.DestinationUnavailable, &st, lastErr,
			"%s could not be reached after %d attempts%s; nothing was sent", c.p.Subject, n, unreachable(lastErr))
	}
	if lastTimeout > 0 {
		return nil, c.fail(failure.DestinationUnavailable, &st, lastErr,
			"%s did not answer successfully after %d attempts: the last had no answer %s", c.p.Subject, n, c.noAnswer(lastTimeout))
	}
	if lastStatus != 0 {
		// recovery.md#destination_unavailable: the detail names the
		// request and the last status.
		return nil, c.fail(failure.DestinationUnavailable, &st, lastErr,
			"%s did not answer successfully after %d attempts: the last was answered %d %s to %s",
			c.p.Subject, n, lastStatus, http.StatusText(lastStatus), req.Route)
	}
	return nil, c.fail(failure.DestinationUnavailable, &st, lastErr,
		"%s did not answer successfully after %d attempts", c.p.Subject, n)
}

// noAnswer says that an attempt timed out after timeout, and, when the
// run's lease cut it below Params.Timeout, that raising the timeout alone
// cannot help: every attempt ends before the lease would
// (docs/config.md#settings, lease_ttl).
func (c *Client) noAnswer(timeout time.Duration) string {
	r := time.Second
	if timeout < time.Second {
		r = 10 * time.Millisecond
	}
	s := "within " + timeout.Round(r).String()
	if timeout < c.p.Timeout {
		s += fmt.Sprintf(" (its timeout of %s was cut to what the run's lease had left: a destination this slow needs a longer settings.lease_ttl)",
			c.p.Timeout)
	}
	return s
}

// unreachable says where and why a request never reached its server, as
// " (HOST:PORT: why)": a wrong base_url or port, a typo'd host and a
// firewall read alike otherwise, and `oncesync check` logs nothing else.
// Only the URL's host and port are named, never its user, path or query.
func unreachable(err error) string {
	var (
		op  *net.OpError
		dns *net.DNSError
		ne  net.Error
	)
	host, via := "", ""
	if errors.As(err, &op) && op.Op == "proxyconnect" {
		// The proxy (HTTPS_PROXY, HTTP_PROXY) was not reached: name it,
		// not the destination, which the worker never tried.
		via = "the proxy "
		var inner *net.OpError
		if errors.As(op.Err, &inner) && inner.Addr != nil {
			host = inner.Addr.String()
		}
	} else if op != nil && op.Addr != nil {
		host = op.Addr.String()
	}
	var (
		why string
		pe  *ProxyError
	)
	switch {
	case errors.As(err, &pe):
		host, via, why = pe.Proxy, "the proxy ", fmt.Sprintf("HTTP %d to CONNECT", pe.Status)
	case errors.As(err, &dns) && dns.IsNotFound:
		host, why = dns.Name, "no such host"
	case errors.As(err, &dns):
		host, why = dns.Name, "the host name could not be looked up"
	case errors.Is(err, syscall.ECONNREFUSED):
		why = "connection refused"
	case errors.Is(err, syscall.ECONNRESET):
		why = "connection reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		why = "no route to the host"
	case errors.As(err, &ne) && ne.Timeout():
		why = "no answer in time"
	default:
		return ""
	}
	if host == "" {
		return " (" + via + why + ")"
	}
	return " (" + via + host + ": " + why + ")"
}

// TLSAdvice is what to do about a TLS connection the client refused (a
// certificate not accepted, an answer that is not TLS): the catalog's next
// step for destination_unavailable is about outages, which this is not.
const TLSAdvice = "fix the server's certificate or the URL, or have the workers trust its authority " +
	"(the system's certificate store, or SSL_CERT_FILE)"

// tlsRefused reports whether err is a TLS handshake this client refused or
// could not make, a failure no retry changes: a certificate not accepted
// (expired, self-signed, signed by an authority the worker does not trust,
// for another name), or an answer that is not TLS (https:// to a plain
// HTTP port). why says which, without the URL.
func tlsRefused(err error) (why string, ok bool) {
	var (
		cv   *tls.CertificateVerificationError
		ua   x509.UnknownAuthorityError
		hn   x509.HostnameError
		ci   x509.CertificateInvalidError
		rh   tls.RecordHeaderError
		cert error
	)
	switch {
	case errors.As(err, &cv):
		cert = cv.Err
	case errors.As(err, &ua):
		cert = ua
	case errors.As(err, &hn):
		cert = hn
	case errors.As(err, &ci):
		cert = ci
	case errors.As(err, &rh), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// net/http replaces the RecordHeaderError of an HTTP answer
		// with its own error, known by its text only.
		return "the server did not answer in TLS: check that the URL's scheme and port are right", true
	default:
		return "", false
	}
	return "its certificate was not accepted: " + cert.Error(), true
}

// hostOf returns the host and port of rawURL, never its user, path or query.
func hostOf(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil || u.Host == "" {
		return "the server"
	}
	return u.Host
}

// attemptTimeout returns the timeout of the next attempt: Params.Timeout,
// bounded by the attempt deadline, which must leave MinAttempt.
func (c *Client) attemptTimeout(ctx context.Context, st *state, req Request, lastErr error) (time.Duration, error) {
	if err := ctx.Err(); err != nil {
		return 0, c.interrupted(ctx, st, req, err)
	}
	until, ok := destination.AttemptDeadline(ctx)
	if !ok {
		return c.p.Timeout, nil
	}
	left := until.Sub(c.p.Clock.Now())
	if left < c.p.MinAttempt {
		return 0, c.noLeaseTime(st, req, left, lastErr)
	}
	return min(c.p.Timeout, left), nil
}

// noLeaseTime fails a request for which the lease has less than MinAttempt
// left: it is what ran out, so the code is lease_lost.
func (c *Client) noLeaseTime(st *state, req Request, left time.Duration, lastErr error) error {
	return c.fail(failure.LeaseLost, st, leaseCause(lastErr),
		"%s not sent to %s: the run's lease has %s left", req.Route, c.p.Subject, roundLeft(left))
}

// leaseCause is ErrNoLeaseTime, after the last attempt's error if any.
func leaseCause(lastErr error) error {
	if lastErr == nil {
		return destination.ErrNoLeaseTime
	}
	return fmt.Errorf("%w (after %w)", destination.ErrNoLeaseTime, lastErr)
}

type waitKind int

const (
	waitPace waitKind = iota
	waitRateLimit
	waitBackoff
	// waitAsked: a Retry-After on an answer other than 429 (a 503).
	waitAsked
)

// wait sleeps d unless it would end less than MinAttempt before the
// attempt deadline (read now: a renewed lease moves it); then the request
// fails, wrapping destination.ErrNoLeaseTime.
func (c *Client) wait(ctx context.Context, st *state, req Request, d time.Duration, kind waitKind, lastErr error) error {
	if d <= 0 {
		if err := ctx.Err(); err != nil {
			return c.interrupted(ctx, st, req, err)
		}
		return nil
	}
	if until, ok := destination.AttemptDeadline(ctx); ok {
		left := until.Sub(c.p.Clock.Now())
		if left < c.p.MinAttempt {
			// No attempt could start even without the wait: the lease
			// itself is running out, whatever the wait is for.
			return c.noLeaseTime(st, req, left, lastErr)
		}
		if d+c.p.MinAttempt > left {
			code, what := failure.DestinationRateLimited, fmt.Sprintf("%s's rate limit holds the next request for %s", c.p.Subject, roundWait(d))
			switch kind {
			case waitRateLimit:
				what = fmt.Sprintf("%s asked to wait %s", c.p.Subject, roundWait(d))
			case waitBackoff:
				code, what = failure.DestinationUnavailable, fmt.Sprintf("retrying %s needs a %s backoff", req.Route, roundWait(d))
			case waitAsked:
				code, what = failure.DestinationUnavailable, fmt.Sprintf("%s asked to wait %s before %s is retried", c.p.Subject, roundWait(d), req.Route)
			}
			if d <= left {
				// The wait fits; the attempt after it (MinAttempt at
				// least) does not: "a 7.33s backoff, longer than the
				// lease has left (7.5s)" read as a mistake.
				return c.fail(code, st, leaseCause(lastErr), "%s, and the attempt after it at least %s: more than the run's lease has left (%s)",
					what, roundWait(c.p.MinAttempt), roundLeft(left))
			}
			return c.fail(code, st, leaseCause(lastErr), "%s, longer than the run's lease has left (%s)", what, roundLeft(left))
		}
	}
	why := "the rate limit"
	switch kind {
	case waitRateLimit:
		why = "asked by " + c.p.Subject + " (429)"
	case waitBackoff:
		why = "a backoff after a failed attempt"
	case waitAsked:
		why = "asked by " + c.p.Subject + " (Retry-After)"
	}
	destination.NoteWait(ctx, destination.Wait{Route: req.Route, For: d, Why: why})
	sleep := func() error { return c.p.Sleep(ctx, d) }
	var err error
	if kind == waitPace {
		err = sleep() // every call paces: none would keep its place
	} else {
		err = waitWithoutPlace(ctx, sleep) // between a failed attempt and the next
	}
	if err != nil {
		return c.interrupted(ctx, st, req, err)
	}
	return nil
}

func roundWait(d time.Duration) time.Duration { return d.Round(10 * time.Millisecond) }

func roundLeft(d time.Duration) time.Duration { return max(d, 0).Round(10 * time.Millisecond) }

// send makes one attempt. wrote reports whether the request may have
// reached the server: from the moment it has a connection (httptrace's
// GotConn) bytes of it may be on the wire, and a request whose bytes all
// left may be processed even if the transport never got to report the
// write (a cancellation racing WroteRequest: chaos destination-faults saw
// such requests applied, then sent again as not sent). Before that (a
// refused connection, a DNS or TLS failure, a wait for a connection cut
// short) nothing of it can have been processed.
func (c *Client) send(ctx context.Context, req Request, timeout time.Duration) (resp *Response, wrote bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var written atomic.Bool
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		// The transport may try again on a fresh connection: any
		// connection it got counts.
		GotConn: func(httptrace.GotConnInfo) { written.Store(true) },
	})
	var body io.Reader
	if req.Body != nil {
		body = bytes.NewReader(req.Body)
	}
	hr, err := http.NewRequestWithContext(ctx, req.Method, req.URL, body)
	if err != nil {
		return nil, false, &TransportError{Prefix: c.p.Name, Route: req.Route, Err: errors.New("cannot build request")}
	}
	var late atomic.Bool
	if len(req.Body) > 0 { // an empty body stays http.NoBody, sent with Content-Length: 0
		// The lease was checked before the attempt; a process stopped
		// (SIGSTOP, a frozen VM) after that check wakes with the request
		// still to send, maybe before the context's timer fires. The body
		// checks the attempt deadline on every read, its last just before
		// the transport sends the request's end, so a request is never
		// completed after the lease's deadline
		// (docs/guide.md#a-run-that-was-frozen).
		hr.GetBody = func() (io.ReadCloser, error) {
			return &deadlineBody{r: bytes.NewReader(req.Body), ctx: ctx, clk: c.p.Clock, late: &late}, nil
		}
		hr.Body, _ = hr.GetBody()
	}
	for k, vs := range req.Header {
		hr.Header[k] = append([]string(nil), vs...)
	}
	if req.Prepare != nil {
		req.Prepare(hr.Header)
	}
	res, err := c.client.Do(hr)
	if written.Load() {
		destination.CountRequest(ctx) // the run's request figure
	}
	if late.Load() {
		if res != nil {
			_ = res.Body.Close()
		}
		return nil, written.Load(), &TransportError{Prefix: c.p.Name, Route: req.Route, Err: errSendPastDeadline}
	}
	if err != nil {
		return nil, written.Load(), &TransportError{Prefix: c.p.Name, Route: req.Route, Err: unwrapURL(err)}
	}
	defer res.Body.Close()
	b, rerr := io.ReadAll(io.LimitReader(res.Body, c.p.MaxBody))
	ok := res.StatusCode >= 200 && res.StatusCode < 300
	if !ok || res.StatusCode == http.StatusMultiStatus {
		// An error page may echo the request's headers (the API key, a
		// token): the connector reads it for the records' messages, which
		// are stored and shown. Only refusals pay for it.
		b = hideSecretBytes(b, c.p.Secrets)
	}
	r := &Response{Status: res.StatusCode, Header: res.Header, Body: b}
	if c.p.Observe != nil {
		c.p.Observe(r)
	}
	if rerr != nil && ok && !req.PartialBodyOK {
		// The server answered (so the request was written) but the body
		// the caller needs is lost.
		return nil, true, &TransportError{Prefix: c.p.Name, Route: req.Route, Err: fmt.Errorf("reading response: %w", unwrapURL(rerr))}
	}
	// A non-2xx whose body broke is judged by its status alone.
	return r, true, nil
}

func unwrapURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err // its text holds the whole URL
	}
	return err
}

// redirect fails a 3xx answer. 307 and 308 say the resource is at another
// address and the same request must be made there: this server did not
// process it. Any other 3xx may follow a processed write (303 See Other is
// the answer to a processed POST; 301 and 302 are used alike), so the
// request may have been applied.
func (c *Client) redirect(st *state, req Request, resp *Response) error {
	if resp.Status != http.StatusTemporaryRedirect && resp.Status != http.StatusPermanentRedirect {
		st.mayHaveApplied = true
	}
	re := &RedirectError{Prefix: c.p.Name, Route: req.Route, Status: resp.Status, Location: origin(resp.Header.Get("Location"))}
	where := "another address"
	if re.Location != "" {
		where = re.Location
	}
	if resp.Status == http.StatusMovedPermanently || resp.Status == http.StatusPermanentRedirect {
		// The address moved for good (http:// to https://, an old host
		// name): asking again meets the same answer, and the fix is the
		// sync's, so it is not retried by the queue and the breaker counts it.
		return c.fail(failure.InvalidSyncDefinition, st, re,
			"%s answered %d, a permanent redirect to %s, which oncesync never follows (it would resend credentials and records); set the %s's %s to the address it moved to",
			c.p.Subject, resp.Status, where, c.p.Side, c.p.URLSetting)
	}
	return c.fail(failure.DestinationUnavailable, st, re,
		"%s answered %d, a redirect to %s, which oncesync never follows (it would resend credentials and records); check the %s's %s",
		c.p.Subject, resp.Status, where, c.p.Side, c.p.URLSetting)
}

// interrupted fails a request whose context ended (or whose Sleep or Pacer
// failed).
func (c *Client) interrupted(ctx context.Context, st *state, req Request, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		err = cerr
	}
	return c.fail(failure.DestinationUnavailable, st, err, "request to %s interrupted (%s)", c.p.Subject, req.Route)
}

// fail returns a user-visible failure whose cause is scrubbed and, when
// nothing may have been applied, wraps destination.ErrNotSent.
func (c *Client) fail(code failure.Code, st *state, cause error, format string, args ...any) error {
	if !st.mayHaveApplied {
		cause = &notSentError{err: cause}
	}
	return failure.Wrap(code, c.safe(cause), format, args...)
}

func (c *Client) safe(err error) error { return &safeError{err: err, secrets: c.p.Secrets} }

// withoutSentValues is r for a failure's text: its body without the values
// the request carried (records' names, phone numbers), which an error
// page may echo; the text is logged and kept in the queue's job errors.
// Only the body is changed, never the route or the connector's words.
func withoutSentValues(r *Response, sent []byte) *Response {
	vals := destination.JSONValues(sent)
	if len(vals) == 0 || len(r.Body) == 0 {
		return r
	}
	c := *r
	c.Body = []byte(destination.RedactValues(destination.Redact(string(r.Body)), vals))
	return &c
}

// maxReason bounds the server's answer quoted in a failure's detail.
const maxReason = 300

// reason is err's text as a failure detail may quote it: scrubbed like
// every error text, and cut to maxReason bytes on a rune boundary.
func (c *Client) reason(err error) string {
	r := c.safe(err).Error()
	if len(r) <= maxReason {
		return r
	}
	cut := maxReason
	for cut > 0 && !utf8.RuneStart(r[cut]) {
		cut--
	}
	return r[:cut] + "..."
}

// FanOut calls fn(i) for i in [0,n) with at most conc in flight and stops
// starting new calls once one fails; it returns the first error (or the
// context's, when it ended before every call was handed out). The fan-out
// of a connector's one-call-per-record path.
//
// A call that waits between a failed attempt and the next (a backoff, a
// 429's or Retry-After's wait: Client.wait; not the rate limit's pace)
// gives its place up meanwhile, and takes one again before its next
// attempt: conc bounds the requests in flight, not the calls waiting. One
// record's backoff held a place for up to 30 s while the page's other
// records queued behind it (a webhook answering 10 % of deliveries 5xx ran
// at 14 records a second with 4 places: an independent check, 2026-12-07).
// A call that waits while it holds a lock the others take must not give
// its place up: see Unplaced.
func FanOut(ctx context.Context, n, conc int, fn func(ctx context.Context, i int) error) error {
	// A failure stops the handing out of calls, not the calls in flight:
	// one cut short after its request left would be in doubt, and a slow
	// server may still apply it after a read-back found nothing (chaos
	// destination-faults, 2026-12-01: such calls were written twice). Left
	// to finish, each brings its own answer.
	conc = max(conc, 1)
	// At most conc calls work, and at most 2*conc have started and not
	// ended: calls backing off give their places to as many others, never
	// to the whole page (an outage would otherwise start every record, each
	// then retrying, and a failure would stop none of them).
	places, open := make(chan struct{}, conc), make(chan struct{}, 2*conc)
	stop := make(chan struct{})
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
		handed   int
	)
feed:
	for i := range n {
		for _, sem := range []chan struct{}{open, places} {
			select {
			case sem <- struct{}{}:
			case <-stop:
				break feed
			case <-ctx.Done():
				break feed
			}
		}
		select {
		case <-stop: // a call failed while this one waited for its place
			<-places
			<-open
			break feed
		default:
		}
		handed++
		wg.Go(func() {
			p := &place{places: places, held: true}
			err := fn(context.WithValue(ctx, placeKey{}, p), i)
			if err != nil {
				// Before the place is free: the feeder, taking it, must
				// see the failure and hand out nothing more.
				once.Do(func() { firstErr = err; close(stop) })
			}
			p.give()
			<-open
		})
	}
	wg.Wait()
	if firstErr == nil && handed < n {
		// The parent was cancelled before every index was handed out.
		return ctx.Err()
	}
	return firstErr
}

// Unplaced is ctx without its FanOut place: a call that holds a lock the
// other calls of its fan-out take (a cache filled by the first of them)
// makes its requests under it, so that its waits keep its place. Had it
// given the place up, the others, holding every place while they wait for
// the lock, would leave it none to take back.
func Unplaced(ctx context.Context) context.Context {
	if ctx.Value(placeKey{}) == nil {
		return ctx
	}
	return context.WithValue(ctx, placeKey{}, (*place)(nil))
}

// place is a FanOut call's place among the conc in flight.
type place struct {
	places chan struct{}
	mu     sync.Mutex
	held   bool
}

type placeKey struct{}

// give gives the place up, if held, and reports whether it did.
func (p *place) give() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.held {
		return false
	}
	<-p.places
	p.held = false
	return true
}

// take waits for a place again, or for ctx to end.
func (p *place) take(ctx context.Context) error {
	select {
	case p.places <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.mu.Lock()
	p.held = true
	p.mu.Unlock()
	return nil
}

// waitWithoutPlace runs sleep with ctx's FanOut place given up (when ctx
// holds one), and takes a place again before it returns. Only the wait that
// gave the place takes one back: two requests of one call waiting at once
// would otherwise take two places and leave one taken when the call ends.
func waitWithoutPlace(ctx context.Context, sleep func() error) error {
	p, _ := ctx.Value(placeKey{}).(*place)
	if p == nil || !p.give() {
		return sleep()
	}
	err := sleep()
	if terr := p.take(ctx); err == nil {
		err = terr
	}
	return err
}

// Chains groups idx by key: the indices whose key is the same (records
// naming one destination contact) make one chain, in idx order; the
// chains are in the order of their first index. An empty key is a chain
// of its own.
func Chains(idx []int, key func(i int) string) [][]int {
	out := make([][]int, 0, len(idx))
	var at map[string]int
	for _, i := range idx {
		k := key(i)
		if k == "" {
			out = append(out, []int{i})
			continue
		}
		if c, ok := at[k]; ok {
			out[c] = append(out[c], i)
			continue
		}
		if at == nil {
			at = make(map[string]int, len(idx))
		}
		at[k] = len(out)
		out = append(out, []int{i})
	}
	return out
}

// FanOutChains is FanOut over chains: the chains side by side, at most
// conc at once, and each chain's calls one after another in its order, the
// next started once the one before returned without error. Two writes to
// one contact sent side by side land in either order, and the contact
// keeps whichever landed last; in order, it keeps the one read last.
func FanOutChains(ctx context.Context, chains [][]int, conc int, fn func(ctx context.Context, i int) error) error {
	return FanOut(ctx, len(chains), conc, func(ctx context.Context, c int) error {
		for _, i := range chains[c] {
			if err := fn(ctx, i); err != nil {
				return err
			}
		}
		return nil
	})
}

// WriteEach is a connector's one-call-per-record write: send is called for
// each record, at most conc at a time (FanOut); records whose key (nil: no
// key) is the same are sent one after another, in page order
// (FanOutChains). A record whose send returns
// without error is settled with the result it returns. Once a send fails no
// more are started; then the records never sent, and those whose send
// provably did not reach the server (its error wraps destination.ErrNotSent),
// are NotSent, and the others are left out of the results: in doubt. The
// first error is returned (the connector maps it).
func WriteEach(ctx context.Context, recs []destination.Record, conc int, key func(destination.Record) string,
	send func(ctx context.Context, r destination.Record) (destination.Result, error)) ([]destination.Result, error) {
	results := make([]destination.Result, len(recs))
	done := make([]bool, len(recs))
	maybeSent := make([]bool, len(recs))
	idx := make([]int, len(recs))
	for i := range idx {
		idx[i] = i
	}
	chains := Chains(idx, func(i int) string {
		if key == nil {
			return ""
		}
		return key(recs[i])
	})
	err := FanOutChains(ctx, chains, conc, func(ctx context.Context, i int) error {
		res, err := send(ctx, recs[i])
		if err != nil {
			maybeSent[i] = !errors.Is(err, destination.ErrNotSent)
			return err
		}
		results[i], done[i] = res, true
		return nil
	})
	out := make([]destination.Result, 0, len(recs))
	for i := range recs {
		switch {
		case done[i]:
			out = append(out, results[i])
		case err != nil && !maybeSent[i]:
			out = append(out, destination.Result{Key: recs[i].Key, Outcome: destination.NotSent})
		}
	}
	return out, err
}

// errSendPastDeadline: the request's body was still being sent when the
// attempt deadline passed, and was cut there (deadlineBody).
var errSendPastDeadline = errors.New("the run's lease ran out while the request was being sent; it was cut before its end")

// deadlineBody is a request body that refuses to be read once the attempt
// deadline of ctx has passed (or ctx ended), so the transport abandons the
// request before its last byte: a server does not process a request whose
// body never ended.
type deadlineBody struct {
	r    *bytes.Reader
	ctx  context.Context
	clk  clock.Clock
	late *atomic.Bool
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	if until, ok := destination.AttemptDeadline(b.ctx); ok && !b.clk.Now().Before(until) {
		b.late.Store(true)
		return 0, errSendPastDeadline
	}
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	return b.r.Read(p)
}

func (b *deadlineBody) Close() error { return nil }
