package brevo_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/destination/destinationtest"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/testenv"
)

const apiKey = "xkeysib-TEST-0123456789abcdef"

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// sleepLog records the waits a destination asked for; with a fake clock it
// advances the clock by each wait, so time passes only through sleeps.
type sleepLog struct {
	mu    sync.Mutex
	clk   *clock.Fake
	waits []time.Duration
}

func (s *sleepLog) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	if s.clk != nil && d > 0 {
		s.clk.Advance(d)
	}
	return ctx.Err()
}

func (s *sleepLog) all() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.waits...)
}

// nonZero returns the waits longer than zero.
func (s *sleepLog) nonZero() []time.Duration {
	var out []time.Duration
	for _, d := range s.all() {
		if d > 0 {
			out = append(out, d)
		}
	}
	return out
}

type bundle struct {
	fake   *fakebrevo.Server
	proxy  *fakebrevo.Proxy
	url    string // base URL (…/v3)
	clock  *clock.Fake
	sleeps *sleepLog
	dest   *brevo.Destination
	params brevo.Params
}

// setup starts the fake Brevo behind the spec-validating proxy; every request
// the destination sends must conform to swagger.yaml or the test fails.
// The fake and the destination share a fake clock that only sleeps advance.
func setup(t *testing.T, opts fakebrevo.Options, mut ...func(*brevo.Params)) *bundle {
	t.Helper()
	b := &bundle{clock: clock.NewFake(t0)}
	b.sleeps = &sleepLog{clk: b.clock}
	if opts.APIKey == "" {
		opts.APIKey = apiKey
	}
	if opts.Clock == nil {
		opts.Clock = b.clock
	}
	if opts.Seed == 0 {
		opts.Seed = 7
	}
	b.fake = fakebrevo.New(testAccount(opts))
	b.startProxy(t, b.fake)
	b.params = brevo.Params{
		BaseURL:    b.url,
		APIKey:     apiKey,
		Mode:       brevo.ModeSingle,
		ListIDs:    []int64{2, 7},
		Clock:      b.clock,
		Sleep:      b.sleeps.sleep,
		MaxRetries: 3,
	}
	for _, m := range mut {
		m(&b.params)
	}
	b.dest = b.newDest(t, b.params)
	return b
}

func (b *bundle) startProxy(t *testing.T, next http.Handler) {
	t.Helper()
	proxy, err := fakebrevo.ValidatingProxy(next)
	if err != nil {
		t.Fatalf("ValidatingProxy: %v", err)
	}
	b.proxy = proxy
	srv := httptest.NewServer(proxy)
	b.url = srv.URL + fakebrevo.BasePath
	t.Cleanup(func() {
		srv.Close()
		for _, err := range proxy.Errors() {
			if errors.Is(err, fakebrevo.ErrInvalidResponse) {
				t.Logf("fake's response off spec (not this client's fault): %v", err)
				continue
			}
			t.Errorf("request does not conform to Brevo's API spec: %v", err)
		}
	})
}

func (b *bundle) newDest(t *testing.T, p brevo.Params) *brevo.Destination {
	t.Helper()
	d, err := brevo.New(p)
	if err != nil {
		t.Fatalf("brevo.New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func rec(i int, attrs map[string]any) destination.Record {
	r := destinationtest.Record(i)
	if attrs != nil {
		r.Data["attributes"] = attrs
	}
	return r
}

func recs(n int) []destination.Record {
	out := make([]destination.Record, n)
	for i := range out {
		out[i] = rec(i, nil)
	}
	return out
}

func byKey(t *testing.T, want []destination.Record, res []destination.Result) map[string]destination.Result {
	t.Helper()
	out := make(map[string]destination.Result, len(res))
	for _, r := range res {
		out[r.Key] = r
	}
	if len(out) != len(want) || len(res) != len(want) {
		t.Fatalf("%d results (%d keys) for %d records", len(res), len(out), len(want))
	}
	return out
}

func emailOf(r destination.Record) string { return r.Data["email"].(string) }

func TestAcceptance(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			destinationtest.Run(t, destinationtest.Harness{
				// Bulk imports are asynchronous: Write answers Accepted and
				// the suite settles the records through Outcomes.
				Async:  mode == brevo.ModeBulk,
				Storms: true,
				// A bulk import whose 202 was lost is read back only once
				// it ran, and the suite's fake clock runs it only when
				// asked: the lost-answer case runs on the single path.
				LostAnswers: mode == brevo.ModeSingle,
				WriteModes:  []destination.WriteMode{destination.Update, destination.Create, destination.Mirror},
				Changed: func(i int) destination.Record {
					r := destinationtest.Record(i)
					r.Key = fmt.Sprintf("%064x", 5000+i)
					r.Data["attributes"] = map[string]any{"FIRSTNAME": fmt.Sprintf("Changed%d", i), "AGE": float64(70 + i)}
					return r
				},
				Cleared: func(i int) destination.Record {
					r := destinationtest.Record(i)
					r.Key = fmt.Sprintf("%064x", 7000+i)
					r.Data["attributes"].(map[string]any)["FIRSTNAME"] = destinationtest.EmptyValue(i)
					return r
				},
				Setup: func(t *testing.T, cfg destinationtest.Config) destinationtest.Target {
					opts := fakebrevo.Options{APIKey: apiKey, Seed: 11}
					for _, r := range cfg.Faults.Refuse {
						opts.RefuseEmails = append(opts.RefuseEmails, emailOf(r))
					}
					switch {
					case cfg.Faults.Unavailable:
						opts.ErrorRate = 1
					case cfg.Faults.Flaky:
						opts.ErrorRate = 0.4
					}
					if cfg.Faults.FailProcess {
						opts.ImportFailRate = 1
					}
					// A fake clock from now (Verify's since is wall time)
					// that only Advance moves: imports finish when the
					// suite says so.
					clk := clock.NewFake(time.Now())
					opts.Clock = clk
					opts.ProcessDelay = 4 * time.Second
					b := &bundle{}
					fake := fakebrevo.New(testAccount(opts))
					faults, answered := transportFaults(cfg.Faults, fake)
					b.startProxy(t, faults)
					if cfg.Faults.Refused {
						b.url = "http://" + testenv.RefusedAddr(t) + fakebrevo.BasePath
					}
					key := apiKey
					if cfg.Faults.Unauthorized {
						key = "xkeysib-WRONG-fedcba9876543210"
					}
					d := b.newDest(t, brevo.Params{
						BaseURL: b.url, APIKey: key, Mode: mode, ListIDs: []int64{3},
						Sleep: cfg.Sleep, MaxRetries: cfg.MaxRetries, Clock: cfg.Clock, WriteMode: cfg.WriteMode,
					})
					// For a mirror, what the sync holds at Brevo is its list:
					// a removed contact stays in the account, off the list.
					held := func(c fakebrevo.Contact) bool {
						return cfg.WriteMode != destination.Mirror || slices.Contains(c.ListIDs, 3)
					}
					stored := func() int64 { return fake.Stats().Contacts }
					if cfg.WriteMode == destination.Mirror {
						stored = func() int64 {
							n := int64(0)
							for i := range 64 {
								if c, ok := fake.Contact(emailOf(destinationtest.Record(i))); ok && held(c) {
									n++
								}
							}
							return n
						}
					}
					return destinationtest.Target{
						Duplicates: func() int64 { return fake.Stats().DuplicateWrites },
						Put: func(r destination.Record) {
							body, _ := json.Marshal(map[string]any{"email": emailOf(r), "attributes": r.Data["attributes"], "updateEnabled": true})
							req := httptest.NewRequest(http.MethodPost, fakebrevo.BasePath+"/contacts", bytes.NewReader(body))
							req.Header.Set("api-key", apiKey)
							req.Header.Set("content-type", "application/json")
							rr := httptest.NewRecorder()
							fake.ServeHTTP(rr, req)
							if rr.Code >= 300 {
								t.Fatalf("seeding a contact: HTTP %d %s", rr.Code, rr.Body)
							}
						},
						Lookup: func(r destination.Record) (present, same bool) {
							c, ok := fake.Contact(emailOf(r))
							if !ok || !held(c) {
								return false, false
							}
							for k, v := range r.Data["attributes"].(map[string]any) {
								if !destinationtest.SameHeld(c.Attributes[strings.ToUpper(k)], v) {
									return true, false
								}
							}
							return true, true
						},
						Dest:         d,
						Secrets:      []string{apiKey, key},
						Requests:     func() int64 { return fake.Stats().Requests + answered.Load() },
						ServerErrors: func() int64 { return fake.Stats().ByStatus["503"] },
						Stored:       stored,
						Advance:      func() { clk.Advance(5 * time.Second) },
					}
				},
			})
		})
	}
}

