package shopify_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/fakeshopify"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/shopify"
)

const token = "shpat_0123456789abcdef_secret"

// env is a fake shop and a source reading it, on one fake clock: the
// source's waits advance it, so no test sleeps.
type env struct {
	clock *clock.Fake
	fake  *fakeshopify.Server
	srv   *httptest.Server
	src   *shopify.Source

	mu    sync.Mutex
	slept []time.Duration
}

func newEnv(t *testing.T, o fakeshopify.Options, p shopify.Params) *env {
	t.Helper()
	e := &env{clock: clock.NewFake(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC))}
	o.Token, o.Clock = token, e.clock
	e.fake = fakeshopify.New(o)
	e.srv = httptest.NewServer(e.fake)
	t.Cleanup(e.srv.Close)
	p.ShopURL, p.Token, p.Clock = e.srv.URL, token, e.clock
	p.Sleep = func(ctx context.Context, d time.Duration) error {
		e.mu.Lock()
		e.slept = append(e.slept, d)
		e.mu.Unlock()
		e.clock.Advance(d)
		return ctx.Err()
	}
	if p.Backoff == nil {
		p.Backoff = func(attempt int) time.Duration { return time.Duration(attempt+1) * time.Second }
	}
	src, err := shopify.New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = src.Close() })
	e.src = src
	return e
}

func (e *env) sleeps() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.slept)
}

// readAll reads a pass from cursor with pages of size and returns its
// records and the next pass's cursor.
func (e *env) readAll(t *testing.T, cursor string, size int) ([]source.Record, string) {
	t.Helper()
	var out []source.Record
	for range 10000 {
		p, err := e.src.ReadPage(context.Background(), cursor, size)
		if err != nil {
			t.Fatalf("ReadPage: %v", err)
		}
		out = append(out, p.Records...)
		cursor = p.Next
		if p.End {
			return out, cursor
		}
	}
	t.Fatal("no End")
	return nil, ""
}

func ids(recs []source.Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = r.Fields["id"].(string)
	}
	return out
}

func TestRecordFields(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{})
	e.fake.Put(fakeshopify.Customer{ID: 6_123_456_789_012, Email: "ada@example.com", FirstName: "Ada", LastName: "Lovelace",
		Phone: "+15550001", Tags: []string{"vip", "newsletter"}, Note: "n", VerifiedEmail: true, NumberOfOrders: 3},
		fakeshopify.Customer{ID: 5, Email: ""})
	recs, _ := e.readAll(t, "", 250)
	if len(recs) != 2 {
		t.Fatalf("%d records", len(recs))
	}
	// Sorted by updatedAt then id: both were stamped at the same instant.
	got := recs[1].Fields
	want := map[string]any{"id": "6123456789012", "email": "ada@example.com", "firstName": "Ada", "lastName": "Lovelace",
		"phone": "+15550001", "note": "n", "state": "ENABLED", "tags": "vip, newsletter", "verifiedEmail": true,
		"createdAt": "2026-12-01T08:00:00Z", "updatedAt": "2026-12-01T08:00:00Z"}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s = %#v, want %#v", k, got[k], w)
		}
	}
	if n := got["numberOfOrders"]; n == nil || n.(interface{ String() string }).String() != "3" {
		t.Errorf("numberOfOrders = %#v", n)
	}
	if recs[0].Fields["email"] != nil || recs[0].Fields["firstName"] != nil {
		t.Errorf("a customer without e-mail or name: %#v; want nils", recs[0].Fields)
	}
}

