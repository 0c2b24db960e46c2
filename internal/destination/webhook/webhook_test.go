package webhook_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/destinationtest"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/testenv"
)

const (
	token  = "Bearer tok-SECRET-abc123"
	secret = "whsec_" + "c2lnbmluZy1zZWNyZXQtZm9yLXRlc3Rz" // base64("signing-secret-for-tests")
)

var signingKey = []byte("signing-secret-for-tests")

// receiver is an httptest webhook receiver: it checks the auth header and
// the Standard Webhooks signature, stores records by Idempotency-Key, and
// misbehaves on demand.
type receiver struct {
	t      *testing.T
	srv    *httptest.Server
	clock  clock.Clock
	faults destinationtest.Faults
	// status, when set, answers every request with it (and retryAfter).
	status     atomic.Int64
	retryAfter string
	failFirst  atomic.Int64 // answer the first N requests 503

	requests atomic.Int64
	errors5  atomic.Int64

	mu      sync.Mutex
	stored  map[string]json.RawMessage // Idempotency-Key -> body
	headers []http.Header
	refuse  map[string]bool
}

func newReceiver(t *testing.T, f destinationtest.Faults, clk clock.Clock) *receiver {
	if clk == nil {
		clk = clock.NewFake(time.Unix(1_700_000_000, 0))
	}
	rv := &receiver{t: t, faults: f, stored: map[string]json.RawMessage{}, refuse: map[string]bool{}, clock: clk}
	for _, r := range f.Refuse {
		rv.refuse[r.Key] = true
	}
	rv.srv = httptest.NewServer(http.HandlerFunc(rv.serve))
	t.Cleanup(rv.srv.Close)
	return rv
}

