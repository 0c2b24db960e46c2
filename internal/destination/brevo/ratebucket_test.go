package brevo_test

import (
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// TestOtherEndpointsLimitDoesNotStallContacts: Brevo limits /v3/contacts*
// per second and every other endpoint (/v3/processes, /v3/account) per hour,
// each with its own x-sib-ratelimit-* headers. An hourly budget spent on
// process reads says nothing of the contacts' window: the next import is
// sent at once, not after a pause.
func TestOtherEndpointsLimitDoesNotStallContacts(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{OtherRateLimitPerHour: 1}, func(p *brevo.Params) {
		p.Mode = brevo.ModeBulk
		p.RateLimit = 1000
	})
	ctx := t.Context()
	page := recs(3)
	res, err := b.dest.Write(ctx, page)
	if err != nil || len(res) != 3 || res[0].Outcome != destination.Accepted {
		t.Fatalf("first import: %+v, %v", res, err)
	}
	// The hour's only process read: answered, remaining 0, reset in an hour.
	if _, _, err := b.dest.Outcomes(ctx, res[0].Ref, page); err != nil {
		t.Fatalf("outcomes: %v", err)
	}
	before := len(b.sleeps.all())
	next := []destination.Record{rec(10, nil), rec(11, nil)}
	if res, err := b.dest.Write(ctx, next); err != nil || len(res) != 2 || res[0].Outcome != destination.Accepted {
		t.Fatalf("second import: %+v, %v", res, err)
	}
	for _, d := range b.sleeps.all()[before:] {
		if d >= 5*time.Second {
			t.Fatalf("the next import waited %v: the hourly budget of /v3/processes paused the contacts", d)
		}
	}
}

// TestRateLimitResetZeroIsNotNow: in a window's last second Brevo's
// x-sib-ratelimit-reset says 0 (whole seconds left, rounded down). A 429
// with it is waited out, at least a second, not retried at once into the
// same spent window until the retries run out.
func TestRateLimitResetZeroIsNotNow(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{RateLimitPerSecond: 1})
	b.clock.Set(t0.Add(500 * time.Millisecond))
	other := b.newDest(t, brevo.Params{BaseURL: b.url, APIKey: apiKey, Clock: b.clock, Sleep: (&sleepLog{}).sleep})
	if _, err := other.Write(t.Context(), recs(1)); err != nil {
		t.Fatalf("other Write: %v", err)
	}
	rs := []destination.Record{rec(1, nil)}
	res, err := b.dest.Write(t.Context(), rs)
	if err != nil || len(res) != 1 || res[0].Outcome != destination.Delivered {
		t.Fatalf("Write after a 429 with reset 0: %+v, %v; want delivered", res, err)
	}
	if n := b.fake.Stats().ByStatus["429"]; n != 1 {
		t.Errorf("%d answers 429, want 1", n)
	}
}

// TestSpentHourlyBudgetHoldsProcessReads: once Brevo says the hourly budget
// of its routes outside /contacts is spent (remaining 0, reset in up to an
// hour), the next process read is not sent at once into the spent budget,
// poll after poll: it is not sent (the poll is answered rate limited, as
// the budget's pace allows no read before the reset) or waits.
func TestSpentHourlyBudgetHoldsProcessReads(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{OtherRateLimitPerHour: 1, ProcessDelay: time.Hour}, func(p *brevo.Params) {
		p.Mode = brevo.ModeBulk
		p.RateLimit = 1000
	})
	ctx := t.Context()
	page := recs(2)
	res, err := b.dest.Write(ctx, page)
	if err != nil || len(res) != 2 || res[0].Outcome != destination.Accepted {
		t.Fatalf("import: %+v, %v", res, err)
	}
	if _, done, err := b.dest.Outcomes(ctx, res[0].Ref, page); done || err != nil {
		t.Fatalf("first outcomes: %v, %v; want not done", done, err)
	}
	before := len(b.sleeps.all())
	reads, _ := processReads(b.fake)
	_, _, err = b.dest.Outcomes(ctx, res[0].Ref, page) // its answer: rate limited, or not done
	waited := time.Duration(0)
	for _, d := range b.sleeps.all()[before:] {
		waited += d
	}
	if again, _ := processReads(b.fake); again > reads && waited < 30*time.Second {
		t.Fatalf("the next process read waited %v: sent at once into a spent hourly budget", waited)
	}
	if failure.CodeOf(err) != failure.DestinationRateLimited {
		t.Errorf("poll with the budget spent: %v; want destination_rate_limited", err)
	}
}
