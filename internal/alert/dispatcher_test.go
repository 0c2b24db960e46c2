package alert

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/testenv"
)

// countingSink counts the Send calls of the sink it wraps and renames it.
type countingSink struct {
	Sink
	name  string
	calls atomic.Int64
}

func (s *countingSink) Name() string { return s.name }

func (s *countingSink) Send(ctx context.Context, a Alert) error {
	s.calls.Add(1)
	return s.Sink.Send(ctx, a)
}

// chanSink delivers alerts to a channel; when block is non-nil each Send
// first announces itself on started and waits for block or ctx.
type chanSink struct {
	name    string
	got     chan Alert
	started chan struct{}
	block   chan struct{}
	closed  atomic.Bool
}

func newChanSink(name string) *chanSink {
	return &chanSink{name: name, got: make(chan Alert, 100), started: make(chan struct{}, 100)}
}

func (s *chanSink) Name() string { return s.name }

func (s *chanSink) Send(ctx context.Context, a Alert) error {
	if s.block != nil {
		s.started <- struct{}{}
		select {
		case <-s.block:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	s.got <- a
	return nil
}

func (s *chanSink) Close(context.Context) error { s.closed.Store(true); return nil }

func receive(t *testing.T, ch <-chan Alert, what string) Alert {
	t.Helper()
	select {
	case a := <-ch:
		return a
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
		return Alert{}
	}
}

func TestRetryPolicyBackoff(t *testing.T) {
	t.Parallel()
	p := RetryPolicy{}.withDefaults()
	if p.Attempts != 5 {
		t.Errorf("default attempts = %d, want 5", p.Attempts)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second,
		32 * time.Second, time.Minute, time.Minute, time.Minute}
	for i, w := range want {
		if got := p.Backoff(i + 1); got != w {
			t.Errorf("Backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
	custom := RetryPolicy{InitialBackoff: 100 * time.Millisecond, MaxBackoff: 300 * time.Millisecond}.withDefaults()
	for i, w := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 300 * time.Millisecond, 300 * time.Millisecond} {
		if got := custom.Backoff(i + 1); got != w {
			t.Errorf("custom Backoff(%d) = %v, want %v", i+1, got, w)
		}
	}
}

// TestDownSinkDelaysNothing runs real sinks: a webhook that is up, one whose
// port refuses connections, one whose server hangs, and the log sink.
func TestDownSinkDelaysNothing(t *testing.T) {
	t.Parallel()
	const secret, token = "whsec-s3cret-value", "tok-5ecret"

	upSrv, upGot := webhookServer(t, http.StatusOK)
	up, err := NewWebhookSink(WebhookSinkParams{URL: upSrv.URL, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	downWH, err := NewWebhookSink(WebhookSinkParams{URL: "http://" + testenv.RefusedAddr(t) + "/h/" + token, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	down := &countingSink{Sink: downWH, name: "webhook-down"}

	hangStarted := make(chan struct{}, 10)
	release := make(chan struct{})
	hangSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hangStarted <- struct{}{}
		select { // never answers while the test runs
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hangSrv.Close)
	t.Cleanup(func() { close(release) })
	hangWH, err := NewWebhookSink(WebhookSinkParams{URL: hangSrv.URL, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	hang := &countingSink{Sink: hangWH, name: "webhook-hang"}

	logger, logs := newTestLogger()
	sleeper := &noSleep{}
	d := NewDispatcher(DispatcherParams{
		Sinks:  []Sink{NewLogSink(logger), &countingSink{Sink: up, name: "webhook-up"}, down, hang},
		Logger: logger,
		Clock:  clock.NewFake(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)),
		Retry:  RetryPolicy{Sleep: sleeper.Sleep},
	})

	const n = 3
	var ids []string
	start := time.Now()
	for i := range n {
		a := testAlert()
		a.ID = ""
		a.SyncID = fmt.Sprintf("sync-%d", i)
		queued, err := d.Notify(context.Background(), a)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, queued.ID)
	}
	if el := time.Since(start); el > time.Second {
		t.Errorf("Notify took %v for %d alerts, want immediate", el, n)
	}

	// The working webhook receives every alert while the hanging one is
	// still stuck on the first.
	<-hangStarted
	for i := range n {
		select {
		case req := <-upGot:
			if got := req.header.Get("webhook-id"); got != ids[i] {
				t.Errorf("up webhook %d: webhook-id %q, want %q", i, got, ids[i])
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("up webhook got %d of %d alerts", i, n)
		}
	}
	if c := hang.calls.Load(); c != 1 {
		t.Errorf("hanging sink: %d calls, want 1 (still stuck on the first)", c)
	}

	// The refused sink is tried 5 times per alert with 1s,2s,4s,8s waits.
	waitFor(t, "final failures of the down sink", func() bool {
		return len(failures(t, logs, "alert delivery failed", "webhook-down")) == n
	})
	if c := down.calls.Load(); c != 5*n {
		t.Errorf("down sink: %d calls, want %d", c, 5*n)
	}
	for _, r := range failures(t, logs, "alert delivery failed", "webhook-down") {
		if r["attempts"] != float64(5) || r["level"] != "ERROR" {
			t.Errorf("final failure record = %v", r)
		}
		if !strings.Contains(r["error"].(string), "refused") {
			t.Errorf("final failure error = %v", r["error"])
		}
	}
	waits := sleeper.Waits()
	slices.Sort(waits)
	var want []time.Duration
	for range n {
		want = append(want, time.Second, 2*time.Second, 4*time.Second, 8*time.Second)
	}
	slices.Sort(want)
	if !slices.Equal(waits, want) {
		t.Errorf("backoff waits = %v, want %v", waits, want)
	}

	// The log sink wrote every alert.
	waitFor(t, "log lines", func() bool { return len(logs.find(t, "alert")) == n })

	// Close gives up on the hanging sink at its deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := d.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Close = %v, want the deadline", err)
	}
	if got := len(failures(t, logs, "alert delivery abandoned at shutdown", "webhook-hang")); got != n {
		t.Errorf("%d abandoned alerts logged for the hanging sink, want %d", got, n)
	}
	if _, err := d.Notify(context.Background(), testAlert()); !errors.Is(err, ErrClosed) {
		t.Errorf("Notify after Close = %v, want ErrClosed", err)
	}
	for _, s := range []string{secret, token} {
		if strings.Contains(logs.String(), s) {
			t.Errorf("logs leak %q", s)
		}
	}
}

// failures returns the log records with message msg for sink.
func failures(t *testing.T, logs *logBuffer, msg, sink string) []map[string]any {
	var out []map[string]any
	for _, r := range logs.find(t, msg) {
		if r["sink"] == sink {
			out = append(out, r)
		}
	}
	return out
}

func TestDispatcherRetries(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		attempts     int
		statuses     []int // answers in order; the last repeats
		wantRequests int
		wantWaits    []time.Duration
		wantFailure  bool
	}{
		{name: "succeeds first time", statuses: []int{200}, wantRequests: 1},
		{name: "recovers after two 503s", statuses: []int{503, 503, 200}, wantRequests: 3,
			wantWaits: []time.Duration{time.Second, 2 * time.Second}},
		{name: "gives up after the default 5 attempts", statuses: []int{503}, wantRequests: 5,
			wantWaits: []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, wantFailure: true},
		{name: "configured attempts", attempts: 2, statuses: []int{500}, wantRequests: 2,
			wantWaits: []time.Duration{time.Second}, wantFailure: true},
		{name: "permanent failure is not retried", statuses: []int{404}, wantRequests: 1, wantFailure: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var mu sync.Mutex
			requests := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				mu.Lock()
				st := tt.statuses[min(requests, len(tt.statuses)-1)]
				requests++
				mu.Unlock()
				w.WriteHeader(st)
			}))
			t.Cleanup(srv.Close)
			wh, err := NewWebhookSink(WebhookSinkParams{URL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			logger, logs := newTestLogger()
			sleeper := &noSleep{}
			d := NewDispatcher(DispatcherParams{Sinks: []Sink{wh}, Logger: logger,
				Retry: RetryPolicy{Attempts: tt.attempts, Sleep: sleeper.Sleep}})
			if _, err := d.Notify(context.Background(), testAlert()); err != nil {
				t.Fatal(err)
			}
			// Close drains the queue: every attempt has happened when it returns.
			if err := d.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if requests != tt.wantRequests {
				t.Errorf("requests = %d, want %d", requests, tt.wantRequests)
			}
			if w := sleeper.Waits(); !slices.Equal(w, tt.wantWaits) {
				t.Errorf("waits = %v, want %v", w, tt.wantWaits)
			}
			f := failures(t, logs, "alert delivery failed", "webhook")
			if (len(f) == 1) != tt.wantFailure || len(f) > 1 {
				t.Errorf("final failure records = %v, want failure %v", f, tt.wantFailure)
			}
			if tt.wantFailure && len(f) == 1 && f[0]["attempts"] != float64(tt.wantRequests) {
				t.Errorf("attempts logged = %v, want %d", f[0]["attempts"], tt.wantRequests)
			}
		})
	}
}

func TestCloseDrainsQueuedAlerts(t *testing.T) {
	t.Parallel()
	slow := newChanSink("slow")
	slow.block = make(chan struct{})
	logger, _ := newTestLogger()
	d := NewDispatcher(DispatcherParams{Sinks: []Sink{slow}, Logger: logger})
	const n = 5
	for range n {
		if _, err := d.Notify(context.Background(), testAlert()); err != nil {
			t.Fatal(err)
		}
	}
	<-slow.started
	closed := make(chan error, 1)
	go func() { closed <- d.Close(context.Background()) }()
	select {
	case err := <-closed:
		t.Fatalf("Close returned (%v) before the queue was drained", err)
	default:
	}
	close(slow.block)
	if err := <-closed; err != nil {
		t.Fatalf("Close = %v", err)
	}
	if len(slow.got) != n {
		t.Errorf("%d alerts delivered before Close returned, want %d", len(slow.got), n)
	}
	if !slow.closed.Load() {
		t.Error("Close did not close the sink")
	}
}

func TestNotifyFillsIDAndTime(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	s := newChanSink("rec")
	d := NewDispatcher(DispatcherParams{Sinks: []Sink{s}, Clock: clock.NewFake(now)})
	t.Cleanup(func() { _ = d.Close(context.Background()) })

	a := testAlert()
	a.ID, a.At = "", time.Time{}
	queued, err := d.Notify(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	got := receive(t, s.got, "alert")
	if len(got.ID) != 32 || got.ID != queued.ID || !got.At.Equal(now) {
		t.Errorf("delivered id %q at %v, queued id %q; want a 32-hex id at %v", got.ID, got.At, queued.ID, now)
	}
	other, _ := d.Notify(context.Background(), Alert{Kind: "x"})
	if other.ID == got.ID {
		t.Error("two alerts got the same id")
	}

	kept := testAlert()
	queued, _ = d.Notify(context.Background(), kept)
	if queued.ID != kept.ID || !queued.At.Equal(kept.At) {
		t.Errorf("Notify overwrote id/time: %+v", queued)
	}
}

func TestNotifyNeverBlocksOnAFullQueue(t *testing.T) {
	t.Parallel()
	stuck := newChanSink("stuck")
	stuck.block = make(chan struct{})
	defer close(stuck.block)
	logger, logs := newTestLogger()
	d := NewDispatcher(DispatcherParams{Sinks: []Sink{stuck}, Logger: logger, QueueSize: 1})
	t.Cleanup(func() { _ = d.Close(context.Background()) })

	first, _ := d.Notify(context.Background(), testAlert())
	<-stuck.started // the worker holds the first alert
	returned := make(chan Alert, 1)
	go func() {
		_, _ = d.Notify(context.Background(), testAlert()) // fills the queue
		third, _ := d.Notify(context.Background(), testAlert())
		returned <- third
	}()
	var third Alert
	select {
	case third = <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("Notify blocked on a full sink queue")
	}
	dropped := logs.find(t, "alert dropped: sink queue full")
	if len(dropped) != 1 || dropped[0]["alert_id"] != third.ID || dropped[0]["sink"] != "stuck" {
		t.Errorf("dropped records = %v, want the third alert (first %s)", dropped, first.ID)
	}
}

func TestLogSinkLevelsAndFields(t *testing.T) {
	t.Parallel()
	tests := []struct {
		severity Severity
		level    string
	}{
		{SeverityCritical, "ERROR"},
		{SeverityWarning, "WARN"},
		{SeverityInfo, "INFO"},
		{"", "INFO"},
	}
	for _, tt := range tests {
		t.Run(string(tt.severity), func(t *testing.T) {
			t.Parallel()
			logger, logs := newTestLogger()
			a := testAlert()
			a.Severity = tt.severity
			if err := NewLogSink(logger).Send(context.Background(), a); err != nil {
				t.Fatal(err)
			}
			recs := logs.find(t, "alert")
			if len(recs) != 1 {
				t.Fatalf("records = %v", logs.records(t))
			}
			r := recs[0]
			want := map[string]any{
				"level": tt.level, "alert_id": a.ID, "kind": a.Kind, "severity": string(tt.severity),
				"workspace": "acme", "sync": "contacts-to-brevo", "what_happened": a.WhatHappened,
				"next_step": a.NextStep, "owner": "you", "link": a.Link, "at": "2025-03-04T05:06:07Z",
			}
			for k, v := range want {
				if r[k] != v {
					t.Errorf("%s = %v, want %v", k, r[k], v)
				}
			}
		})
	}
}

func TestFromConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cfg       config.Alerts
		wantSinks []string
		wantErr   string // substring; the secret must not appear
	}{
		{name: "log only", wantSinks: []string{"log"}},
		{
			name: "all sinks",
			cfg: config.Alerts{
				Webhook: config.WebhookAlert{URL: "https://hooks.example.com/x", Secret: "s3cret"},
				Email:   config.EmailAlert{Host: "smtp.example.com", Port: 587, Password: "s3cret", From: "a@example.com", To: []string{"b@example.com"}, StartTLS: true},
				Sentry:  config.SentryAlert{DSN: "https://s3cret@o1.ingest.sentry.io/42"},
			},
			wantSinks: []string{"log", "webhook", "email", "sentry"},
		},
		{name: "bad sentry dsn", cfg: config.Alerts{Sentry: config.SentryAlert{DSN: "https://s3cret@/"}}, wantErr: "alerts.sentry"},
		{name: "bad webhook url", cfg: config.Alerts{Webhook: config.WebhookAlert{URL: "s3cret://x"}}, wantErr: "alerts.webhook"},
		{name: "email without recipients", cfg: config.Alerts{Email: config.EmailAlert{Host: "h", Password: "s3cret", From: "a@example.com"}}, wantErr: "alerts.email"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d, err := FromConfig(tt.cfg, nil, nil)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !errors.Is(err, ErrInvalidConfig) {
					t.Fatalf("err = %v, want %q wrapping ErrInvalidConfig", err, tt.wantErr)
				}
				if strings.Contains(err.Error(), "s3cret") {
					t.Errorf("error %q leaks the secret", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = d.Close(context.Background()) })
			if got := d.Sinks(); !slices.Equal(got, tt.wantSinks) {
				t.Errorf("sinks = %v, want %v", got, tt.wantSinks)
			}
		})
	}
}

// errSink fails every delivery with err.
type errSink struct {
	name string
	err  error
}

func (s errSink) Name() string                      { return s.name }
func (s errSink) Send(context.Context, Alert) error { return s.err }

// TestDeliveryTellsWhetherSomebodyWasTold: Send's Delivery says, once every
// sink is done, whether a sink other than the log delivered the alert (the
// log alone counts only when it is the only sink), and names the sinks
// that gave up.
func TestDeliveryTellsWhetherSomebodyWasTold(t *testing.T) {
	t.Parallel()
	logger, _ := newTestLogger()
	down := errSink{"webhook", errors.New("status 503")}
	up := newChanSink("email")
	tests := []struct {
		name   string
		sinks  []Sink
		told   bool
		failed []string
	}{
		{"the log alone", []Sink{NewLogSink(logger)}, true, nil},
		{"the log and a sink that is down", []Sink{NewLogSink(logger), down}, false, []string{"webhook"}},
		{"one sink down, one up", []Sink{NewLogSink(logger), down, up}, true, []string{"webhook"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := NewDispatcher(DispatcherParams{Sinks: tt.sinks, Logger: logger, Retry: RetryPolicy{Sleep: (&noSleep{}).Sleep}})
			t.Cleanup(func() { _ = d.Close(context.Background()) })
			_, dl, err := d.Send(context.Background(), testAlert())
			if err != nil {
				t.Fatal(err)
			}
			if err := dl.Wait(t.Context()); err != nil {
				t.Fatal(err)
			}
			if dl.Told() != tt.told || !slices.Equal(dl.Failed(), tt.failed) || len(dl.Pending()) != 0 {
				t.Errorf("Told %v, Failed %v, Pending %v; want %v, %v, none", dl.Told(), dl.Failed(), dl.Pending(), tt.told, tt.failed)
			}
		})
	}

	// A sink still trying is pending, and tells nobody yet.
	slow := newChanSink("sentry")
	slow.block = make(chan struct{})
	d := NewDispatcher(DispatcherParams{Sinks: []Sink{NewLogSink(logger), slow}, Logger: logger})
	_, dl, err := d.Send(context.Background(), testAlert())
	if err != nil {
		t.Fatal(err)
	}
	<-slow.started
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := dl.Wait(ctx); err == nil || dl.Told() || !slices.Equal(dl.Pending(), []string{"sentry"}) {
		t.Errorf("Wait %v, Told %v, Pending %v: want a timeout, not told, sentry pending", err, dl.Told(), dl.Pending())
	}
	close(slow.block)
	if err := dl.Wait(context.Background()); err != nil || !dl.Told() {
		t.Errorf("after the slow sink delivered: Wait %v, Told %v", err, dl.Told())
	}
	_ = d.Close(context.Background())
}

// TestDispatcherCountsOutcomes: what became of every alert at every sink is
// counted (oncesync_alerts_total{sink,outcome}), so that a rule outside
// oncesync sees alerts being lost while the sinks that would say so are down.
func TestDispatcherCountsOutcomes(t *testing.T) {
	t.Parallel()
	instant := RetryPolicy{Attempts: 2, Sleep: func(context.Context, time.Duration) error { return nil }}
	logger, _ := newTestLogger()

	// A sink that delivers and one that is down.
	ok := newChanSink("webhook")
	down := &errSink{name: "email", err: errors.New("connection refused")}
	d := NewDispatcher(DispatcherParams{Sinks: []Sink{ok, down}, Logger: logger, Retry: instant})
	for range 3 {
		if _, err := d.Notify(context.Background(), testAlert()); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{
		"email/delivered": 0, "email/failed": 3, "email/dropped": 0,
		"webhook/delivered": 3, "webhook/failed": 0, "webhook/dropped": 0,
	}
	if got := alertCounts(t, d); !maps.Equal(got, want) {
		t.Errorf("oncesync_alerts_total = %v, want %v", got, want)
	}

	// A stuck sink whose queue is full drops what does not fit.
	stuck := newChanSink("sentry")
	stuck.block = make(chan struct{})
	d = NewDispatcher(DispatcherParams{Sinks: []Sink{stuck}, Logger: logger, Retry: instant, QueueSize: 1})
	for i := range 3 {
		if _, err := d.Notify(context.Background(), testAlert()); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			<-stuck.started // the sink holds the first alert, its queue takes one more
		}
	}
	close(stuck.block)
	if err := d.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want = map[string]float64{"sentry/delivered": 2, "sentry/failed": 0, "sentry/dropped": 1}
	if got := alertCounts(t, d); !maps.Equal(got, want) {
		t.Errorf("oncesync_alerts_total = %v, want %v", got, want)
	}
}

// alertCounts gathers d's oncesync_alerts_total as "sink/outcome" → value.
func alertCounts(t *testing.T, d *Dispatcher) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(d.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "oncesync_alerts_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			got[labels["sink"]+"/"+labels["outcome"]] = m.GetCounter().GetValue()
		}
	}
	return got
}