func TestWriteSingle(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{})
	rs := recs(12)
	rs[0].Data["ext_id"] = "crm-42"
	res, err := b.dest.Write(t.Context(), rs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	got := byKey(t, rs, res)
	for _, r := range rs {
		c, ok := b.fake.Contact(emailOf(r))
		if !ok {
			t.Fatalf("contact %s not stored", r.Key[:8])
		}
		if res := got[r.Key]; res.Outcome != destination.Delivered || res.Ref != strconv.FormatInt(c.ID, 10) {
			t.Errorf("result %+v, want delivered with Ref = contact id %d", res, c.ID)
		}
		attrs := r.Data["attributes"].(map[string]any)
		if c.Attributes["FIRSTNAME"] != attrs["FIRSTNAME"] || c.Attributes["AGE"] != attrs["AGE"] {
			t.Errorf("contact attributes %v, want %v", c.Attributes, attrs)
		}
		if fmt.Sprint(c.ListIDs) != "[2 7]" {
			t.Errorf("contact lists %v, want [2 7]", c.ListIDs)
		}
	}
	if c, _ := b.fake.Contact(emailOf(rs[0])); c.ExtID != "crm-42" {
		t.Errorf("ext_id = %q, want crm-42", c.ExtID)
	}
	st := b.fake.Stats()
	if n := st.ByRoute["POST /v3/contacts"]; n != int64(len(rs)) {
		t.Errorf("%d POST /contacts, want one per record (%d)", n, len(rs))
	}

	// A second write updates (204, updateEnabled) instead of failing as a duplicate.
	res, err = b.dest.Write(t.Context(), rs[:2])
	if err != nil {
		t.Fatalf("second Write: %v", err)
	}
	for _, r := range res {
		if r.Outcome != destination.Delivered {
			t.Errorf("rewrite: %+v, want delivered", r)
		}
	}
	if n := b.fake.Stats().ByStatus["204"]; n != 2 {
		t.Errorf("%d updates (204), want 2", n)
	}
}

// settle polls Outcomes for every Accepted result of res, advancing the
// shared fake clock by 1 s between polls, and returns the final results.
func (b *bundle) settle(t *testing.T, recs []destination.Record, res []destination.Result) []destination.Result {
	t.Helper()
	return settleWith(t, b.dest, b.clock, recs, res)
}

// writeDelivered writes recs, settles what Brevo accepted, and fails the
// test unless every record ends delivered.
func (b *bundle) writeDelivered(t *testing.T, recs []destination.Record) {
	t.Helper()
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range byKey(t, recs, b.settle(t, recs, res)) {
		if r.Outcome != destination.Delivered {
			t.Errorf("%+v, want delivered", r)
		}
	}
}

func settleWith(t *testing.T, d *brevo.Destination, clk *clock.Fake, recs []destination.Record, res []destination.Result) []destination.Result {
	t.Helper()
	data := map[string]destination.Record{}
	for _, r := range recs {
		data[r.Key] = r
	}
	var out []destination.Result
	byRef := map[string][]destination.Record{}
	for _, r := range res {
		if r.Outcome == destination.Accepted {
			byRef[r.Ref] = append(byRef[r.Ref], data[r.Key])
			continue
		}
		out = append(out, r)
	}
	for ref, rs := range byRef {
		for poll := 0; ; poll++ {
			if poll == 1000 {
				t.Fatalf("process %s not done after %d polls", ref, poll)
			}
			got, done, err := d.Outcomes(t.Context(), ref, rs)
			if err != nil {
				t.Fatalf("Outcomes(%s): %v", ref, err)
			}
			if done {
				out = append(out, got...)
				break
			}
			clk.Advance(time.Second)
		}
	}
	return out
}

// TestWriteBulkIsAcceptedThenDelivered is issue 13's finding 2: the 202 of
// POST /contacts/import is not a delivery. Every record is Accepted under
// the process id, and only Outcomes, once the process completed, says
// Delivered.
func TestWriteBulkIsAcceptedThenDelivered(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: 3 * time.Second}, func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	rs := recs(300)
	res, err := b.dest.Write(t.Context(), rs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	for _, r := range byKey(t, rs, res) {
		if r.Outcome != destination.Accepted || r.Ref != "1" {
			t.Errorf("result %+v, want accepted with Ref = process id 1", r)
		}
	}
	if _, done, err := b.dest.Outcomes(t.Context(), "1", rs); done || err != nil {
		t.Fatalf("Outcomes of a queued import: done %v, %v; want not done", done, err)
	}
	got := byKey(t, rs, b.settle(t, rs, res))
	for _, r := range rs {
		if res := got[r.Key]; res.Outcome != destination.Delivered || res.Ref != "1" {
			t.Errorf("result %+v, want delivered with Ref = process id 1", res)
		}
		c, ok := b.fake.Contact(emailOf(r))
		if !ok || c.Attributes["FIRSTNAME"] != r.Data["attributes"].(map[string]any)["FIRSTNAME"] {
			t.Fatalf("contact %s stored = %v (%v)", r.Key[:8], ok, c.Attributes)
		}
	}
	st := b.fake.Stats()
	if n := st.ByRoute["POST /v3/contacts/import"]; n != 1 {
		t.Errorf("%d imports, want 1 for a page", n)
	}
	if n := st.ByRoute["POST /v3/contacts"]; n != 0 {
		t.Errorf("%d single writes, want 0", n)
	}
	if n := st.ByRoute["GET /v3/processes"]; n != 0 {
		t.Errorf("%d GET /processes: Outcomes must ask its own process only", n)
	}
}