// TestThrottleWaitsForTheBucket: a short bucket is waited out by the time
// its restore rate needs, first after a THROTTLED answer, then before the
// next request from the throttleStatus the last answer carried.
func TestThrottleWaitsForTheBucket(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{})
	e.fake.Seed(300)
	e.fake.SetBucket(1000, 50, 100) // 100 points left
	p, err := e.src.ReadPage(context.Background(), "", 250)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Records) != 250 {
		t.Fatalf("%d records", len(p.Records))
	}
	// 250 customers of 3 points and 2 for the connection: 752. The first
	// request was THROTTLED with 100 available, restored at 50/s.
	if got, want := e.sleeps(), []time.Duration{13040 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	if st := e.fake.Stats(); st.Throttled != 1 {
		t.Fatalf("throttled %d times, want 1", st.Throttled)
	}
	// The bucket is now empty (752 charged, nothing refunded): the source
	// waits before asking, and is not throttled again.
	p, err = e.src.ReadPage(context.Background(), p.Next, 250)
	if err != nil || len(p.Records) != 50 || !p.End {
		t.Fatalf("second page: %d records, end %v, %v", len(p.Records), p.End, err)
	}
	if got, want := e.sleeps(), []time.Duration{13040 * time.Millisecond, 15040 * time.Millisecond}; !slices.Equal(got, want) {
		t.Fatalf("waits %v, want %v", got, want)
	}
	if st := e.fake.Stats(); st.Throttled != 1 {
		t.Fatalf("throttled %d times, want 1", st.Throttled)
	}
	// The refund: 50 customers cost 152 of the 752 asked, so 600 are back
	// and a small page needs no wait.
	if _, err := e.src.ReadPage(context.Background(), "", 10); err != nil {
		t.Fatal(err)
	}
	if n := len(e.sleeps()); n != 2 {
		t.Fatalf("a page the bucket covers waited: %v", e.sleeps())
	}
}

func TestThrottledForeverFails(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{})
	e.fake.Seed(3)
	for range 30 {
		e.fake.Inject(fakeshopify.Fault{Throttle: true})
	}
	_, err := e.src.ReadPage(context.Background(), "", 10)
	if !errors.Is(err, source.ErrUnavailable) || !strings.Contains(err.Error(), "THROTTLED") {
		t.Fatalf("err = %v; want source unavailable after THROTTLED answers", err)
	}
}

func Test429WaitsRetryAfter(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{})
	e.fake.Seed(5)
	e.fake.Inject(fakeshopify.Fault{Status: 429, RetryAfter: "2.5"})
	recs, _ := e.readAll(t, "", 10)
	if len(recs) != 5 {
		t.Fatalf("%d records", len(recs))
	}
	if got := e.sleeps(); !slices.Equal(got, []time.Duration{2500 * time.Millisecond}) {
		t.Fatalf("waits %v, want the Retry-After 2.5s", got)
	}
}

func Test5xxAndDropsRetried(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{})
	e.fake.Seed(5)
	e.fake.Inject(fakeshopify.Fault{Status: 503}, fakeshopify.Fault{Drop: true}, fakeshopify.Fault{Status: 500}, fakeshopify.Fault{Cut: true})
	recs, _ := e.readAll(t, "", 10)
	if len(recs) != 5 {
		t.Fatalf("%d records", len(recs))
	}
	if st := e.fake.Stats(); st.Dropped != 2 || st.CostCharged != 2*(2+5*3) {
		t.Fatalf("dropped %d, cost charged %d: want the cut answer served and charged", st.Dropped, st.CostCharged)
	}
	if got, want := e.sleeps(), []time.Duration{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second}; !slices.Equal(got, want) {
		t.Fatalf("backoffs %v, want %v", got, want)
	}
}

func Test5xxStormFails(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{MaxRetries: 2})
	e.fake.Seed(5)
	e.fake.Inject(fakeshopify.Fault{Status: 502}, fakeshopify.Fault{Status: 502}, fakeshopify.Fault{Status: 502})
	_, err := e.src.ReadPage(context.Background(), "", 10)
	if !errors.Is(err, source.ErrUnavailable) || errors.Is(err, source.ErrInvalid) {
		t.Fatalf("err = %v; want source unavailable", err)
	}
	if strings.Contains(err.Error(), "destination") {
		t.Fatalf("a source error speaks of a destination: %v", err)
	}
}

