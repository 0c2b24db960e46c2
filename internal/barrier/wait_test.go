package barrier_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

func TestBackoffCeiling(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		n    int
		want time.Duration
	}{
		{-1, time.Second}, {0, time.Second}, {1, 2 * time.Second}, {2, 4 * time.Second}, {3, 8 * time.Second},
		{4, 16 * time.Second}, {5, 30 * time.Second}, {6, 30 * time.Second}, {100, 30 * time.Second},
	} {
		if got := barrier.BackoffCeiling(tt.n); got != tt.want {
			t.Errorf("BackoffCeiling(%d) = %s, want %s", tt.n, got, tt.want)
		}
	}
}

// waitBundle is a barrier on the test Redis with metrics, a JSON log and a
// SQLite dead-letter store.
type waitBundle struct {
	*bundle
	reg   *prometheus.Registry
	logs  *bytes.Buffer
	store *sqlite.Store
	clock *clock.Fake
}

func setupWait(t *testing.T) *waitBundle {
	t.Helper()
	tb := setup(t, redis.NewClient(mainOptions(t)))
	reg := prometheus.NewRegistry()
	m, err := barrier.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	logs := &bytes.Buffer{}
	tb.barrier = barrier.New(barrier.Params{
		Client:  tb.client,
		Metrics: m,
		Logger:  slog.New(slog.NewJSONHandler(logs, nil)),
	})
	clk := clock.NewFake(time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC))
	st, err := sqlite.Open(t.Context(), sqlite.OpenParams{Path: filepath.Join(t.TempDir(), "x.db"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return &waitBundle{bundle: tb, reg: reg, logs: logs, store: st, clock: clk}
}

// sleeps records the sleeps Wait asks for; jitter returns the ceiling so the
// recorded sleeps are the backoff ceilings.
type sleeps struct {
	got   []time.Duration
	onNth map[int]func()
}

func (s *sleeps) sleep(_ context.Context, d time.Duration) error {
	s.got = append(s.got, d)
	if f := s.onNth[len(s.got)]; f != nil {
		f()
	}
	return nil
}

func ceiling(d time.Duration) time.Duration { return d }

func TestWaitDeadLettersAfterThreeRetries(t *testing.T) {
	t.Parallel()
	wb := setupWait(t)
	key := wb.key()
	wb.check(t, key, "old-run", "snap-old", time.Minute)

	var s sleeps
	res, err := wb.barrier.Wait(wb.ctx, barrier.WaitParams{
		Key: key, Token: "run-b", Snapshot: "snap-new",
		DeadLetters: wb.store,
		Entry:       barrier.DeadLetter{SyncID: "contacts", RunID: 12, Partition: 2, Reason: barrier.ReasonSourceChanged, Payload: `{"p":2}`},
		Sleep:       s.sleep, Jitter: ceiling, Clock: wb.clock,
	})
	var dl *barrier.DeadLetteredError
	if !errors.As(err, &dl) || !errors.Is(err, barrier.ErrDeadLettered) {
		t.Fatalf("Wait = %v, want *DeadLetteredError", err)
	}
	if res.Outcome != barrier.Mismatch || res.HolderSnapshot != "snap-old" {
		t.Errorf("last result = %+v, want the mismatch", res)
	}
	if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}; !equalDurations(s.got, want) {
		t.Errorf("sleeps = %v, want %v (1 s ×2, 3 retries)", s.got, want)
	}
	if !dl.Stored || dl.Entry.ID == 0 {
		t.Fatalf("dead letter not stored: %+v", dl)
	}
	got, err := wb.store.GetDeadLetter(wb.ctx, dl.Entry.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := barrier.DeadLetter{ID: dl.Entry.ID, SyncID: "contacts", RunID: 12, Partition: 2, Key: key,
		Reason: barrier.ReasonSourceChanged, Token: "run-b", Snapshot: "snap-new",
		HolderToken: "old-run", HolderSnapshot: "snap-old", Attempts: 4, Payload: `{"p":2}`, CreatedAt: wb.clock.Now()}
	if got != want {
		t.Errorf("stored dead letter\n got %+v\nwant %+v", got, want)
	}
	if n := counter(t, wb.reg, barrier.MetricChecks, "check", "mismatch"); n != 4 {
		t.Errorf("mismatch count = %v, want 4", n)
	}
	if n := counter(t, wb.reg, barrier.MetricDeadLetters, "", ""); n != 1 {
		t.Errorf("dead letters count = %v, want 1", n)
	}
}

func TestWaitConverges(t *testing.T) {
	t.Parallel()
	wb := setupWait(t)
	key := wb.key()
	wb.check(t, key, "old-run", "snap-old", time.Minute)
	var s sleeps
	s.onNth = map[int]func(){2: func() { // the stale barrier goes away during the second sleep
		if err := wb.barrier.Release(wb.ctx, key, "old-run"); err != nil {
			t.Error(err)
		}
	}}
	res, err := wb.barrier.Wait(wb.ctx, barrier.WaitParams{
		Key: key, Token: "run-b", Snapshot: "snap-new", DeadLetters: wb.store, Sleep: s.sleep, Jitter: ceiling,
	})
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if res.Outcome != barrier.Created || len(s.got) != 2 {
		t.Errorf("Wait = %s after %d sleeps, want created after 2", res.Outcome, len(s.got))
	}
	if dls, _ := wb.store.ListDeadLetters(wb.ctx, barrier.ListDeadLettersParams{}); len(dls) != 0 {
		t.Errorf("dead letters %+v, want none", dls)
	}
}

func TestWaitDefaultJitterIsFull(t *testing.T) {
	t.Parallel()
	wb := setupWait(t)
	key := wb.key()
	wb.check(t, key, "old-run", "snap-old", time.Minute)
	var (
		s    sleeps
		seen = map[time.Duration]bool{}
	)
	for range 20 {
		s.got = nil
		_, err := wb.barrier.Wait(wb.ctx, barrier.WaitParams{Key: key, Token: "run-b", Snapshot: "x", Retries: 5, Sleep: s.sleep})
		if !errors.Is(err, barrier.ErrDeadLettered) {
			t.Fatalf("Wait = %v, want ErrDeadLettered", err)
		}
		for i, d := range s.got {
			if d < 0 || d > barrier.BackoffCeiling(i) {
				t.Errorf("sleep %d = %s, outside [0, %s]", i, d, barrier.BackoffCeiling(i))
			}
			seen[d] = true
		}
	}
	if len(seen) < 50 {
		t.Errorf("only %d distinct sleeps in 100: not random", len(seen))
	}
}

func TestWaitVerifyOnly(t *testing.T) {
	t.Parallel()
	wb := setupWait(t)
	key := wb.key()
	var s sleeps
	s.onNth = map[int]func(){1: func() { wb.check(t, key, "coordinator", "snap-1", time.Minute) }}
	res, err := wb.barrier.Wait(wb.ctx, barrier.WaitParams{Key: key, Snapshot: "snap-1", VerifyOnly: true, Sleep: s.sleep, Jitter: ceiling})
	if err != nil || res.Outcome != barrier.Aligned || len(s.got) != 1 {
		t.Fatalf("Wait = %+v, %v after %d sleeps; want aligned after the coordinator created it", res, err, len(s.got))
	}
	// Never created: a lost barrier ends in the dead-letter list, not in a
	// fresh start from the partition's own view.
	lost := wb.key()
	s = sleeps{}
	_, err = wb.barrier.Wait(wb.ctx, barrier.WaitParams{Key: lost, Token: "part-1", Snapshot: "snap-1", VerifyOnly: true,
		DeadLetters: wb.store, Sleep: s.sleep, Jitter: ceiling})
	var dl *barrier.DeadLetteredError
	if !errors.As(err, &dl) || dl.Entry.HolderSnapshot != "" {
		t.Fatalf("Wait on a missing barrier = %v, want dead-lettered", err)
	}
	if _, ok := wb.value(t, lost); ok {
		t.Error("VerifyOnly created the barrier")
	}
}

// TestWaitVerifyOnlyRestoresPin: a partition's barrier lost to a Redis
// restart without persistence (issue 6: the run was dead-lettered as
// source_changed_during_run though nothing changed) is restored from the
// coordinator's pin the partition carries, at once; a caller whose view
// differs from the pin still mismatches and is dead-lettered, and the
// restored barrier holds the pin, never the caller's snapshot.
func TestWaitVerifyOnlyRestoresPin(t *testing.T) {
	t.Parallel()
	wb := setupWait(t)
	pin := &barrier.Pin{Token: "run7", Snapshot: "snap-pinned"}

	key := wb.key()
	var s sleeps
	res, err := wb.barrier.Wait(wb.ctx, barrier.WaitParams{Key: key, Token: "p1-job3", Snapshot: "snap-pinned",
		TTL: time.Hour, VerifyOnly: true, Pin: pin, DeadLetters: wb.store, Sleep: s.sleep, Jitter: ceiling})
	if err != nil || res.Outcome != barrier.Aligned || res.HolderToken != "run7" || len(s.got) != 0 {
		t.Fatalf("Wait = %+v, %v after %d sleeps; want aligned with the restored pin at once", res, err, len(s.got))
	}
	if v, ok := wb.value(t, key); !ok || v != "run7:snap-pinned" {
		t.Fatalf("barrier = %q, %v; want the pin restored", v, ok)
	}
	if ttl := wb.client.PTTL(wb.ctx, key).Val(); ttl < 59*time.Minute {
		t.Errorf("restored barrier TTL %s, want the given hour", ttl)
	}
	if !strings.Contains(wb.logs.String(), "checkpoint barrier restored from the pinned snapshot") {
		t.Errorf("no log line for the restore:\n%s", wb.logs)
	}

	// The source changed while the barrier was gone: restored to the pin,
	// then a mismatch like any other, dead-lettered after the retries.
	changed := wb.key()
	s = sleeps{}
	_, err = wb.barrier.Wait(wb.ctx, barrier.WaitParams{Key: changed, Token: "p2-job4", Snapshot: "snap-changed",
		VerifyOnly: true, Pin: pin, DeadLetters: wb.store, Sleep: s.sleep, Jitter: ceiling,
		Entry: barrier.DeadLetter{Reason: barrier.ReasonSourceChanged}})
	var dl *barrier.DeadLetteredError
	if !errors.As(err, &dl) || dl.Entry.HolderToken != "run7" || dl.Entry.HolderSnapshot != "snap-pinned" || len(s.got) != barrier.DefaultRetries {
		t.Fatalf("Wait with a changed view = %v (%+v) after %d sleeps; want dead-lettered against the pin", err, dl, len(s.got))
	}
	if v, _ := wb.value(t, changed); v != "run7:snap-pinned" {
		t.Fatalf("barrier = %q: a caller's own view must never become the reference point", v)
	}

	// A barrier present with another snapshot is left alone (no restore).
	other := wb.key()
	wb.check(t, other, "run8", "snap-other", time.Minute)
	s = sleeps{}
	_, err = wb.barrier.Wait(wb.ctx, barrier.WaitParams{Key: other, Token: "p1-job5", Snapshot: "snap-pinned",
		VerifyOnly: true, Pin: pin, Retries: -1, Sleep: s.sleep, Jitter: ceiling})
	if !errors.As(err, &dl) || dl.Entry.HolderToken != "run8" {
		t.Fatalf("Wait on another holder's barrier = %v, want a mismatch against run8", err)
	}
	if v, _ := wb.value(t, other); v != "run8:snap-other" {
		t.Fatalf("barrier = %q, want run8's left alone", v)
	}
}

func TestWaitContextEnds(t *testing.T) {
	t.Parallel()
	wb := setupWait(t)
	key := wb.key()
	wb.check(t, key, "old-run", "snap-old", time.Minute)
	ctx, cancel := context.WithCancel(wb.ctx)
	cancel()
	_, err := wb.barrier.Wait(ctx, barrier.WaitParams{Key: key, Token: "run-b", Snapshot: "x", Jitter: ceiling})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Wait = %v, want context.Canceled", err)
	}
}

// TestMetricsAndLog: outcome counters, hit ratio, latency histogram, and a
// log line per attempt with token and snapshot.
func TestMetricsAndLog(t *testing.T) {
	t.Parallel()
	wb := setupWait(t)
	if r := gauge(t, wb.reg, barrier.MetricHitRatio); !math.IsNaN(r) {
		t.Errorf("hit ratio before any check = %v, want NaN", r)
	}
	key := wb.key()
	wb.check(t, key, "run-a", "snap-1", 0) // created
	wb.check(t, key, "run-b", "snap-1", 0) // aligned
	wb.check(t, key, "run-c", "snap-2", 0) // mismatch
	wb.check(t, key, "run-d", "snap-1", 0) // aligned
	if _, err := wb.barrier.Check(wb.ctx, key, "bad:token", "s", 0); err == nil {
		t.Fatal("want an error")
	}
	if _, err := wb.barrier.Verify(wb.ctx, wb.key(), "snap-1"); err != nil { // missing
		t.Fatal(err)
	}
	for _, tt := range []struct {
		op, outcome string
		want        float64
	}{
		{"check", "created", 1}, {"check", "aligned", 2}, {"check", "mismatch", 1}, {"check", "error", 1},
		{"verify", "missing", 1}, {"verify", "aligned", 0},
	} {
		if got := counter(t, wb.reg, barrier.MetricChecks, tt.op, tt.outcome); got != tt.want {
			t.Errorf("%s %s = %v, want %v", tt.op, tt.outcome, got, tt.want)
		}
	}
	if r := gauge(t, wb.reg, barrier.MetricHitRatio); r != 3.0/5 {
		t.Errorf("hit ratio = %v, want 3/5 (aligned+mismatch over answered checks)", r)
	}
	if n := histogramCount(t, wb.reg, barrier.MetricLatency, "check"); n != 5 {
		t.Errorf("latency samples = %d, want 5", n)
	}

	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(wb.logs.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	if len(lines) != 6 {
		t.Fatalf("%d log lines, want one per attempt (6):\n%s", len(lines), wb.logs.String())
	}
	third := lines[2]
	if third["token"] != "run-c" || third["snapshot"] != "snap-2" || third["outcome"] != "mismatch" ||
		third["holder_token"] != "run-a" || third["holder_snapshot"] != "snap-1" || third["key"] != key {
		t.Errorf("log line of the mismatch = %v", third)
	}
}

func TestCheckEvictionPolicy(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	safe, _, err := startServer(dir, "--maxmemory-policy", "noeviction")
	if err != nil {
		unavailable(t, "%v", err)
	}
	evicting, _, err := startServer(dir, "--maxmemory-policy", "allkeys-lru", "--maxmemory", "64mb")
	if err != nil {
		t.Fatal(err)
	}
	volatile, _, err := startServer(dir, "--maxmemory-policy", "volatile-ttl")
	if err != nil {
		t.Fatal(err)
	}
	ring := func(addrs ...string) redis.UniversalClient {
		m := map[string]string{}
		for i, a := range addrs {
			m[string(rune('a'+i))] = a
		}
		return redis.NewRing(&redis.RingOptions{Addrs: m})
	}
	tests := []struct {
		name    string
		client  redis.UniversalClient
		allow   bool
		refused []string // policies named in the error; nil = accepted
	}{
		{"noeviction", redis.NewClient(&redis.Options{Addr: safe}), false, nil},
		{"allkeys-lru", redis.NewClient(&redis.Options{Addr: evicting}), false, []string{"allkeys-lru"}},
		{"volatile-ttl", redis.NewClient(&redis.Options{Addr: volatile}), false, []string{"volatile-ttl"}},
		{"allowed", redis.NewClient(&redis.Options{Addr: evicting}), true, nil},
		{"ring with one evicting shard", ring(safe, evicting), false, []string{"allkeys-lru"}},
		{"ring all safe", ring(safe, safe), false, nil},
		{"cluster", redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterAddrs(t)}), false, nil},
		{"unreachable", redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1}), false, []string{""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer tt.client.Close()
			err := barrier.CheckEvictionPolicy(t.Context(), tt.client, tt.allow)
			if tt.refused == nil {
				if err != nil {
					t.Errorf("CheckEvictionPolicy = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("CheckEvictionPolicy = nil, want a refusal")
			}
			if tt.refused[0] == "" {
				if !errors.Is(err, store.ErrUnavailable) {
					t.Errorf("err = %v, want store.ErrUnavailable", err)
				}
				return
			}
			var pe *barrier.EvictionPolicyError
			if !errors.As(err, &pe) || !errors.Is(err, barrier.ErrEvictingRedis) || pe.Policy != tt.refused[0] || pe.Addr != evicting && pe.Addr != volatile {
				t.Fatalf("err = %v, want *EvictionPolicyError for %s", err, tt.refused[0])
			}
			for _, want := range []string{"fresh start", "noeviction", "allow_evicting_redis: true", pe.Addr} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("message does not say %q: %v", want, err)
				}
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func family(t *testing.T, reg *prometheus.Registry, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}

func hasLabels(m *dto.Metric, op, outcome string) bool {
	for _, l := range m.GetLabel() {
		switch {
		case l.GetName() == "op" && l.GetValue() != op, l.GetName() == "outcome" && l.GetValue() != outcome:
			return false
		}
	}
	return true
}

func counter(t *testing.T, reg *prometheus.Registry, name, op, outcome string) float64 {
	t.Helper()
	for _, m := range family(t, reg, name).GetMetric() {
		if hasLabels(m, op, outcome) {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func gauge(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	return family(t, reg, name).GetMetric()[0].GetGauge().GetValue()
}

func histogramCount(t *testing.T, reg *prometheus.Registry, name, op string) uint64 {
	t.Helper()
	for _, m := range family(t, reg, name).GetMetric() {
		if hasLabels(m, op, "") {
			return m.GetHistogram().GetSampleCount()
		}
	}
	return 0
}
