package deadman_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

const hbToken = "7c1d0e2f-hb-s3cret-token"

// monitor is a healthchecks.io-like endpoint that records its pings and
// answers with the statuses queued in answers (then 200).
type monitor struct {
	mu      sync.Mutex
	pings   []ping
	answers []int
	block   chan struct{} // non-nil: every request waits for it (or its own end)
	srv     *httptest.Server
}

type ping struct {
	method, path, query, body, contentType string
}

func newMonitor(t *testing.T) *monitor {
	t.Helper()
	m := &monitor{}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		m.mu.Lock()
		m.pings = append(m.pings, ping{r.Method, r.URL.Path, r.URL.RawQuery, string(b), r.Header.Get("Content-Type")})
		status := http.StatusOK
		if len(m.answers) > 0 {
			status, m.answers = m.answers[0], m.answers[1:]
		}
		block := m.block
		m.mu.Unlock()
		if block != nil {
			select {
			case <-block:
			case <-r.Context().Done():
				return
			}
		}
		if status >= 300 && status < 400 {
			w.Header().Set("Location", "/elsewhere")
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

func (m *monitor) url() string { return m.srv.URL + "/ping/" + hbToken }

func (m *monitor) take() []ping {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.pings
	m.pings = nil
	return out
}

func noSleep(ctx context.Context, _ time.Duration) error { return ctx.Err() }

func finished(id int64, state store.RunState, code failure.Code) store.Run {
	return store.Run{ID: id, SyncID: "contacts", State: state, FailureCode: string(code),
		Counters: store.Counters{Read: 500, Written: 480, Replayed: 20}}
}

// TestHeartbeatOnSuccessAndFail is docs/guide.md#telling-silence-from-outside's heartbeat: a request to the
// URL on every successful run, to URL + "/fail" on a failed one, nothing
// for a skipped or interrupted run.
func TestHeartbeatOnSuccessAndFail(t *testing.T) {
	t.Parallel()
	m := newMonitor(t)
	h := deadman.NewHeartbeats(deadman.HeartbeatParams{Sleep: noSleep})
	ctx := t.Context()
	if err := h.Send(ctx, "contacts", m.url(), finished(7, store.RunSucceeded, "")); err != nil {
		t.Fatal(err)
	}
	if err := h.Send(ctx, "contacts", m.url(), finished(8, store.RunFailed, failure.DestinationAuth)); err != nil {
		t.Fatal(err)
	}
	if err := h.Send(ctx, "contacts", m.url()+"?env=prod", finished(9, store.RunFailed, failure.StoreUnavailable)); err != nil {
		t.Fatal(err)
	}
	for _, st := range []store.RunState{store.RunSkipped, store.RunInterrupted, store.RunRunning} {
		if err := h.Send(ctx, "contacts", m.url(), finished(10, st, failure.Interrupted)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Send(ctx, "contacts", "", finished(11, store.RunSucceeded, "")); err != nil {
		t.Fatal(err)
	}
	got := m.take()
	if len(got) != 3 {
		t.Fatalf("pings %+v, want 3 (success, fail, fail with a query)", got)
	}
	want := []ping{
		{method: "POST", path: "/ping/" + hbToken},
		{method: "POST", path: "/ping/" + hbToken + "/fail"},
		{method: "POST", path: "/ping/" + hbToken + "/fail", query: "env=prod"},
	}
	for i, p := range got {
		if p.method != want[i].method || p.path != want[i].path || p.query != want[i].query || !strings.HasPrefix(p.contentType, "text/plain") {
			t.Errorf("ping %d = %+v, want %+v", i, p, want[i])
		}
	}
	if !strings.Contains(got[0].body, "run 7 of sync contacts succeeded: read 500, written 480, replayed 20") {
		t.Errorf("success body %q", got[0].body)
	}
	if !strings.Contains(got[1].body, "run 8 of sync contacts failed: destination_auth (owner: you)") {
		t.Errorf("failure body %q", got[1].body)
	}
}

// TestHeartbeatRetriesALittle: no answer, a 429 or a 5xx are retried up to
// the attempts; a 4xx is not.
func TestHeartbeatRetriesALittle(t *testing.T) {
	t.Parallel()
	m := newMonitor(t)
	var waits []time.Duration
	var mu sync.Mutex
	h := deadman.NewHeartbeats(deadman.HeartbeatParams{Sleep: func(ctx context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return ctx.Err()
	}})
	ctx := t.Context()
	m.answers = []int{503, 429}
	if err := h.Send(ctx, "contacts", m.url(), finished(1, store.RunSucceeded, "")); err != nil {
		t.Fatalf("503, 429, then 200: %v", err)
	}
	if n := len(m.take()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}
	if len(waits) != 2 || waits[0] != deadman.HeartbeatBackoff || waits[1] != 2*deadman.HeartbeatBackoff {
		t.Errorf("waits %v, want 1s then 2s", waits)
	}

	m.answers = []int{500, 502, 503, 200}
	err := h.Send(ctx, "contacts", m.url(), finished(2, store.RunSucceeded, ""))
	var herr *deadman.HeartbeatError
	if !errors.As(err, &herr) || !errors.Is(err, deadman.ErrHeartbeat) || herr.Attempts != deadman.HeartbeatAttempts || herr.Status != 503 {
		t.Fatalf("three 5xx: %v (%+v), want a HeartbeatError after 3 attempts", err, herr)
	}
	if n := len(m.take()); n != 3 {
		t.Fatalf("%d requests, want 3", n)
	}

	m.answers = []int{404}
	if err := h.Send(ctx, "contacts", m.url(), finished(3, store.RunFailed, failure.SourceUnavailable)); !errors.As(err, &herr) || herr.Status != 404 || herr.Attempts != 1 {
		t.Fatalf("404: %v, want one attempt", err)
	}
	m.take()
	m.answers = []int{200} // consumed by nothing: the server is gone
	m.srv.Close()
	if err := h.Send(ctx, "contacts", m.url(), finished(4, store.RunSucceeded, "")); !errors.As(err, &herr) || herr.Status != 0 || herr.Attempts != 3 {
		t.Fatalf("refused connections: %v, want 3 attempts without an answer", err)
	}
	if strings.Contains(err.Error(), hbToken) || strings.Contains(err.Error(), "/ping/") {
		t.Errorf("error shows the URL: %v", err)
	}
}

// TestHeartbeatFollowsNoRedirect: a 3xx is an error, and the place it
// points to gets nothing (the URL's token and the summary stay put).
func TestHeartbeatFollowsNoRedirect(t *testing.T) {
	t.Parallel()
	m := newMonitor(t)
	m.answers = []int{http.StatusTemporaryRedirect}
	var logs bytes.Buffer
	h := deadman.NewHeartbeats(deadman.HeartbeatParams{Sleep: noSleep, Client: m.srv.Client(),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	err := h.Send(t.Context(), "contacts", m.url(), finished(1, store.RunSucceeded, ""))
	var herr *deadman.HeartbeatError
	if !errors.As(err, &herr) || herr.Status != http.StatusTemporaryRedirect || herr.Attempts != 1 {
		t.Fatalf("307: %v, want an error after one attempt", err)
	}
	got := m.take()
	if len(got) != 1 || got[0].path != "/ping/"+hbToken {
		t.Fatalf("requests %+v: the redirect was followed", got)
	}
	if !strings.Contains(err.Error(), "redirects are not followed") || strings.Contains(err.Error(), hbToken) {
		t.Errorf("error %q", err)
	}
	// Through Beat, the failure is logged, without the URL.
	m.answers = []int{http.StatusFound}
	h.Beat(t.Context(), "contacts", m.url(), finished(2, store.RunSucceeded, ""))
	if err := h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "heartbeat failed") || strings.Contains(logs.String(), hbToken) {
		t.Errorf("log %q", logs.String())
	}
}

// TestSlowHeartbeatNeverBlocks: Beat returns while the monitor has not
// answered; Close waits for it, and a Close whose context ends cancels it.
func TestSlowHeartbeatNeverBlocks(t *testing.T) {
	t.Parallel()
	m := newMonitor(t)
	m.block = make(chan struct{})
	h := deadman.NewHeartbeats(deadman.HeartbeatParams{Sleep: noSleep})
	h.Beat(t.Context(), "contacts", m.url(), finished(1, store.RunSucceeded, "")) // would deadlock if it waited
	close(m.block)
	if err := h.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if n := len(m.take()); n != 1 {
		t.Fatalf("%d pings, want 1", n)
	}

	m.mu.Lock()
	m.block = make(chan struct{}) // never released
	m.mu.Unlock()
	h = deadman.NewHeartbeats(deadman.HeartbeatParams{Sleep: noSleep})
	h.Beat(t.Context(), "contacts", m.url(), finished(2, store.RunSucceeded, ""))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := h.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Close with an ended context: %v", err)
	}
}

// TestHeartbeatTimesOut: an attempt that gets no answer within the timeout
// ends, and so does the heartbeat.
func TestHeartbeatTimesOut(t *testing.T) {
	t.Parallel()
	m := newMonitor(t)
	m.block = make(chan struct{}) // never released: only the timeout ends a request
	h := deadman.NewHeartbeats(deadman.HeartbeatParams{Sleep: noSleep, Timeout: 20 * time.Millisecond, Attempts: 2})
	err := h.Send(t.Context(), "contacts", m.url(), finished(1, store.RunSucceeded, ""))
	var herr *deadman.HeartbeatError
	if !errors.As(err, &herr) || herr.Attempts != 2 || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("%v, want two timed-out attempts", err)
	}
}

func TestHeartbeatTarget(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url   string
		state store.RunState
		want  string
	}{
		{"https://hc-ping.com/uuid", store.RunSucceeded, "https://hc-ping.com/uuid"},
		{"https://hc-ping.com/uuid", store.RunFailed, "https://hc-ping.com/uuid/fail"},
		{"https://hc-ping.com/uuid/", store.RunFailed, "https://hc-ping.com/uuid/fail"},
		{"https://cronitor.link/p/key/job?env=prod", store.RunFailed, "https://cronitor.link/p/key/job/fail?env=prod"},
		{"https://hc-ping.com/uuid", store.RunSkipped, ""},
		{"", store.RunSucceeded, ""},
	} {
		got, _ := deadman.HeartbeatTarget(tc.url, store.Run{State: tc.state})
		if got != tc.want {
			t.Errorf("HeartbeatTarget(%q, %s) = %q, want %q", tc.url, tc.state, got, tc.want)
		}
	}
}