// TestBulkImportSkippedRowsAreRejected is the example: 2,000 rows,
// 40 of which Brevo's import skips. The 40 are Rejected (retried on later
// runs), with a message that names the problem and no address; the page
// does not fail; the 1,960 others are Delivered.
func TestBulkImportSkippedRowsAreRejected(t *testing.T) {
	t.Parallel()
	rs := recs(2000)
	skipped := map[string]bool{}
	var refuse []string
	for i := 0; i < 2000; i += 50 {
		skipped[rs[i].Key] = true
		refuse = append(refuse, emailOf(rs[i]))
	}
	// One address differs in case from what the report lists.
	rs[0].Data["email"] = strings.ToUpper(emailOf(rs[0]))
	b := setup(t, fakebrevo.Options{RefuseEmails: refuse, ProcessDelay: 2 * time.Second},
		func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	res, err := b.dest.Write(t.Context(), rs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	got := byKey(t, rs, b.settle(t, rs, res))
	var delivered, rejected int
	for _, r := range rs {
		g := got[r.Key]
		switch {
		case skipped[r.Key]:
			rejected++
			if g.Outcome != destination.Rejected || !strings.Contains(g.Message, "invalid e-mail address") {
				t.Errorf("skipped row: %+v, want rejected naming the problem", g)
			}
			if strings.Contains(g.Message, "@") {
				t.Errorf("rejection message %q holds an address", g.Message)
			}
		default:
			delivered++
			if g.Outcome != destination.Delivered {
				t.Errorf("record %s: %+v, want delivered", r.Key[:8], g)
			}
		}
	}
	if delivered != 1960 || rejected != 40 {
		t.Errorf("%d delivered, %d rejected; want 1960, 40", delivered, rejected)
	}
	st := b.fake.Stats()
	if st.Contacts != 1960 || st.ImportRowsSkipped != 40 || st.ReportRequests != 1 {
		t.Errorf("stats %+v", st)
	}
	if n := st.ByRoute["POST /v3/contacts"]; n != 0 {
		t.Errorf("%d single writes, want 0 (a skipped row is no reason to resend the page)", n)
	}
}

// TestBulkFallbackOnRefusedImport: an import Brevo refuses whole (400) is
// resent one contact at a time, so only the bad record is rejected.
func TestBulkFallbackOnRefusedImport(t *testing.T) {
	t.Parallel()
	rs := recs(50)
	bad := rs[17]
	b := &bundle{clock: clock.NewFake(t0)}
	b.sleeps = &sleepLog{clk: b.clock}
	b.fake = fakebrevo.New(testAccount(fakebrevo.Options{APIKey: apiKey, Clock: b.clock, RefuseEmails: []string{emailOf(bad)}}))
	b.startProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v3/contacts/import" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write([]byte(`{"code":"invalid_parameter","message":"jsonBody is invalid"}`))
			return
		}
		b.fake.ServeHTTP(w, r)
	}))
	d := b.newDest(t, brevo.Params{BaseURL: b.url, APIKey: apiKey, Mode: brevo.ModeBulk, ListIDs: []int64{1},
		Clock: b.clock, Sleep: b.sleeps.sleep, Concurrency: 8})
	res, err := d.Write(t.Context(), rs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	got := byKey(t, rs, res)
	for _, r := range rs {
		g := got[r.Key]
		if r.Key == bad.Key {
			if g.Outcome != destination.Rejected || !strings.Contains(g.Message, "Invalid email address") {
				t.Errorf("bad record: %+v, want rejected with Brevo's message", g)
			}
			continue
		}
		if g.Outcome != destination.Delivered {
			t.Errorf("record %s: %+v, want delivered", r.Key[:8], g)
		}
	}
	if st := b.fake.Stats(); st.Contacts != 49 || st.ByRoute["POST /v3/contacts"] != 50 {
		t.Errorf("stats %+v", st)
	}
}

// TestBulkAcceptedWithoutProcessIDIsInDoubt: a 202 that names no process
// cannot be polled, so its records are left in doubt (Verify settles them).
func TestBulkAcceptedWithoutProcessIDIsInDoubt(t *testing.T) {
	t.Parallel()
	b := &bundle{clock: clock.NewFake(t0)}
	b.sleeps = &sleepLog{clk: b.clock}
	b.startProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusAccepted)
		_, _ = w.Write([]byte(`{}`))
	}))
	d := b.newDest(t, brevo.Params{BaseURL: b.url, APIKey: apiKey, Mode: brevo.ModeBulk, ListIDs: []int64{1},
		Clock: b.clock, Sleep: b.sleeps.sleep})
	res, err := d.Write(t.Context(), recs(3))
	if !errors.Is(err, brevo.ErrOutcomeUnknown) || failure.CodeOf(err) != failure.DestinationUnavailable || len(res) != 0 {
		t.Fatalf("Write = %v, %v; want no results and destination_unavailable wrapping ErrOutcomeUnknown", res, err)
	}
}

func TestInvalidEmailRejectedBeforeSending(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.Mode = mode })
			rs := recs(3)
			rs[1].Data["email"] = "not an email"
			rs[2].Data["attributes"] = "oops"
			res, err := b.dest.Write(t.Context(), rs)
			if err != nil {
				t.Fatalf("Write: %v", err)
			}
			got := byKey(t, rs, b.settle(t, rs, res))
			if got[rs[0].Key].Outcome != destination.Delivered {
				t.Errorf("good record: %+v", got[rs[0].Key])
			}
			for _, r := range rs[1:] {
				if g := got[r.Key]; g.Outcome != destination.Rejected || g.Message == "" {
					t.Errorf("malformed record: %+v, want rejected with a reason", g)
				}
			}
			if n := b.fake.Stats().ByRoute; n["POST /v3/contacts"]+n["POST /v3/contacts/import"] != 1 {
				t.Errorf("%v requests, want 1 write (malformed records are not sent)", n)
			}
		})
	}
}

func TestUnauthorizedFailsAtOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakebrevo.Options{APIKey: "xkeysib-OTHER"}, func(p *brevo.Params) { p.Mode = mode; p.Concurrency = 1 })
			_, err := b.dest.Write(t.Context(), recs(5))
			if failure.CodeOf(err) != failure.DestinationAuth {
				t.Fatalf("Write error %v, want %s", err, failure.DestinationAuth)
			}
			var apiErr *brevo.APIError
			if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnauthorized || apiErr.Code != "unauthorized" {
				t.Errorf("error chain %v, want a *brevo.APIError 401 unauthorized", err)
			}
			if n := b.fake.Stats().Requests; n != 1 {
				t.Errorf("%d requests, want 1 (no retry)", n)
			}
			if len(b.sleeps.nonZero()) != 0 {
				t.Errorf("slept %v, want no backoff", b.sleeps.nonZero())
			}
			if strings.Contains(err.Error(), apiKey) || strings.Contains(err.Error(), "@") {
				t.Errorf("error %q holds the API key or an e-mail address", err)
			}
		})
	}
}

func TestServerErrorRetriedThenSuccess(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ErrorRate: 0.5, Seed: 3}, func(p *brevo.Params) {
		p.MaxRetries, p.Concurrency, p.RateLimit = 30, 1, 1e9
	})
	rs := recs(6)
	res, err := b.dest.Write(t.Context(), rs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	for _, r := range byKey(t, rs, res) {
		if r.Outcome != destination.Delivered {
			t.Errorf("%+v, want delivered", r)
		}
	}
	st := b.fake.Stats()
	if st.ByStatus["503"] == 0 {
		t.Fatalf("the fake sent no 503 with this seed: the test proves nothing")
	}
	if st.Contacts != int64(len(rs)) || st.DuplicateWrites != 0 {
		t.Errorf("contacts %d, duplicates %d; want %d, 0", st.Contacts, st.DuplicateWrites, len(rs))
	}
	// One backoff per 503 (pacing waits a few µs at most at this
	// RateLimit; a backoff is a tenth of a second and more).
	var waits []time.Duration
	for _, d := range b.sleeps.nonZero() {
		if d > time.Millisecond {
			waits = append(waits, d)
		}
	}
	if int64(len(waits)) != st.ByStatus["503"] {
		t.Errorf("%d backoffs for %d 503s", len(waits), st.ByStatus["503"])
	}
	for _, d := range waits {
		if d > 30*time.Second {
			t.Errorf("backoff %s above the 30 s cap", d)
		}
	}
}

func TestServerErrorExhaustsRetries(t *testing.T) {
	t.Parallel()
	// A limit so high that pacing never waits: every wait is a backoff.
	b := setup(t, fakebrevo.Options{ErrorRate: 1}, func(p *brevo.Params) { p.RateLimit = 1e9 })
	_, err := b.dest.Write(t.Context(), recs(1))
	if failure.CodeOf(err) != failure.DestinationUnavailable {
		t.Fatalf("Write error %v, want %s", err, failure.DestinationUnavailable)
	}
	if n := b.fake.Stats().Requests; n != 4 {
		t.Errorf("%d requests, want 4 (1 + MaxRetries 3)", n)
	}
	waits := b.sleeps.nonZero()
	if len(waits) > 3 {
		t.Fatalf("slept %v, want at most 3 backoffs", waits)
	}
	for i, d := range waits {
		if d > time.Second<<i {
			t.Errorf("backoff %d = %s, want ≤ %s", i, d, time.Second<<i)
		}
	}
}

