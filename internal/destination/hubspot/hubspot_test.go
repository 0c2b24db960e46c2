package hubspot_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
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
	"github.com/oncesync/oncesync/internal/destination/hubspot"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/fakehubspot"
	"github.com/oncesync/oncesync/internal/testenv"
)

const token = "pat-na1-TEST-0123456789abcdef"

// ageProp is the account's custom number property the test records map.
var ageProp = fakehubspot.Property{Name: "age", Type: "number"}

// record is the i-th test record in HubSpot's shape.
func record(i int) destination.Record {
	return recordWith(i, fmt.Sprintf("First%d", i))
}

// changed is record i with another first name.
func changed(i int) destination.Record { return recordWith(i, fmt.Sprintf("Changed%d", i)) }

func recordWith(i int, first string) destination.Record {
	sum := sha256.Sum256([]byte(fmt.Sprintf("hubspot-record-%d-%s", i, first)))
	return destination.Record{Key: hex.EncodeToString(sum[:]), Data: map[string]any{
		"email":      fmt.Sprintf("User%d@Example.com", i),
		"attributes": map[string]any{"firstname": first, "age": float64(20 + i%50)},
	}}
}

func emailOf(r destination.Record) string { return r.Data["email"].(string) }

// propsOf is r's data as HubSpot properties.
func propsOf(r destination.Record) map[string]string {
	p := map[string]string{"email": emailOf(r)}
	for k, v := range r.Data["attributes"].(map[string]any) {
		switch v := v.(type) {
		case nil:
			p[k] = "" // cleared
		case string:
			p[k] = v
		case float64:
			p[k] = strconv.FormatFloat(v, 'f', -1, 64)
		}
	}
	return p
}

// holds reports whether the fake has r (by e-mail) and exactly its data.
func holds(fake *fakehubspot.Server, r destination.Record) (present, same bool) {
	c, ok := fake.Contact(emailOf(r))
	if !ok {
		return false, false
	}
	for k, v := range propsOf(r) {
		if k == "email" {
			v = strings.ToLower(v)
		}
		if c.Properties[k] != v {
			return true, false
		}
	}
	return true, true
}

func TestAcceptance(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{hubspot.ModeBulk, hubspot.ModeSingle} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			destinationtest.Run(t, destinationtest.Harness{
				Record:  record,
				Changed: changed,
				Cleared: func(i int) destination.Record {
					r := recordWith(i, "")
					r.Key = fmt.Sprintf("%064x", 7000+i)
					r.Data["attributes"].(map[string]any)["firstname"] = destinationtest.EmptyValue(i)
					return r
				},
				Storms:      true,
				LostAnswers: true,
				WriteModes:  []destination.WriteMode{destination.Update, destination.Create, destination.Mirror},
				Setup: func(t *testing.T, cfg destinationtest.Config) destinationtest.Target {
					f := cfg.Faults
					opts := fakehubspot.Options{Token: token, Properties: []fakehubspot.Property{ageProp}, Seed: 7,
						RedirectTo: f.RedirectTo, DropFirst: f.DropAnswers, RateLimitFirst: f.RateLimitStorm,
						RateLimit: -1}
					for _, r := range f.Refuse {
						opts.RefuseEmails = append(opts.RefuseEmails, emailOf(r))
					}
					switch {
					case f.Unavailable:
						opts.FailAll = true
					case f.Flaky:
						opts.FailFirst, opts.ErrorRate = 2, 0.3
					}
					if f.RateLimited > 0 {
						opts.RateLimitFirst, opts.RateLimitWait = 1<<30, f.RateLimited
					}
					if f.RateLimitStorm > 0 {
						opts.RateLimitWait = time.Second
					}
					fake := fakehubspot.New(opts)
					srv := httptest.NewServer(fake)
					t.Cleanup(srv.Close)
					base := srv.URL
					if f.Refused {
						base = "http://" + testenv.RefusedAddr(t)
					}
					tok := token
					if f.Unauthorized {
						tok = "pat-na1-WRONG-fedcba9876543210"
					}
					d, err := hubspot.New(hubspot.Params{BaseURL: base, Token: tok, Mode: mode, WriteMode: string(cfg.WriteMode),
						Properties: []string{"firstname", "age"},
						Sleep:      cfg.Sleep, MaxRetries: cfg.MaxRetries, Clock: cfg.Clock, RateLimit: 1e9})
					if err != nil {
						t.Fatal(err)
					}
					return destinationtest.Target{
						Dest:         d,
						Secrets:      []string{token, tok},
						Requests:     func() int64 { return fake.Stats().Requests },
						ServerErrors: func() int64 { return fake.Stats().ByStatus["503"] },
						Stored:       func() int64 { return fake.Stats().Contacts },
						Duplicates:   func() int64 { return fake.Stats().DuplicateWrites },
						Put:          func(r destination.Record) { fake.Put(propsOf(r)) },
						Lookup:       func(r destination.Record) (bool, bool) { return holds(fake, r) },
					}
				},
			})
		})
	}
}

