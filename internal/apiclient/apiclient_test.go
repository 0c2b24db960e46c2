package apiclient_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/testenv"
)

const secret = "key-SECRET-0123456789"

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// sleeps records the waits asked for and advances a fake clock by each, so
// time passes only through sleeps.
type sleeps struct {
	mu    sync.Mutex
	clk   *clock.Fake
	waits []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	s.clk.Advance(d)
	return ctx.Err()
}

func (s *sleeps) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// server counts requests and answers with h.
func server(t *testing.T, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func status(code int, header ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) {
		for i := 0; i+1 < len(header); i += 2 {
			w.Header().Set(header[i], header[i+1])
		}
		w.WriteHeader(code)
	}
}

// newClient returns a client with its own transport: httptest.Server.Close
// closes the idle connections of http.DefaultTransport, which would break a
// parallel test's reused connection. 503 is NotApplied, as Brevo's is.
func newClient(clk *clock.Fake, s *sleeps, mut ...func(*apiclient.Params)) *apiclient.Client {
	p := apiclient.Params{
		Name: "test", Subject: "the test API", Clock: clk, Sleep: s.sleep, MaxRetries: 2,
		Client:  &http.Client{Transport: &http.Transport{}},
		Secrets: []string{secret},
		Backoff: func(int) time.Duration { return 4 * time.Second },
		Classify: func(st int) apiclient.Class {
			if st == http.StatusServiceUnavailable {
				return apiclient.NotApplied
			}
			return apiclient.DefaultClassify(st)
		},
	}
	for _, m := range mut {
		m(&p)
	}
	return apiclient.New(p)
}

func post(url string) apiclient.Request {
	h := http.Header{}
	h.Set("api-key", secret)
	return apiclient.Request{Method: http.MethodPost, URL: url + "/contacts", Route: "POST /contacts", Header: h,
		Body: []byte(`{"email":"jane@example.com"}`)}
}

func wantCode(t *testing.T, err error, code failure.Code) {
	t.Helper()
	if got := failure.CodeOf(err); got != code {
		t.Fatalf("error %v: code %s, want %s", err, got, code)
	}
	for _, s := range []string{secret, "jane@example.com"} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q holds %q", err, s)
		}
	}
}

func TestRedirectIsNeverFollowed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status  int
		notSent bool
		code    failure.Code // a permanent move is the sync's to fix
	}{
		{http.StatusTemporaryRedirect, true, failure.DestinationUnavailable},
		{http.StatusPermanentRedirect, true, failure.InvalidSyncDefinition},
		{http.StatusMovedPermanently, false, failure.InvalidSyncDefinition},
		{http.StatusFound, false, failure.DestinationUnavailable},
		{http.StatusSeeOther, false, failure.DestinationUnavailable}, // the answer to a processed POST
	}
	for _, tt := range tests {
		t.Run(http.StatusText(tt.status), func(t *testing.T) {
			t.Parallel()
			var leaked atomic.Int64
			other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				leaked.Add(1)
				if r.Header.Get("api-key") != "" {
					t.Errorf("the other origin received the api-key header")
				}
			}))
			t.Cleanup(other.Close)
			srv, n := server(t, status(tt.status, "Location", other.URL+"/v3/contacts?token=T0KEN"))
			clk := clock.NewFake(t0)
			c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) { p.URLSetting = "base_url" })
			_, err := c.Do(t.Context(), post(srv.URL))
			wantCode(t, err, tt.code)
			if leaked.Load() != 0 {
				t.Errorf("the other origin received %d requests, want 0", leaked.Load())
			}
			if n.Load() != 1 {
				t.Errorf("%d requests, want 1 (a redirect is not retried)", n.Load())
			}
			var re *apiclient.RedirectError
			if !errors.As(err, &re) || re.Status != tt.status || re.Location != other.URL {
				t.Errorf("error %v, want a RedirectError %d to %s", err, tt.status, other.URL)
			}
			if !strings.Contains(err.Error(), "base_url") || strings.Contains(err.Error(), "T0KEN") {
				t.Errorf("error %q: want the setting to check, and no path or query of the Location", err)
			}
			if got := errors.Is(err, destination.ErrNotSent); got != tt.notSent {
				t.Errorf("errors.Is(err, ErrNotSent) = %v, want %v", got, tt.notSent)
			}
		})
	}
}

func TestConnectionRefusedIsNotSentAndRetried(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	s := &sleeps{clk: clk}
	c := newClient(clk, s)
	u := "http://" + testenv.RefusedAddr(t)
	// The URL's user information and query must not show either.
	u = strings.Replace(u, "http://", "http://jane@example.com:"+secret+"@", 1)
	req := post(u)
	req.URL += "?token=T0KEN"
	_, err := c.Do(t.Context(), req)
	wantCode(t, err, failure.DestinationUnavailable)
	if !errors.Is(err, destination.ErrNotSent) {
		t.Errorf("error %v does not wrap ErrNotSent: nothing was ever written", err)
	}
	if errors.Is(err, apiclient.ErrOutcomeUnknown) {
		t.Errorf("error %v says the outcome is unknown", err)
	}
	if strings.Contains(err.Error(), "T0KEN") {
		t.Errorf("error %q holds the URL's query", err)
	}
	// The detail says where and why (an independent check, 2026-12-04:
	// `oncesync check` of a wrong base_url said only "could not be
	// reached"), never the URL's user or password.
	host := u[strings.LastIndex(u, "@")+1:]
	if d := failure.Detail(err); !strings.Contains(d, "("+host+": connection refused)") || strings.Contains(d, secret) || strings.Contains(d, "jane") {
		t.Errorf("detail %q does not say (%s: connection refused), or names the URL's user", d, host)
	}
	// Not written, so safe to retry even though POST is not idempotent.
	if got := s.all(); len(got) != 2 {
		t.Errorf("slept %v, want 2 backoffs (MaxRetries 2)", got)
	}
}

