package fakebrevo

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestAuth(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		optKey  string
		headers map[string]string
		want    int
	}{
		{"missing key", "", nil, http.StatusUnauthorized},
		{"any key accepted", "", map[string]string{"api-key": "whatever"}, http.StatusOK},
		{"wrong key", "secret", map[string]string{"api-key": "nope"}, http.StatusUnauthorized},
		{"right key", "secret", map[string]string{"api-key": "secret"}, http.StatusOK},
		{"partner-key alone", "", map[string]string{"partner-key": "p"}, http.StatusUnauthorized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, Options{APIKey: tt.optKey})
			r := b.send(b.raw, "GET", "/v3/contacts", nil, tt.headers)
			b.mustStatus(r, tt.want)
			if r.header.Get(HeaderRateLimitLimit) == "" {
				t.Error("no rate-limit headers")
			}
			if tt.want == http.StatusUnauthorized {
				e := r.errCode(t)
				if e.Code != CodeUnauthorized || strings.Contains(e.Message, "nope") {
					t.Errorf("error = %+v", e)
				}
			}
		})
	}
	t.Run("outside /v3 needs no key", func(t *testing.T) {
		t.Parallel()
		b := setup(t, Options{APIKey: "secret"})
		b.mustStatus(b.send(b.raw, "GET", "/_stats", nil, nil), http.StatusOK)
	})
}

func TestRateLimitWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{RateLimitPerSecond: 3})
	// 0.75 s are left in the window: the reset says 0 (whole seconds,
	// rounded down).
	b.clock.Set(epoch.Add(250 * time.Millisecond))
	reset := "0"
	check := func(r resp, status int, remaining string) {
		t.Helper()
		b.mustStatus(r, status)
		h := r.header
		if h.Get(HeaderRateLimitLimit) != "3" || h.Get(HeaderRateLimitRemaining) != remaining || h.Get(HeaderRateLimitReset) != reset {
			t.Errorf("headers limit=%q remaining=%q reset=%q, want 3 %s %s", h.Get(HeaderRateLimitLimit), h.Get(HeaderRateLimitRemaining), h.Get(HeaderRateLimitReset), remaining, reset)
		}
		if h.Get("Retry-After") != "" {
			t.Error("Retry-After sent; Brevo does not document it")
		}
	}
	check(b.do("GET", "/v3/contacts", nil), 200, "2")
	check(b.do("POST", "/v3/contacts", m{"email": "a@example.com"}), 201, "1")
	check(b.do("GET", "/v3/contacts/1", nil), 200, "0")
	r := b.do("POST", "/v3/contacts", m{"email": "b@example.com"})
	check(r, http.StatusTooManyRequests, "0")
	if e := r.errCode(t); e.Code != CodeTooManyRequests {
		t.Errorf("code = %s", e.Code)
	}
	if _, ok := b.srv.Contact("b@example.com"); ok {
		t.Error("a rate-limited write was applied")
	}
	// Processes are not limited.
	b.mustStatus(b.do("GET", "/v3/processes", nil), http.StatusOK)

	b.clock.Advance(750 * time.Millisecond) // next window, a whole second left
	reset = "1"
	check(b.do("GET", "/v3/contacts", nil), 200, "2")
	if st := b.srv.Stats(); st.ByStatus["429"] != 1 {
		t.Errorf("by status = %v", st.ByStatus)
	}
}

