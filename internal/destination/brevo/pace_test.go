package brevo

import (
	"testing"
	"time"
)

// TestReadBudgetPace: no pacing while more than half the budget is left,
// the time to the reset spread over the reads left beyond the reserve
// after that, at most maxReadGap apart (a small budget is spent faster
// rather than counted spent early), and spent at the reserve.
func TestReadBudgetPace(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name             string
		limit, remaining int
		reset, sinceLast time.Duration
		wantWait         time.Duration
		wantSpent        bool
	}{
		{name: "more than half left", limit: 100, remaining: 51, reset: time.Hour, wantWait: 0},
		{name: "half left, just read", limit: 100, remaining: 50, reset: 45 * time.Minute, wantWait: time.Minute},
		{name: "half left, read a while ago", limit: 100, remaining: 50, reset: 45 * time.Minute, sinceLast: 40 * time.Second, wantWait: 20 * time.Second},
		{name: "a thin spread is capped", limit: 100, remaining: 10, reset: time.Hour, wantWait: maxReadGap},
		{name: "a small budget", limit: 10, remaining: 4, reset: time.Hour, wantWait: maxReadGap},
		{name: "the reserve", limit: 100, remaining: 5, reset: time.Hour, wantWait: time.Hour, wantSpent: true},
		{name: "spent, read a moment ago", limit: 100, remaining: 0, reset: time.Hour, sinceLast: time.Minute, wantWait: time.Hour, wantSpent: true},
		{name: "spent, asked again now and then", limit: 100, remaining: 0, reset: time.Hour, sinceLast: spentProbe, wantWait: 0},
		{name: "the reserve is never probed into", limit: 100, remaining: 3, reset: time.Hour, sinceLast: time.Hour, wantWait: time.Hour, wantSpent: true},
		{name: "after the reset", limit: 100, remaining: 0, reset: -time.Second, wantWait: 0},
	} {
		g := readBudget{known: true, limit: tc.limit, remaining: tc.remaining, reset: now.Add(tc.reset)}
		wait, spent := g.pace(now, now.Add(-tc.sinceLast))
		if wait != tc.wantWait || spent != tc.wantSpent {
			t.Errorf("%s: pace = %v, %v; want %v, %v", tc.name, wait, spent, tc.wantWait, tc.wantSpent)
		}
	}
	if wait, spent := (readBudget{}).pace(now, now); wait != 0 || spent {
		t.Errorf("an unknown budget: pace = %v, %v; want 0, false", wait, spent)
	}
}