// TestBadTokenIsAuth: a refused token is source.ErrAuth, and no error
// shows the token.
func TestBadTokenIsAuth(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{})
	e.fake.Seed(3)
	wrong := "shpat_wrong_token_value_42"
	src, err := shopify.New(shopify.Params{ShopURL: e.srv.URL, Token: wrong, Clock: e.clock})
	if err != nil {
		t.Fatal(err)
	}
	_, err = src.ReadPage(context.Background(), "", 10)
	if !errors.Is(err, source.ErrAuth) {
		t.Fatalf("err = %v; want source.ErrAuth", err)
	}
	if strings.Contains(err.Error(), wrong) {
		t.Fatalf("the token is in the error: %v", err)
	}
	if _, err := src.ReadIdentities(context.Background(), "id", []string{"1"}); !errors.Is(err, source.ErrAuth) {
		t.Fatalf("ReadIdentities: %v; want source.ErrAuth", err)
	}
	if _, err := src.Snapshot(context.Background()); !errors.Is(err, source.ErrAuth) {
		t.Fatalf("Snapshot: %v; want source.ErrAuth", err)
	}
}

// TestTokenNeverInErrors: a server that echoes the token in its answers
// (bodies, GraphQL messages) does not get it into the source's errors.
func TestTokenNeverInErrors(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
	}{
		{200, `{"errors":[{"message":"bad token ` + token + `","extensions":{"code":"undefinedField"}}]}`},
		{200, `{"errors":[{"message":"denied ` + token + ` for a@b.example.com","extensions":{"code":"ACCESS_DENIED"}}]}`},
		{500, `{"errors":"` + token + `"}`},
		{401, `{"errors":"` + token + `"}`},
		{200, `not json ` + token},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(tc.status)
			_, _ = w.Write([]byte(tc.body))
		}))
		src, err := shopify.New(shopify.Params{ShopURL: srv.URL, Token: token, MaxRetries: -1})
		if err != nil {
			t.Fatal(err)
		}
		_, err = src.ReadPage(context.Background(), "", 10)
		srv.Close()
		if err == nil {
			t.Fatalf("%d %s: no error", tc.status, tc.body)
		}
		if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "a@b.example.com") {
			t.Fatalf("%d: the error shows the token or an e-mail: %v", tc.status, err)
		}
	}
}

func TestGraphQLErrorsMapped(t *testing.T) {
	for _, tc := range []struct {
		body string
		want error
	}{
		{`{"errors":[{"message":"Field 'x' doesn't exist on type 'Customer'","extensions":{"code":"undefinedField"}}]}`, source.ErrInvalid},
		{`{"errors":[{"message":"Access denied for customers field.","extensions":{"code":"ACCESS_DENIED"}}]}`, source.ErrAuth},
		{`{"errors":[{"message":"Internal error.","extensions":{"code":"INTERNAL_SERVER_ERROR"}}]}`, source.ErrUnavailable},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte(tc.body)) }))
		src, err := shopify.New(shopify.Params{ShopURL: srv.URL, Token: token})
		if err != nil {
			t.Fatal(err)
		}
		_, err = src.ReadPage(context.Background(), "", 10)
		srv.Close()
		if !errors.Is(err, tc.want) {
			t.Fatalf("%s: %v; want %v", tc.body, err, tc.want)
		}
	}
}