func TestLostAnswer(t *testing.T) {
	t.Parallel()
	// The server reads the whole request, then cuts the connection.
	cut := func(w http.ResponseWriter, _ *http.Request) {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
	}
	t.Run("write is not resent", func(t *testing.T) {
		t.Parallel()
		srv, n := server(t, cut)
		clk := clock.NewFake(t0)
		_, err := newClient(clk, &sleeps{clk: clk}).Do(t.Context(), post(srv.URL))
		wantCode(t, err, failure.DestinationUnavailable)
		if !errors.Is(err, apiclient.ErrOutcomeUnknown) || errors.Is(err, destination.ErrNotSent) {
			t.Errorf("error %v: want ErrOutcomeUnknown, not ErrNotSent", err)
		}
		if n.Load() != 1 {
			t.Errorf("%d requests, want 1", n.Load())
		}
	})
	t.Run("idempotent request is retried and stays in doubt", func(t *testing.T) {
		t.Parallel()
		srv, n := server(t, cut)
		clk := clock.NewFake(t0)
		req := post(srv.URL)
		req.Idempotent = true
		_, err := newClient(clk, &sleeps{clk: clk}).Do(t.Context(), req)
		wantCode(t, err, failure.DestinationUnavailable)
		if errors.Is(err, destination.ErrNotSent) {
			t.Errorf("error %v wraps ErrNotSent, but the request was written", err)
		}
		if n.Load() != 3 {
			t.Errorf("%d requests, want 3", n.Load())
		}
	})
}

// A request that may have been applied once stays in doubt even when a
// later attempt is refused.
func TestMaybeAppliedThenRefusedIsInDoubt(t *testing.T) {
	t.Parallel()
	srv, n := server(t, status(http.StatusInternalServerError))
	clk := clock.NewFake(t0)
	s := &sleeps{clk: clk}
	c := newClient(clk, s, func(p *apiclient.Params) {
		p.Sleep = func(ctx context.Context, d time.Duration) error {
			srv.Close() // the next attempt finds nothing listening
			return s.sleep(ctx, d)
		}
	})
	req := post(srv.URL)
	req.Idempotent = true
	_, err := c.Do(t.Context(), req)
	wantCode(t, err, failure.DestinationUnavailable)
	if errors.Is(err, destination.ErrNotSent) {
		t.Errorf("error %v wraps ErrNotSent after a 500 that may have applied the write", err)
	}
	if n.Load() != 1 {
		t.Errorf("%d requests reached the server, want 1", n.Load())
	}
}

func TestNotAppliedAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		h      http.HandlerFunc
		code   failure.Code
		reqs   int64
		sleeps int
	}{
		{"401", status(401), failure.DestinationAuth, 1, 0},
		{"429 kept", status(429, "Retry-After", "2"), failure.DestinationRateLimited, 3, 2},
		{"429 beyond MaxWait", status(429, "Retry-After", "3600"), failure.DestinationRateLimited, 1, 0},
		// "Retry-After: 0" (or a date past) was taken at its word: the
		// retries went out back to back, no wait at all.
		{"429 now", status(429, "Retry-After", "0"), failure.DestinationRateLimited, 3, 2},
		{"503 not applied", status(503), failure.DestinationUnavailable, 3, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, n := server(t, tt.h)
			clk := clock.NewFake(t0)
			s := &sleeps{clk: clk}
			c := newClient(clk, s)
			_, err := c.Do(t.Context(), post(srv.URL))
			wantCode(t, err, tt.code)
			if !errors.Is(err, destination.ErrNotSent) {
				t.Errorf("error %v does not wrap ErrNotSent: the server said it did not process the request", err)
			}
			if tt.name == "429 beyond MaxWait" && !strings.Contains(err.Error(), "rate limit for POST /contacts resets in 1h0m0s") {
				t.Errorf("error %q does not name the route whose budget is spent", err)
			}
			if n.Load() != tt.reqs || len(s.all()) != tt.sleeps {
				t.Errorf("%d requests, slept %v; want %d requests, %d sleeps", n.Load(), s.all(), tt.reqs, tt.sleeps)
			}
		})
	}
}

