package apiclient

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
)

// TestFanOutLetsCallsInFlightFinish: a failure stops the handing out of
// calls, but a call already in flight is not cancelled (cut short after
// its request left, it would be in doubt and could still be applied after
// a read-back).
func TestFanOutLetsCallsInFlightFinish(t *testing.T) {
	t.Parallel()
	boom := errors.New("boom")
	started := make(chan struct{})
	var calls, cancelled atomic.Int64
	err := FanOut(t.Context(), 10, 2, func(ctx context.Context, i int) error {
		calls.Add(1)
		switch i {
		case 0:
			<-started // fail while call 1 is in flight
			return boom
		case 1:
			close(started)
			// Before, a failure cancelled this context within
			// microseconds; give it far longer than that to show.
			select {
			case <-ctx.Done():
				cancelled.Add(1)
			case <-time.After(100 * time.Millisecond):
			}
			return nil
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("FanOut = %v, want the failure", err)
	}
	if cancelled.Load() != 0 {
		t.Fatal("a call in flight saw its context cancelled by another's failure")
	}
	if n := calls.Load(); n >= 10 {
		t.Fatalf("%d calls: handing out did not stop after the failure", n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := FanOut(ctx, 3, 1, func(context.Context, int) error { return nil }); !errors.Is(err, context.Canceled) {
		t.Fatalf("FanOut on a cancelled context = %v", err)
	}
}

// TestWriteEach: settled records keep their results; after a failure, the
// records never sent and those whose send provably did not reach the
// server are NotSent, and the one that may have reached it is left out.
func TestWriteEach(t *testing.T) {
	recs := make([]destination.Record, 6)
	for i := range recs {
		recs[i] = destination.Record{Key: fmt.Sprintf("k%d", i)}
	}
	lost := errors.New("connection reset after the request was written")
	refused := fmt.Errorf("dial: %w", destination.ErrNotSent)
	out, err := WriteEach(context.Background(), recs, 1, nil, func(_ context.Context, r destination.Record) (destination.Result, error) {
		switch r.Key {
		case "k2":
			return destination.Result{}, lost
		case "k1":
			return destination.Result{Key: r.Key, Outcome: destination.Rejected, Message: "bad"}, nil
		}
		return destination.Result{Key: r.Key, Outcome: destination.Delivered}, nil
	})
	if !errors.Is(err, lost) {
		t.Fatalf("err = %v, want the first failure", err)
	}
	got := map[string]destination.Outcome{}
	for _, r := range out {
		got[r.Key] = r.Outcome
	}
	// FanOut may still hand out a call or two racing the failure: those are
	// settled; none after is sent.
	if len(got) != 5 || got["k0"] != destination.Delivered || got["k1"] != destination.Rejected {
		t.Fatalf("results %v: want k0 delivered, k1 rejected, k2 (in doubt) left out, the rest settled or not sent", got)
	}
	if _, ok := got["k2"]; ok {
		t.Fatalf("k2 may have reached the server, so it is in doubt, not %v", got["k2"])
	}
	for _, k := range []string{"k3", "k4", "k5"} {
		if o := got[k]; o != destination.Delivered && o != destination.NotSent {
			t.Fatalf("%s = %v, want delivered (sent before the failure stopped the fan-out) or not sent", k, o)
		}
	}
	out, err = WriteEach(context.Background(), recs[:1], 4, nil, func(context.Context, destination.Record) (destination.Result, error) {
		return destination.Result{}, refused
	})
	if !errors.Is(err, destination.ErrNotSent) || len(out) != 1 || out[0].Outcome != destination.NotSent {
		t.Fatalf("a send that never reached the server: %v, %v; want NotSent", out, err)
	}
}

// TestFanOutBoundsRequestsNotWaits: calls that wait (waitWithoutPlace) give
// their place to the next call, and take one back before they go on, so
// that at most conc calls work at once; an Unplaced wait keeps its place.
func TestFanOutBoundsRequestsNotWaits(t *testing.T) {
	t.Parallel()
	var working, most, started atomic.Int64
	enter := func() {
		n := working.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
	}
	err := FanOut(t.Context(), 20, 3, func(ctx context.Context, i int) error {
		started.Add(1)
		enter()
		time.Sleep(time.Millisecond)
		working.Add(-1)
		if err := waitWithoutPlace(ctx, func() error { time.Sleep(20 * time.Millisecond); return nil }); err != nil {
			return err
		}
		enter()
		time.Sleep(time.Millisecond)
		working.Add(-1)
		return nil
	})
	if err != nil || started.Load() != 20 {
		t.Fatalf("FanOut = %v after %d calls", err, started.Load())
	}
	if m := most.Load(); m > 3 {
		t.Fatalf("%d calls worked at once, want at most 3", m)
	}
	// An Unplaced wait keeps the place: the other call cannot start.
	var order []int
	var mu sync.Mutex
	err = FanOut(t.Context(), 2, 1, func(ctx context.Context, i int) error {
		mu.Lock()
		order = append(order, i)
		mu.Unlock()
		return waitWithoutPlace(Unplaced(ctx), func() error {
			time.Sleep(5 * time.Millisecond)
			mu.Lock()
			order = append(order, 10+i)
			mu.Unlock()
			return nil
		})
	})
	if err != nil || fmt.Sprint(order) != "[0 10 1 11]" {
		t.Fatalf("Unplaced waits: %v, order %v; want [0 10 1 11]", err, order)
	}
}

// TestFanOutOutageStartsFewCalls: when every call backs off and then fails
// (a destination down), no more than twice conc calls start: giving places
// up while waiting must not start the whole page against an outage.
func TestFanOutOutageStartsFewCalls(t *testing.T) {
	t.Parallel()
	down := errors.New("503")
	var started atomic.Int64
	err := FanOut(t.Context(), 50, 2, func(ctx context.Context, i int) error {
		started.Add(1)
		_ = waitWithoutPlace(ctx, func() error { time.Sleep(10 * time.Millisecond); return nil })
		return down
	})
	if !errors.Is(err, down) {
		t.Fatalf("FanOut = %v", err)
	}
	if n := started.Load(); n > 4 {
		t.Fatalf("%d calls started against the outage, want at most 4 (twice conc)", n)
	}
}

// TestFanOutTwoWaitsOfOneCall: two requests of one call that wait at once
// give up one place between them and take one back: the calls after it
// still work one at a time (conc 1). Before, both took a place back: with
// conc 1 the second waited for ever behind its own call.
func TestFanOutTwoWaitsOfOneCall(t *testing.T) {
	t.Parallel()
	var working, most atomic.Int64
	err := FanOut(t.Context(), 4, 1, func(ctx context.Context, i int) error {
		if i == 0 {
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					_ = waitWithoutPlace(ctx, func() error { time.Sleep(10 * time.Millisecond); return nil })
				})
			}
			wg.Wait()
			return nil
		}
		n := working.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		time.Sleep(20 * time.Millisecond)
		working.Add(-1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if m := most.Load(); m > 1 {
		t.Fatalf("%d calls worked at once after a call's two waits, want 1 (a place was left taken)", m)
	}
}

func TestChainsKeepEachKeysOrder(t *testing.T) {
	t.Parallel()
	keys := map[int]string{3: "a", 5: "b", 7: "a", 9: "", 11: "b", 13: "a"}
	got := Chains([]int{3, 5, 7, 9, 11, 13}, func(i int) string { return keys[i] })
	want := [][]int{{3, 7, 13}, {5, 11}, {9}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Chains = %v, want %v", got, want)
	}
	// Each chain's calls go one after another, the chains side by side.
	var mu sync.Mutex
	var order []int
	inFlight := map[string]bool{}
	err := FanOutChains(context.Background(), got, 3, func(_ context.Context, i int) error {
		mu.Lock()
		if inFlight[keys[i]] && keys[i] != "" {
			mu.Unlock()
			return fmt.Errorf("two calls of key %q at once", keys[i])
		}
		inFlight[keys[i]] = true
		mu.Unlock()
		time.Sleep(time.Millisecond)
		mu.Lock()
		inFlight[keys[i]] = false
		order = append(order, i)
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	pos := map[int]int{}
	for n, i := range order {
		pos[i] = n
	}
	if len(order) != 6 || pos[3] > pos[7] || pos[7] > pos[13] || pos[5] > pos[11] {
		t.Fatalf("calls in order %v: a chain's calls out of order", order)
	}
}
