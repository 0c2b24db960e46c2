package webhook_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/failure"
)

// unkind starts a receiver answering with h and returns a destination
// posting to it (no signing, no sleeping).
func unkind(t *testing.T, mode string, h http.HandlerFunc) *webhook.Destination {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	d, err := webhook.New(webhook.Params{
		URL: srv.URL + "/hook", Mode: mode, MaxRetries: 2,
		Headers: map[string]string{"Authorization": token},
		Sleep:   func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// Standard Webhooks: "410 Gone ... Sender should disable the webhook
// endpoint, and stop sending it messages". oncesync rejected each record
// instead (so in single mode every record of the run was posted to a
// receiver that had said stop, and the run went on as if the records
// were bad).
func TestGoneStopsTheRun(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{webhook.ModeSingle, webhook.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			var n atomic.Int64
			d := unkind(t, mode, func(w http.ResponseWriter, r *http.Request) {
				n.Add(1)
				w.WriteHeader(http.StatusGone)
			})
			recs := records(20)
			res, err := d.Write(t.Context(), recs)
			if failure.CodeOf(err) != failure.DestinationUnavailable || !errors.Is(err, destination.ErrNotSent) {
				t.Fatalf("Write error %v, want destination_unavailable wrapping ErrNotSent (the receiver took nothing)", err)
			}
			if !strings.Contains(err.Error(), "410") {
				t.Errorf("error %q does not name the 410", err)
			}
			for _, r := range res {
				if r.Outcome != destination.NotSent {
					t.Errorf("%s: outcome %v, want not sent", r.Key[:8], r.Outcome)
				}
			}
			if got := n.Load(); got > 4 { // single mode: at most one per worker in flight
				t.Errorf("%d requests to a receiver that answered 410 Gone", got)
			}
		})
	}
}