// bundle is a destination wired to a fake with a request log.
type bundle struct {
	fake   *fakehubspot.Server
	dest   *hubspot.Destination
	mu     sync.Mutex
	bodies map[string][][]byte // by path
	sleeps []time.Duration
	clk    *clock.Fake
}

func setup(t *testing.T, opts fakehubspot.Options, mut func(*hubspot.Params)) *bundle {
	t.Helper()
	if opts.Token == "" {
		opts.Token = token
	}
	opts.Properties = append(opts.Properties, ageProp)
	b := &bundle{bodies: map[string][][]byte{}, clk: clock.NewFake(time.Now())}
	if opts.Clock == nil {
		opts.Clock = b.clk // the rolling window moves with the destination's waits
	}
	b.fake = fakehubspot.New(opts)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.bodies[r.URL.Path] = append(b.bodies[r.URL.Path], body)
		b.mu.Unlock()
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		b.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	p := hubspot.Params{BaseURL: srv.URL, Token: token, Properties: []string{"firstname", "age"}, RateLimit: 1e9, Clock: b.clk,
		Sleep: func(ctx context.Context, d time.Duration) error {
			b.mu.Lock()
			b.sleeps = append(b.sleeps, d)
			b.mu.Unlock()
			b.clk.Advance(d)
			return ctx.Err()
		}}
	if mut != nil {
		mut(&p)
	}
	d, err := hubspot.New(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	b.dest = d
	return b
}

func (b *bundle) requests(path string) [][]byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.bodies[path]
}

func records(n int) []destination.Record {
	out := make([]destination.Record, n)
	for i := range out {
		out[i] = record(i)
	}
	return out
}

const upsertPath = "/crm/v3/objects/contacts/batch/upsert"

