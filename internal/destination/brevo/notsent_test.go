package brevo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// brevoStub answers POST /v3/contacts 201 and POST /v3/contacts/import 202;
// cut lists the request numbers (1-based) whose connection it cuts after
// reading them, without an answer.
func brevoStub(t *testing.T, cut ...int64) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		for _, c := range cut {
			if c == i {
				if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
					conn.Close()
				}
				return
			}
		}
		switch r.URL.Path {
		case "/v3/contacts/import":
			w.WriteHeader(http.StatusAccepted)
			fmt.Fprintf(w, `{"processId":%d}`, i)
		default:
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, `{"id":%d}`, i)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func notSentRecords(n int) []destination.Record {
	out := make([]destination.Record, n)
	for i := range out {
		out[i] = destination.Record{Key: fmt.Sprintf("%064d", i), Data: map[string]any{
			"email": fmt.Sprintf("user%d@example.com", i), "attributes": map[string]any{"N": strings.Repeat("x", 100)}}}
	}
	return out
}

func outcomes(recs []destination.Record, res []destination.Result) []string {
	by := map[string]destination.Result{}
	for _, r := range res {
		by[r.Key] = r
	}
	out := make([]string, len(recs))
	for i, r := range recs {
		if got, ok := by[r.Key]; ok {
			out[i] = got.Outcome.String()
		} else {
			out[i] = "in doubt"
		}
	}
	return out
}

func newStubDest(t *testing.T, srv *httptest.Server, mode string) *Destination {
	t.Helper()
	return newStubDestWith(t, srv, mode, nil)
}

func newStubDestWith(t *testing.T, srv *httptest.Server, mode string, client *http.Client) *Destination {
	t.Helper()
	d, err := New(Params{BaseURL: srv.URL + "/v3", APIKey: "xkeysib-k", Mode: mode, ListIDs: []int64{1}, HTTPClient: client,
		Concurrency: 1, RateLimit: 1e9, Clock: clock.NewFake(time.Unix(1_700_000_000, 0)),
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() }})
	if err != nil {
		t.Fatal(err)
	}
	d.maxBody = 550 // two records per import body
	t.Cleanup(func() { d.Close() })
	return d
}

// closeCounter counts the answers whose body the client has closed.
type closeCounter struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c closeCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := c.rt.RoundTrip(r)
	if err == nil {
		res.Body = countingBody{res.Body, c.n}
	}
	return res, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (b countingBody) Close() error {
	defer b.n.Add(1)
	return b.ReadCloser.Close()
}

// The lease runs out after the first request: what was not yet sent is
// NotSent, per record on the single path and per chunk on the bulk path.
func TestWhatWasNotSentAfterTheLeaseEndedIsNotSent(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode string
		want string
	}{
		{ModeSingle, "[delivered not sent not sent not sent not sent not sent]"},
		{ModeBulk, "[accepted accepted not sent not sent not sent not sent]"},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			t.Parallel()
			srv, n := brevoStub(t)
			// The lease ends once the client has read the first answer:
			// flipping on the server's side raced the client's own reads.
			var answered atomic.Int64
			d := newStubDestWith(t, srv, tt.mode, &http.Client{Transport: closeCounter{http.DefaultTransport, &answered}})
			far := time.Unix(1_800_000_000, 0)
			ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time {
				if answered.Load() > 0 {
					return time.Unix(0, 0)
				}
				return far
			})
			recs := notSentRecords(6)
			res, err := d.Write(ctx, recs)
			if failure.CodeOf(err) != failure.LeaseLost || !errors.Is(err, destination.ErrNoLeaseTime) {
				t.Fatalf("Write error %v, want lease_lost wrapping ErrNoLeaseTime", err)
			}
			if got := fmt.Sprint(outcomes(recs, res)); got != tt.want {
				t.Errorf("outcomes %s, want %s", got, tt.want)
			}
			if n.Load() != 1 {
				t.Errorf("%d requests, want 1", n.Load())
			}
		})
	}
}

// Only the record whose POST was written and then lost is in doubt; the
// records the failed page never sent are NotSent (finding 11).
func TestOnlyAWrittenRequestIsInDoubt(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{ModeSingle, ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			srv, n := brevoStub(t, 2) // the second request is cut after it was read
			d := newStubDest(t, srv, mode)
			recs := notSentRecords(6)
			res, err := d.Write(t.Context(), recs)
			if failure.CodeOf(err) != failure.DestinationUnavailable || !errors.Is(err, ErrOutcomeUnknown) {
				t.Fatalf("Write error %v, want destination_unavailable wrapping ErrOutcomeUnknown", err)
			}
			want := "[delivered in doubt not sent not sent not sent not sent]"
			if mode == ModeBulk {
				want = "[accepted accepted in doubt in doubt not sent not sent]"
			}
			if got := fmt.Sprint(outcomes(recs, res)); got != want {
				t.Errorf("outcomes %s, want %s", got, want)
			}
			if n.Load() != 2 {
				t.Errorf("%d requests, want 2 (a lost write is not resent)", n.Load())
			}
		})
	}
}