func TestAttemptDeadline(t *testing.T) {
	t.Parallel()
	t.Run("past: nothing is sent", func(t *testing.T) {
		t.Parallel()
		srv, n := server(t, status(200))
		clk := clock.NewFake(t0)
		c := newClient(clk, &sleeps{clk: clk})
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return clk.Now().Add(-time.Second) })
		_, err := c.Do(ctx, post(srv.URL))
		wantCode(t, err, failure.LeaseLost)
		if !errors.Is(err, destination.ErrNoLeaseTime) || !errors.Is(err, destination.ErrNotSent) {
			t.Errorf("error %v: want ErrNoLeaseTime and ErrNotSent", err)
		}
		if n.Load() != 0 {
			t.Errorf("%d requests, want 0", n.Load())
		}
	})
	t.Run("less than MinAttempt left: nothing is sent", func(t *testing.T) {
		t.Parallel()
		srv, n := server(t, status(200))
		clk := clock.NewFake(t0)
		c := newClient(clk, &sleeps{clk: clk})
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return clk.Now().Add(500 * time.Millisecond) })
		if _, err := c.Do(ctx, post(srv.URL)); !errors.Is(err, destination.ErrNoLeaseTime) || n.Load() != 0 {
			t.Errorf("Do = %v after %d requests, want ErrNoLeaseTime and none", err, n.Load())
		}
	})
	t.Run("bounds the attempt's timeout", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(t0)
		var got time.Time
		rt := roundTripper(func(r *http.Request) (*http.Response, error) {
			got, _ = r.Context().Deadline()
			return &http.Response{StatusCode: 200, Body: http.NoBody, Header: http.Header{}}, nil
		})
		c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) { p.Client = &http.Client{Transport: rt} })
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return clk.Now().Add(5 * time.Second) })
		if _, err := c.Do(ctx, post("http://api.example")); err != nil {
			t.Fatal(err)
		}
		if got.IsZero() || got.After(time.Now().Add(5*time.Second)) {
			t.Errorf("attempt deadline %v, want at most 5 s away (the lease), not the 30 s timeout", got)
		}
	})
	t.Run("429 wait beyond it is not taken", func(t *testing.T) {
		t.Parallel()
		srv, n := server(t, status(429, "Retry-After", "30"))
		clk := clock.NewFake(t0)
		s := &sleeps{clk: clk}
		c := newClient(clk, s)
		until := clk.Now().Add(20 * time.Second)
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return until })
		_, err := c.Do(ctx, post(srv.URL))
		wantCode(t, err, failure.DestinationRateLimited)
		if !errors.Is(err, destination.ErrNoLeaseTime) || !errors.Is(err, destination.ErrNotSent) {
			t.Errorf("error %v: want ErrNoLeaseTime and ErrNotSent", err)
		}
		if len(s.all()) != 0 || n.Load() != 1 {
			t.Errorf("slept %v after %d requests; want no wait after the one request", s.all(), n.Load())
		}
	})
	t.Run("a wait that fits, the attempt after it not", func(t *testing.T) {
		t.Parallel()
		srv, n := server(t, status(503, "Retry-After", "7"))
		clk := clock.NewFake(t0)
		c := newClient(clk, &sleeps{clk: clk})
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return clk.Now().Add(7500 * time.Millisecond) })
		_, err := c.Do(ctx, post(srv.URL))
		wantCode(t, err, failure.DestinationUnavailable)
		// "asked to wait 7s ..., longer than the run's lease has left
		// (7.5s)" contradicted itself.
		if want := "asked to wait 7s before POST /contacts is retried, and the attempt after it at least 1s: more than the run's lease has left"; !strings.Contains(err.Error(), want) || n.Load() != 1 {
			t.Errorf("after %d requests: %q, want it to say %q", n.Load(), err, want)
		}
	})
	t.Run("backoff beyond it is not taken", func(t *testing.T) {
		t.Parallel()
		srv, n := server(t, status(503))
		clk := clock.NewFake(t0)
		s := &sleeps{clk: clk}
		c := newClient(clk, s, func(p *apiclient.Params) { p.MaxRetries = 10 })
		until := clk.Now().Add(10 * time.Second)
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return until })
		_, err := c.Do(ctx, post(srv.URL))
		wantCode(t, err, failure.DestinationUnavailable)
		if !errors.Is(err, destination.ErrNoLeaseTime) {
			t.Errorf("error %v: want ErrNoLeaseTime", err)
		}
		// 4 s backoffs at t0 and t0+4s fit (each leaves 1 s to attempt);
		// the third, at t0+8s, does not.
		if n.Load() != 3 || len(s.all()) != 2 || clk.Now().After(until) {
			t.Errorf("%d requests, slept %v, clock at +%s; want 3, two 4 s backoffs, within the deadline",
				n.Load(), s.all(), clk.Now().Sub(t0))
		}
	})
	t.Run("a renewed lease moves it", func(t *testing.T) {
		t.Parallel()
		srv, n := server(t, status(503))
		clk := clock.NewFake(t0)
		s := &sleeps{clk: clk}
		c := newClient(clk, s)
		// Renewed all along: always 6 s ahead.
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return clk.Now().Add(6 * time.Second) })
		_, err := c.Do(ctx, post(srv.URL))
		wantCode(t, err, failure.DestinationUnavailable)
		if errors.Is(err, destination.ErrNoLeaseTime) || n.Load() != 3 {
			t.Errorf("Do = %v after %d requests, want every retry taken (3 requests)", err, n.Load())
		}
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestCancelledBeforeSendingIsNotSent(t *testing.T) {
	t.Parallel()
	srv, n := server(t, status(503))
	clk := clock.NewFake(t0)
	ctx, cancel := context.WithCancel(t.Context())
	c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) {
		p.Classify = func(int) apiclient.Class { return apiclient.NotApplied }
		p.Sleep = func(context.Context, time.Duration) error { cancel(); return context.Canceled }
	})
	_, err := c.Do(ctx, post(srv.URL))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, destination.ErrNotSent) {
		t.Errorf("Do = %v, want context.Canceled and ErrNotSent", err)
	}
	if n.Load() != 1 {
		t.Errorf("%d requests, want 1", n.Load())
	}
}

