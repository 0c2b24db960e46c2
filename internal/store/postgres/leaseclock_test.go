package postgres

import (
	"errors"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// skewed is a machine's wall clock that is off by d.
type skewed time.Duration

func (d skewed) Now() time.Time { return time.Now().Add(time.Duration(d)) }

// openSkewed opens schema with ServerTime on a machine whose clock is off
// by skew.
func openSkewed(t *testing.T, schema string, skew time.Duration) *Store {
	t.Helper()
	s, err := Open(t.Context(), OpenParams{URL: storeURL(t, schema), Clock: skewed(skew), Schema: schema, ServerTime: true})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestLeasesOnTheServersClock: three machines share the store, one clock
// right, one two minutes ahead, one two minutes behind (no NTP, a VM
// resumed). A lease granted for 30 s is live for every one of them: the
// machine ahead must not read it as expired and take it while its holder
// writes, and each reads its end on its own clock, where it compares it
// (recovery, status).
func TestLeasesOnTheServersClock(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	open := func(skew time.Duration) *Store { return openSkewed(t, schema, skew) }
	right, ahead, behind := open(0), open(2*time.Minute), open(-2*time.Minute)
	const ttl = 30 * time.Second
	inTTL := func(who string, s *Store, l store.Lease) {
		t.Helper()
		if left := l.ExpiresAt.Sub(s.now()); left < ttl-5*time.Second || left > ttl+time.Second {
			t.Errorf("%s reads the lease's end %s from now on its clock, want about %s", who, left, ttl)
		}
	}
	for _, holder := range []struct {
		name string
		s    *Store
	}{{"right", right}, {"ahead", ahead}, {"behind", behind}} {
		syncID := "s-" + holder.name
		l, err := holder.s.LeaseAcquire(t.Context(), store.LeaseAcquireParams{SyncID: syncID, Token: "holder", Holder: holder.name, TTL: ttl})
		if err != nil {
			t.Fatalf("%s acquires: %v", holder.name, err)
		}
		inTTL(holder.name+" (holder)", holder.s, l)
		for _, other := range []struct {
			name string
			s    *Store
		}{{"right", right}, {"ahead", ahead}, {"behind", behind}} {
			if other.s == holder.s {
				continue
			}
			_, err := other.s.LeaseAcquire(t.Context(), store.LeaseAcquireParams{SyncID: syncID, Token: "other", Holder: other.name, TTL: ttl})
			if !errors.Is(err, store.ErrLeaseHeld) {
				t.Errorf("lease of the machine %s: the machine %s acquires it with %v, want ErrLeaseHeld", holder.name, other.name, err)
			}
			got, err := other.s.LeaseGet(t.Context(), syncID)
			if err != nil {
				t.Fatalf("LeaseGet: %v", err)
			}
			inTTL(other.name+" (lease of "+holder.name+")", other.s, got)
		}
		if l, err = holder.s.LeaseRenew(t.Context(), syncID, "holder", ttl); err != nil {
			t.Fatalf("%s renews: %v", holder.name, err)
		}
		inTTL(holder.name+" (renewed)", holder.s, l)
	}
}

// TestLedgerTimesOnTheServersClock: the same three machines. A claim made
// on the one behind is read by the one ahead as made a moment ago, not four
// minutes ago: the in-doubt grace counted from it would otherwise have
// passed at once, and a write still in flight been sent again. So with
// completions and last-seen times, and a prune by age run on the machine
// ahead keeps what the one behind has just refused.
func TestLedgerTimesOnTheServersClock(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	open := func(skew time.Duration) *Store { return openSkewed(t, schema, skew) }
	right, ahead, behind := open(0), open(2*time.Minute), open(-2*time.Minute)
	ctx := t.Context()
	l, err := behind.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s", Token: "t", Holder: "behind", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	claim := store.LedgerClaimParams{SyncID: "s", Fence: l.Fence, RunID: 1, Keys: []string{"claimed", "done", "refused"}}
	if err := behind.LedgerClaim(ctx, claim); err != nil {
		t.Fatal(err)
	}
	if err := behind.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s", Fence: l.Fence, RunID: 1, Entries: []store.LedgerFinish{
		{Key: "done", State: store.LedgerComplete}, {Key: "refused", State: store.LedgerRejected, Message: "no"}}}); err != nil {
		t.Fatal(err)
	}
	justNow := func(who string, s *Store, what string, at time.Time) {
		t.Helper()
		if ago := s.now().Sub(at); ago < -time.Second || ago > 5*time.Second {
			t.Errorf("%s reads %s as %s ago on its clock, want a moment ago", who, what, ago)
		}
	}
	for _, reader := range []struct {
		name string
		s    *Store
	}{{"right", right}, {"ahead", ahead}, {"behind", behind}} {
		got, err := reader.s.LedgerGet(ctx, "s", []string{"claimed", "done", "refused"})
		if err != nil || len(got) != 3 {
			t.Fatalf("%s: LedgerGet = %v, %v", reader.name, got, err)
		}
		justNow(reader.name, reader.s, "the claim", got["claimed"].ClaimedAt)
		justNow(reader.name, reader.s, "the completion", got["done"].CompletedAt)
		justNow(reader.name, reader.s, "the refusal's last sight", got["refused"].SeenAt)
		listed, err := reader.s.LedgerList(ctx, "s", store.LedgerPending, 0)
		if err != nil || len(listed) != 1 {
			t.Fatalf("%s: LedgerList = %v, %v", reader.name, listed, err)
		}
		justNow(reader.name, reader.s, "the listed claim", listed[0].ClaimedAt)
	}
	if n, err := ahead.LedgerPrune(ctx, ahead.now().Add(-time.Minute)); err != nil || n != 0 {
		t.Errorf("the machine ahead prunes what was seen over a minute ago: %d entries, %v; want 0 (the refusal is a moment old)", n, err)
	}
	if err := behind.LedgerTouch(ctx, "s", []string{"done"}); err != nil {
		t.Fatal(err)
	}
	got, err := ahead.LedgerGet(ctx, "s", []string{"done"})
	if err != nil {
		t.Fatal(err)
	}
	justNow("ahead", ahead, "a touch by the machine behind", got["done"].SeenAt)
}