func (rv *receiver) serve(w http.ResponseWriter, r *http.Request) {
	n := rv.requests.Add(1)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	rv.mu.Lock()
	rv.headers = append(rv.headers, r.Header.Clone())
	rv.mu.Unlock()
	fail := func(code int) {
		if code >= 500 {
			rv.errors5.Add(1)
		}
		w.WriteHeader(code)
	}
	switch {
	case rv.faults.RedirectTo != "":
		http.Redirect(w, r, rv.faults.RedirectTo+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		return
	case rv.faults.RateLimitStorm > 0 && n <= int64(rv.faults.RateLimitStorm):
		// A storm that ends.
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		return
	case rv.faults.RateLimited > 0:
		w.Header().Set("Retry-After", strconv.Itoa(int(rv.faults.RateLimited/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
		return
	case r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json":
		fail(http.StatusMethodNotAllowed)
		return
	case rv.faults.Unauthorized || r.Header.Get("Authorization") != token:
		fail(http.StatusUnauthorized)
		return
	case rv.faults.Unavailable || (rv.faults.Flaky && n%2 == 1) || n <= rv.failFirst.Load():
		fail(http.StatusServiceUnavailable)
		return
	}
	if s := rv.status.Load(); s != 0 {
		if rv.retryAfter != "" {
			w.Header().Set("Retry-After", rv.retryAfter)
		}
		w.WriteHeader(int(s))
		io.WriteString(w, strings.Repeat("x", 600))
		return
	}
	id, ts := r.Header.Get("webhook-id"), r.Header.Get("webhook-timestamp")
	m := hmac.New(sha256.New, signingKey)
	m.Write([]byte(id + "." + ts + "."))
	m.Write(body)
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	if !hmac.Equal([]byte(r.Header.Get("webhook-signature")), []byte(want)) {
		rv.t.Errorf("bad signature %q (id %q ts %q)", r.Header.Get("webhook-signature"), id, ts)
		fail(http.StatusBadRequest)
		return
	}
	if wantTS := strconv.FormatInt(rv.clock.Now().Unix(), 10); ts != wantTS {
		rv.t.Errorf("webhook-timestamp %q, want %q (from the injected clock)", ts, wantTS)
	}
	key := r.Header.Get("Idempotency-Key")
	if id != key {
		rv.t.Errorf("webhook-id %q differs from Idempotency-Key %q", id, key)
	}
	if rv.refuse[key] {
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, `{"error":"refused this record"}`)
		return
	}
	rv.mu.Lock()
	rv.stored[key] = body
	rv.mu.Unlock()
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, `{"id":"ref-`+key[:8]+`"}`)
}

func (rv *receiver) storedCount() int64 {
	rv.mu.Lock()
	defer rv.mu.Unlock()
	return int64(len(rv.stored))
}

type bundle struct {
	rv    *receiver
	dest  *webhook.Destination
	slept *[]time.Duration
}

func setup(t *testing.T, mode string, f destinationtest.Faults, mut ...func(*webhook.Params)) bundle {
	t.Helper()
	return setupClock(t, mode, f, nil, mut...)
}

// setupClock is setup with clk as the receiver's and the destination's clock
// (nil: a fake one).
func setupClock(t *testing.T, mode string, f destinationtest.Faults, clk clock.Clock, mut ...func(*webhook.Params)) bundle {
	t.Helper()
	rv := newReceiver(t, f, clk)
	base := rv.srv.URL
	if f.Refused {
		base = "http://" + testenv.RefusedAddr(t)
	}
	var (
		mu    sync.Mutex
		slept []time.Duration
	)
	p := webhook.Params{
		URL:     base + "/hook?token=QUERY-SECRET-xyz",
		Mode:    mode,
		Headers: map[string]string{"Authorization": token},
		Secret:  secret,
		Clock:   rv.clock,
		Sleep: func(ctx context.Context, d time.Duration) error {
			mu.Lock()
			slept = append(slept, d)
			mu.Unlock()
			return ctx.Err()
		},
		MaxRetries: 3,
	}
	for _, m := range mut {
		m(&p)
	}
	d, err := webhook.New(p)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return bundle{rv: rv, dest: d, slept: &slept}
}

func TestAcceptance(t *testing.T) {
	t.Parallel()
	destinationtest.Run(t, destinationtest.Harness{
		// The receiver keys what it stores by Idempotency-Key, as the
		// webhook's contract asks: a resend is never a second write, so
		// the lost-answer case (which counts duplicates) has nothing to
		// count here.
		Storms: true,
		Setup: func(t *testing.T, cfg destinationtest.Config) destinationtest.Target {
			b := setupClock(t, webhook.ModeSingle, cfg.Faults, cfg.Clock, func(p *webhook.Params) {
				p.Sleep, p.MaxRetries = cfg.Sleep, cfg.MaxRetries
			})
			return destinationtest.Target{
				Dest:         b.dest,
				Secrets:      []string{token, secret, "tok-SECRET-abc123", "QUERY-SECRET-xyz"},
				Requests:     b.rv.requests.Load,
				ServerErrors: b.rv.errors5.Load,
				Stored:       b.rv.storedCount,
			}
		},
	})
}

func records(n int) []destination.Record {
	out := make([]destination.Record, n)
	for i := range out {
		out[i] = destinationtest.Record(i)
	}
	return out
}

func TestSingleSendsDataWithIdempotencyKey(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.ModeSingle, destinationtest.Faults{})
	recs := records(5)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	refs := map[string]string{}
	for _, r := range res {
		refs[r.Key] = r.Ref
	}
	for _, r := range recs {
		body, ok := b.rv.stored[r.Key]
		if !ok {
			t.Fatalf("record %s not received under its Idempotency-Key", r.Key[:8])
		}
		var got map[string]any
		if err := json.Unmarshal(body, &got); err != nil {
			t.Fatal(err)
		}
		if got["email"] != r.Data["email"] {
			t.Errorf("body %s, want the record's data", body)
		}
		if want := "ref-" + r.Key[:8]; refs[r.Key] != want {
			t.Errorf("Ref = %q, want %q (the response's id)", refs[r.Key], want)
		}
	}
}

func TestBulk(t *testing.T) {
	t.Parallel()
	recs := records(4)
	keys := make([]string, len(recs))
	for i, r := range recs {
		keys[i] = r.Key
	}
	h := sha256.Sum256([]byte(strings.Join(keys, "\n") + "\n"))
	wantKey := hex.EncodeToString(h[:])
	if got := webhook.BulkIdempotencyKey(keys); got != wantKey {
		t.Fatalf("BulkIdempotencyKey = %s, want %s", got, wantKey)
	}

	tests := []struct {
		name    string
		refuse  bool
		outcome destination.Outcome
		reqs    int64
	}{
		{"accepted", false, destination.Delivered, 1},
		// A refused page is split until each refusal is one record's:
		// 1 page, 2 halves, 4 records.
		{"refused page", true, destination.Rejected, 7},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := destinationtest.Faults{}
			b := setup(t, webhook.ModeBulk, f)
			if tt.refuse {
				b.rv.refuse[wantKey] = true
				b.rv.refuse[webhook.BulkIdempotencyKey(keys[:2])] = true
				b.rv.refuse[webhook.BulkIdempotencyKey(keys[2:])] = true
				for _, k := range keys {
					b.rv.refuse[webhook.BulkIdempotencyKey([]string{k})] = true
				}
			}
			res, err := b.dest.Write(t.Context(), recs)
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if len(res) != len(recs) {
				t.Fatalf("%d results, want %d", len(res), len(recs))
			}
			for _, r := range res {
				if r.Outcome != tt.outcome {
					t.Errorf("%s: outcome %v, want %v", r.Key[:8], r.Outcome, tt.outcome)
				}
			}
			if n := b.rv.requests.Load(); n != tt.reqs {
				t.Errorf("%d requests, want %d", n, tt.reqs)
			}
			if tt.refuse {
				return
			}
			var body struct {
				Records []struct {
					Key  string         `json:"key"`
					Data map[string]any `json:"data"`
				} `json:"records"`
			}
			if err := json.Unmarshal(b.rv.stored[wantKey], &body); err != nil {
				t.Fatalf("bulk body under key %s: %v", wantKey[:8], err)
			}
			if len(body.Records) != len(recs) {
				t.Fatalf("bulk body has %d records, want %d", len(body.Records), len(recs))
			}
			for i, r := range body.Records {
				if r.Key != recs[i].Key || r.Data["email"] != recs[i].Data["email"] {
					t.Errorf("bulk record %d = %v, want key %s and the record's data", i, r, recs[i].Key[:8])
				}
			}
		})
	}
}

