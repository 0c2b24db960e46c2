package demo

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
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

// TestCheck refuses what the demo cannot play, naming why; the demo's
// defaults pass.
func TestCheck(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		p    Params
		want string
	}{
		{Params{Mode: "bulk", Records: 5000, PageSize: 250}, ""},
		{Params{Mode: "single", Records: 10, PageSize: 250, KillAtWrite: 10}, ""},
		{Params{Mode: "fast", Records: 10, PageSize: 250}, `--mode "fast"`},
		{Params{Mode: "bulk", Records: 0, PageSize: 250}, "--records and --page-size must be at least 1"},
		{Params{Mode: "bulk", Records: 10, PageSize: 250, KillAtWrite: -1}, "--kill-at-write at least 0"},
		{Params{Mode: "bulk", Records: 5000, PageSize: 250, KillAtWrite: 21}, "5000 contacts make 20 writes on the bulk path"},
		{Params{Mode: "single", Records: 10, PageSize: 250, KillAtWrite: 11}, "10 contacts make 10 writes"},
	} {
		err := tt.p.Check()
		if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
			t.Errorf("Check(%+v) = %v, want %q", tt.p, err, tt.want)
		}
	}
}

// TestWorkerLog quotes the end of a log the demo removes, and points at one
// it keeps (a failed demo named a file it had just deleted).
func TestWorkerLog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var b strings.Builder
	for i := 1; i <= 20; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	if err := os.WriteFile(filepath.Join(dir, "w.log"), []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	got := workerLog(dir, "w.log", false)
	if !strings.Contains(got, "line 20") || !strings.Contains(got, "line 13") || strings.Contains(got, "line 12") || !strings.Contains(got, "--dir") {
		t.Errorf("removed directory: %q", got)
	}
	if got := workerLog(dir, "w.log", true); got != "see "+filepath.Join(dir, "w.log") {
		t.Errorf("kept directory: %q", got)
	}
}