func TestSecretsAreScrubbed(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, status(401))
	clk := clock.NewFake(t0)
	c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) {
		p.StatusError = func(route string, r *apiclient.Response) error {
			return errors.New(route + ": bad key " + secret + " for jane@example.com")
		}
	})
	_, err := c.Do(t.Context(), post(srv.URL))
	wantCode(t, err, failure.DestinationAuth)
	if !strings.Contains(err.Error(), "[redacted]") || !strings.Contains(err.Error(), "[email]") {
		t.Errorf("error %q, want the secret and the address replaced", err)
	}
}

// TestAuthDetailSaysWhatWasRefused: a revoked key, an account out of
// credits and a missing scope all fail destination_auth; the detail a
// person reads (`oncesync status`, the sync page) quotes the server's
// answer, scrubbed and bounded, so that they are told apart. It used to be
// the connector's fixed sentence alone.
func TestAuthDetailSaysWhatWasRefused(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		status int
		text   string
		long   bool // an answer longer than a detail quotes
	}{
		{401, "unauthorized: Key not found", false},
		{402, "not_enough_credits: You don't have enough credit", false},
		{403, "permission_denied: unrecognised IP address 192.0.2.7", true},
	} {
		pad := ""
		if tt.long {
			pad = strings.Repeat(".", 400)
		}
		srv, _ := server(t, status(tt.status))
		clk := clock.NewFake(t0)
		c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) {
			p.StatusError = func(route string, r *apiclient.Response) error {
				return fmt.Errorf("%s: HTTP %d %s (key %s, contact jane@example.com)%s", route, r.Status, tt.text, secret, pad)
			}
		})
		_, err := c.Do(t.Context(), post(srv.URL))
		wantCode(t, err, failure.DestinationAuth)
		d := failure.Detail(err)
		if !strings.Contains(d, fmt.Sprintf("HTTP %d %s", tt.status, tt.text)) {
			t.Errorf("detail %q does not say what the server answered", d)
		}
		if strings.Contains(d, secret) || strings.Contains(d, "jane@example.com") || len(d) > 400 {
			t.Errorf("detail %q (%d bytes) holds the secret or the address, or is not bounded", d, len(d))
		}
		if !tt.long && strings.Count(err.Error(), tt.text) != 1 {
			t.Errorf("error %q repeats the server's answer", err)
		}
	}
}

// TestTLSRefusedIsNamedAndNotRetried: a server whose certificate the
// worker does not accept (self-signed here), and https:// to a plain HTTP
// port. Both used to be retried with backoff (six attempts, 23 s in a run)
// and then reported as "could not be reached after 6 attempts" without
// the cause. Now the first attempt fails, not sent, naming the cause.
func TestTLSRefusedIsNamedAndNotRetried(t *testing.T) {
	t.Parallel()
	var served atomic.Int64
	tlsSrv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { served.Add(1) }))
	t.Cleanup(tlsSrv.Close)
	plain, _ := server(t, status(200))
	for _, tt := range []struct {
		name, url, want string
	}{
		{"self-signed", tlsSrv.URL, "its certificate was not accepted: x509: "},
		{"not TLS", "https://" + strings.TrimPrefix(plain.URL, "http://"), "the server did not answer in TLS"},
	} {
		clk := clock.NewFake(t0)
		s := &sleeps{clk: clk}
		c := newClient(clk, s)
		_, err := c.Do(t.Context(), post(tt.url))
		wantCode(t, err, failure.DestinationUnavailable)
		d := failure.Detail(err)
		host := strings.TrimPrefix(strings.TrimPrefix(tt.url, "https://"), "http://")
		if !strings.Contains(d, tt.want) || !strings.Contains(d, host) || !strings.Contains(d, "SSL_CERT_FILE") {
			t.Errorf("%s: detail %q, want the host %s, %q and what to do (SSL_CERT_FILE)", tt.name, d, host, tt.want)
		}
		if !errors.Is(err, destination.ErrNotSent) {
			t.Errorf("%s: error %v does not wrap ErrNotSent", tt.name, err)
		}
		if len(s.all()) != 0 {
			t.Errorf("%s: slept %v: a refused TLS connection was retried", tt.name, s.all())
		}
	}
	if served.Load() != 0 {
		t.Errorf("the TLS server served %d requests", served.Load())
	}
}

// TestSlowAnswerSaysTheLeaseCutTheTimeout: a destination slower than what
// the run's lease leaves an attempt (14 to 24 s under the default
// lease_ttl, whatever `timeout` says). Its write used to fail with "the
// answer to POST /contacts was lost", and a person who raised `timeout`
// saw no change; the detail now says no answer came in the time the lease
// left, and what setting governs it.
func TestSlowAnswerSaysTheLeaseCutTheTimeout(t *testing.T) {
	t.Parallel()
	slow := roundTripper(func(r *http.Request) (*http.Response, error) {
		if tr := httptrace.ContextClientTrace(r.Context()); tr != nil && tr.GotConn != nil {
			tr.GotConn(httptrace.GotConnInfo{}) // the request is on the wire
		}
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
	for _, idempotent := range []bool{false, true} {
		clk := clock.NewFake(t0)
		c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) {
			p.Client = &http.Client{Transport: slow}
			p.Timeout = 90 * time.Second
			p.MinAttempt = 10 * time.Millisecond
			if idempotent {
				p.MaxRetries = -1 // retried, it would meet the backoff's own limit first
			}
		})
		ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return clk.Now().Add(50 * time.Millisecond) })
		req := post("http://api.example")
		req.Idempotent = idempotent
		_, err := c.Do(ctx, req)
		wantCode(t, err, failure.DestinationUnavailable)
		d := failure.Detail(err)
		if !strings.Contains(d, "within 50ms (its timeout of 1m30s was cut to what the run's lease had left") ||
			!strings.Contains(d, "settings.lease_ttl") {
			t.Errorf("idempotent %v: detail %q does not say the lease cut the timeout", idempotent, d)
		}
		if !idempotent && !errors.Is(err, apiclient.ErrOutcomeUnknown) {
			t.Errorf("error %v: want the outcome unknown (in doubt)", err)
		}
	}
}

