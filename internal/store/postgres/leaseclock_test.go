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

// TestLeasesOnTheServersClock: three machines share the store, one clock
// right, one two minutes ahead, one two minutes behind (no NTP, a VM
// resumed). A lease granted for 30 s is live for every one of them: the
// machine ahead must not read it as expired and take it while its holder
// writes, and each reads its end on its own clock, where it compares it
// (recovery, status).
func TestLeasesOnTheServersClock(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	open := func(skew time.Duration) *Store {
		s, err := Open(t.Context(), OpenParams{URL: storeURL(t, schema), Clock: skewed(skew), Schema: schema, ServerTime: true})
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() { _ = s.Close() })
		return s
	}
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