func TestAnswers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		status     int
		retryAfter string
		wantCode   failure.Code // "" = no error
		wantReject bool
		wantSleeps []time.Duration // nil = not checked
		wantReqs   int64
	}{
		{name: "400 rejects with the body cut to 500", status: 400, wantReject: true, wantReqs: 1},
		{name: "422 rejects", status: 422, wantReject: true, wantReqs: 1},
		{name: "404 is the address", status: 404, wantCode: failure.DestinationUnavailable, wantReqs: 1},
		{name: "405 is the address", status: 405, wantCode: failure.DestinationUnavailable, wantReqs: 1},
		{name: "503 honours Retry-After", status: 503, retryAfter: "5", wantCode: failure.DestinationUnavailable,
			wantSleeps: []time.Duration{5 * time.Second, 5 * time.Second, 5 * time.Second}, wantReqs: 4},
		{name: "503 with a far Retry-After fails at once", status: 503, retryAfter: "86400", wantCode: failure.DestinationUnavailable,
			wantSleeps: []time.Duration{}, wantReqs: 1},
		{name: "401 is auth", status: 401, wantCode: failure.DestinationAuth, wantReqs: 1},
		{name: "403 is auth", status: 403, wantCode: failure.DestinationAuth, wantReqs: 1},
		// 402 Payment Required: the receiver's account lapsed or was
		// suspended. It says nothing of the record, which must not be
		// rejected for its content (a whole page refused would blame the
		// mapping).
		{name: "402 is auth", status: 402, wantCode: failure.DestinationAuth, wantReqs: 1},
		{name: "408 retried", status: 408, wantCode: failure.DestinationUnavailable, wantReqs: 4},
		{name: "409 retried", status: 409, wantCode: failure.DestinationUnavailable, wantReqs: 4},
		{name: "500 retried", status: 500, wantCode: failure.DestinationUnavailable, wantReqs: 4},
		{name: "429 honours Retry-After seconds", status: 429, retryAfter: "7", wantCode: failure.DestinationRateLimited,
			wantSleeps: []time.Duration{7 * time.Second, 7 * time.Second, 7 * time.Second}, wantReqs: 4},
		{name: "429 honours Retry-After date", status: 429, retryAfter: time.Unix(1_700_000_012, 0).UTC().Format(http.TimeFormat),
			wantCode: failure.DestinationRateLimited, wantSleeps: []time.Duration{12 * time.Second, 12 * time.Second, 12 * time.Second}, wantReqs: 4},
		{name: "429 with a far Retry-After fails at once", status: 429, retryAfter: "3600", wantCode: failure.DestinationRateLimited,
			wantSleeps: []time.Duration{}, wantReqs: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, webhook.ModeSingle, destinationtest.Faults{})
			b.rv.status.Store(int64(tt.status))
			b.rv.retryAfter = tt.retryAfter
			recs := records(1)
			res, err := b.dest.Write(t.Context(), recs)
			if got := b.rv.requests.Load(); got != tt.wantReqs {
				t.Errorf("%d requests, want %d", got, tt.wantReqs)
			}
			if tt.wantCode != "" {
				if got := failure.CodeOf(err); got != tt.wantCode {
					t.Fatalf("error %v: code %s, want %s", err, got, tt.wantCode)
				}
				for _, s := range []string{"SECRET", "/hook", "user0@"} {
					if strings.Contains(err.Error(), s) {
						t.Errorf("error %q holds %q", err, s)
					}
				}
				if tt.wantSleeps != nil {
					retrySleeps := *b.slept
					if len(retrySleeps) != len(tt.wantSleeps) {
						t.Fatalf("slept %v, want %v", retrySleeps, tt.wantSleeps)
					}
					for i := range retrySleeps {
						if retrySleeps[i] != tt.wantSleeps[i] {
							t.Errorf("slept %v, want %v", retrySleeps, tt.wantSleeps)
						}
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			if len(res) != 1 || res[0].Outcome != destination.Rejected {
				t.Fatalf("results %+v, want one rejected", res)
			}
			if len(res[0].Message) != webhook.MaxMessageLen || strings.Trim(res[0].Message, "x") != "" {
				t.Errorf("message of %d bytes, want the body cut to %d", len(res[0].Message), webhook.MaxMessageLen)
			}
		})
	}
}

