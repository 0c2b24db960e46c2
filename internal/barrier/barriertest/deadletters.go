// Package barriertest is the conformance suite of barrier.DeadLetters,
// run by every store that implements it.
package barriertest

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

// Open returns a fresh, empty store whose clock is clk, closed when t ends.
type Open func(t *testing.T, clk clock.Clock) barrier.DeadLetters

// DeadLetterSuite checks a barrier.DeadLetters implementation against a
// real store.
func DeadLetterSuite(t *testing.T, open Open) {
	t.Run("AddGetList", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		s := open(t, clk)
		ctx := t.Context()

		first, err := s.AddDeadLetter(ctx, barrier.DeadLetter{
			SyncID: "contacts", RunID: 7, Partition: 3, Key: "oncesync:v1:{sync:contacts}:barrier:7",
			Reason: barrier.ReasonSourceChanged, Token: "tok-a", Snapshot: "aaa",
			HolderToken: "tok-b", HolderSnapshot: "bbb", Attempts: 4, Payload: `{"partition":3}`,
		})
		if err != nil {
			t.Fatalf("AddDeadLetter: %v", err)
		}
		if first.ID == 0 {
			t.Error("stored dead letter has no ID")
		}
		if !first.CreatedAt.Equal(clk.Now()) {
			t.Errorf("CreatedAt = %s, want the store clock's %s", first.CreatedAt, clk.Now())
		}
		clk.Advance(time.Minute)
		at := time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)
		second, err := s.AddDeadLetter(ctx, barrier.DeadLetter{Key: "named", Reason: barrier.ReasonMismatch,
			Token: "t2", Snapshot: "s2", CreatedAt: at})
		if err != nil {
			t.Fatalf("AddDeadLetter: %v", err)
		}
		if !second.CreatedAt.Equal(at) {
			t.Errorf("CreatedAt = %s, want the given %s", second.CreatedAt, at)
		}
		if second.ID <= first.ID {
			t.Errorf("IDs %d then %d: want increasing", first.ID, second.ID)
		}

		got, err := s.GetDeadLetter(ctx, first.ID)
		if err != nil {
			t.Fatalf("GetDeadLetter: %v", err)
		}
		if !equal(got, first) {
			t.Errorf("GetDeadLetter = %+v, want %+v", got, first)
		}
		if got.SyncID != "contacts" || got.RunID != 7 || got.Partition != 3 || got.Attempts != 4 ||
			got.HolderToken != "tok-b" || got.HolderSnapshot != "bbb" || got.Payload != `{"partition":3}` ||
			got.Reason != barrier.ReasonSourceChanged || got.Requeued() {
			t.Errorf("round trip lost fields: %+v", got)
		}
		if _, err := s.GetDeadLetter(ctx, second.ID+1000); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetDeadLetter(unknown) = %v, want ErrNotFound", err)
		}

		all, err := s.ListDeadLetters(ctx, barrier.ListDeadLettersParams{})
		if err != nil {
			t.Fatal(err)
		}
		if ids(all) != ids([]barrier.DeadLetter{second, first}) {
			t.Errorf("List = %v, want newest first %v", ids(all), ids([]barrier.DeadLetter{second, first}))
		}
		one, err := s.ListDeadLetters(ctx, barrier.ListDeadLettersParams{SyncID: "contacts"})
		if err != nil {
			t.Fatal(err)
		}
		if len(one) != 1 || one[0].ID != first.ID {
			t.Errorf("List(sync contacts) = %v, want [%d]", ids(one), first.ID)
		}
		limited, err := s.ListDeadLetters(ctx, barrier.ListDeadLettersParams{Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(limited) != 1 || limited[0].ID != second.ID {
			t.Errorf("List(limit 1) = %v, want [%d]", ids(limited), second.ID)
		}
	})

	t.Run("AddInvalid", func(t *testing.T) {
		t.Parallel()
		s := open(t, clock.NewFake(time.Unix(0, 0)))
		for _, d := range []barrier.DeadLetter{{Reason: "r", Token: "t", Snapshot: "s"}, {Key: "k", Token: "t", Snapshot: "s"}} {
			if _, err := s.AddDeadLetter(t.Context(), d); err == nil {
				t.Errorf("AddDeadLetter(%+v) succeeded, want an error", d)
			}
		}
	})

	t.Run("Requeue", func(t *testing.T) {
		t.Parallel()
		clk := clock.NewFake(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		s := open(t, clk)
		ctx := t.Context()
		d, err := s.AddDeadLetter(ctx, barrier.DeadLetter{Key: "k", Reason: barrier.ReasonMismatch, Token: "t", Snapshot: "s"})
		if err != nil {
			t.Fatal(err)
		}
		at := clk.Now().Add(time.Hour)
		r, err := s.RequeueDeadLetter(ctx, d.ID, "alice", at)
		if err != nil {
			t.Fatalf("RequeueDeadLetter: %v", err)
		}
		if !r.RequeuedAt.Equal(at) || r.RequeuedBy != "alice" || r.ID != d.ID {
			t.Errorf("requeued = %+v, want at %s by alice", r, at)
		}
		if _, err := s.RequeueDeadLetter(ctx, d.ID, "bob", at.Add(time.Minute)); !errors.Is(err, barrier.ErrAlreadyRequeued) {
			t.Errorf("second RequeueDeadLetter = %v, want ErrAlreadyRequeued", err)
		}
		if got, _ := s.GetDeadLetter(ctx, d.ID); got.RequeuedBy != "alice" || !got.RequeuedAt.Equal(at) {
			t.Errorf("after a refused requeue: %+v, want alice's requeue kept", got)
		}
		if _, err := s.RequeueDeadLetter(ctx, d.ID+1000, "bob", at); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("RequeueDeadLetter(unknown) = %v, want ErrNotFound", err)
		}
		parked, err := s.ListDeadLetters(ctx, barrier.ListDeadLettersParams{})
		if err != nil {
			t.Fatal(err)
		}
		if len(parked) != 0 {
			t.Errorf("List (parked only) = %v, want none after requeue", ids(parked))
		}
		all, err := s.ListDeadLetters(ctx, barrier.ListDeadLettersParams{IncludeRequeued: true})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 || !all[0].Requeued() {
			t.Errorf("List (including requeued) = %+v, want the requeued entry", all)
		}
	})

	t.Run("RequeueConcurrent", func(t *testing.T) {
		t.Parallel()
		s := open(t, clock.NewFake(time.Unix(1e9, 0)))
		ctx := t.Context()
		d, err := s.AddDeadLetter(ctx, barrier.DeadLetter{Key: "k", Reason: barrier.ReasonMismatch, Token: "t", Snapshot: "s"})
		if err != nil {
			t.Fatal(err)
		}
		const n = 8
		var (
			wg      sync.WaitGroup
			mu      sync.Mutex
			ok, dup int
		)
		for i := range n {
			wg.Go(func() {
				_, err := s.RequeueDeadLetter(ctx, d.ID, "person-"+strconv.Itoa(i), time.Unix(1e9+int64(i), 0))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case err == nil:
					ok++
				case errors.Is(err, barrier.ErrAlreadyRequeued):
					dup++
				default:
					t.Errorf("RequeueDeadLetter: %v", err)
				}
			})
		}
		wg.Wait()
		if ok != 1 || dup != n-1 {
			t.Errorf("%d succeeded and %d were refused, want 1 and %d", ok, dup, n-1)
		}
	})
}

func equal(a, b barrier.DeadLetter) bool {
	return a.ID == b.ID && a.SyncID == b.SyncID && a.RunID == b.RunID && a.Partition == b.Partition &&
		a.Key == b.Key && a.Reason == b.Reason && a.Token == b.Token && a.Snapshot == b.Snapshot &&
		a.HolderToken == b.HolderToken && a.HolderSnapshot == b.HolderSnapshot && a.Attempts == b.Attempts &&
		a.Payload == b.Payload && a.CreatedAt.Equal(b.CreatedAt) && a.RequeuedAt.Equal(b.RequeuedAt) &&
		a.RequeuedBy == b.RequeuedBy
}

func ids(ds []barrier.DeadLetter) string {
	var b []byte
	for i, d := range ds {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendInt(b, d.ID, 10)
	}
	return string(b)
}