// TestRedirectNotFollowed: a shop answering 301 to another origin: the
// other origin never gets a request (nor the token).
func TestRedirectNotFollowed(t *testing.T) {
	var got int
	var mu sync.Mutex
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got++
		mu.Unlock()
	}))
	defer other.Close()
	e := newEnv(t, fakeshopify.Options{RedirectTo: other.URL}, shopify.Params{})
	_, err := e.src.ReadPage(context.Background(), "", 10)
	if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "redirect") || !strings.Contains(err.Error(), "set the source's shop_url to the address it moved to") {
		t.Fatalf("err = %v; want a refused redirect", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if got != 0 {
		t.Fatalf("the redirect was followed: %d requests at the other origin", got)
	}
}

func TestMaxRecordBytes(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{MaxRecordBytes: 400})
	e.fake.Put(fakeshopify.Customer{ID: 1, Email: "a@example.com"}, fakeshopify.Customer{ID: 2, Email: "b@example.com", Note: strings.Repeat("x", 500)})
	_, err := e.src.ReadPage(context.Background(), "", 10)
	if !errors.Is(err, source.ErrInvalid) || !strings.Contains(err.Error(), "max_record_bytes") {
		t.Fatalf("err = %v; want the record refused for its size", err)
	}
	if strings.Contains(err.Error(), "xxxx") || strings.Contains(err.Error(), "@example.com") {
		t.Fatalf("the error shows the record: %v", err)
	}
}

// TestIncrementalRuns: a pass reads every customer; the next reads those
// changed since, each once, including changes in the very second the
// previous pass ended at, and never an unchanged one.
func TestIncrementalRuns(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{Lookback: time.Minute})
	seeded := e.fake.Seed(30)
	id := func(i int) int64 { return seeded[i].ID }
	recs, next := e.readAll(t, "", 7)
	if len(recs) != 30 {
		t.Fatalf("first pass: %d records", len(recs))
	}
	// Nothing changed: nothing read.
	recs, next2 := e.readAll(t, next, 7)
	if len(recs) != 0 {
		t.Fatalf("second pass without changes read %v", ids(recs))
	}
	if next2 != next {
		t.Fatalf("a pass without changes moved the cursor")
	}
	// Changes in the same second the first pass ended at (it read all 30
	// at 08:00:00): one of them again, and a new customer.
	e.fake.Update(id(4), func(c *fakeshopify.Customer) { c.FirstName = "Changed" })
	added := e.fake.Put(fakeshopify.Customer{Email: "new@example.com"})[0]
	recs, next = e.readAll(t, next, 7)
	if got := ids(recs); !slices.Equal(got, []string{itoa(id(4)), itoa(added.ID)}) {
		t.Fatalf("third pass read %v; want the changed and the added customer", got)
	}
	if recs[0].Fields["firstName"] != "Changed" {
		t.Fatalf("changed customer read as %v", recs[0].Fields["firstName"])
	}
	// An hour later: two changes.
	e.clock.Advance(time.Hour)
	e.fake.Update(id(17), func(c *fakeshopify.Customer) { c.LastName = "Later" })
	e.fake.Update(id(2), func(c *fakeshopify.Customer) { c.LastName = "Later" })
	recs, next = e.readAll(t, next, 7)
	if got := ids(recs); !slices.Equal(got, []string{itoa(id(2)), itoa(id(17))}) {
		t.Fatalf("fourth pass read %v; want customers 2 and 17", got)
	}
	recs, _ = e.readAll(t, next, 7)
	if len(recs) != 0 {
		t.Fatalf("fifth pass read %v", ids(recs))
	}
	// It asked only for customers updated from the last instant read (less
	// the look-back for Shopify's search index).
	st := e.fake.Stats()
	if last := st.LastQueries[len(st.LastQueries)-1]; last != "updated_at:>='2026-12-01T08:59:00Z'" {
		t.Fatalf("last search query %q", last)
	}
}