// TestSlidingRateWindow: under SlidingRateWindow, requests at the limit's
// pace are all answered, and one sent early (a request bunched by the
// network) finds the second before it full, although it falls in a
// calendar second of its own that a fixed window would have let it through.
func TestSlidingRateWindow(t *testing.T) {
	t.Parallel()
	for _, sliding := range []bool{false, true} {
		b := setup(t, Options{RateLimitPerSecond: 3, SlidingRateWindow: sliding})
		b.clock.Set(epoch.Add(400 * time.Millisecond))
		for range 3 { // 400, 700 and 1000 ms: three in the second before each
			b.mustStatus(b.do("GET", "/v3/contacts", nil), http.StatusOK)
			b.clock.Advance(300 * time.Millisecond)
		}
		b.clock.Set(epoch.Add(1200 * time.Millisecond)) // a calendar second with one request so far
		want := http.StatusOK
		if sliding {
			want = http.StatusTooManyRequests // 400, 700, 1000 and 1200 ms within one second
		}
		b.mustStatus(b.do("GET", "/v3/contacts", nil), want)
		b.clock.Set(epoch.Add(1701 * time.Millisecond)) // 400 and 700 ms have left the second (a refused request counts too)
		b.mustStatus(b.do("GET", "/v3/contacts", nil), http.StatusOK)
	}
}

func TestInjectedFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		want int
		code string
	}{
		{"error rate", Options{ErrorRate: 1}, http.StatusServiceUnavailable, CodeServiceUnavailable},
		{"rate-limit rate", Options{RateLimitRate: 1}, http.StatusTooManyRequests, CodeTooManyRequests},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, tt.opts)
			r := b.do("POST", "/v3/contacts", m{"email": "a@example.com"})
			b.mustStatus(r, tt.want)
			if e := r.errCode(t); e.Code != tt.code {
				t.Errorf("code = %s", e.Code)
			}
			if r.header.Get(HeaderRateLimitRemaining) == "" {
				t.Error("no rate-limit headers")
			}
			if st := b.srv.Stats(); st.ContactsWritten != 0 || st.Requests != 1 {
				t.Errorf("stats = %+v", st)
			}
		})
	}
}

func TestFaultsAreDeterministicWithSeed(t *testing.T) {
	t.Parallel()
	run := func(seed int64) []int {
		srv := New(Options{Seed: seed, ErrorRate: 0.5, Clock: nil})
		var codes []int
		for range 40 {
			req := httptest.NewRequest("GET", "/v3/contacts", nil)
			req.Header.Set("api-key", "k")
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			codes = append(codes, rec.Code)
		}
		return codes
	}
	a, b, c := run(7), run(7), run(8)
	if !slices.Equal(a, b) {
		t.Errorf("same seed, different faults:\n%v\n%v", a, b)
	}
	if slices.Equal(a, c) {
		t.Errorf("different seeds, same faults: %v", a)
	}
	if !slices.Contains(a, 503) || !slices.Contains(a, 200) {
		t.Errorf("error rate 0.5 gave %v", a)
	}
}

func TestDropResponse(t *testing.T) {
	t.Parallel()
	var hooked atomic.Int64
	var b *bundle
	b = setup(t, Options{DropResponseRate: 1, AfterWrite: func(r *http.Request) {
		// The write is applied before the hook runs.
		if _, ok := b.srv.Contact("ann@example.com"); ok {
			hooked.Add(1)
		}
	}})
	for _, base := range []string{b.api, b.raw} {
		_, err := b.sendErr(base, "POST", "/v3/contacts", m{"email": "ann@example.com", "updateEnabled": true}, map[string]string{"api-key": testKey})
		if err == nil {
			t.Fatal("got a response; want the connection cut")
		}
	}
	if hooked.Load() != 2 {
		t.Errorf("AfterWrite saw the write %d times, want 2", hooked.Load())
	}
	st := b.srv.Stats()
	if st.Dropped != 2 || st.ContactsWritten != 2 || st.DuplicateWrites != 1 || st.Contacts != 1 || len(st.ByStatus) != 0 {
		t.Errorf("stats = %+v", st)
	}
	// Reads are never dropped.
	b.mustStatus(b.do("GET", "/v3/contacts/ann%40example.com", nil), http.StatusOK)
}