// TestCheckIsNotRetriedAfterNoAnswer: a connection check's request
// (destination.WithCheck) that gets no answer within its timeout fails at
// once, saying so; a run's is tried again.
func TestCheckIsNotRetriedAfterNoAnswer(t *testing.T) {
	t.Parallel()
	var attempts atomic.Int64
	silent := roundTripper(func(r *http.Request) (*http.Response, error) {
		attempts.Add(1)
		<-r.Context().Done()
		return nil, r.Context().Err()
	})
	for _, check := range []bool{true, false} {
		attempts.Store(0)
		clk := clock.NewFake(t0)
		c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) {
			p.Client = &http.Client{Transport: silent}
			p.Timeout = 50 * time.Millisecond
		})
		ctx := t.Context()
		if check {
			ctx = destination.WithCheck(ctx)
		}
		_, err := c.Do(ctx, apiclient.Request{Method: http.MethodGet, URL: "http://api.example/account", Route: "GET /account", Idempotent: true})
		wantCode(t, err, failure.DestinationUnavailable)
		d := failure.Detail(err)
		switch {
		case check && (attempts.Load() != 1 || !strings.Contains(d, "the test API did not answer GET /account within 50ms (destination.timeout)")):
			t.Errorf("check: %d attempts, detail %q; want one, and that it did not answer within 50ms", attempts.Load(), d)
		case !check && attempts.Load() != 3:
			t.Errorf("run: %d attempts, detail %q; want 3 (MaxRetries 2)", attempts.Load(), d)
		}
	}
}

func TestResponseBodyIsBounded(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, strings.Repeat("x", 10000)) })
	clk := clock.NewFake(t0)
	c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) { p.MaxBody = 1000 })
	res, err := c.Do(t.Context(), post(srv.URL))
	if err != nil || len(res.Body) != 1000 {
		t.Fatalf("Do = %d bytes, %v; want 1000 bytes", len(res.Body), err)
	}
}

func TestPacerIsAskedBeforeEveryAttempt(t *testing.T) {
	t.Parallel()
	srv, _ := server(t, status(503))
	clk := clock.NewFake(t0)
	s := &sleeps{clk: clk}
	c := newClient(clk, s, func(p *apiclient.Params) {
		p.Pacer = apiclient.NewLimiter(clk, 2) // one request per 500 ms
		p.Backoff = func(int) time.Duration { return 0 }
	})
	_, _ = c.Do(t.Context(), post(srv.URL))
	if got := s.all(); len(got) != 2 || got[0] != 500*time.Millisecond || got[1] != 500*time.Millisecond {
		t.Errorf("slept %v, want the limiter's 500 ms before each retry", got)
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	tests := []struct {
		v    string
		want time.Duration
		ok   bool
	}{
		{"7", 7 * time.Second, true},
		{" 1.5 ", 1500 * time.Millisecond, true},
		{now.Add(12 * time.Second).UTC().Format(http.TimeFormat), 12 * time.Second, true},
		{now.Add(-time.Hour).UTC().Format(http.TimeFormat), 0, true},
		{"", 0, false},
		{"-1", 0, false},
		{"soon", 0, false},
		// A wait beyond ParseSeconds' bound (about 11 days) was read as
		// none, and the request retried at once with backoff: it is as
		// long as the bound, which no run waits.
		{"99999999", 1e6 * time.Second, true},
		{"1e300", 1e6 * time.Second, true},
	}
	for _, tt := range tests {
		if got, ok := apiclient.RetryAfter(tt.v, now); got != tt.want || ok != tt.ok {
			t.Errorf("RetryAfter(%q) = %s, %v; want %s, %v", tt.v, got, ok, tt.want, tt.ok)
		}
	}
}

func TestBackoffFullJitter(t *testing.T) {
	t.Parallel()
	for attempt := range 8 {
		limit := min(time.Second<<attempt, 30*time.Second)
		for range 100 {
			if d := apiclient.Backoff(attempt); d < 0 || d > limit {
				t.Fatalf("Backoff(%d) = %s, want within [0, %s]", attempt, d, limit)
			}
		}
	}
}

func TestNoRedirectsLeavesTheClientAlone(t *testing.T) {
	t.Parallel()
	base := &http.Client{Timeout: time.Second}
	c := apiclient.NoRedirects(base)
	if base.CheckRedirect != nil || c.CheckRedirect == nil || c.Timeout != time.Second {
		t.Errorf("NoRedirects changed its argument or dropped its settings")
	}
}

func TestRefuseRedirects(t *testing.T) {
	t.Parallel()
	var leaked atomic.Int64
	other := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { leaked.Add(1) }))
	t.Cleanup(other.Close)
	srv, _ := server(t, status(http.StatusTemporaryRedirect, "Location", other.URL))
	// A client that follows redirects, as a library's would.
	c := &http.Client{Transport: apiclient.RefuseRedirects(nil)}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader("{}"))
	req.Header.Set("X-Sentry-Auth", secret)
	resp, err := c.Do(req)
	if err == nil {
		resp.Body.Close()
	}
	if !errors.Is(err, apiclient.ErrRedirect) || leaked.Load() != 0 {
		t.Errorf("Do = %v with %d requests at the other origin; want ErrRedirect and none", err, leaked.Load())
	}
}

