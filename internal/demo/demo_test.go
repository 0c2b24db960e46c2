package demo

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestRecoveryTimer: a write the killed worker had sent before it died, and
// that the destination applied after the kill, is not the resumed worker's
// first write (the demo once printed a recovery of 0s that way).
func TestRecoveryTimer(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	var rec recoveryTimer
	rec.killedAt = t0
	rec.write(t0.Add(-5*time.Millisecond), t0.Add(3*time.Millisecond)) // worker 1's second import in flight
	if got := rec.recovery(); got != 0 {
		t.Fatalf("recovery after the killed worker's own write = %v, want 0 (not resumed yet)", got)
	}
	rec.secondAt = t0.Add(20 * time.Millisecond)
	rec.write(t0.Add(10*time.Millisecond), t0.Add(25*time.Millisecond)) // arrived before worker 2 started
	rec.write(t0.Add(10*time.Second), t0.Add(10*time.Second+40*time.Millisecond))
	rec.write(t0.Add(11*time.Second), t0.Add(11*time.Second))
	if got, want := rec.recovery(), 10*time.Second+40*time.Millisecond; got != want {
		t.Fatalf("recovery = %v, want %v", got, want)
	}
}

// TestStampArrival: the handler sees when its request reached the server.
func TestStampArrival(t *testing.T) {
	t.Parallel()
	before := time.Now()
	var got time.Time
	h := stampArrival(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { got = arrivedAt(r) }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/v3/contacts/import", nil))
	if got.Before(before) || got.After(time.Now()) {
		t.Fatalf("arrivedAt = %v, want between %v and now", got, before)
	}
	if !arrivedAt(httptest.NewRequest(http.MethodGet, "/", nil)).IsZero() {
		t.Fatal("an unstamped request has an arrival time")
	}
}

// TestInDoubtSummary: the summary's in-doubt line says what the resumed run
// measured, not a fixed sentence.
func TestInDoubtSummary(t *testing.T) {
	t.Parallel()
	line := "run 2 succeeded: read 5000, written 4500, replayed from ledger 0, rejected 0, in doubt 1250 " +
		"(500 found already delivered, 750 not found there and written once), pages 20, duration 10.312s"
	want := "1250 records; 500 found at Brevo by reading it back (not written again), 750 not there (written once)"
	if got := InDoubtSummary(line); got != want {
		t.Fatalf("InDoubtSummary = %q, want %q", got, want)
	}
	if got := InDoubtSummary("run 2 succeeded: read 5000, written 5000, rejected 0, in doubt 0, pages 20"); got != "none" {
		t.Fatalf("InDoubtSummary with none in doubt = %q", got)
	}
	if got := InDoubtSummary("run 2 failed"); got != "see worker 2's line above" {
		t.Fatalf("InDoubtSummary without figures = %q", got)
	}
}

// TestKillAt: the worker is killed at a write the run makes, whatever the
// size of the source.
func TestKillAt(t *testing.T) {
	for _, tc := range []struct {
		mode              string
		records, pageSize int
		want              int
	}{
		{"bulk", 5000, 250, 7}, // 20 pages
		{"bulk", 1200, 250, 3}, // 5 pages
		{"bulk", 100, 250, 1},  // 1 page
		{"bulk", 500, 250, 1},  // 2 pages
		{"single", 5000, 250, 1666},
		{"single", 2, 250, 1},
	} {
		got := killAt(tc.mode, tc.records, tc.pageSize)
		if got != tc.want {
			t.Errorf("killAt(%s, %d, %d) = %d, want %d", tc.mode, tc.records, tc.pageSize, got, tc.want)
		}
		writes := tc.records
		if tc.mode == "bulk" {
			writes = (tc.records + tc.pageSize - 1) / tc.pageSize
		}
		if got < 1 || got > writes {
			t.Errorf("killAt(%s, %d, %d) = %d: not one of the run's %d writes", tc.mode, tc.records, tc.pageSize, got, writes)
		}
	}
}