func TestDropResponseThroughReverseProxy(t *testing.T) {
	t.Parallel()
	srv := New(Options{DropResponseRate: 1})
	backend := httptest.NewServer(srv)
	defer backend.Close()
	u, err := url.Parse(backend.URL)
	if err != nil {
		t.Fatal(err)
	}
	p, err := ValidatingProxyTo(u)
	if err != nil {
		t.Fatal(err)
	}
	front := httptest.NewServer(p)
	defer front.Close()
	req, _ := http.NewRequest("POST", front.URL+"/v3/contacts", strings.NewReader(`{"email":"ann@example.com"}`))
	req.Header.Set("api-key", "k")
	req.Header.Set("Content-Type", "application/json")
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("got %d; want the connection cut", res.StatusCode)
	}
	if _, ok := srv.Contact("ann@example.com"); !ok {
		t.Error("write not applied")
	}
}

func TestValidateOption(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Validate: true})
	tests := []struct {
		name, method, path string
		body               any
		want               int
		wantMsg            string
	}{
		{"valid create", "POST", "/v3/contacts", m{"email": "ann@example.com", "listIds": []int{1}}, 201, ""},
		{"list id not an integer", "POST", "/v3/contacts", m{"email": "bob@example.com", "listIds": []string{"x"}}, 400, "listIds"},
		{"attributes not an object", "PUT", "/v3/contacts/1", m{"attributes": []int{1}}, 400, "attributes"},
		{"limit above the maximum", "GET", "/v3/contacts?limit=5000", nil, 400, "limit"},
		{"import rows not objects", "POST", "/v3/contacts/import", m{"jsonBody": []int{1}, "listIds": []int{1}}, 400, "jsonBody"},
		{"email format", "POST", "/v3/contacts", m{"email": "two@@example.com"}, 400, "email"},
		{"not in the spec", "POST", "/v3/processes", m{}, 400, "no operation"},
	}
	for _, tt := range tests {
		r := b.doRaw(tt.method, tt.path, tt.body)
		if r.status != tt.want {
			t.Errorf("%s: status %d, want %d: %s", tt.name, r.status, tt.want, r.body)
			continue
		}
		if tt.want == 400 {
			e := r.errCode(t)
			if e.Code != CodeInvalidParameter || !strings.Contains(e.Message, tt.wantMsg) || strings.Contains(e.Message, "bob@") {
				t.Errorf("%s: error = %+v", tt.name, e)
			}
		}
	}
	st := b.srv.Stats()
	if st.Invalid != 6 || st.Contacts != 1 {
		t.Errorf("invalid %d contacts %d, want 6 1", st.Invalid, st.Contacts)
	}
}

func TestStatsAndReset(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{})
	b.mustStatus(b.do("POST", "/v3/contacts", m{"email": "ann@example.com"}), 201)
	b.mustStatus(b.do("GET", "/v3/contacts/ann%40example.com", nil), 200)
	b.mustStatus(b.do("GET", "/v3/contacts/nobody%40example.com", nil), 404)
	b.mustStatus(b.doRaw("PATCH", "/v3/contacts/1", nil), 405)

	r := b.send(b.raw, "GET", "/_stats", nil, nil)
	b.mustStatus(r, http.StatusOK)
	var raw map[string]json.RawMessage
	r.json(t, &raw)
	for _, k := range []string{"requests", "contacts_written", "duplicate_writes", "contacts", "by_route", "by_status", "invalid_requests", "refused", "dropped_responses"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("/_stats lacks %q: %s", k, r.body)
		}
	}
	var st Stats
	r.json(t, &st)
	wantRoutes := map[string]int64{"POST /v3/contacts": 1, "GET /v3/contacts/{identifier}": 2, "PATCH /v3/contacts/{identifier}": 1}
	wantStatus := map[string]int64{"201": 1, "200": 1, "404": 1, "405": 1}
	if st.Requests != 4 || st.ContactsWritten != 1 || st.Contacts != 1 ||
		!mapsEqual(st.ByRoute, wantRoutes) || !mapsEqual(st.ByStatus, wantStatus) {
		t.Errorf("stats = %+v", st)
	}
	if strings.Contains(string(r.body), "ann@") {
		t.Error("stats carry an e-mail address")
	}

	b.mustStatus(b.send(b.raw, "GET", "/_reset", nil, nil), http.StatusMethodNotAllowed)
	b.mustStatus(b.send(b.raw, "POST", "/_reset", nil, nil), http.StatusNoContent)
	if st := b.srv.Stats(); st.Requests != 0 || st.Contacts != 0 || len(st.ByRoute) != 0 {
		t.Errorf("after reset: %+v", st)
	}
	if _, ok := b.srv.Contact("ann@example.com"); ok {
		t.Error("contact survived reset")
	}
	var out struct{ ID int64 }
	r = b.do("POST", "/v3/contacts", m{"email": "ann@example.com"})
	r.json(t, &out)
	if out.ID != 1 {
		t.Errorf("ids not reset: %d", out.ID)
	}
}