// TestChangedDuringAPass: a customer updated while a pass reads moves to
// the end of the UPDATED_AT order and is read there (again, if the pass
// had read it already), with its new values.
func TestChangedDuringAPass(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{})
	seeded := e.fake.Seed(20)
	p, err := e.src.ReadPage(context.Background(), "", 10)
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Advance(time.Minute)
	e.fake.Update(seeded[3].ID, func(c *fakeshopify.Customer) { c.FirstName = "Read twice" }) // already read
	e.fake.Update(seeded[15].ID, func(c *fakeshopify.Customer) { c.FirstName = "Read once" }) // not yet
	rest, _ := e.readAll(t, p.Next, 10)
	all := append(p.Records, rest...)
	count := map[string]int{}
	for _, r := range all {
		count[r.Fields["id"].(string)]++
	}
	if len(count) != 20 || count[itoa(seeded[3].ID)] != 2 || count[itoa(seeded[15].ID)] != 1 || len(all) != 21 {
		t.Fatalf("read %d records of %d customers: %v", len(all), len(count), count)
	}
	last2 := all[len(all)-2:]
	if last2[0].Fields["firstName"] != "Read twice" || last2[1].Fields["firstName"] != "Read once" {
		t.Fatalf("the pass ends with %v, %v", last2[0].Fields["firstName"], last2[1].Fields["firstName"])
	}
}

// TestManyCustomersAtTheBoundary: more customers share the last instant
// than a cursor remembers (64): the next pass reads the others again
// rather than miss one, and once the instant is out of the look-back
// window (a minute here) nothing is read.
func TestManyCustomersAtTheBoundary(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{Lookback: time.Minute})
	e.fake.Seed(100)
	recs, next := e.readAll(t, "", 30)
	if len(recs) != 100 {
		t.Fatal(len(recs))
	}
	recs, next = e.readAll(t, next, 30)
	if len(recs) != 36 {
		t.Fatalf("%d records read again; want the 36 the cursor could not remember", len(recs))
	}
	again, next := e.readAll(t, next, 30)
	if !slices.Equal(ids(again), ids(recs)) {
		t.Fatalf("third pass read %d records; want the same 36 (the cursor keeps the newest read)", len(again))
	}
	e.clock.Advance(61 * time.Second)
	e.fake.Put(fakeshopify.Customer{Email: "x@example.com"})
	recs, next = e.readAll(t, next, 30)
	if len(recs) != 37 {
		t.Fatalf("%d records after one was added a minute later, want 37", len(recs))
	}
	if recs, _ = e.readAll(t, next, 30); len(recs) != 0 {
		t.Fatalf("%d records without changes", len(recs))
	}
}

// TestLateIndexedCustomerIsNotLost: Shopify's search index follows writes
// with a delay that differs between customers and that Shopify does not
// bound: a customer updated before the last one a pass read, but indexed
// after the pass, is read by a later pass, once, if it was indexed within
// the look-back. A one-minute look-back lost one indexed three minutes late
// (an independent check, 2026-12-04); cursor_lookback is 15m by default.
func TestLateIndexedCustomerIsNotLost(t *testing.T) {
	for _, tt := range []struct {
		name      string
		lookback  time.Duration
		before    time.Duration // from the late customer's update to the next one's
		indexedIn time.Duration // from the late customer's update to its indexing
		wantRead  bool
	}{
		{"indexed 20 s late", 0, 5 * time.Second, 20 * time.Second, true},
		{"indexed 3 min late", 0, 70 * time.Second, 3 * time.Minute, true},
		{"indexed 3 min late, one-minute look-back", time.Minute, 70 * time.Second, 3 * time.Minute, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, fakeshopify.Options{}, shopify.Params{Lookback: tt.lookback})
			seeded := e.fake.Seed(10)
			_, next := e.readAll(t, "", 4)
			e.clock.Advance(10 * time.Minute)
			late := seeded[3].ID
			e.fake.Update(late, func(c *fakeshopify.Customer) { c.FirstName = "Indexed late" })
			e.fake.DelayIndex(late, e.clock.Now().Add(tt.indexedIn))
			e.clock.Advance(tt.before)
			e.fake.Update(seeded[7].ID, func(c *fakeshopify.Customer) { c.FirstName = "Indexed at once" })
			recs, next := e.readAll(t, next, 4)
			if got := ids(recs); !slices.Equal(got, []string{itoa(seeded[7].ID)}) {
				t.Fatalf("second pass read %v; want only the customer already indexed", got)
			}
			e.clock.Advance(tt.indexedIn) // now indexed
			recs, next = e.readAll(t, next, 4)
			got := ids(recs)
			if read := slices.Equal(got, []string{itoa(late)}) && recs[0].Fields["firstName"] == "Indexed late"; read != tt.wantRead {
				t.Fatalf("third pass read %v; want the late-indexed customer: %v", got, tt.wantRead)
			}
			if recs, _ = e.readAll(t, next, 4); len(recs) != 0 {
				t.Fatalf("fourth pass read %v", ids(recs))
			}
		})
	}
}

