package runner

import (
	"context"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/store"
)

// sharedClockStore is a store whose shared clock (PostgreSQL's server
// clock) is off ahead of the run's.
type sharedClockStore struct {
	store.Store
	off time.Duration
}

func (s sharedClockStore) ClockOffset(context.Context) (time.Duration, error) { return s.off, nil }

// TestMirrorRefsOnTheSharedClock: a mirror's slot reference keeps when its
// write was claimed, and runs on other machines order two writes to one
// contact by it (goneSlots). It was kept on the writing machine's clock, so
// a machine two minutes behind wrote times two minutes early and the
// contact's newer holder could be taken for the stale one. With a store on
// a shared clock, the time is written on that clock.
func TestMirrorRefsOnTheSharedClock(t *testing.T) {
	t.Parallel()
	for _, off := range []time.Duration{0, 2 * time.Minute, -2 * time.Minute} {
		tb, _, params := setupMirror(t, 5)
		p := params()
		p.Store = sharedClockStore{Store: tb.store, off: off}
		claimed := tb.clock.Now()
		if _, err := Run(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		es, err := tb.store.LedgerList(context.Background(), p.Sync.ID, store.LedgerComplete, 0)
		if err != nil {
			t.Fatal(err)
		}
		refs := 0
		for _, e := range es {
			s, ok := ledger.DecodeSlot(e, true)
			if !ok {
				continue
			}
			_, _, at, ok := ledger.RefHandleAt(s.Ref)
			if !ok {
				continue
			}
			refs++
			if want := claimed.Add(off).Truncate(time.Millisecond); !at.Equal(want) {
				t.Errorf("offset %s: slot %s keeps its claim at %s, want %s (the run's clock %s on the store's)", off, e.Key, at.UTC(), want.UTC(), claimed.UTC())
			}
		}
		if refs != 5 {
			t.Fatalf("offset %s: %d slots keep a handle with a claim time, want 5", off, refs)
		}
	}
}