// TestRequestsAreCounted: every attempt that got a connection counts in the
// run's request figure (destination.WithRequestCount); one refused before
// it had a connection does not.
func TestRequestsAreCounted(t *testing.T) {
	t.Parallel()
	t.Run("retries", func(t *testing.T) {
		t.Parallel()
		var calls atomic.Int64
		srv, n := server(t, func(w http.ResponseWriter, _ *http.Request) {
			if calls.Add(1) < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			w.WriteHeader(http.StatusOK)
		})
		clk := clock.NewFake(t0)
		var counted atomic.Int64
		ctx := destination.WithRequestCount(t.Context(), &counted)
		if _, err := newClient(clk, &sleeps{clk: clk}).Do(ctx, post(srv.URL)); err != nil {
			t.Fatal(err)
		}
		if counted.Load() != 3 || n.Load() != 3 {
			t.Fatalf("counted %d requests, the server saw %d; want 3 and 3", counted.Load(), n.Load())
		}
	})
	t.Run("refused", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(t0)
		var counted atomic.Int64
		ctx := destination.WithRequestCount(t.Context(), &counted)
		if _, err := newClient(clk, &sleeps{clk: clk}).Do(ctx, post("http://"+testenv.RefusedAddr(t))); err == nil {
			t.Fatal("a refused connection succeeded")
		}
		if counted.Load() != 0 {
			t.Fatalf("counted %d requests for a destination that refused every connection", counted.Load())
		}
	})
}

// echo answers code with a body that echoes the request (its api-key
// header and its body), as some error pages do.
func echo(t *testing.T, code int) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.WriteHeader(code)
		fmt.Fprintf(w, `{"message":"bad request %s with key %s"}`, b, r.Header.Get("api-key"))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A refusal's body reaches the connector (which makes the records'
// stored messages of it) without the client's secrets.
func TestRefusalBodyHidesSecrets(t *testing.T) {
	t.Parallel()
	for _, code := range []int{http.StatusBadRequest, http.StatusMultiStatus} {
		srv := echo(t, code)
		clk := clock.NewFake(t0)
		c := newClient(clk, &sleeps{clk: clk})
		res, err := c.Do(t.Context(), post(srv.URL))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(res.Body), secret) || !strings.Contains(string(res.Body), "[redacted]") {
			t.Errorf("HTTP %d: body %s, want the secret hidden", code, res.Body)
		}
	}
}

// A failure's text (logged, kept in the queue's job errors) shows neither
// the secret nor the values the request carried, which an error page may
// echo.
func TestFailureHidesRequestValues(t *testing.T) {
	t.Parallel()
	srv := echo(t, http.StatusUnauthorized)
	clk := clock.NewFake(t0)
	c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) {
		p.StatusError = func(route string, r *apiclient.Response) error {
			return errors.New(route + ": " + string(r.Body))
		}
	})
	req := post(srv.URL)
	req.Route = "POST /contacts/import"
	req.Body = []byte(`{"email":"jane@example.com","attributes":{"FIRSTNAME":"Janeth","SMS":"+15550199887"},"type":"contacts"}`)
	_, err := c.Do(t.Context(), req)
	wantCode(t, err, failure.DestinationAuth)
	for _, leak := range []string{secret, "jane@example.com", "Janeth", "+15550199887"} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q shows %q", err, leak)
		}
	}
	// The route is the connector's, not the server's: a value equal to
	// one of its words ("contacts") leaves it alone.
	if !strings.Contains(err.Error(), "POST /contacts/import: ") || !strings.Contains(err.Error(), "FIRSTNAME") {
		t.Errorf("error %q, want the route and the rest of the message kept", err)
	}
}

// TestServiceUnavailableRetryAfter: a 503 (or another retried answer) that
// says when to come back is retried then, not after a backoff of its own
// (a server shedding load is hit again while it still sheds), and one that
// says to come back later than MaxWait fails at once instead of being hit
// MaxRetries more times for nothing (docs/RELIABILITY.md).
func TestServiceUnavailableRetryAfter(t *testing.T) {
	t.Parallel()
	httpDate := t0.Add(20 * time.Second).Format(http.TimeFormat)
	tests := []struct {
		name   string
		h      http.HandlerFunc
		req    func(string) apiclient.Request
		reqs   int64
		sleeps []time.Duration
		detail string
	}{
		{"503 seconds", status(503, "Retry-After", "7"), post, 3, []time.Duration{7 * time.Second, 7 * time.Second}, "did not answer successfully after 3 attempts: the last was answered 503 Service Unavailable to POST /contacts"},
		{"503 HTTP date", status(503, "Retry-After", httpDate), post, 3, []time.Duration{20 * time.Second, 4 * time.Second}, "did not answer successfully after 3 attempts: the last was answered 503 Service Unavailable to POST /contacts"},
		{"503 a day", status(503, "Retry-After", "86400"), post, 1, nil, "the test API answered 503 to POST /contacts and asked to come back in 24h0m0s"},
		{"500 idempotent a day", status(500, "Retry-After", "86400"), func(u string) apiclient.Request {
			r := post(u)
			r.Idempotent = true
			return r
		}, 1, nil, "the test API answered 500 to POST /contacts and asked to come back in 24h0m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, n := server(t, tt.h)
			clk := clock.NewFake(t0)
			s := &sleeps{clk: clk}
			c := newClient(clk, s)
			_, err := c.Do(t.Context(), tt.req(srv.URL))
			wantCode(t, err, failure.DestinationUnavailable)
			if !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("error %q does not say %q", err, tt.detail)
			}
			if got := s.all(); n.Load() != tt.reqs || !slices.Equal(got, tt.sleeps) {
				t.Errorf("%d requests, slept %v; want %d requests, sleeps %v", n.Load(), got, tt.reqs, tt.sleeps)
			}
		})
	}
}