// TestUpdatedInThePassBelowItsCursor: a customer updated while a pass reads
// customers of that very second, with an id below the cursor's, sorts
// before the cursor: the pass does not read it, and a next pass starting
// after the last customer read (cursor_lookback 0, or a pass longer than
// the look-back) never did, a lost update (an independent check,
// 2026-12-06). The next pass starts no later than this one began.
func TestUpdatedInThePassBelowItsCursor(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{Lookback: -1})
	seeded := e.fake.Seed(20)
	_, next := e.readAll(t, "", 4)
	e.clock.Advance(10 * time.Minute)
	for _, c := range seeded[10:] {
		e.fake.Update(c.ID, func(c *fakeshopify.Customer) { c.LastName = "Bulk edit" })
	}
	p, err := e.src.ReadPage(context.Background(), next, 4)
	if err != nil {
		t.Fatal(err)
	}
	// In the same second: below the cursor, which is among the bulk edit.
	q := seeded[0].ID
	e.fake.Update(q, func(c *fakeshopify.Customer) { c.FirstName = "Updated below the cursor" })
	e.clock.Advance(time.Second)
	e.fake.Update(seeded[1].ID, func(c *fakeshopify.Customer) { c.FirstName = "Updated a second later" })
	rest, next := e.readAll(t, p.Next, 4)
	if got := ids(append(p.Records, rest...)); slices.Contains(got, itoa(q)) {
		t.Fatalf("the pass read %v, the customer below its cursor too: the test proves nothing", got)
	}
	recs, next := e.readAll(t, next, 4)
	var read bool
	for _, r := range recs {
		if r.Fields["id"] == itoa(q) {
			read = r.Fields["firstName"] == "Updated below the cursor"
		}
	}
	if !read {
		t.Fatalf("the next pass read %v, not the customer updated below the cursor", ids(recs))
	}
	e.clock.Advance(time.Hour)
	if recs, _ = e.readAll(t, next, 4); len(recs) != 0 {
		t.Fatalf("a pass an hour later read %v; want nothing", ids(recs))
	}
}