func mapsEqual(a, b map[string]int64) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestConcurrentWrites(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{Validate: true})
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				email := "c" + string(rune('a'+w)) + "-" + string(rune('a'+i)) + "@example.com"
				res, err := b.sendErr(b.api, "POST", "/v3/contacts", m{"email": email, "updateEnabled": true}, map[string]string{"api-key": testKey})
				if err != nil || res.status != 201 {
					t.Errorf("create: %v %d", err, res.status)
					return
				}
			}
		}()
	}
	wg.Wait()
	if st := b.srv.Stats(); st.Contacts != 200 || st.ContactsWritten != 200 {
		t.Errorf("stats = %+v", st)
	}
}

func TestServe(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	addrc := make(chan string, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- Serve(ctx, "127.0.0.1:0", Options{APIKey: "k"}, func(addr string) { addrc <- addr })
	}()
	var addr string
	select {
	case addr = <-addrc:
	case err := <-errc:
		t.Fatalf("Serve: %v", err)
	}
	req, _ := http.NewRequest("GET", "http://"+addr+"/v3/contacts", nil)
	req.Header.Set("api-key", "k")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != 200 {
		t.Errorf("status = %d", res.StatusCode)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Errorf("Serve after cancel: %v", err)
	}

	if err := Serve(context.Background(), "127.0.0.1:0", Options{ErrorRate: 2}, nil); !errors.Is(err, ErrBadOptions) {
		t.Errorf("bad options: %v", err)
	}
}

func TestRegisterFlags(t *testing.T) {
	t.Parallel()
	var o Options
	fs := pflag.NewFlagSet("fake-brevo", pflag.ContinueOnError)
	RegisterFlags(fs, &o)
	if o.RateLimitPerSecond != DefaultRateLimitPerSecond {
		t.Errorf("default rate limit = %d", o.RateLimitPerSecond)
	}
	if o.ProcessDelay != DefaultProcessDelay {
		t.Errorf("default process delay = %s", o.ProcessDelay)
	}
	for _, name := range []string{"api-key", "latency", "error-rate", "rate-limit-rate", "rate-limit", "drop-response-rate", "refuse-email",
		"process-delay", "import-row-delay", "import-skip-rate", "import-fail-rate", "report-listen", "validate", "seed"} {
		if f := fs.Lookup(name); f == nil || f.Usage == "" {
			t.Errorf("flag --%s missing or without help", name)
		}
	}
	err := fs.Parse([]string{"--api-key=s", "--latency=50ms", "--error-rate=0.1", "--rate-limit-rate=0.2", "--rate-limit=0",
		"--drop-response-rate=0.3", "--refuse-email=a@example.com", "--refuse-email=b@example.com", "--process-delay=2s", "--validate", "--seed=9",
		"--import-row-delay=1ms", "--import-skip-rate=0.25", "--import-fail-rate=0.5", "--report-listen=127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	want := Options{APIKey: "s", Latency: 50 * time.Millisecond, ErrorRate: 0.1, RateLimitRate: 0.2, RateLimitPerSecond: 0,
		DropResponseRate: 0.3, RefuseEmails: []string{"a@example.com", "b@example.com"}, ProcessDelay: 2 * time.Second, Validate: true, Seed: 9}
	if o.APIKey != want.APIKey || o.Latency != want.Latency || o.ErrorRate != want.ErrorRate || o.RateLimitRate != want.RateLimitRate ||
		o.RateLimitPerSecond != 0 || o.DropResponseRate != want.DropResponseRate || !slices.Equal(o.RefuseEmails, want.RefuseEmails) ||
		o.ProcessDelay != want.ProcessDelay || !o.Validate || o.Seed != 9 ||
		o.ImportRowDelay != time.Millisecond || o.ImportSkipRate != 0.25 || o.ImportFailRate != 0.5 || o.ReportListen != "127.0.0.1:0" {
		t.Errorf("options = %+v", o)
	}
}

func TestOptionsCheck(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts Options
		ok   bool
	}{
		{"zero", Options{}, true},
		{"all faults", Options{ErrorRate: 1, RateLimitRate: 0.5, DropResponseRate: 0.1, Validate: true}, true},
		{"error rate above 1", Options{ErrorRate: 1.5}, false},
		{"negative drop rate", Options{DropResponseRate: -0.1}, false},
		{"negative latency", Options{Latency: -time.Second}, false},
		{"negative process delay", Options{ProcessDelay: -time.Second}, false},
		{"negative rate limit", Options{RateLimitPerSecond: -1}, false},
		{"empty refused email", Options{RefuseEmails: []string{" "}}, false},
		{"import faults", Options{ImportSkipRate: 0.5, ImportFailRate: 1, ImportRowDelay: time.Millisecond, ReportBaseURL: "http://127.0.0.1:1/r"}, true},
		{"import skip rate above 1", Options{ImportSkipRate: 2}, false},
		{"negative import fail rate", Options{ImportFailRate: -1}, false},
		{"negative import row delay", Options{ImportRowDelay: -time.Second}, false},
		{"relative report base URL", Options{ReportBaseURL: "/reports"}, false},
	}
	for _, tt := range tests {
		err := tt.opts.Check()
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrBadOptions)) {
			t.Errorf("%s: Check() = %v", tt.name, err)
		}
	}
}