func TestBatchesOfAtMost100(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{}, nil)
	// A contact named twice in a page starts a new batch, after the first.
	recs := append(append(records(50), changed(5)), records(250)[50:]...)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	for _, r := range res {
		if r.Outcome != destination.Delivered || r.Ref == "" {
			t.Fatalf("record %s: %v ref %q (%s)", r.Key[:8], r.Outcome, r.Ref, r.Message)
		}
	}
	var sizes []int
	for _, body := range b.requests(upsertPath) {
		var in struct {
			Inputs []struct {
				ID         string            `json:"id"`
				IDProperty string            `json:"idProperty"`
				Properties map[string]string `json:"properties"`
			} `json:"inputs"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(in.Inputs))
		for _, x := range in.Inputs {
			if x.IDProperty != "email" || x.ID == "" || x.Properties["firstname"] == "" {
				t.Errorf("input %+v: want idProperty email, an id and properties", x)
			}
		}
	}
	if fmt.Sprint(sizes) != "[50 100 100 1]" {
		t.Errorf("batch sizes %v, want [50 100 100 1]", sizes)
	}
	st := b.fake.Stats()
	if st.Contacts != 250 || st.ContactsWritten != 251 || st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Errorf("fake: %d contacts, %d written, %d duplicates, %d invalid; want 250, 251, 0, 0",
			st.Contacts, st.ContactsWritten, st.DuplicateWrites, st.Invalid)
	}
	if c, _ := b.fake.Contact("user5@example.com"); c.Properties["firstname"] != "Changed5" {
		t.Errorf("contact 5 has firstname %q, want the page's last value Changed5", c.Properties["firstname"])
	}
	if c, _ := b.fake.Contact("user249@example.com"); c.Properties["firstname"] != "First249" || c.Properties["age"] != "69" {
		t.Errorf("contact 249 has %v", c.Properties)
	}
}

func TestMultiStatusRejectsOnlyTheBadInputs(t *testing.T) {
	t.Parallel()
	recs := records(6)
	recs[2].Data["attributes"].(map[string]any)["age"] = "not a number"
	b := setup(t, fakehubspot.Options{RefuseEmails: []string{"user4@example.com"}}, nil)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if n := len(b.requests(upsertPath)); n != 1 {
		t.Errorf("%d upsert requests, want 1 (a 207 is settled per input)", n)
	}
	byKey := map[string]destination.Result{}
	for _, r := range res {
		byKey[r.Key] = r
	}
	for i, r := range recs {
		got := byKey[r.Key]
		switch i {
		case 2:
			if got.Outcome != destination.Rejected || !strings.Contains(got.Message, "not a number") || !strings.Contains(got.Message, "VALIDATION_ERROR") {
				t.Errorf("record 2: %v %q, want rejected with HubSpot's message", got.Outcome, got.Message)
			}
		case 4:
			if got.Outcome != destination.Rejected || !strings.Contains(got.Message, "Email address [email] is invalid") {
				t.Errorf("record 4: %v %q, want rejected with HubSpot's message, e-mail redacted", got.Outcome, got.Message)
			}
			if strings.Contains(strings.ToLower(got.Message), "user4@") {
				t.Errorf("record 4's message %q holds its e-mail address", got.Message)
			}
		default:
			if got.Outcome != destination.Delivered {
				t.Errorf("record %d: %v %q, want delivered", i, got.Outcome, got.Message)
			}
		}
	}
	if st := b.fake.Stats(); st.Contacts != 4 {
		t.Errorf("fake stores %d contacts, want 4", st.Contacts)
	}
}

func TestUnknownPropertyRejectsEachRecord(t *testing.T) {
	t.Parallel()
	recs := records(3)
	for _, r := range recs {
		r.Data["attributes"].(map[string]any)["shoe_size"] = "42"
	}
	b := setup(t, fakehubspot.Options{}, nil)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	for _, r := range res {
		if r.Outcome != destination.Rejected || !strings.Contains(r.Message, `"shoe_size" does not exist`) {
			t.Errorf("record %s: %v %q, want rejected: the property does not exist", r.Key[:8], r.Outcome, r.Message)
		}
	}
	// The batch refused whole, then each input alone.
	if n := len(b.requests(upsertPath)); n != 4 {
		t.Errorf("%d upsert requests, want 4 (the batch, then one per record)", n)
	}
}

func TestRateLimitHeadersPauseAndRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{RateLimit: 2}, func(p *hubspot.Params) { p.Mode = hubspot.ModeSingle; p.Concurrency = 1 })
	res, err := b.dest.Write(t.Context(), records(3))
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	for _, r := range res {
		if r.Outcome != destination.Delivered {
			t.Errorf("record %s: %v", r.Key[:8], r.Outcome)
		}
	}
	b.mu.Lock()
	sleeps := append([]time.Duration(nil), b.sleeps...)
	b.mu.Unlock()
	// The second answer says the window (2 per 10 s) is spent: the limiter
	// pauses 10 s / 2 before the third request.
	found := false
	for _, d := range sleeps {
		if d == 5*time.Second {
			found = true
		}
	}
	if !found {
		t.Errorf("waits %v: want a 5 s pause after X-HubSpot-RateLimit-Remaining 0", sleeps)
	}
	if st := b.fake.Stats(); st.Contacts != 3 || st.DuplicateWrites != 0 {
		t.Errorf("fake: %d contacts, %d duplicates", st.Contacts, st.DuplicateWrites)
	}
}

func TestDailyLimitFailsAtOnce(t *testing.T) {
	t.Parallel()
	var requests atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		// A Retry-After, if HubSpot sent one, would be the ten-second
		// window's: the daily limit stays spent.
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"status":"error","message":"You have reached your daily limit.","errorType":"RATE_LIMIT","policyName":"DAILY"}`)
	}))
	t.Cleanup(srv.Close)
	d, err := hubspot.New(hubspot.Params{BaseURL: srv.URL, Token: token, Sleep: destinationtest.NoSleep})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Write(t.Context(), records(2))
	if failure.CodeOf(err) != failure.DestinationRateLimited {
		t.Fatalf("Write error %v, want %s", err, failure.DestinationRateLimited)
	}
	for _, r := range res {
		if r.Outcome != destination.NotSent {
			t.Errorf("record %s: %v, want not sent (a 429 applies nothing)", r.Key[:8], r.Outcome)
		}
	}
	// HubSpot does not say when the day ends for the account: the detail
	// says what is spent, never a made-up "resets in 24h0m0s".
	if d := failure.Detail(err); !strings.Contains(d, "daily request limit") || strings.Contains(d, "24h") {
		t.Errorf("detail %q: want the daily limit named, without a made-up reset time", d)
	}
	if calls := requests.Load(); calls != 1 {
		t.Errorf("%d requests, want 1: the daily limit is not retried", calls)
	}
}