func TestReadIdentitiesChunks(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{BucketSize: 100000, RestoreRate: 100000}, shopify.Params{})
	seeded := e.fake.Seed(600)
	var want []string
	for i := 0; i < 600; i += 2 {
		want = append(want, itoa(seeded[i].ID))
	}
	e.fake.Delete(seeded[0].ID)
	got, err := e.src.ReadIdentities(context.Background(), "id", want)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 299 {
		t.Fatalf("%d records, want 299 (300 asked, one deleted)", len(got))
	}
	if n := e.fake.Stats().RootFields["nodes"]; n != 2 {
		t.Fatalf("%d nodes queries, want 2 (250 ids each at most)", n)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestThrottledWithoutStatus: a THROTTLED answer without throttleStatus is
// waited out a second at a time.
func TestThrottledWithoutStatus(t *testing.T) {
	var mu sync.Mutex
	n := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		n++
		first := n == 1
		mu.Unlock()
		if first {
			_, _ = w.Write([]byte(`{"errors":[{"message":"Throttled","extensions":{"code":"THROTTLED"}}]}`))
			return
		}
		_, _ = w.Write([]byte(`{"data":{"customers":{"nodes":[],"pageInfo":{"hasNextPage":false,"endCursor":null}}}}`))
	}))
	defer srv.Close()
	var slept []time.Duration
	src, err := shopify.New(shopify.Params{ShopURL: srv.URL, Token: token, Sleep: func(_ context.Context, d time.Duration) error {
		slept = append(slept, d)
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	p, err := src.ReadPage(context.Background(), "", 10)
	if err != nil || !p.End || !slices.Equal(slept, []time.Duration{time.Second}) {
		t.Fatalf("page %+v, %v, waits %v; want an empty end after one 1s wait", p, err, slept)
	}
}

func TestDescribeCursor(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{})
	e.fake.Seed(3)
	p, err := e.src.ReadPage(context.Background(), "", 2)
	if err != nil {
		t.Fatal(err)
	}
	_, next := e.readAll(t, p.Next, 2)
	e.clock.Advance(time.Hour)
	_, settled := e.readAll(t, next, 2)
	c := &shopify.Config{}
	for cursor, want := range map[string]string{
		"":           "start of the shop's customers",
		p.Next:       "after a customer updated 2026-12-01 08:00:00 UTC",
		next:         "customers updated from 2026-12-01 08:00:00 UTC on",
		settled:      "customers updated after 2026-12-01 08:00:00 UTC",
		"shopify1:x": "a cursor this oncesync cannot read",
	} {
		if got := c.DescribeCursor(nil, cursor); got != want {
			t.Errorf("DescribeCursor(%q) = %q, want %q", cursor, got, want)
		}
	}
}

// TestSettledWindowIsNotReadAgain: a quiet store whose last look-back
// window holds more customers than a cursor remembers (a bulk import, all
// in one second) is read again by the pass that follows, and no more: that
// pass began more than the look-back after the import (by Shopify's Date),
// so every customer of it was indexed and read, and the next passes ask
// only for customers updated after it. A customer updated later and
// indexed late is still read once indexed.
func TestSettledWindowIsNotReadAgain(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{})
	seeded := e.fake.Seed(300)
	if recs, _ := e.readAll(t, "", 250); len(recs) != 300 {
		t.Fatalf("first pass: %d records", len(recs))
	}
	recs, next := e.readAll(t, "", 250)
	if len(recs) != 300 {
		t.Fatalf("first pass again: %d records", len(recs))
	}
	// Within the look-back: the 236 the cursor does not remember, again.
	if recs, _ := e.readAll(t, next, 250); len(recs) != 236 {
		t.Fatalf("second pass at once: %d records; want 236", len(recs))
	}
	e.clock.Advance(20 * time.Minute)
	recs, next = e.readAll(t, next, 250)
	if len(recs) != 236 {
		t.Fatalf("second pass 20 minutes later: %d records; want 236", len(recs))
	}
	for i := range 3 {
		e.clock.Advance(time.Hour)
		if recs, next = e.readAll(t, next, 250); len(recs) != 0 {
			t.Fatalf("pass %d after the window settled read %d records again", i+3, len(recs))
		}
	}
	// From the last instant read, without look-back (inclusive: Shopify's
	// updated_at filter may match whole days; the source drops the
	// customers of that instant and before itself).
	st := e.fake.Stats()
	if last := st.LastQueries[len(st.LastQueries)-1]; last != "updated_at:>='2026-12-01T08:00:00Z'" {
		t.Fatalf("last search query %q", last)
	}
	// Updated now, indexed ten minutes later: not read until then, then once.
	late := seeded[42].ID
	e.fake.Update(late, func(c *fakeshopify.Customer) { c.FirstName = "Indexed late" })
	e.fake.DelayIndex(late, e.clock.Now().Add(10*time.Minute))
	e.clock.Advance(5 * time.Minute)
	if recs, next = e.readAll(t, next, 250); len(recs) != 0 {
		t.Fatalf("read %v before it was indexed", ids(recs))
	}
	e.clock.Advance(10 * time.Minute)
	recs, next = e.readAll(t, next, 250)
	if got := ids(recs); !slices.Equal(got, []string{itoa(late)}) || recs[0].Fields["firstName"] != "Indexed late" {
		t.Fatalf("read %v once indexed; want the late-indexed customer", got)
	}
	for range 2 {
		e.clock.Advance(20 * time.Minute)
		if recs, next = e.readAll(t, next, 250); len(recs) != 0 {
			t.Fatalf("read %v again", ids(recs))
		}
	}
}

