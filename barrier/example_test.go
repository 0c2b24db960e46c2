package barrier_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/barrier"
	"github.com/oncesync/oncesync/internal/testenv"
)

// client is the examples' Redis (ONCESYNC_TEST_REDIS_URL, default
// 127.0.0.1:6379), and run a prefix that keeps their keys apart from any
// other run's.
var (
	client *redis.Client
	run    = "example-" + testenv.RandHex(4) + "-"
)

// TestMain runs the examples against a real Redis: without one they are
// skipped (failed under CI=true), as the other tests that need Redis are.
func TestMain(m *testing.M) {
	opt, err := redis.ParseURL(testenv.RedisURL())
	if err == nil {
		client = redis.NewClient(opt)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		err = client.Ping(ctx).Err()
		cancel()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "barrier examples: no Redis at %s: %v\n", testenv.RedisURL(), err)
		if testenv.InCI() {
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	_ = client.Close()
	os.Exit(code)
}

// Two workers check the same barrier: the first creates it with the snapshot
// of its inputs, a second with the same inputs is aligned, and one that read
// other inputs is told it does not match, with the holder's snapshot.
func ExampleBarrier_Check() {
	ctx := context.Background()
	b := barrier.New(barrier.Params{Client: client})
	key := barrier.Key(run + "nightly-export")

	snap, _ := barrier.Snapshot(map[string]any{"table": "contacts", "version": 42})
	stale, _ := barrier.Snapshot(map[string]any{"table": "contacts", "version": 41})

	first, _ := b.Check(ctx, key, "worker-1", snap, time.Minute)
	second, _ := b.Check(ctx, key, "worker-2", snap, time.Minute)
	third, _ := b.Check(ctx, key, "worker-3", stale, time.Minute)
	fmt.Println(first.Outcome, second.Outcome, third.Outcome)
	fmt.Println("held by", third.HolderToken, "at the same snapshot:", third.HolderSnapshot == snap)

	// Only the holder releases it.
	err := b.Release(ctx, key, "worker-2")
	fmt.Println(errors.Is(err, barrier.ErrNotHolder))
	fmt.Println(b.Release(ctx, key, "worker-1"))
	// Output:
	// created aligned mismatch
	// held by worker-1 at the same snapshot: true
	// true
	// <nil>
}

// A worker whose inputs keep disagreeing with the barrier waits with backoff
// and then parks its work as a dead letter for a person (here with no
// retries and no store, so the entry is only returned).
// A coordinator pins a snapshot; workers Verify theirs against it without
// ever creating the barrier, and only the holder may Advance it to the next
// snapshot (a stale one then no longer matches).
func ExampleBarrier_Advance() {
	ctx := context.Background()
	b := barrier.New(barrier.Params{Client: client})
	key := barrier.Key(run + "daily-load")

	monday, _ := barrier.Snapshot(map[string]any{"day": "2026-12-07"})
	tuesday, _ := barrier.Snapshot(map[string]any{"day": "2026-12-08"})

	before, _ := b.Verify(ctx, key, monday)
	_, _ = b.Check(ctx, key, "coordinator", monday, time.Minute)
	pinned, _ := b.Verify(ctx, key, monday)
	err := b.Advance(ctx, key, "worker-1", tuesday, time.Minute)
	fmt.Println(before.Outcome, pinned.Outcome, errors.Is(err, barrier.ErrNotHolder))

	_ = b.Advance(ctx, key, "coordinator", tuesday, time.Minute)
	old, _ := b.Verify(ctx, key, monday)
	now, _ := b.Verify(ctx, key, tuesday)
	fmt.Println(old.Outcome, now.Outcome)
	_ = b.Release(ctx, key, "coordinator")
	// Output:
	// missing aligned true
	// mismatch aligned
}

func ExampleBarrier_Wait() {
	ctx := context.Background()
	b := barrier.New(barrier.Params{Client: client})
	key := barrier.Key(run + "daily-load")

	_, _ = b.Check(ctx, key, "leader", "snapshot-a", time.Minute)
	_, err := b.Wait(ctx, barrier.WaitParams{Key: key, Token: "late", Snapshot: "snapshot-b", Retries: -1})

	var dl *barrier.DeadLetteredError
	if errors.As(err, &dl) {
		fmt.Println("parked:", dl.Entry.Reason, "after", dl.Entry.Attempts, "check; stored:", dl.Stored)
		fmt.Println("the barrier holds", dl.Entry.HolderSnapshot)
	}
	_ = b.Release(ctx, key, "leader")
	// Output:
	// parked: checkpoint_mismatch after 1 check; stored: false
	// the barrier holds snapshot-a
}

// A Barrier counts its checks on your Prometheus registry; alert on
// HitRatioAlert to learn that barrier keys expire or are evicted.
func ExampleNewMetrics() {
	ctx := context.Background()
	reg := prometheus.NewRegistry()
	m, err := barrier.NewMetrics(reg)
	if err != nil {
		panic(err)
	}
	b := barrier.New(barrier.Params{Client: client, Metrics: m})
	key := barrier.Key(run + "hourly-sync")

	_, _ = b.Check(ctx, key, "worker-1", "snapshot-a", time.Minute)
	_, _ = b.Check(ctx, key, "worker-2", "snapshot-a", time.Minute)
	_ = b.Release(ctx, key, "worker-1")

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() != "oncesync_checkpoint_checks_total" {
			continue
		}
		for _, s := range mf.GetMetric() {
			if v := s.GetCounter().GetValue(); v > 0 {
				fmt.Println(s.GetLabel()[0].GetValue(), s.GetLabel()[1].GetValue(), v) // op, outcome
			}
		}
	}
	// Output:
	// check aligned 1
	// check created 1
}

// Equal inputs give equal snapshots on every machine: map order does not
// matter, a time's zone does not matter, and an integer is not a float.
func ExampleSnapshot() {
	a, _ := barrier.Snapshot(map[string]any{"rows": 1000, "as_of": time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)})
	b, _ := barrier.Snapshot(map[string]any{"as_of": time.Date(2026, 12, 1, 13, 0, 0, 0, time.FixedZone("CET", 3600)), "rows": 1000})
	c, _ := barrier.Snapshot(map[string]any{"rows": 1000.0, "as_of": time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)})
	_, err := barrier.Snapshot(map[string]any{"config": struct{ Path string }{"x"}})
	fmt.Println(a == b, a == c, len(a), errors.Is(err, barrier.ErrUnhashable))
	// Output: true false 64 true
}