func TestLatency(t *testing.T) {
	t.Parallel()
	srv := New(Options{Latency: 30 * time.Millisecond})
	req := httptest.NewRequest("GET", "/v3/contacts", nil)
	req.Header.Set("api-key", "k")
	start := time.Now()
	srv.ServeHTTP(httptest.NewRecorder(), req)
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Errorf("request took %v, want >= 30ms", d)
	}
}

// TestHoldWrite: a held write is handled after HoldWrite even though its
// client gave up, and the fake counts it abandoned; reads are never held.
func TestHoldWrite(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{HoldWriteRate: 1, HoldWrite: 300 * time.Millisecond})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.raw+"/v3/contacts",
		strings.NewReader(`{"email":"late@example.com","attributes":{"FIRSTNAME":"Late"}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("api-key", testKey)
	req.Header.Set("Content-Type", "application/json")
	if res, err := http.DefaultClient.Do(req); err == nil {
		res.Body.Close()
		t.Fatalf("the held write answered %d before its client's timeout", res.StatusCode)
	}
	if _, ok := b.srv.Contact("late@example.com"); ok {
		t.Fatal("the held write was applied before HoldWrite passed")
	}
	if st := b.srv.Stats(); st.HeldPending != 1 {
		t.Fatalf("pending held writes = %d, want 1", st.HeldPending)
	}
	deadline := time.Now().Add(5 * time.Second)
	for b.srv.Stats().HeldPending > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if _, ok := b.srv.Contact("late@example.com"); !ok {
		t.Fatal("the held write was not applied after its client gave up")
	}
	st := b.srv.Stats()
	if st.Held != 1 || st.HeldAbandoned != 1 || st.HeldPending != 0 {
		t.Fatalf("held %d, abandoned %d, pending %d; want 1, 1, 0", st.Held, st.HeldAbandoned, st.HeldPending)
	}
	b.mustStatus(b.do(http.MethodGet, "/v3/contacts/late@example.com", nil), http.StatusOK)
	if got := b.srv.Stats().Held; got != 1 {
		t.Fatalf("a read was held (held %d)", got)
	}
}