// TestAPIVersionTooOldOrRetired: the fields the source reads came in
// 2025-04; an older api_version is refused by Shopify with a message that
// says which version is needed, and one Shopify no longer supports is
// served as the oldest it does ("falls forward"), which the message names.
func TestAPIVersionTooOldOrRetired(t *testing.T) {
	for _, tc := range []struct {
		name, version, oldest string
		want                  []string // in the error; none: the read succeeds
	}{
		{"supported old version", "2025-01", "", []string{"api_version 2025-01)", "needs api_version 2025-04 or later", "defaultEmailAddress"}},
		{"retired, falls forward", "2024-10", "2026-01", nil},
		{"retired, falls forward to a version without the fields", "2024-07", "2025-01",
			[]string{"api_version 2024-07, served as 2025-01 as Shopify no longer supports 2024-07)", "needs api_version 2025-04 or later"}},
		{"current", "2025-07", "2025-04", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, fakeshopify.Options{OldestVersion: tc.oldest}, shopify.Params{APIVersion: tc.version})
			e.fake.Seed(3)
			_, err := e.src.ReadPage(context.Background(), "", 10)
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, source.ErrInvalid) {
				t.Fatalf("%v; want ErrInvalid", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("%v; want %q in it", err, w)
				}
			}
		})
	}
}

// TestUpdatedAtFilterMatchesWholeDays: Shopify documents the customers
// query's updated_at filter as "The date and time, matching a whole day,
// when the customer's information was last updated"; the fake takes each
// comparator's day whole, so "updated_at:>'T'" matches from the next day
// on. A store that settled at 08:00 and changed a customer at 10:00 the
// same day must still send that change (and a change the next day), and a
// pass must not read again the customers of the day it already read.
func TestUpdatedAtFilterMatchesWholeDays(t *testing.T) {
	e := newEnv(t, fakeshopify.Options{}, shopify.Params{})
	seeded := e.fake.Seed(10)
	_, next := e.readAll(t, "", 4)
	e.clock.Advance(time.Hour) // 09:00: the window before 08:00 settles
	if recs, n := e.readAll(t, next, 4); len(recs) != 0 {
		t.Fatalf("a pass without changes read %v", ids(recs))
	} else {
		next = n
	}
	e.clock.Advance(time.Hour) // 10:00, the same day
	e.fake.Update(seeded[3].ID, func(c *fakeshopify.Customer) { c.FirstName = "Changed at ten" })
	e.clock.Advance(time.Minute)
	recs, next := e.readAll(t, next, 4)
	if got := ids(recs); !slices.Equal(got, []string{itoa(seeded[3].ID)}) || recs[0].Fields["firstName"] != "Changed at ten" {
		t.Fatalf("the pass after a change the same day read %v; want the changed customer", got)
	}
	e.clock.Advance(time.Hour)
	if recs, next = e.readAll(t, next, 4); len(recs) != 0 {
		t.Fatalf("a pass an hour later read %v again", ids(recs))
	}
	e.clock.Advance(24 * time.Hour) // the next day
	e.fake.Update(seeded[7].ID, func(c *fakeshopify.Customer) { c.FirstName = "Changed a day later" })
	e.clock.Advance(time.Minute)
	recs, _ = e.readAll(t, next, 4)
	if got := ids(recs); !slices.Equal(got, []string{itoa(seeded[7].ID)}) {
		t.Fatalf("the pass a day later read %v; want the customer changed that day", got)
	}
}