// viaProxy returns a client of NewHTTPClient sending every request through
// proxy (as HTTPS_PROXY would, loopback included).
func viaProxy(t *testing.T, proxy string) *http.Client {
	t.Helper()
	u, err := url.Parse(proxy)
	if err != nil {
		t.Fatal(err)
	}
	c := apiclient.NewHTTPClient()
	c.Transport.(*http.Transport).Proxy = http.ProxyURL(u)
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// TestProxyThatRefusesIsNamed: behind a corporate proxy (HTTPS_PROXY) that
// wants credentials, each call was tried 6 times (30 CONNECTs for a run of
// 20 Brevo records, 38 s) and failed "could not be reached after 6
// attempts; nothing was sent", naming neither the proxy nor its 407; a
// plain-HTTP forward proxy's 407 was taken for the destination's answer
// (Brevo: a page in doubt, read back through the same proxy). Now both
// fail at the first attempt, not sent, naming the proxy; a proxy that is
// down is named as the proxy.
func TestProxyThatRefusesIsNamed(t *testing.T) {
	t.Parallel()
	proxy, n := server(t, status(http.StatusProxyAuthRequired, "Proxy-Authenticate", `Basic realm="corp"`))
	for _, target := range []string{"https://api.example.com", "http://api.example.com"} {
		t.Run(target, func(t *testing.T) {
			clk := clock.NewFake(t0)
			s := &sleeps{clk: clk}
			c := newClient(clk, s, func(p *apiclient.Params) { p.Client = viaProxy(t, proxy.URL) })
			before := n.Load()
			_, err := c.Do(t.Context(), post(target))
			wantCode(t, err, failure.DestinationUnavailable)
			if !errors.Is(err, destination.ErrNotSent) {
				t.Errorf("error %v does not wrap ErrNotSent: the proxy forwarded nothing", err)
			}
			if d := failure.Detail(err); !strings.Contains(d, "407") || !strings.Contains(d, "HTTPS_PROXY") {
				t.Errorf("detail %q does not name the proxy's 407 and the setting", d)
			}
			if got := n.Load() - before; got != 1 || len(s.all()) != 0 {
				t.Errorf("%d requests to the proxy, slept %v; want 1 and no retry", got, s.all())
			}
		})
	}
	t.Run("proxy down", func(t *testing.T) {
		clk := clock.NewFake(t0)
		s := &sleeps{clk: clk}
		down := "http://" + testenv.RefusedAddr(t)
		c := newClient(clk, s, func(p *apiclient.Params) { p.Client = viaProxy(t, down) })
		_, err := c.Do(t.Context(), post("https://api.example.com"))
		wantCode(t, err, failure.DestinationUnavailable)
		if d, want := failure.Detail(err), "(the proxy "+strings.TrimPrefix(down, "http://")+": connection refused)"; !strings.Contains(d, want) {
			t.Errorf("detail %q does not say %q", d, want)
		}
	})
}

// TestNotAppliedOnlyInTheServersOwnWords: a 503 is "not processed" when the
// server says it; the same status from an egress proxy that forwarded the
// request (Envoy's "upstream connect error or disconnect/reset before
// headers") proves nothing, and a write resent on it may be written twice.
// Such an answer is MaybeApplied: a write is not retried, and is in doubt.
func TestNotAppliedOnlyInTheServersOwnWords(t *testing.T) {
	t.Parallel()
	own := func(r *apiclient.Response) bool { return strings.HasPrefix(string(r.Body), `{"code"`) }
	for _, tc := range []struct {
		name, body string
		reqs       int64
		notSent    bool
	}{
		{"the server's", `{"code":"service_unavailable","message":"try later"}`, 3, true},
		{"an egress proxy's", "upstream connect error or disconnect/reset before headers. reset reason: connection termination", 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, n := server(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusServiceUnavailable)
				io.WriteString(w, tc.body)
			})
			clk := clock.NewFake(t0)
			s := &sleeps{clk: clk}
			c := newClient(clk, s, func(p *apiclient.Params) { p.Own = own })
			_, err := c.Do(t.Context(), post(srv.URL))
			wantCode(t, err, failure.DestinationUnavailable)
			if got := errors.Is(err, destination.ErrNotSent); got != tc.notSent {
				t.Errorf("not sent = %v, want %v (%v)", got, tc.notSent, err)
			}
			if !tc.notSent && !errors.Is(err, apiclient.ErrOutcomeUnknown) {
				t.Errorf("error %v is not ErrOutcomeUnknown: the write may have been applied", err)
			}
			if n.Load() != tc.reqs {
				t.Errorf("%d requests, want %d", n.Load(), tc.reqs)
			}
		})
	}
}