func TestTokenNeverInErrors(t *testing.T) {
	t.Parallel()
	// A server that echoes the Authorization header in its error message.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadGateway)
		_, _ = fmt.Fprintf(w, `{"status":"error","message":"bad gateway for %s user1@example.com","category":"X"}`, r.Header.Get("Authorization"))
	}))
	t.Cleanup(srv.Close)
	d, err := hubspot.New(hubspot.Params{BaseURL: srv.URL, Token: token, Sleep: destinationtest.NoSleep, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Write(t.Context(), records(2))
	if err == nil {
		t.Fatal("Write against a 502 returned no error")
	}
	if strings.Contains(err.Error(), token) || strings.Contains(err.Error(), "user1@example.com") {
		t.Errorf("error %q holds the token or an e-mail address", err)
	}
	if !strings.Contains(err.Error(), "502") {
		t.Errorf("error %q does not say what HubSpot answered", err)
	}
	_, err = d.Verify(t.Context(), records(1), time.Now())
	if err == nil || strings.Contains(err.Error(), token) {
		t.Errorf("Verify error %v: want one, without the token", err)
	}
}

func TestVerifyComparesEveryMappedProperty(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{}, nil)
	recs := records(3)
	if _, err := b.dest.Write(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	stale := changed(1) // same contact, other firstname: not landed
	older := record(2)
	older.Data["attributes"].(map[string]any)["age"] = float64(99) // other age
	landed, err := b.dest.Verify(t.Context(), []destination.Record{recs[0], stale, older, record(7)}, time.Now())
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if _, ok := landed[recs[0].Key]; !ok || len(landed) != 1 {
		t.Errorf("landed %v: want exactly record 0 (record 1 and 2 differ, 7 is missing)", landed)
	}
}

func TestCustomIDProperty(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{Properties: []fakehubspot.Property{{Name: "customer_id", Type: "string", Unique: true}}},
		func(p *hubspot.Params) {
			p.IDProperty = "customer_id"
			p.Properties = append(p.Properties, "customer_id")
		})
	recs := records(3)
	for i, r := range recs {
		r.Data["attributes"].(map[string]any)["customer_id"] = fmt.Sprintf("C-%d", i)
	}
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	for _, r := range res {
		if r.Outcome != destination.Delivered {
			t.Errorf("record %s: %v %q", r.Key[:8], r.Outcome, r.Message)
		}
	}
	c, ok := b.fake.Contact("C-1")
	if !ok || c.Properties["email"] != "user1@example.com" || c.Properties["firstname"] != "First1" {
		t.Errorf("contact C-1: %v %v", ok, c.Properties)
	}
	landed, err := b.dest.Verify(t.Context(), recs, time.Now())
	if err != nil || len(landed) != 3 {
		t.Errorf("Verify = %v, %v; want the 3 records", landed, err)
	}
	checked, err := b.dest.Check(t.Context())
	if err != nil {
		t.Errorf("Check: %v (%v)", err, checked)
	}
	// Under an id_property of its own, an e-mail cleared in the source
	// ("" or null) is cleared in HubSpot, as any property (it was left
	// out of the request, and HubSpot kept the old address).
	cleared := []destination.Record{recs[0], recs[1]}
	for i, empty := range []any{"", nil} {
		r := destination.Record{Key: fmt.Sprintf("cleared-%d", i), Data: map[string]any{"email": empty,
			"attributes": map[string]any{"customer_id": fmt.Sprintf("C-%d", i), "firstname": fmt.Sprintf("First%d", i)}}}
		cleared[i] = r
	}
	if landed, err := b.dest.Verify(t.Context(), cleared, time.Now()); err != nil || len(landed) != 0 {
		t.Fatalf("Verify of cleared e-mails while HubSpot holds them = %v, %v; want none", landed, err)
	}
	if res, err = b.dest.Write(t.Context(), cleared); err != nil || len(res) != 2 || res[0].Outcome != destination.Delivered || res[1].Outcome != destination.Delivered {
		t.Fatalf("Write of cleared e-mails: %v %+v", err, res)
	}
	for i := range cleared {
		if c, ok := b.fake.Contact(fmt.Sprintf("C-%d", i)); !ok || c.Properties["email"] != "" {
			t.Errorf("contact C-%d holds e-mail %q after it was cleared in the source", i, c.Properties["email"])
		}
	}
	if landed, err = b.dest.Verify(t.Context(), cleared, time.Now()); err != nil || len(landed) != 2 {
		t.Errorf("Verify after the clear = %v, %v; want both", landed, err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	unique := fakehubspot.Property{Name: "customer_id", Type: "string", Unique: true}
	plain := fakehubspot.Property{Name: "nickname", Type: "string"}
	for _, tc := range []struct {
		name   string
		mut    func(*hubspot.Params)
		code   failure.Code
		phrase string
		scopes []string // the private app's (nil: the fake's default)
	}{
		{"ok", nil, "", "", nil},
		// A token that may read but not write contacts passed every check
		// (an independent check, 2026-12-06); its first run failed.
		{"read-only token", nil, failure.DestinationAuth, "lacks the crm.objects.contacts.write scope", []string{"crm.objects.contacts.read", "crm.schemas.contacts.read"}},
		{"unknown property", func(p *hubspot.Params) { p.Properties = append(p.Properties, "shoe_size") }, failure.InvalidSyncDefinition, "property shoe_size does not exist", nil},
		{"read-only property", func(p *hubspot.Params) { p.Properties = append(p.Properties, "createdate") }, failure.InvalidSyncDefinition, "read-only", nil},
		{"unknown id property", func(p *hubspot.Params) { p.IDProperty = "crm_key" }, failure.InvalidSyncDefinition, "id_property crm_key is not", nil},
		{"non-unique id property", func(p *hubspot.Params) { p.IDProperty = "nickname" }, failure.InvalidSyncDefinition, "unique values", nil},
		{"unique id property", func(p *hubspot.Params) { p.IDProperty = "customer_id" }, "", "", nil},
		{"bad token", func(p *hubspot.Params) { p.Token = "pat-wrong" }, failure.DestinationAuth, "", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakehubspot.Options{Properties: []fakehubspot.Property{unique, plain}, Scopes: tc.scopes}, tc.mut)
			checked, err := b.dest.Check(t.Context())
			if tc.code == "" {
				if err != nil || len(checked) < 3 || !strings.Contains(strings.Join(checked, "\n"), "the token may write contacts") {
					t.Fatalf("Check = %v, %v", checked, err)
				}
				return
			}
			if failure.CodeOf(err) != tc.code || !strings.Contains(fmt.Sprint(err), tc.phrase) {
				t.Fatalf("Check error %v, want %s with %q", err, tc.code, tc.phrase)
			}
			if strings.Contains(fmt.Sprint(err), "pat-wrong") {
				t.Errorf("Check error holds the token")
			}
			if st := b.fake.Stats(); st.ContactsWritten != 0 {
				t.Errorf("Check wrote %d contacts", st.ContactsWritten)
			}
		})
	}
}

