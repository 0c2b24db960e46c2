package klaviyo_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/destinationtest"
	"github.com/oncesync/oncesync/internal/destination/klaviyo"
	"github.com/oncesync/oncesync/internal/fakeklaviyo"
	"github.com/oncesync/oncesync/internal/testenv"
)

const (
	apiKey = "pk_TEST_0123456789abcdef0123456789"
	listID = "LiSt01"
)

// record is the suite's record i in Klaviyo's mapped shape.
func record(i int) destination.Record {
	r := destinationtest.Record(i)
	r.Data = map[string]any{
		"email": r.Data["email"],
		"attributes": map[string]any{
			"first_name":     "First" + strconv.Itoa(i),
			"location.city":  "City" + strconv.Itoa(i%3),
			"properties.age": float64(20 + i%50),
		},
	}
	return r
}

func emailOf(r destination.Record) string { return r.Data["email"].(string) }

// checkSpec fails t for every request or answer off Klaviyo's spec.
func checkSpec(t *testing.T, fake *fakeklaviyo.Server) {
	t.Helper()
	t.Cleanup(func() {
		if n := fake.Stats().Invalid; n > 0 {
			t.Errorf("%d requests did not conform to Klaviyo's API spec", n)
		}
		for _, err := range fake.SpecErrors() {
			t.Errorf("the fake answered off the spec: %v", err)
		}
	})
}

// transportFaults answers the suite's redirect and rate-limit faults itself.
func transportFaults(f destinationtest.Faults, next http.Handler) (http.Handler, *atomic.Int64) {
	answered := new(atomic.Int64)
	in := destinationtest.NewInjector(f)
	// A storm's 429: throttled, come back in a second.
	throttled := func(w http.ResponseWriter) {
		answered.Add(1)
		w.Header().Set("Retry-After", "1")
		w.Header().Set("Content-Type", "application/vnd.api+json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"errors":[{"id":"x","status":429,"code":"throttled","title":"Request was throttled.","detail":"Request was throttled."}]}`))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if in.Handle(w, r, next, throttled) {
			return
		}
		switch {
		case f.RedirectTo != "":
			answered.Add(1)
			http.Redirect(w, r, f.RedirectTo+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		case f.RateLimited > 0:
			answered.Add(1)
			w.Header().Set("Retry-After", strconv.Itoa(int(f.RateLimited.Seconds())))
			w.Header().Set("Content-Type", "application/vnd.api+json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"errors":[{"id":"x","status":429,"code":"throttled","title":"Request was throttled.","detail":"Request was throttled."}]}`))
		default:
			next.ServeHTTP(w, r)
		}
	}), answered
}

func TestAcceptance(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{klaviyo.ModeSingle, klaviyo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			destinationtest.Run(t, destinationtest.Harness{
				Record: record,
				// Bulk import jobs are asynchronous: Write answers Accepted
				// and the suite settles the records through Outcomes.
				Async:  mode == klaviyo.ModeBulk,
				Storms: true,
				// A bulk job whose 202 was lost is read back only once it
				// ran, and the suite's fake clock runs it only when asked:
				// the lost-answer case runs on the single path.
				LostAnswers: mode == klaviyo.ModeSingle,
				WriteModes:  writeModes(mode),
				Changed: func(i int) destination.Record {
					r := record(i)
					r.Key = fmt.Sprintf("%064x", 5000+i)
					r.Data["attributes"] = map[string]any{"first_name": fmt.Sprintf("Changed%d", i), "location.city": "Elsewhere", "properties.age": float64(70 + i)}
					return r
				},
				Cleared: func(i int) destination.Record {
					r := record(i)
					r.Key = fmt.Sprintf("%064x", 7000+i)
					r.Data["attributes"].(map[string]any)["first_name"] = destinationtest.EmptyValue(i)
					return r
				},
				Setup: func(t *testing.T, cfg destinationtest.Config) destinationtest.Target {
					clk := clock.NewFake(time.Now())
					opts := fakeklaviyo.Options{APIKey: apiKey, Validate: true, ValidateResponses: true, Seed: 11,
						Clock: clk, JobDelay: 4 * time.Second}
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
						opts.JobFailRate = 1
					}
					fake := fakeklaviyo.New(opts)
					checkSpec(t, fake)
					h, answered := transportFaults(cfg.Faults, fake)
					srv := httptest.NewServer(h)
					t.Cleanup(srv.Close)
					base := srv.URL
					if cfg.Faults.Refused {
						base = "http://" + testenv.RefusedAddr(t)
					}
					key := apiKey
					if cfg.Faults.Unauthorized {
						key = "pk_WRONG_fedcba9876543210fedcba98"
					}
					d, err := klaviyo.New(klaviyo.Params{BaseURL: base, APIKey: key, Mode: mode, ListID: listID,
						Sleep: cfg.Sleep, MaxRetries: cfg.MaxRetries, Clock: cfg.Clock, WriteMode: cfg.WriteMode})
					if err != nil {
						t.Fatal(err)
					}
					// For a mirror, what the sync holds at Klaviyo is its
					// list: a removed profile stays, out of the list.
					held := func(p fakeklaviyo.Profile) bool {
						return cfg.WriteMode != destination.Mirror || slices.Contains(p.Lists, listID)
					}
					stored := func() int64 { return fake.Stats().Profiles }
					if cfg.WriteMode == destination.Mirror {
						stored = func() int64 {
							n := int64(0)
							for i := range 64 {
								if p, ok := fake.Profile(emailOf(record(i))); ok && held(p) {
									n++
								}
							}
							return n
						}
					}
					return destinationtest.Target{
						Duplicates: func() int64 { return fake.Stats().DuplicateWrites },
						Put: func(r destination.Record) {
							a := r.Data["attributes"].(map[string]any)
							fake.AddProfile(emailOf(r), map[string]any{"first_name": a["first_name"],
								"location": map[string]any{"city": a["location.city"]}, "properties": map[string]any{"age": a["properties.age"]}})
						},
						Lookup: func(r destination.Record) (present, same bool) {
							p, ok := fake.Profile(emailOf(r))
							if !ok || !held(p) {
								return false, false
							}
							a := r.Data["attributes"].(map[string]any)
							same = destinationtest.SameHeld(p.Attributes["first_name"], a["first_name"]) &&
								destinationtest.SameHeld(p.Location["city"], a["location.city"]) &&
								destinationtest.SameHeld(p.Properties["age"], a["properties.age"])
							return true, same
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

// sleepLog advances a fake clock by every wait, so time passes only
// through the destination's own sleeps.
type sleepLog struct {
	mu    sync.Mutex
	clk   *clock.Fake
	waits []time.Duration
}

func (s *sleepLog) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.waits = append(s.waits, d)
	s.mu.Unlock()
	if d > 0 {
		s.clk.Advance(d)
	}
	return ctx.Err()
}

// writeModes are the write modes the suite asks of mode: mirror needs the
// bulk path (only bulk jobs add profiles to the list).
func writeModes(mode string) []destination.WriteMode {
	if mode == klaviyo.ModeBulk {
		return []destination.WriteMode{destination.Update, destination.Create, destination.Mirror}
	}
	return []destination.WriteMode{destination.Update, destination.Create}
}
