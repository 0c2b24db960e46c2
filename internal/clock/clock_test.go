package clock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestFakeAfterFunc(t *testing.T) {
	t.Parallel()
	f := NewFake(time.Unix(1000, 0))
	var got []string
	f.AfterFunc(2*time.Second, func() { got = append(got, "b") })
	f.AfterFunc(time.Second, func() { got = append(got, "a") })
	stopped := f.AfterFunc(time.Second, func() { got = append(got, "stopped") })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop of a pending timer must report true once")
	}
	f.Advance(999 * time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("ran before due: %v", got)
	}
	f.Advance(5 * time.Second)
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("ran %v, want [a b] in time order", got)
	}
	// A call due at once runs before AfterFunc returns; one that re-arms
	// itself inside an Advance runs again if already due.
	f.AfterFunc(0, func() { got = append(got, "now") })
	if got[len(got)-1] != "now" {
		t.Fatalf("a call due at once did not run: %v", got)
	}
	n := 0
	var tick func()
	tick = func() {
		n++
		if n < 3 {
			f.AfterFunc(time.Second, tick)
		}
	}
	f.AfterFunc(time.Second, tick)
	f.Advance(10 * time.Second)
	if n != 1 {
		t.Fatalf("a re-armed call not yet due ran %d times, want 1", n)
	}
	f.Advance(time.Second)
	f.Advance(time.Second)
	if n != 3 || f.Pending() != 0 {
		t.Fatalf("ticks %d (want 3), pending %d", n, f.Pending())
	}
}

func TestWithDeadlineOnFake(t *testing.T) {
	t.Parallel()
	f := NewFake(time.Unix(1000, 0))
	at := f.Now().Add(time.Minute)
	ctx, cancel := WithDeadline(context.Background(), f, at)
	defer cancel()
	if d, ok := ctx.Deadline(); !ok || !d.Equal(at) {
		t.Fatalf("Deadline() = %s %v, want %s", d, ok, at)
	}
	f.Advance(59 * time.Second)
	if ctx.Err() != nil {
		t.Fatal("done before its deadline")
	}
	f.Advance(time.Second)
	select {
	case <-ctx.Done():
	default:
		t.Fatal("not done at its deadline")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err() = %v, want DeadlineExceeded", ctx.Err())
	}

	ctx2, cancel2 := WithDeadline(context.Background(), f, f.Now().Add(time.Minute))
	cancel2()
	if !errors.Is(ctx2.Err(), context.Canceled) || f.Pending() != 0 {
		t.Fatalf("cancelled: Err() = %v, pending timers %d", ctx2.Err(), f.Pending())
	}
}