func TestRetryThenSuccessBacksOff(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.ModeSingle, destinationtest.Faults{})
	b.rv.failFirst.Store(3)
	res, err := b.dest.Write(t.Context(), records(1))
	if err != nil || len(res) != 1 || res[0].Outcome != destination.Delivered {
		t.Fatalf("Write = %+v, %v; want delivered after retries", res, err)
	}
	if len(*b.slept) != 3 {
		t.Fatalf("slept %v, want 3 backoffs", *b.slept)
	}
	for i, d := range *b.slept {
		if limit := time.Second << i; d < 0 || d > limit {
			t.Errorf("backoff %d = %s, want within [0, %s] (full jitter from 1 s)", i, d, limit)
		}
	}
}

func TestVerifyUnsupported(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.ModeSingle, destinationtest.Faults{})
	if c := b.dest.Capability(); c != destination.CapIdempotent {
		t.Errorf("Capability = %s, want idempotent", c)
	}
	if _, err := b.dest.Verify(t.Context(), records(1), time.Now()); !errors.Is(err, webhook.ErrVerifyUnsupported) {
		t.Errorf("Verify error = %v, want ErrVerifyUnsupported", err)
	}
}

func TestResendSameKey(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.ModeSingle, destinationtest.Faults{})
	recs := records(3)
	for range 2 {
		if _, err := b.dest.Write(t.Context(), recs); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	seen := map[string]int{}
	for _, h := range b.rv.headers {
		seen[h.Get("Idempotency-Key")]++
	}
	for _, r := range recs {
		if seen[r.Key] != 2 {
			t.Errorf("key %s sent %d times, want 2 with the same Idempotency-Key", r.Key[:8], seen[r.Key])
		}
	}
	if got := b.rv.storedCount(); got != 3 {
		t.Errorf("receiver stores %d records, want 3", got)
	}
}

func TestSignPlainSecret(t *testing.T) {
	t.Parallel()
	m := hmac.New(sha256.New, []byte("plain"))
	m.Write([]byte("id1.42.{}"))
	want := "v1," + base64.StdEncoding.EncodeToString(m.Sum(nil))
	if got := webhook.Sign([]byte("plain"), "id1", "42", []byte("{}")); got != want {
		t.Errorf("Sign = %s, want %s", got, want)
	}
}

func TestNewRejectsBadParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    webhook.Params
	}{
		{"no url", webhook.Params{}},
		{"relative url", webhook.Params{URL: "/hook"}},
		{"ftp url", webhook.Params{URL: "ftp://example.com/x"}},
		{"bad mode", webhook.Params{URL: "https://example.com", Mode: "batch"}},
		{"bad header", webhook.Params{URL: "https://example.com", Headers: map[string]string{"X-A": "v\r\nX-B: y"}}},
		{"bad whsec", webhook.Params{URL: "https://example.com", Secret: "whsec_!!!notbase64"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := webhook.New(tt.p)
			if got := failure.CodeOf(err); got != failure.InvalidSyncDefinition {
				t.Errorf("New error %v: code %s, want %s", err, got, failure.InvalidSyncDefinition)
			}
		})
	}
}

// A bulk POST that never reached the receiver leaves none of its records in
// doubt (finding 11).
func TestBulkRefusedIsNotSent(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.ModeBulk, destinationtest.Faults{Refused: true})
	recs := records(4)
	res, err := b.dest.Write(t.Context(), recs)
	if failure.CodeOf(err) != failure.DestinationUnavailable || !errors.Is(err, destination.ErrNotSent) {
		t.Fatalf("Write error %v, want destination_unavailable wrapping ErrNotSent", err)
	}
	if len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	for _, r := range res {
		if r.Outcome != destination.NotSent {
			t.Errorf("%s: outcome %v, want not sent", r.Key[:8], r.Outcome)
		}
	}
}

// A bulk POST answered 500 may have been applied: its records stay in doubt
// (resent later with the same Idempotency-Key), however the retries end.
func TestBulkServerErrorIsInDoubt(t *testing.T) {
	t.Parallel()
	b := setup(t, webhook.ModeBulk, destinationtest.Faults{})
	b.rv.status.Store(http.StatusInternalServerError)
	res, err := b.dest.Write(t.Context(), records(4))
	if failure.CodeOf(err) != failure.DestinationUnavailable || errors.Is(err, destination.ErrNotSent) {
		t.Fatalf("Write error %v, want destination_unavailable, not ErrNotSent", err)
	}
	if len(res) != 0 {
		t.Errorf("results %+v, want none (in doubt)", res)
	}
}

// TestABackoffGivesItsPlaceUp: a record waiting between its attempts does
// not hold one of the concurrency places: with one place, the page's next
// record is delivered while the first waits out its backoff (one record's
// backoff held its page's other records for up to 30 s: an independent
// check, 2026-12-07).
func TestABackoffGivesItsPlaceUp(t *testing.T) {
	t.Parallel()
	var (
		mu      sync.Mutex
		seen    = map[string]int{}
		sawNext = make(chan struct{})
		once    sync.Once
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get(webhook.HeaderIdempotencyKey)
		mu.Lock()
		seen[key]++
		n := seen[key]
		mu.Unlock()
		if key == "k1" {
			once.Do(func() { close(sawNext) })
		}
		if key == "k0" && n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	t.Cleanup(srv.Close)
	d, err := webhook.New(webhook.Params{URL: srv.URL + "/hook", Mode: webhook.ModeSingle, Concurrency: 1, MaxRetries: 3,
		Sleep: func(ctx context.Context, _ time.Duration) error {
			select {
			case <-sawNext:
				return nil
			case <-time.After(2 * time.Second):
				return errors.New("the next record was not sent while this one waited")
			case <-ctx.Done():
				return ctx.Err()
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	recs := []destination.Record{
		{Key: "k0", Data: map[string]any{"n": 0}}, {Key: "k1", Data: map[string]any{"n": 1}}, {Key: "k2", Data: map[string]any{"n": 2}},
	}
	res, err := d.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	for _, r := range res {
		if r.Outcome != destination.Delivered {
			t.Errorf("%s: %s, want delivered", r.Key, r.Outcome)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(res) != 3 || seen["k0"] != 2 || seen["k1"] != 1 || seen["k2"] != 1 {
		t.Fatalf("results %d, requests by key %v; want 3 delivered, k0 twice", len(res), seen)
	}
}