func TestRateLimit(t *testing.T) {
	t.Parallel()

	t.Run("429 waits for x-sib-ratelimit-reset", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakebrevo.Options{RateLimitPerSecond: 1})
		// Another client spends the one-second window first.
		other := b.newDest(t, brevo.Params{BaseURL: b.url, APIKey: apiKey, Clock: b.clock, Sleep: (&sleepLog{}).sleep})
		if _, err := other.Write(t.Context(), recs(1)); err != nil {
			t.Fatalf("other Write: %v", err)
		}
		rs := []destination.Record{rec(1, nil)}
		res, err := b.dest.Write(t.Context(), rs)
		if err != nil {
			t.Fatalf("Write: %v", err)
		}
		if byKey(t, rs, res)[rs[0].Key].Outcome != destination.Delivered {
			t.Errorf("%+v, want delivered", res)
		}
		st := b.fake.Stats()
		if st.ByStatus["429"] != 1 {
			t.Errorf("%d 429s, want 1", st.ByStatus["429"])
		}
		if got := b.sleeps.nonZero(); len(got) != 1 || got[0] != time.Second {
			t.Errorf("slept %v, want one 1s wait (the reset the fake sent)", got)
		}
	})

	t.Run("remaining 0 slows down before a 429", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakebrevo.Options{RateLimitPerSecond: 3}, func(p *brevo.Params) { p.RateLimit = 1000; p.Concurrency = 1 })
		rs := recs(10)
		if _, err := b.dest.Write(t.Context(), rs); err != nil {
			t.Fatalf("Write: %v", err)
		}
		st := b.fake.Stats()
		if st.ByStatus["429"] != 0 {
			t.Errorf("%d 429s, want 0: the client must wait for the reset when remaining hits 0", st.ByStatus["429"])
		}
		if st.Contacts != 10 {
			t.Errorf("%d contacts, want 10", st.Contacts)
		}
	})

	t.Run("persistent 429 is destination_rate_limited", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakebrevo.Options{RateLimitRate: 1})
		_, err := b.dest.Write(t.Context(), recs(1))
		if failure.CodeOf(err) != failure.DestinationRateLimited {
			t.Fatalf("Write error %v, want %s", err, failure.DestinationRateLimited)
		}
		if n := b.fake.Stats().Requests; n != 4 {
			t.Errorf("%d requests, want 4", n)
		}
		for _, d := range b.sleeps.nonZero() {
			if d != time.Second {
				t.Errorf("slept %v, want the fake's 1s reset each time", b.sleeps.nonZero())
				break
			}
		}
	})

	t.Run("client paces at the limit Brevo states when lower", func(t *testing.T) {
		t.Parallel()
		// Brevo limits this account to 4 a second (x-sib-ratelimit-limit:
		// 4) where rate_limit says 10: the client paces at 4, so another
		// process pacing alike shares a budget it can keep (at 10, 60 %
		// of the requests of three processes were answered 429).
		b := setup(t, fakebrevo.Options{RateLimitPerSecond: 4}, func(p *brevo.Params) { p.RateLimit = 10; p.Concurrency = 1 })
		if _, err := b.dest.Write(t.Context(), recs(9)); err != nil {
			t.Fatalf("Write: %v", err)
		}
		// The first answer tells the limit: from the third request on,
		// each waits at least a quarter of a second (at 10/s they went
		// 100ms apart until the window was spent).
		got := b.sleeps.nonZero()
		if len(got) < 8 || slices.ContainsFunc(got[1:], func(d time.Duration) bool { return d < 250*time.Millisecond }) {
			t.Errorf("waits %v, want 8 or more, none under 250ms after the first (paced at Brevo's 4/s, not 10/s)", got)
		}
		if st := b.fake.Stats(); st.ByStatus["429"] != 0 || st.Contacts != 9 {
			t.Errorf("%d 429s and %d contacts, want 0 and 9", st.ByStatus["429"], st.Contacts)
		}
	})

	t.Run("client paces at RateLimit", func(t *testing.T) {
		t.Parallel()
		b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.RateLimit = 5; p.Concurrency = 1 })
		if _, err := b.dest.Write(t.Context(), recs(11)); err != nil {
			t.Fatalf("Write: %v", err)
		}
		// Paced at apiclient.AccountHeadroom of 5/s: ten intervals.
		rate := 5 * apiclient.AccountHeadroom
		want := 10 * time.Duration(float64(time.Second)/rate)
		if elapsed := b.clock.Now().Sub(t0); elapsed < want-time.Millisecond || elapsed > want+time.Millisecond {
			t.Errorf("11 requests at 5/s took %s of (fake) time, want %s", elapsed, want)
		}
	})
}

func TestImportSplitUnder8MB(t *testing.T) {
	t.Parallel()
	var (
		mu    sync.Mutex
		sizes []int64
	)
	b := &bundle{clock: clock.NewFake(t0)}
	b.sleeps = &sleepLog{clk: b.clock}
	b.fake = fakebrevo.New(testAccount(fakebrevo.Options{APIKey: apiKey, Clock: b.clock}))
	b.startProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v3/contacts/import" {
			mu.Lock()
			sizes = append(sizes, r.ContentLength)
			mu.Unlock()
		}
		b.fake.ServeHTTP(w, r)
	}))
	d := b.newDest(t, brevo.Params{BaseURL: b.url, APIKey: apiKey, Mode: brevo.ModeBulk, ListIDs: []int64{1},
		Clock: b.clock, Sleep: b.sleeps.sleep})
	// 9 records of ~1 MB: ~9 MB, more than one body holds.
	big := strings.Repeat("x", 1_000_000)
	rs := make([]destination.Record, 9)
	for i := range rs {
		rs[i] = rec(i, map[string]any{"NOTES": big, "FIRSTNAME": fmt.Sprint(i)})
	}
	res, err := d.Write(t.Context(), rs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	refs := map[string]int{}
	for _, r := range byKey(t, rs, res) {
		if r.Outcome != destination.Accepted {
			t.Fatalf("%+v, want accepted", r)
		}
		refs[r.Ref]++
	}
	if len(sizes) != 2 {
		t.Fatalf("import bodies %v, want 2", sizes)
	}
	var total int
	for _, s := range sizes {
		if s <= 0 || s >= brevo.MaxImportBody {
			t.Errorf("import body of %d bytes, want under %d", s, brevo.MaxImportBody)
		}
	}
	for _, n := range refs {
		total += n
	}
	if len(refs) != 2 || total != len(rs) {
		t.Errorf("process refs %v, want two processes covering %d records", refs, len(rs))
	}
	if n := b.fake.Stats().Contacts; n != int64(len(rs)) {
		t.Errorf("%d contacts, want %d", n, len(rs))
	}
}

func TestVerifySingle(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{})
	rs := recs(6)
	// 0, 1: written as mapped. 2: written with other data. 3: written without
	// the lists. 4: written with AGE as a string. 5: never written.
	if _, err := b.dest.Write(t.Context(), rs[:2]); err != nil {
		t.Fatal(err)
	}
	changed := rec(2, map[string]any{"FIRSTNAME": "Someone else", "AGE": float64(22)})
	if _, err := b.dest.Write(t.Context(), []destination.Record{changed}); err != nil {
		t.Fatal(err)
	}
	noLists := b.newDest(t, brevo.Params{BaseURL: b.url, APIKey: apiKey, ListIDs: []int64{2}, Clock: b.clock, Sleep: b.sleeps.sleep})
	if _, err := noLists.Write(t.Context(), rs[3:4]); err != nil {
		t.Fatal(err)
	}
	asString := rec(4, map[string]any{"FIRSTNAME": "First4", "AGE": "24"})
	if _, err := b.dest.Write(t.Context(), []destination.Record{asString}); err != nil {
		t.Fatal(err)
	}
	before := b.fake.Stats().ContactsWritten

	landed, err := b.dest.Verify(t.Context(), rs, t0)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	want := map[int]bool{0: true, 1: true, 4: true}
	for i, r := range rs {
		ref, ok := landed[r.Key]
		if ok != want[i] {
			t.Errorf("record %d landed = %v, want %v", i, ok, want[i])
			continue
		}
		if ok {
			c, _ := b.fake.Contact(emailOf(r))
			if ref != strconv.FormatInt(c.ID, 10) {
				t.Errorf("record %d Ref = %q, want contact id %d", i, ref, c.ID)
			}
		}
	}
	st := b.fake.Stats()
	if st.ContactsWritten != before {
		t.Errorf("Verify wrote %d contacts", st.ContactsWritten-before)
	}
	if n := st.ByRoute["GET /v3/contacts/{identifier}"]; n != int64(len(rs)) {
		t.Errorf("%d GET /contacts/{identifier}, want %d", n, len(rs))
	}
}

