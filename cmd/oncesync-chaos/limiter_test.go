package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// TestAccountURL: requests of several syncs on the one account URL are told
// apart by the sync ID in their records, and the fake's per-account limit
// answers 429 past it, which contactCalls counts (redis-restart-limiter's
// 429 shares rest on both).
func TestAccountURL(t *testing.T) {
	t.Parallel()
	e := setup(t, "account-url")
	// One instant: both requests fall in the fake's same one-second window.
	d, err := e.newDest(fakebrevo.Options{RateLimitPerSecond: 1, Clock: clock.NewFake(time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	post := func(email string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, d.AccountURL()+"/contacts",
			strings.NewReader(`{"email":"`+email+`","attributes":{"FIRSTNAME":"First1"},"updateEnabled":true}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("api-key", apiKey)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	from := time.Now()
	if got := post("cabcdef-s01-0000001@example.com"); got != http.StatusCreated && got != http.StatusNoContent {
		t.Fatalf("first write: status %d", got)
	}
	if got := post("cabcdef-p02-0000001@example.com"); got != http.StatusTooManyRequests {
		t.Fatalf("second write in the same second on a 1/s account: status %d, want 429", got)
	}
	if n := d.writeCount("cabcdef-s01"); n != 1 {
		t.Fatalf("writes of cabcdef-s01: %d, want 1 (attributed by its e-mail)", n)
	}
	if n := d.writeCount("cabcdef-p02"); n != 0 {
		t.Fatalf("writes of cabcdef-p02: %d, want 0 (refused)", n)
	}
	if _, ok := d.fake.Contact("cabcdef-s01-0000001@example.com"); !ok {
		t.Fatal("the accepted write is not at the fake")
	}
	n, limited := d.contactCalls(from, time.Now().Add(time.Second))
	if n != 2 || limited != 1 {
		t.Fatalf("contactCalls: %d requests, %d limited; want 2, 1", n, limited)
	}
}

func TestJudgeAfter(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 2, 9, 0, 0, 0, time.UTC)
	mk := func(n, limited int) phase {
		return phase{Name: "after", From: at, To: at.Add(time.Minute), N: n, Limited: limited, Accepted: n - limited, RateAllowed: limiterRate}
	}
	for _, tc := range []struct {
		name     string
		p        phase
		problems int
	}{
		{"shared level", mk(1000, 5), 0},
		{"at the bound", mk(1000, 50), 0},
		{"just past it", mk(1000, 51), 1},
		{"runs pacing alone", mk(1000, 500), 1},
		{"too few to judge", mk(limiterRate*minAfterSeconds-1, 0), 1},
		{"both", mk(10, 5), 2},
	} {
		if got := judgeAfter(tc.p); len(got) != tc.problems {
			t.Errorf("%s: problems %q, want %d", tc.name, got, tc.problems)
		}
	}
	if s := mk(1000, 5).String(); !strings.Contains(s, "0.5 %") {
		t.Errorf("phase text %q does not give the 429 share", s)
	}
}