// TestCheckOfAnotherServer: a base_url that reaches a server answering
// every request 200 with JSON of its own is not HubSpot: check says so
// (destination_unavailable), not that id_property is missing.
func TestCheckOfAnotherServer(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok":true}`)
	}))
	t.Cleanup(srv.Close)
	d, err := hubspot.New(hubspot.Params{BaseURL: srv.URL, Token: token, Sleep: destinationtest.NoSleep, RateLimit: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	_, err = d.Check(t.Context())
	if failure.CodeOf(err) != failure.DestinationUnavailable || !strings.Contains(fmt.Sprint(err), "not HubSpot's: check destination.base_url") ||
		strings.Contains(fmt.Sprint(err), "id_property") {
		t.Fatalf("Check against another server = %v, want destination_unavailable naming base_url", err)
	}
}

// TestMultiStatusErrorsWithoutIDs: HubSpot does not document how a 207's
// errors name their inputs. When they name none, the inputs its results do
// not list were refused: one alone takes the error, several are sent
// again one by one; none is written twice or left in doubt.
func TestMultiStatusErrorsWithoutIDs(t *testing.T) {
	t.Parallel()
	fake := fakehubspot.New(fakehubspot.Options{Token: token, Properties: []fakehubspot.Property{ageProp},
		RefuseEmails: []string{"user1@example.com", "user3@example.com"}})
	var upserts int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		upserts++
		mu.Unlock()
		rec := httptest.NewRecorder()
		fake.ServeHTTP(rec, r)
		var body map[string]any
		if json.Unmarshal(rec.Body.Bytes(), &body) == nil {
			if errs, ok := body["errors"].([]any); ok {
				for _, e := range errs {
					delete(e.(map[string]any), "context")
				}
			}
		}
		b, _ := json.Marshal(body)
		w.WriteHeader(rec.Code)
		_, _ = w.Write(b)
	}))
	t.Cleanup(srv.Close)
	d, err := hubspot.New(hubspot.Params{BaseURL: srv.URL, Token: token, Sleep: destinationtest.NoSleep, RateLimit: 1e9})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(5)
	res, err := d.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if len(res) != 5 {
		t.Fatalf("%d results for 5 records", len(res))
	}
	for i, r := range res {
		want := destination.Delivered
		if r.Key == recs[1].Key || r.Key == recs[3].Key {
			want = destination.Rejected
		}
		if r.Outcome != want {
			t.Errorf("result %d: %v (%s), want %v", i, r.Outcome, r.Message, want)
		}
	}
	if st := fake.Stats(); st.Contacts != 3 || st.DuplicateWrites != 0 || upserts != 3 {
		t.Errorf("fake: %d contacts, %d duplicates, %d requests; want 3, 0, 3 (the batch, then the 2 refused alone)",
			st.Contacts, st.DuplicateWrites, upserts)
	}
}