func TestVerifyAfterKilledWrite(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	// The write lands, then the writer dies before it sees the answer: the
	// answer is held back until Write has returned, so the client cannot
	// pick the answer over the cancellation.
	returned := make(chan struct{})
	b := setup(t, fakebrevo.Options{AfterWrite: func(*http.Request) {
		cancel()
		select {
		case <-returned:
		case <-time.After(5 * time.Second):
		}
	}})
	rs := []destination.Record{rec(0, nil)}
	rs[0].Data["email"] = "Mixed.Case+tag@Example.com"
	_, err := b.dest.Write(ctx, rs)
	close(returned)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Write = %v, want the writer cancelled in the in-doubt window", err)
	}
	landed, err := b.dest.Verify(t.Context(), append(rs, rec(1, nil)), t0)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if _, ok := landed[rs[0].Key]; !ok || len(landed) != 1 {
		t.Errorf("landed = %v, want only the in-doubt record", landed)
	}
	if n := b.fake.Stats().DuplicateWrites; n != 0 {
		t.Errorf("%d duplicate writes", n)
	}
}

func TestVerifyBulk(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: 9 * time.Second}, func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	rs := recs(120)
	written := rs[:100]
	if _, err := b.dest.Write(t.Context(), written); err != nil {
		t.Fatalf("Write: %v", err)
	}
	// Change one landed contact behind oncesync's back.
	other := b.newDest(t, brevo.Params{BaseURL: b.url, APIKey: apiKey, Clock: b.clock, Sleep: b.sleeps.sleep, ListIDs: []int64{2, 7}})
	b.clock.Advance(10 * time.Second)
	changed := rec(5, map[string]any{"FIRSTNAME": "Changed", "AGE": float64(25)})
	if _, err := other.Write(t.Context(), []destination.Record{changed}); err != nil {
		t.Fatal(err)
	}
	// A second import still running when Verify starts.
	late := rs[100:110]
	if _, err := b.dest.Write(t.Context(), late); err != nil {
		t.Fatalf("Write: %v", err)
	}
	waitsBefore := len(b.sleeps.nonZero())

	landed, err := b.dest.Verify(t.Context(), rs, t0)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for i, r := range rs {
		want := i < 110 && i != 5
		if _, ok := landed[r.Key]; ok != want {
			t.Errorf("record %d landed = %v, want %v", i, ok, want)
		}
	}
	st := b.fake.Stats()
	if n := st.ByRoute["GET /v3/contacts/{identifier}"]; n > 20 {
		t.Errorf("%d GET /contacts/{identifier}: a large set must be verified by listing", n)
	}
	if n := st.ByRoute["GET /v3/processes"]; n != 1 {
		t.Errorf("%d GET /processes, want 1 (the running imports, noted once)", n)
	}
	if st.ByRoute["GET /v3/processes/{processId}"] == 0 {
		t.Errorf("no GET /processes/{processId}: Verify did not wait for the running import")
	}
	if st.ByRoute["GET /v3/contacts"] == 0 {
		t.Errorf("no GET /contacts")
	}
	if len(b.sleeps.nonZero()) == waitsBefore {
		t.Errorf("Verify did not wait for the running import")
	}
}

// TestVerifyBulkChangedBackWaitsForTheImports: rows whose values went B in
// an import still queued at Brevo (its 202 lost with the run that sent it),
// then back to A, the values Brevo holds: a read-back found A at once and
// took the rows for landed, and the import then wrote B over them for good.
// With EarlierInDoubt the running imports end first, the read finds B, and
// the rows are not landed (they are sent again, with A).
func TestVerifyBulkChangedBackWaitsForTheImports(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: 15 * time.Second}, func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	a := []destination.Record{rec(1, map[string]any{"FIRSTNAME": "A1"}), rec(2, map[string]any{"FIRSTNAME": "A2"})}
	if _, err := b.dest.Write(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(20 * time.Second) // A landed
	since := b.clock.Now()
	bs := []destination.Record{rec(1, map[string]any{"FIRSTNAME": "B1"}), rec(2, map[string]any{"FIRSTNAME": "B2"})}
	for i := range bs {
		bs[i].Key = fmt.Sprintf("%064d", i+1) // another value, another delivery key
	}
	if _, err := b.dest.Write(t.Context(), bs); err != nil { // queued; its answer "lost"
		t.Fatal(err)
	}
	for i := range a {
		a[i].EarlierInDoubt = true
	}
	landed, err := b.dest.Verify(t.Context(), a, since)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if len(landed) != 0 {
		t.Errorf("landed %v: the rows changed back were taken as landed while the import of B ran", landed)
	}
	if c, ok := b.fake.Contact("user1@example.com"); !ok || fmt.Sprint(c.Attributes["FIRSTNAME"]) != "B1" {
		t.Fatalf("contact 1 after Verify: %+v (%v); the import of B should have run", c, ok)
	}
}

// TestVerifyBulkChangedBackBehindALongImport: as
// TestVerifyBulkChangedBackWaitsForTheImports, with the import of B still
// queued when VerifyWait ends: the rows changed back are not taken as
// landed (they are written again, behind it), though Brevo still holds A.
func TestVerifyBulkChangedBackBehindALongImport(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: 150 * time.Second}, func(p *brevo.Params) {
		p.Mode = brevo.ModeBulk
		p.VerifyWait = 10 * time.Second
	})
	a := []destination.Record{rec(1, map[string]any{"FIRSTNAME": "A1"})}
	if _, err := b.dest.Write(t.Context(), a); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(160 * time.Second) // A landed
	since := b.clock.Now()
	bs := []destination.Record{rec(1, map[string]any{"FIRSTNAME": "B1"})}
	bs[0].Key = fmt.Sprintf("%064d", 1)
	if _, err := b.dest.Write(t.Context(), bs); err != nil { // queued for 150 s; its answer "lost"
		t.Fatal(err)
	}
	a[0].EarlierInDoubt = true
	landed, err := b.dest.Verify(t.Context(), a, since)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if len(landed) != 0 {
		t.Errorf("landed %v: a row changed back was taken as landed while the import of B was still queued", landed)
	}
	if c, ok := b.fake.Contact("user1@example.com"); !ok || fmt.Sprint(c.Attributes["FIRSTNAME"]) != "A1" {
		t.Fatalf("contact 1 after Verify: %+v (%v); the import of B should still be queued", c, ok)
	}
}

// foreignImport starts, on the fake behind b, an import of n rows by
// someone else (another sync, a person) and returns its process id.
func (b *bundle) foreignImport(t *testing.T, n int) string {
	t.Helper()
	rows := make([]string, n)
	for i := range rows {
		rows[i] = fmt.Sprintf(`{"email":"person%d@elsewhere.example.com"}`, i)
	}
	req, _ := http.NewRequest(http.MethodPost, b.url+"/contacts/import",
		strings.NewReader(`{"listIds":[99],"jsonBody":[`+strings.Join(rows, ",")+`]}`))
	req.Header.Set("api-key", apiKey)
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var out struct{ ProcessID int64 }
	if res.StatusCode != http.StatusAccepted || json.NewDecoder(res.Body).Decode(&out) != nil {
		t.Fatalf("foreign import: %d", res.StatusCode)
	}
	return strconv.FormatInt(out.ProcessID, 10)
}