// TestRunTimesOnTheServersClock: a run started and ended by the machine
// behind reads, on the one ahead, as started and ended a moment ago:
// recovery's age rule (a running run younger than a lease TTL may not have
// taken its lease yet) and the dead-man check read them there. A run's
// times survive its updates unchanged.
func TestRunTimesOnTheServersClock(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	open := func(skew time.Duration) *Store { return openSkewed(t, schema, skew) }
	ahead, behind := open(2*time.Minute), open(-2*time.Minute)
	ctx := t.Context()
	if _, err := behind.PutSync(ctx, store.PutSyncParams{ID: "s", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	justNow := func(what string, at time.Time) {
		t.Helper()
		if ago := ahead.now().Sub(at); ago < -time.Second || ago > 5*time.Second {
			t.Errorf("the machine ahead reads %s as %s ago, want a moment ago", what, ago)
		}
	}
	r, err := behind.InsertRun(ctx, store.InsertRunParams{SyncID: "s", State: store.RunRunning})
	if err != nil {
		t.Fatal(err)
	}
	running, err := ahead.ListRunsByState(ctx, store.RunRunning, 0)
	if err != nil || len(running) != 1 {
		t.Fatalf("ListRunsByState = %v, %v", running, err)
	}
	justNow("the run's start", running[0].StartedAt)
	r.State, r.Read = store.RunSucceeded, 1
	if err := behind.UpdateRun(ctx, r); err != nil {
		t.Fatal(err)
	}
	got, err := ahead.GetRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	justNow("the run's start after an update", got.StartedAt)
	justNow("the run's end", got.FinishedAt)
	mine, err := behind.GetRun(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if d := mine.StartedAt.Sub(r.StartedAt); d < -time.Second || d > time.Second {
		t.Errorf("the machine behind reads its run's start %s off what it was given", d)
	}
	act, err := ahead.SyncActivity(ctx)
	if err != nil || len(act) != 1 {
		t.Fatalf("SyncActivity = %v, %v", act, err)
	}
	justNow("the sync's last run", act[0].LastRunAt)
	justNow("the sync's last success", act[0].LastSuccessAt)
}

// TestClockOffsetIsTheServersLessTheStores: store.SharedClock says how far
// the server's clock is from the Store's, so that a time a run embeds in a
// value (a mirror's slot reference) is written on the server's.
func TestClockOffsetIsTheServersLessTheStores(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	for _, skew := range []time.Duration{0, 2 * time.Minute, -2 * time.Minute} {
		var sc store.SharedClock = openSkewed(t, schema, skew)
		off, err := sc.ClockOffset(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		// This machine's clock is the server's: the offset undoes the skew.
		if d := off + skew; d < -time.Second || d > time.Second {
			t.Errorf("a Store %s off reads the server's clock %s from its own, want about %s", skew, off, -skew)
		}
	}
}
