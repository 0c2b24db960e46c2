package webhook_test

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/webhook"
)

// BenchmarkFlakyReceiver is the single path against a receiver that
// answers 10 % of requests 503 (each request 5 ms): four pages of 250
// records, 4 places, real backoffs (docs/PERFORMANCE.md, "A backoff gives
// its place up"). It reports records/s.
func BenchmarkFlakyReceiver(b *testing.B) {
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(1, 2))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(5 * time.Millisecond)
		mu.Lock()
		bad := rnd.Float64() < 0.10
		mu.Unlock()
		if bad {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	d, err := webhook.New(webhook.Params{URL: srv.URL + "/hook", Mode: webhook.ModeSingle, Concurrency: 4, MaxRetries: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	start, n := time.Now(), 0
	for it := 0; b.Loop(); it++ {
		for page := range 4 {
			recs := make([]destination.Record, 250)
			for i := range recs {
				recs[i] = destination.Record{Key: fmt.Sprintf("i%dp%dk%d", it, page, i), Data: map[string]any{"n": i}}
			}
			if _, err := d.Write(b.Context(), recs); err != nil {
				b.Fatal(err)
			}
			n += len(recs)
		}
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "records/s")
}