// processStatus reads a process's status from the fake, around the client.
func (b *bundle) processStatus(t *testing.T, id string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, b.url+"/processes/"+id, nil)
	req.Header.Set("api-key", apiKey)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var p struct{ Status string }
	if err := json.NewDecoder(res.Body).Decode(&p); err != nil {
		t.Fatal(err)
	}
	return p.Status
}

// TestVerifyBulkForeignLongImportDoesNotFail is issue 13's finding 2 (its
// last part): another sync's (or a person's) long import is running while
// an in-doubt bulk page is verified. Verify does not fail: it waits at most
// VerifyWait, for the imports that were running when it started only, and
// answers with what landed.
func TestVerifyBulkForeignLongImportDoesNotFail(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: time.Second, ImportRowDelay: time.Second}, func(p *brevo.Params) {
		p.Mode = brevo.ModeBulk
		p.VerifyWait = 10 * time.Second
	})
	foreign := b.foreignImport(t, 5000) // runs for more than an hour
	// The page's import never reached Brevo: nothing of it landed.
	rs := recs(30)
	landed, err := b.dest.Verify(t.Context(), rs, t0)
	if err != nil {
		t.Fatalf("Verify with a foreign import running: %v", err)
	}
	if len(landed) != 0 {
		t.Errorf("landed = %v, want none", landed)
	}
	st := b.fake.Stats()
	if n := st.ByRoute["GET /v3/processes"]; n != 1 {
		t.Errorf("%d GET /processes, want 1", n)
	}
	if n := st.ByRoute["GET /v3/processes/{processId}"]; n != 5 {
		t.Errorf("%d polls of the running import, want 5 (10 s every 2 s)", n)
	}
	if s := b.processStatus(t, foreign); s != fakebrevo.ProcessQueued && s != fakebrevo.ProcessInProcess {
		t.Fatalf("the foreign import is %s: the test proves nothing", s)
	}
}

// TestVerifyBulkSeesItsImportLandBehindAForeignOne: the page's 202 was lost
// (its process id is unknown) and a foreign long import is running too.
// Verify returns as soon as the page's import completed and its records are
// seen, without waiting for the foreign one.
func TestVerifyBulkSeesItsImportLandBehindAForeignOne(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: time.Second, ImportRowDelay: 100 * time.Millisecond}, func(p *brevo.Params) {
		p.Mode = brevo.ModeBulk
	})
	foreign := b.foreignImport(t, 50_000) // ~83 minutes
	rs := recs(30)
	if _, err := b.dest.Write(t.Context(), rs); err != nil { // its answer is ignored: "lost"
		t.Fatal(err)
	}
	landed, err := b.dest.Verify(t.Context(), rs, t0)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for _, r := range rs {
		if _, ok := landed[r.Key]; !ok {
			t.Errorf("record %s not landed", r.Key[:8])
		}
	}
	if s := b.processStatus(t, foreign); s == fakebrevo.ProcessCompleted {
		t.Errorf("the foreign import completed: Verify waited for it")
	}
	if elapsed := b.clock.Now().Sub(t0); elapsed > time.Minute {
		t.Errorf("Verify took %s of (fake) time", elapsed)
	}
}

func TestVerifyErrorsHoldNoPersonalData(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ErrorRate: 1})
	rs := recs(2)
	_, err := b.dest.Verify(t.Context(), rs, t0)
	if failure.CodeOf(err) != failure.DestinationUnavailable {
		t.Fatalf("Verify error %v, want %s", err, failure.DestinationUnavailable)
	}
	for _, s := range []string{"@", "%40", apiKey} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q holds %q", err, s)
		}
	}
}

func TestNewRejectsBadParams(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		p    brevo.Params
	}{
		{"no key", brevo.Params{}},
		{"bad url", brevo.Params{APIKey: "k", BaseURL: "api.brevo.com/v3"}},
		{"bad mode", brevo.Params{APIKey: "k", Mode: "batch"}},
		{"bulk without lists", brevo.Params{APIKey: "k", Mode: brevo.ModeBulk}},
		{"negative list", brevo.Params{APIKey: "k", ListIDs: []int64{-1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := brevo.New(tt.p)
			if failure.CodeOf(err) != failure.InvalidSyncDefinition {
				t.Errorf("New error %v, want %s", err, failure.InvalidSyncDefinition)
			}
		})
	}
	d, err := brevo.New(brevo.Params{APIKey: "k"})
	if err != nil || d.Capability() != destination.CapVerify {
		t.Errorf("New with defaults = %v, %v; want a CapVerify destination", d, err)
	}
}

// TestExtIDReachesBrevoOnEveryPath is issue 13's finding 3: a mapped ext_id
// reaches Brevo on the bulk path too (as the import's EXT_ID attribute: its
// jsonBody items have no ext_id field), not only on the single path.
func TestExtIDReachesBrevoOnEveryPath(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakebrevo.Options{ProcessDelay: time.Second}, func(p *brevo.Params) { p.Mode = mode })
			rs := recs(3)
			for i, r := range rs {
				r.Data["ext_id"] = fmt.Sprintf("crm-%d", i)
			}
			b.writeDelivered(t, rs)
			for i, r := range rs {
				c, ok := b.fake.Contact(emailOf(r))
				if !ok || c.ExtID != fmt.Sprintf("crm-%d", i) {
					t.Errorf("contact %d: stored %v, ext_id %q; want crm-%d", i, ok, c.ExtID, i)
				}
				if _, ok := c.Attributes["EXT_ID"]; ok {
					t.Errorf("contact %d: EXT_ID stored as an ordinary attribute", i)
				}
			}
		})
	}
}

// TestVerifyComparesExtID: a contact that holds every mapped attribute but
// another ext_id has not landed.
func TestVerifyComparesExtID(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.Mode = mode })
			rs := recs(2)
			rs[0].Data["ext_id"] = "crm-0"
			rs[1].Data["ext_id"] = "crm-1"
			res, err := b.dest.Write(t.Context(), rs)
			if err != nil {
				t.Fatal(err)
			}
			b.settle(t, rs, res)
			other := rec(1, nil)
			other.Data["ext_id"] = "crm-other"
			landed, err := b.dest.Verify(t.Context(), []destination.Record{rs[0], other}, t0)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if _, ok := landed[rs[0].Key]; !ok {
				t.Errorf("the record with its ext_id is not reported landed")
			}
			if _, ok := landed[other.Key]; ok {
				t.Errorf("a record whose ext_id differs from the contact's is reported landed")
			}
		})
	}
}

// TestVerifyExtIDWithSpaces: a Brevo import keeps an EXT_ID without its
// outer spaces (the fake models it); the read-back of "crm-0 " must still
// find it landed, or an in-doubt page is written again.
func TestVerifyExtIDWithSpaces(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.Mode = mode })
			rs := recs(1)
			rs[0].Data["ext_id"] = " crm-0 "
			res, err := b.dest.Write(t.Context(), rs)
			if err != nil {
				t.Fatal(err)
			}
			b.settle(t, rs, res)
			landed, err := b.dest.Verify(t.Context(), rs, t0)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if _, ok := landed[rs[0].Key]; !ok {
				c, _ := b.fake.Contact(emailOf(rs[0]))
				t.Errorf("the record is not reported landed (the contact holds ext_id %q)", c.ExtID)
			}
		})
	}
}

// TestExtIDMappedTwiceIsRejected: ext_id and an EXT_ID attribute in one
// record are ambiguous; the record is refused before anything is sent.
func TestExtIDMappedTwiceIsRejected(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.Mode = mode })
			r := rec(0, map[string]any{"ext_id": "a", "FIRSTNAME": "A"})
			r.Data["ext_id"] = "b"
			res, err := b.dest.Write(t.Context(), []destination.Record{r})
			if err != nil || len(res) != 1 || res[0].Outcome != destination.Rejected || !strings.Contains(res[0].Message, "ext_id") {
				t.Fatalf("Write = %+v, %v; want rejected naming ext_id", res, err)
			}
			if n := b.fake.Stats().Requests; n != 0 {
				t.Errorf("%d requests, want 0", n)
			}
		})
	}
}