// TestAccountRefusedOnlyInTheServersOwnWords: a 401, 402 or 403 whose body
// is not the server's error (a proxy's "access denied" page) was
// destination_auth, the sync author's to fix and counted by the circuit
// breaker; it says nothing of the credentials, so it is
// destination_unavailable, and its body (which may echo the address) is
// not quoted. The server's own 403 stays destination_auth.
func TestAccountRefusedOnlyInTheServersOwnWords(t *testing.T) {
	t.Parallel()
	own := func(r *apiclient.Response) bool { return strings.HasPrefix(string(r.Body), `{"code"`) }
	for _, tc := range []struct {
		name, body string
		want       failure.Code
	}{
		{"the server's", `{"code":"permission_denied","message":"no access"}`, failure.DestinationAuth},
		{"a proxy's", "<html>Access denied by policy for jane@example.com</html>", failure.DestinationUnavailable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := server(t, func(w http.ResponseWriter, _ *http.Request) {
				w.WriteHeader(http.StatusForbidden)
				io.WriteString(w, tc.body)
			})
			clk := clock.NewFake(t0)
			c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) { p.Own = own })
			_, err := c.Do(t.Context(), post(srv.URL))
			wantCode(t, err, tc.want)
			if strings.Contains(failure.Detail(err), "jane@") {
				t.Errorf("the detail quotes the proxy's page: %s", failure.Detail(err))
			}
			if tc.want == failure.DestinationUnavailable && !strings.Contains(failure.Detail(err), "docs/guide.md#http-answers-proxies-and-tls") {
				t.Errorf("the detail names no doc anchor: %s", failure.Detail(err))
			}
		})
	}
}

// TestLongWaitsAreTold: a wait of destination.NoticeAfter or longer (a
// 429's Retry-After, a 503's, a backoff) is told to the context's
// WithWaitNotice function with its route and reason, so a run sleeping on
// one says so; a shorter one is not.
func TestLongWaitsAreTold(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name    string
		h       http.HandlerFunc
		backoff time.Duration
		want    []destination.Wait
	}{
		{"429 Retry-After", status(429, "Retry-After", "30"), time.Second, []destination.Wait{
			{Route: "POST /contacts", For: 30 * time.Second, Why: "asked by the test API (429)"},
			{Route: "POST /contacts", For: 30 * time.Second, Why: "asked by the test API (429)"}}},
		{"503 Retry-After", status(503, "Retry-After", "7"), time.Second, []destination.Wait{
			{Route: "POST /contacts", For: 7 * time.Second, Why: "asked by the test API (Retry-After)"},
			{Route: "POST /contacts", For: 7 * time.Second, Why: "asked by the test API (Retry-After)"}}},
		{"503 backoff", status(503), 4 * time.Second, []destination.Wait{
			{Route: "POST /contacts", For: 4 * time.Second, Why: "a backoff after a failed attempt"},
			{Route: "POST /contacts", For: 4 * time.Second, Why: "a backoff after a failed attempt"}}},
		{"503 short backoff", status(503), time.Second, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, _ := server(t, tt.h)
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			c := newClient(clk, &sleeps{clk: clk}, func(p *apiclient.Params) {
				p.Backoff = func(int) time.Duration { return tt.backoff }
			})
			var got []destination.Wait
			ctx := destination.WithWaitNotice(t.Context(), func(w destination.Wait) { got = append(got, w) })
			if _, err := c.Do(ctx, post(srv.URL)); err == nil {
				t.Fatal("Do succeeded")
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("waits told %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestSigningKey: a Standard Webhooks secret is base64 after "whsec_",
// padded or not (the official libraries decode "whsec_" + unpadded text;
// validate refused it and advised dropping the prefix, which signs with
// the text itself, and nothing verifies that); any other secret is its
// bytes.
func TestSigningKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		secret string
		want   string
		ok     bool
	}{
		{"whsec_YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXowMTIzNDU", "abcdefghijklmnopqrstuvwxyz012345", true},
		{"whsec_YWJjZGVmZ2hpamtsbW5vcHFyc3R1dnd4eXowMTIzNDU=", "abcdefghijklmnopqrstuvwxyz012345", true},
		{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "", true}, // decodes, as the libraries read it
		{"plain text", "plain text", true},
		{"whsec_not base64!", "", false},
		{"whsec_", "", false},
	} {
		key, ok := apiclient.SigningKey(tc.secret)
		if ok != tc.ok || (tc.want != "" && string(key) != tc.want) {
			t.Errorf("SigningKey(%q) = %q, %v; want %q, %v", tc.secret, key, ok, tc.want, tc.ok)
		}
	}
}

// TestAccountLimiterObserve: a vendor's stated rate below the configured
// one paces the account; back above it, the configured rate again.
func TestAccountLimiterObserve(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(t0)
	a := apiclient.NewAccountLimiter(clk, nil, "acct", destination.Limit{Rate: 10})
	next := func() time.Duration {
		d, err := a.Reserve(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		clk.Advance(d)
		return d
	}
	next()
	// Paced at AccountHeadroom of each rate: 9.5/s, 3.8/s.
	at := func(rate float64) time.Duration {
		return time.Duration(float64(time.Second) / (rate * apiclient.AccountHeadroom))
	}
	if d := next(); d != at(10) {
		t.Fatalf("at the configured 10/s: wait %s, want %s", d, at(10))
	}
	a.Observe(4)
	next() // booked at 10/s before the vendor spoke
	if d := next(); d != at(4) {
		t.Fatalf("under the vendor's 4/s: wait %s, want %s", d, at(4))
	}
	a.Observe(1000) // the vendor's limit rose past rate_limit: rate_limit again
	next()
	if d := next(); d != at(10) {
		t.Fatalf("after the vendor's limit rose: wait %s, want %s (rate_limit)", d, at(10))
	}
}
