package fakebrevo

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

// TestOtherEndpointsHaveAnHourlyLimit: the routes outside /v3/contacts*
// share an hourly budget (Brevo's "All other endpoints: 100 RPH"), with
// their own headers, and do not touch the contacts' per-second window.
func TestOtherEndpointsHaveAnHourlyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, Options{OtherRateLimitPerHour: 2, RateLimitPerSecond: 10})
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		r := b.do(http.MethodGet, "/v3/account", nil)
		if r.status != want {
			t.Fatalf("GET /v3/account #%d = %d, want %d", i+1, r.status, want)
		}
		if got := r.header.Get(HeaderRateLimitLimit); got != "2" {
			t.Errorf("#%d limit header %q, want 2", i+1, got)
		}
		if i >= 1 {
			reset, _ := strconv.Atoi(r.header.Get(HeaderRateLimitReset))
			if r.header.Get(HeaderRateLimitRemaining) != "0" || reset <= 1 || reset > 3600 {
				t.Errorf("#%d remaining %q reset %d, want 0 and the rest of the hour", i+1,
					r.header.Get(HeaderRateLimitRemaining), reset)
			}
		}
	}
	if r := b.do(http.MethodGet, "/v3/processes/1", nil); r.status != http.StatusTooManyRequests {
		t.Fatalf("GET /v3/processes/1 in a spent hour = %d, want 429", r.status)
	}
	r := b.do(http.MethodGet, "/v3/contacts", nil)
	if r.status != http.StatusOK || r.header.Get(HeaderRateLimitLimit) != "10" || r.header.Get(HeaderRateLimitRemaining) != "9" {
		t.Fatalf("GET /v3/contacts = %d limit %q remaining %q; want 200, its own window", r.status,
			r.header.Get(HeaderRateLimitLimit), r.header.Get(HeaderRateLimitRemaining))
	}
	b.clock.Advance(time.Hour)
	if r := b.do(http.MethodGet, "/v3/account", nil); r.status != http.StatusOK {
		t.Fatalf("GET /v3/account an hour later = %d, want 200", r.status)
	}
}