// TestClearedValueIsErased: a value cleared in the source ("" or null) is
// erased in Brevo on both paths, and Verify holds such a record landed only
// once Brevo has no value for the attribute.
func TestClearedValueIsErased(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		for _, empty := range []any{"", nil} {
			t.Run(fmt.Sprintf("%s %#v", mode, empty), func(t *testing.T) {
				t.Parallel()
				b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.Mode = mode })
				full := rec(0, map[string]any{"FIRSTNAME": "Ann", "AGE": float64(30)})
				res, err := b.dest.Write(t.Context(), []destination.Record{full})
				if err != nil {
					t.Fatal(err)
				}
				b.settle(t, []destination.Record{full}, res)
				cleared := rec(0, map[string]any{"FIRSTNAME": empty, "AGE": float64(30)})
				cleared.Key = "cleared"
				landed, err := b.dest.Verify(t.Context(), []destination.Record{cleared}, t0)
				if err != nil {
					t.Fatal(err)
				}
				if len(landed) != 0 {
					t.Fatal("a cleared value is reported landed while Brevo holds Ann")
				}
				res, err = b.dest.Write(t.Context(), []destination.Record{cleared})
				if err != nil {
					t.Fatal(err)
				}
				b.settle(t, []destination.Record{cleared}, res)
				c, _ := b.fake.Contact(emailOf(cleared))
				if v, ok := c.Attributes["FIRSTNAME"]; ok && v != nil && v != "" {
					t.Fatalf("Brevo still holds FIRSTNAME %#v after it was cleared", v)
				}
				if landed, err = b.dest.Verify(t.Context(), []destination.Record{cleared}, t0); err != nil || len(landed) != 1 {
					t.Fatalf("after the clear, Verify: %v %v", landed, err)
				}
			})
		}
	}
}

// TestClearedExtIDIsErased: an ext_id cleared in the source ("" or null) is
// erased in Brevo on both paths (single: an empty EXT_ID attribute; bulk: the
// import's empty EXT_ID column under emptyContactsAttributes), and Verify
// holds such a record landed only once the contact has no ext_id. Rows
// without one never share one: a second contact with none is created, not
// refused as holding another's.
func TestClearedExtIDIsErased(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{brevo.ModeSingle, brevo.ModeBulk} {
		for _, empty := range []any{"", nil} {
			t.Run(fmt.Sprintf("%s %#v", mode, empty), func(t *testing.T) {
				t.Parallel()
				b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.Mode = mode })
				full := rec(0, map[string]any{"FIRSTNAME": "Ann"})
				full.Data["ext_id"] = "X-1"
				b.writeDelivered(t, []destination.Record{full})
				cleared := rec(0, map[string]any{"FIRSTNAME": "Ann"})
				cleared.Key, cleared.Data["ext_id"] = "cleared", empty
				landed, err := b.dest.Verify(t.Context(), []destination.Record{cleared}, t0)
				if err != nil {
					t.Fatal(err)
				}
				if len(landed) != 0 {
					t.Fatal("a cleared ext_id is reported landed while Brevo holds X-1")
				}
				other := rec(1, map[string]any{"FIRSTNAME": "Bob"})
				other.Data["ext_id"] = empty
				both := []destination.Record{cleared, other}
				b.writeDelivered(t, both)
				for _, r := range both {
					c, ok := b.fake.Contact(emailOf(r))
					if !ok || c.ExtID != "" {
						t.Errorf("%s: stored %v with ext_id %q, want a contact with none", emailOf(r), ok, c.ExtID)
					}
				}
				if landed, err = b.dest.Verify(t.Context(), both, t0); err != nil || len(landed) != 2 {
					t.Fatalf("after the clear, Verify: %v %v", landed, err)
				}
			})
		}
	}
}

// testAccount gives the fake the attributes these tests write, unless they
// chose the account's attributes themselves: Brevo drops the others.
func testAccount(o fakebrevo.Options) fakebrevo.Options {
	if o.Attributes == nil {
		o.Attributes = fakebrevo.WithAttributes("AGE", "NOTES")
	}
	return o
}

// TestAddressChangeWithExtID: a row whose e-mail changed, sent with its
// ext_id, is refused by POST /contacts (the ext_id is another contact's:
// its old address). The single path then updates that contact by its
// ext_id, e-mail included: one contact, the new address, the new values,
// found by Verify. A new address that a third contact holds stays refused
// with Brevo's message.
func TestAddressChangeWithExtID(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.Mode = brevo.ModeSingle })
	ctx := t.Context()
	first := rec(0, map[string]any{"FIRSTNAME": "Ann"})
	first.Data["ext_id"] = "crm-7"
	other := rec(1, map[string]any{"FIRSTNAME": "Bob"})
	if res, err := b.dest.Write(ctx, []destination.Record{first, other}); err != nil || res[0].Outcome != destination.Delivered || res[1].Outcome != destination.Delivered {
		t.Fatalf("first write: %+v, %v", res, err)
	}
	moved := rec(2, map[string]any{"FIRSTNAME": "Anne"})
	moved.Data["ext_id"] = "crm-7"
	moved.Redelivery = true // the sync delivered this row before, at its old address
	res, err := b.dest.Write(ctx, []destination.Record{moved})
	if err != nil || len(res) != 1 || res[0].Outcome != destination.Delivered {
		t.Fatalf("the moved row: %+v, %v; want delivered", res, err)
	}
	c, ok := b.fake.Contact(emailOf(moved))
	if !ok || c.ExtID != "crm-7" || c.Attributes["FIRSTNAME"] != "Anne" {
		t.Fatalf("contact at the new address: %v %+v", ok, c)
	}
	if _, ok := b.fake.Contact(emailOf(first)); ok {
		t.Fatal("the old address is still a contact")
	}
	if st := b.fake.Stats(); st.Contacts != 2 {
		t.Fatalf("%d contacts, want 2", st.Contacts)
	}
	if landed, err := b.dest.Verify(ctx, []destination.Record{moved}, time.Time{}); err != nil || len(landed) != 1 {
		t.Fatalf("verify: %v, %d landed", err, len(landed))
	}

	taken := rec(1, map[string]any{"FIRSTNAME": "Anne"}) // Bob's address
	taken.Data["ext_id"] = "crm-7"
	taken.Redelivery = true
	res, err = b.dest.Write(ctx, []destination.Record{taken})
	if err != nil || len(res) != 1 || res[0].Outcome != destination.Rejected || !strings.Contains(res[0].Message, "email is already associated") {
		t.Fatalf("a new address another contact holds: %+v, %v; want rejected", res, err)
	}
	if c, _ := b.fake.Contact(emailOf(other)); c.Attributes["FIRSTNAME"] != "Bob" || c.ExtID != "" {
		t.Fatalf("the other contact changed: %+v", c)
	}
}