// TestSlowWriteAppliedAfterTimeoutIsInDoubt: HubSpot applies a write after
// the client's attempt timed out. The records are left in doubt (no result,
// not NotSent), and Verify then finds them: nothing is written twice.
func TestSlowWriteAppliedAfterTimeoutIsInDoubt(t *testing.T) {
	t.Parallel()
	fake := fakehubspot.New(fakehubspot.Options{Token: token, Properties: []fakehubspot.Property{ageProp}, WriteLatency: 300 * time.Millisecond})
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)
	d, err := hubspot.New(hubspot.Params{BaseURL: srv.URL, Token: token, Sleep: destinationtest.NoSleep, RateLimit: 1e9,
		Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(3)
	res, err := d.Write(t.Context(), recs)
	if failure.CodeOf(err) != failure.DestinationUnavailable {
		t.Fatalf("Write error %v, want %s", err, failure.DestinationUnavailable)
	}
	if len(res) != 0 {
		t.Fatalf("results %v, want none: the batch may have been applied", res)
	}
	deadline := time.Now().Add(5 * time.Second)
	for fake.Stats().Contacts < 3 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	landed, err := d.Verify(t.Context(), recs, time.Now().Add(-time.Minute))
	if err != nil || len(landed) != 3 {
		t.Fatalf("Verify = %v, %v; want the 3 records landed", landed, err)
	}
	if st := fake.Stats(); st.ContactsWritten != 3 || st.DuplicateWrites != 0 {
		t.Errorf("fake: %d written, %d duplicates", st.ContactsWritten, st.DuplicateWrites)
	}
}

// TestForbiddenIsAuth: a token without the contacts scopes gets 403 with
// HubSpot's MISSING_SCOPES; it fails at once as destination_auth.
func TestForbiddenIsAuth(t *testing.T) {
	t.Parallel()
	var calls int
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		calls++
		mu.Unlock()
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, `{"status":"error","message":"This app hasn't been granted all required scopes to make this call.","category":"MISSING_SCOPES"}`)
	}))
	t.Cleanup(srv.Close)
	d, err := hubspot.New(hubspot.Params{BaseURL: srv.URL, Token: token, Sleep: destinationtest.NoSleep})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Write(t.Context(), records(2))
	if failure.CodeOf(err) != failure.DestinationAuth || failure.Retryable(err) || strings.Contains(err.Error(), token) {
		t.Fatalf("Write error %v: want a permanent %s without the token", err, failure.DestinationAuth)
	}
	if calls != 1 || len(res) != 2 || res[0].Outcome != destination.NotSent {
		t.Errorf("%d calls, results %v: want 1 call and both records not sent", calls, res)
	}
}

