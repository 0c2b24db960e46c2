package webhook_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/failure"
)

// bulkPage is what a bulk receiver reads.
type bulkPage struct {
	Records []struct {
		Key  string         `json:"key"`
		Data map[string]any `json:"data"`
	} `json:"records"`
}

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
			if failure.CodeOf(err) != failure.InvalidSyncDefinition || !errors.Is(err, destination.ErrNotSent) {
				t.Fatalf("Write error %v, want invalid_sync_definition wrapping ErrNotSent (the receiver took nothing)", err)
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

// A 404 or 405 says nothing is at the sync's url (a typo'd path, a receiver
// moved or not deployed yet), not that the records are bad: each record
// was rejected for it, and the run failed destination_rejected_records,
// whose advice is to fix the mapping. Now the page fails as the address's
// (destination_unavailable, retried later), nothing rejected, nothing
// taken as sent.
func TestNoReceiverAtTheAddressRejectsNothing(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusNotFound, http.StatusMethodNotAllowed} {
		for _, mode := range []string{webhook.ModeSingle, webhook.ModeBulk} {
			t.Run(fmt.Sprintf("%d/%s", status, mode), func(t *testing.T) {
				t.Parallel()
				var n atomic.Int64
				d := unkind(t, mode, func(w http.ResponseWriter, r *http.Request) {
					n.Add(1)
					w.WriteHeader(status)
					io.WriteString(w, "<html><body>Not Found</body></html>")
				})
				recs := records(20)
				res, err := d.Write(t.Context(), recs)
				if failure.CodeOf(err) != failure.DestinationUnavailable || !errors.Is(err, destination.ErrNotSent) {
					t.Fatalf("Write error %v, want destination_unavailable wrapping ErrNotSent", err)
				}
				if !strings.Contains(err.Error(), "check the destination's url") {
					t.Errorf("error %q does not point at the url", err)
				}
				for _, r := range res {
					if r.Outcome != destination.NotSent {
						t.Errorf("%s: outcome %v, want not sent", r.Key[:8], r.Outcome)
					}
				}
				if got := n.Load(); got > 4 {
					t.Errorf("%d requests to an address that answered %d", got, status)
				}
			})
		}
	}
}

// A receiver that refuses a body over its size limit with 413 (nginx's
// client_max_body_size, 1 MiB by default; API gateways' payload limits)
// refused the whole bulk page: every record was rejected, and sent again
// in as large a page on every later run. The page is split instead; only
// a record too large alone is rejected.
func TestBulkTooLargeIsSplit(t *testing.T) {
	t.Parallel()
	const limit = 1200 // bytes; a page of 4 records fits, 16 do not
	var (
		mu   sync.Mutex
		got  = map[string]int{}
		keys = map[string]bool{}
	)
	d := unkind(t, webhook.ModeBulk, func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > limit {
			w.WriteHeader(http.StatusRequestEntityTooLarge)
			io.WriteString(w, "<html><body>413 Request Entity Too Large</body></html>")
			return
		}
		var p bulkPage
		if err := json.Unmarshal(body, &p); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if keys[r.Header.Get("Idempotency-Key")] {
			return // a replay
		}
		keys[r.Header.Get("Idempotency-Key")] = true
		for _, rec := range p.Records {
			got[rec.Key]++
		}
		w.WriteHeader(http.StatusAccepted)
	})
	recs := records(16)
	big := destination.Record{Key: strings.Repeat("b", 64), Data: map[string]any{"note": strings.Repeat("x", 2*limit)}}
	recs = append(recs[:8], append([]destination.Record{big}, recs[8:]...)...)
	res, err := d.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	for _, r := range res {
		switch {
		case r.Key == big.Key:
			if r.Outcome != destination.Rejected {
				t.Errorf("the record too large alone: %v, want rejected", r.Outcome)
			}
		case r.Outcome != destination.Delivered:
			t.Errorf("%s: %v (%s), want delivered", r.Key[:8], r.Outcome, r.Message)
		case got[r.Key] != 1:
			t.Errorf("%s delivered but received %d times", r.Key[:8], got[r.Key])
		}
	}
}

// One bad record in a bulk page (a 422 or 400 from a receiver validating
// every record) rejected the whole page: a bad record must never block
// its page (docs/guide.md#destinations). The page is
// split until the receiver's refusal names the record alone.
func TestBulkBadRecordDoesNotBlockItsPage(t *testing.T) {
	t.Parallel()
	recs := records(10)
	bad := recs[6].Key
	var (
		mu  sync.Mutex
		got = map[string]int{}
	)
	d := unkind(t, webhook.ModeBulk, func(w http.ResponseWriter, r *http.Request) {
		var p bulkPage
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		for _, rec := range p.Records {
			if rec.Key == bad {
				w.WriteHeader(http.StatusUnprocessableEntity)
				io.WriteString(w, `{"error":"email is not valid"}`)
				return
			}
		}
		mu.Lock()
		for _, rec := range p.Records {
			got[rec.Key]++
		}
		mu.Unlock()
	})
	res, err := d.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	if len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	for _, r := range res {
		want := destination.Delivered
		if r.Key == bad {
			want = destination.Rejected
		}
		if r.Outcome != want {
			t.Errorf("%s: %v, want %v", r.Key[:8], r.Outcome, want)
		}
		if want == destination.Delivered && got[r.Key] != 1 {
			t.Errorf("%s delivered, received %d times", r.Key[:8], got[r.Key])
		}
	}
}

// A receiver's error page may echo the request (a debugging proxy, a
// framework's 400 page listing the headers): the rejection message, kept
// in the ledger and shown on the run page, must not hold a header value.
func TestRejectionMessageHoldsNoHeaderValue(t *testing.T) {
	t.Parallel()
	d := unkind(t, webhook.ModeSingle, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		auth := r.Header.Get("Authorization")
		_, token, _ := strings.Cut(auth, " ")
		io.WriteString(w, "bad request; headers: Authorization: "+auth+"; token "+token)
	})
	res, err := d.Write(t.Context(), records(1))
	if err != nil || len(res) != 1 || res[0].Outcome != destination.Rejected {
		t.Fatalf("Write = %+v, %v; want one rejected", res, err)
	}
	if strings.Contains(res[0].Message, "tok-SECRET") {
		t.Errorf("message %q holds the Authorization header's value", res[0].Message)
	}
}

// A 410 after an attempt that timed out (the receiver may have applied it,
// then been switched off) leaves the record in doubt, never not sent.
func TestGoneAfterATimeoutIsInDoubt(t *testing.T) {
	t.Parallel()
	var n atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if n.Add(1) == 1 {
			<-release // applied, the answer never comes in time
			return
		}
		w.WriteHeader(http.StatusGone)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close, which waits for the handler
	d, err := webhook.New(webhook.Params{
		URL: srv.URL, MaxRetries: 2, Timeout: 50 * time.Millisecond,
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	res, err := d.Write(t.Context(), records(1))
	if err == nil || errors.Is(err, destination.ErrNotSent) {
		t.Fatalf("Write error %v, want a failure not wrapping ErrNotSent", err)
	}
	if len(res) != 0 {
		t.Errorf("results %+v, want none (in doubt)", res)
	}
}