// TestUpdateFollowsAnAddressChangeByExtID: write_mode update looks contacts
// up by e-mail; a contact whose row's address changed is found by its ext_id
// instead of being skipped, and one no contact holds stays skipped.
func TestUpdateFollowsAnAddressChangeByExtID(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) {
		p.Mode = brevo.ModeSingle
		p.WriteMode = destination.Upsert
	})
	first := rec(0, map[string]any{"FIRSTNAME": "Ann"})
	first.Data["ext_id"] = "crm-7"
	if res, err := b.dest.Write(t.Context(), []destination.Record{first}); err != nil || res[0].Outcome != destination.Delivered {
		t.Fatalf("first write: %+v, %v", res, err)
	}
	u, err := brevo.New(brevo.Params{BaseURL: b.url, APIKey: apiKey, Mode: brevo.ModeSingle, ListIDs: []int64{2}, WriteMode: destination.Update, RateLimit: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { u.Close() })
	moved := rec(1, map[string]any{"FIRSTNAME": "Anne"})
	moved.Data["ext_id"] = "crm-7"
	moved.Redelivery = true
	nobody := rec(2, map[string]any{"FIRSTNAME": "Cy"})
	nobody.Data["ext_id"] = "crm-9"
	nobody.Redelivery = true
	res, err := u.Write(t.Context(), []destination.Record{moved, nobody})
	if err != nil {
		t.Fatal(err)
	}
	got := byKey(t, []destination.Record{moved, nobody}, res)
	if r := got[moved.Key]; r.Outcome != destination.Delivered || r.Skipped != "" {
		t.Fatalf("the moved row: %+v, want delivered", r)
	}
	if r := got[nobody.Key]; r.Skipped == "" {
		t.Fatalf("a row no contact holds: %+v, want skipped", r)
	}
	if c, ok := b.fake.Contact(emailOf(moved)); !ok || c.ExtID != "crm-7" || c.Attributes["FIRSTNAME"] != "Anne" {
		t.Fatalf("contact at the new address: %v %+v", ok, c)
	}
	if st := b.fake.Stats(); st.Contacts != 1 {
		t.Fatalf("%d contacts, want 1", st.Contacts)
	}
}

// TestFirstDeliveryNeverTakesAnExtIDOver: two syncs of one Brevo account
// whose rows share ext_ids (both map ext_id: id, each from its own table).
// The second sync's first write of id 8 meets the first sync's contact
// holding ext_id 8; read as an address change, it renamed that contact to
// its own address (the first sync's contact gone, its ledger saying
// delivered: a lost record). A record the sync never delivered is refused
// with Brevo's conflict instead, and the other contact keeps its address.
func TestFirstDeliveryNeverTakesAnExtIDOver(t *testing.T) {
	t.Parallel()
	for _, mode := range []destination.WriteMode{destination.Upsert, destination.Update} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.Mode = brevo.ModeSingle })
			ctx := t.Context()
			theirs := rec(0, map[string]any{"FIRSTNAME": "Pa"})
			theirs.Data["ext_id"] = "8"
			if res, err := b.dest.Write(ctx, []destination.Record{theirs}); err != nil || res[0].Outcome != destination.Delivered {
				t.Fatalf("the other sync's write: %+v, %v", res, err)
			}
			p := b.params
			p.WriteMode = mode
			ours := b.newDest(t, p)
			mine := rec(1, map[string]any{"FIRSTNAME": "C1"})
			mine.Data["ext_id"] = "8"
			res, err := ours.Write(ctx, []destination.Record{mine})
			if err != nil || len(res) != 1 || res[0].Outcome == destination.Delivered && res[0].Skipped == "" {
				t.Fatalf("a first delivery whose ext_id another contact holds: %+v, %v; want refused or skipped", res, err)
			}
			if c, ok := b.fake.Contact(emailOf(theirs)); !ok || c.ExtID != "8" || c.Attributes["FIRSTNAME"] != "Pa" {
				t.Fatalf("the other sync's contact: %v %+v; want it unchanged", ok, c)
			}
			if _, ok := b.fake.Contact(emailOf(mine)); ok {
				t.Fatal("the other sync's contact was moved to this record's address")
			}
		})
	}
}

// TestOneAddressTwiceOnAPageEndsWithTheLast: two records of one page whose
// addresses differ only in case are one contact to Brevo. On the single
// path they were sent side by side: whichever request landed last won,
// here the page's first record, and no later run changed it (an
// independent check, 2026-12-06). They now go in page order, as an import
// applies them.
func TestOneAddressTwiceOnAPageEndsWithTheLast(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.Concurrency = 4 })
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte("First")) {
			time.Sleep(200 * time.Millisecond) // the first record's request is the slow one
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		b.proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	p := b.params
	p.BaseURL = slow.URL + fakebrevo.BasePath
	d := b.newDest(t, p)
	first, second := rec(0, map[string]any{"FIRSTNAME": "First"}), rec(1, map[string]any{"FIRSTNAME": "Second"})
	first.Data["email"], second.Data["email"] = "Ann.Case@example.com", "ann.case@example.com"
	res, err := d.Write(context.Background(), []destination.Record{first, second, rec(2, nil)})
	if err != nil || len(res) != 3 || res[0].Outcome != destination.Delivered || res[1].Outcome != destination.Delivered {
		t.Fatalf("write: %+v, %v", res, err)
	}
	c, ok := b.fake.Contact("ann.case@example.com")
	if !ok || c.Attributes["FIRSTNAME"] != "Second" {
		t.Fatalf("contact %+v (found %v), want FIRSTNAME of the page's last record, Second", c.Attributes, ok)
	}
}

// TestRemovalAfterA500IsRetried: a removal takes a contact off the sync's
// lists, which done twice is done once; a 500 to it (which may follow an
// applied write) failed the whole run at its first answer, "each call was
// already retried" (an independent check, 2026-12-06). It is retried in-run.
func TestRemovalAfterA500IsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{}, func(p *brevo.Params) { p.WriteMode = destination.Mirror })
	r := rec(0, nil)
	if res, err := b.dest.Write(context.Background(), []destination.Record{r}); err != nil || res[0].Outcome != destination.Delivered {
		t.Fatalf("write: %+v, %v", res, err)
	}
	var failed atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method == http.MethodPut && failed.Add(1) == 1 {
			b.proxy.ServeHTTP(httptest.NewRecorder(), req) // applied, its answer lost
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte(`{"code":"internal_error","message":"Internal server error"}`))
			return
		}
		b.proxy.ServeHTTP(w, req)
	}))
	t.Cleanup(flaky.Close)
	p := b.params
	p.BaseURL, p.WriteMode = flaky.URL+fakebrevo.BasePath, destination.Mirror
	d := b.newDest(t, p)
	email := fmt.Sprint(r.Data["email"])
	res, err := d.Remove(context.Background(), []destination.Removal{{Key: "rm0", Handle: email}})
	if err != nil || len(res) != 1 || res[0].Outcome != destination.Delivered {
		t.Fatalf("remove after a 500: %+v, %v; want it retried and delivered", res, err)
	}
	if c, ok := b.fake.Contact(email); !ok || len(c.ListIDs) != 0 {
		t.Fatalf("contact %+v (found %v), want it off the lists", c, ok)
	}
}

// TestVerifyHeldBeforeUntouched: rows changed and changed back around a
// kill, more of them in doubt than are looked up one by one: the read-back
// lists the contacts changed since the write in doubt, which does not show
// a contact that write never reached. Each such record was taken for not
// there and sent again, a write of the values Brevo held (283 of 297 in an
// independent check, 2026-12-06). A HeldBefore record untouched since is
// there; one written over since, or not HeldBefore, is not.
func TestVerifyHeldBeforeUntouched(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{})
	rs := recs(30)
	if _, err := b.dest.Write(t.Context(), rs[:25]); err != nil { // 25 to 29 never reached Brevo
		t.Fatalf("Write: %v", err)
	}
	b.clock.Advance(time.Hour)
	since := b.clock.Now() // the write in doubt: it reached record 3 only
	changed := rec(3, map[string]any{"FIRSTNAME": "Other"})
	if _, err := b.dest.Write(t.Context(), []destination.Record{changed}); err != nil {
		t.Fatal(err)
	}
	b.clock.Advance(time.Minute)
	for i := range rs {
		rs[i].HeldBefore = i < 25 // 25 to 29: values never delivered before
	}
	landed, err := b.dest.Verify(t.Context(), rs, since)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for i, r := range rs {
		want := i < 25 && i != 3
		if _, ok := landed[r.Key]; ok != want {
			t.Errorf("record %d landed = %v, want %v", i, ok, want)
		}
	}
	if n := b.fake.Stats().ByRoute["GET /v3/contacts/{identifier}"]; n > 5 {
		t.Errorf("%d contacts looked up one by one, want at most the 5 not held before", n)
	}
}