// TestPaymentRequiredIsAuth: a 402 (the account's plan or payment) says
// nothing of the contacts: it fails at once as destination_auth and no
// record is rejected for it.
func TestPaymentRequiredIsAuth(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = io.WriteString(w, `{"status":"error","message":"Payment required.","category":"PAYMENT_REQUIRED"}`)
	}))
	t.Cleanup(srv.Close)
	d, err := hubspot.New(hubspot.Params{BaseURL: srv.URL, Token: token, Sleep: destinationtest.NoSleep})
	if err != nil {
		t.Fatal(err)
	}
	res, err := d.Write(t.Context(), records(2))
	if failure.CodeOf(err) != failure.DestinationAuth {
		t.Fatalf("Write error %v: want %s", err, failure.DestinationAuth)
	}
	for _, r := range res {
		if r.Outcome != destination.NotSent {
			t.Errorf("results %v: want both records not sent", res)
		}
	}
}

// TestClearedValueClearsTheProperty: a mapped null (a NULL column) is sent as
// "", which clears the property in HubSpot, and Verify holds it landed only
// once HubSpot's property is empty.
func TestClearedValueClearsTheProperty(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{}, nil)
	if _, err := b.dest.Write(t.Context(), []destination.Record{record(1)}); err != nil {
		t.Fatal(err)
	}
	cleared := recordWith(1, "")
	cleared.Key = "cleared-1"
	cleared.Data["attributes"].(map[string]any)["firstname"] = nil
	landed, err := b.dest.Verify(t.Context(), []destination.Record{cleared}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(landed) != 0 {
		t.Fatalf("a null is landed while HubSpot holds %q", "First1")
	}
	res, err := b.dest.Write(t.Context(), []destination.Record{cleared})
	if err != nil || len(res) != 1 || res[0].Outcome != destination.Delivered {
		t.Fatalf("write: %v %+v", err, res)
	}
	if c, ok := b.fake.Contact(emailOf(cleared)); !ok || c.Properties["firstname"] != "" {
		t.Fatalf("HubSpot holds firstname %q after a null was written", c.Properties["firstname"])
	}
	if landed, err = b.dest.Verify(t.Context(), []destination.Record{cleared}, time.Now()); err != nil || len(landed) != 1 {
		t.Fatalf("after the clear, Verify: %v %v", landed, err)
	}
}

// TestOneContactTwiceOnAPageEndsWithTheLast: on the single path two
// records of one contact (here their addresses differ only in case) were
// sent side by side: whichever request landed last won, here the page's
// first record, and no later run changed it. They now go in page order,
// as the bulk path's batches (never naming a contact twice) do.
func TestOneContactTwiceOnAPageEndsWithTheLast(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{}, func(p *hubspot.Params) {
		p.Mode, p.Concurrency = hubspot.ModeSingle, 4
		inner := p.BaseURL
		slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			if strings.Contains(string(body), "First7") {
				time.Sleep(200 * time.Millisecond) // the first record's request is the slow one
			}
			req, err := http.NewRequestWithContext(r.Context(), r.Method, inner+r.URL.RequestURI(), strings.NewReader(string(body)))
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			req.Header = r.Header.Clone()
			resp, err := http.DefaultTransport.RoundTrip(req)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			for k, v := range resp.Header {
				w.Header()[k] = v
			}
			w.WriteHeader(resp.StatusCode)
			_, _ = io.Copy(w, resp.Body)
		}))
		t.Cleanup(slow.Close)
		p.BaseURL = slow.URL
	})
	first, second := recordWith(7, "First7"), recordWith(7, "Second7")
	second.Data["email"] = "user7@example.com"
	res, err := b.dest.Write(t.Context(), []destination.Record{first, second, record(8)})
	if err != nil || len(res) != 3 {
		t.Fatalf("write: %+v, %v", res, err)
	}
	for _, r := range res {
		if r.Outcome != destination.Delivered {
			t.Fatalf("record %s: %v (%s)", r.Key[:8], r.Outcome, r.Message)
		}
	}
	c, ok := b.fake.Contact("user7@example.com")
	if !ok || c.Properties["firstname"] != "Second7" {
		t.Fatalf("contact %+v (found %v), want firstname of the page's last record, Second7", c.Properties, ok)
	}
}
