package brevo_test

import (
	"net/http"
	"strconv"
	"sync/atomic"

	"github.com/oncesync/oncesync/internal/destination/destinationtest"
)

// transportFaults puts the acceptance suite's redirect and rate-limit faults
// in front of next, answering those requests itself; answered counts them.
func transportFaults(f destinationtest.Faults, next http.Handler) (http.Handler, *atomic.Int64) {
	answered := new(atomic.Int64)
	in := destinationtest.NewInjector(f)
	// A storm's 429 is Brevo's spent window, reset in 10 ms.
	spent := func(w http.ResponseWriter) {
		answered.Add(1)
		w.Header().Set("x-sib-ratelimit-limit", "10")
		w.Header().Set("x-sib-ratelimit-remaining", "0")
		w.Header().Set("x-sib-ratelimit-reset", "0.01")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"code":"too_many_requests","message":"rate limit reached"}`))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if in.Handle(w, r, next, spent) {
			return
		}
		switch {
		case f.RedirectTo != "":
			answered.Add(1)
			http.Redirect(w, r, f.RedirectTo+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		case f.RateLimited > 0:
			answered.Add(1)
			secs := strconv.FormatFloat(f.RateLimited.Seconds(), 'f', -1, 64)
			w.Header().Set("x-sib-ratelimit-limit", "10")
			w.Header().Set("x-sib-ratelimit-remaining", "0")
			w.Header().Set("x-sib-ratelimit-reset", secs)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusTooManyRequests)
			_, _ = w.Write([]byte(`{"code":"too_many_requests","message":"rate limit reached"}`))
		default:
			next.ServeHTTP(w, r)
		}
	}), answered
}
