package barrier_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/testenv"
)

func (tb *bundle) check(t *testing.T, key, token, snapshot string, ttl time.Duration) barrier.Result {
	t.Helper()
	res, err := tb.barrier.Check(tb.ctx, key, token, snapshot, ttl)
	if err != nil {
		t.Fatalf("Check(%s, %s): %v", token, snapshot, err)
	}
	return res
}

func (tb *bundle) value(t *testing.T, key string) (string, bool) {
	t.Helper()
	v, err := tb.client.Get(tb.ctx, key).Result()
	if errors.Is(err, redis.Nil) {
		return "", false
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v, true
}

func (tb *bundle) pttl(t *testing.T, key string) time.Duration {
	t.Helper()
	d, err := tb.client.PTTL(tb.ctx, key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	return d
}

func wantResult(t *testing.T, got barrier.Result, want barrier.Result) {
	t.Helper()
	if got != want {
		t.Errorf("result = {%s holder=%q snapshot=%q}, want {%s holder=%q snapshot=%q}",
			got.Outcome, got.HolderToken, got.HolderSnapshot, want.Outcome, want.HolderToken, want.HolderSnapshot)
	}
}

func TestCheckCreatedThenAligned(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		key := tb.key()
		wantResult(t, tb.check(t, key, "run-a", "snap-1", 0),
			barrier.Result{Outcome: barrier.Created, HolderToken: "run-a", HolderSnapshot: "snap-1"})
		if v, ok := tb.value(t, key); !ok || v != "run-a:snap-1" {
			t.Errorf("stored value = %q (present %v), want \"run-a:snap-1\"", v, ok)
		}
		// Another worker (other token), same inputs: aligned, holder unchanged.
		wantResult(t, tb.check(t, key, "run-b", "snap-1", 0),
			barrier.Result{Outcome: barrier.Aligned, HolderToken: "run-a", HolderSnapshot: "snap-1"})
		// The creator again: aligned too.
		wantResult(t, tb.check(t, key, "run-a", "snap-1", 0),
			barrier.Result{Outcome: barrier.Aligned, HolderToken: "run-a", HolderSnapshot: "snap-1"})
		if v, _ := tb.value(t, key); v != "run-a:snap-1" {
			t.Errorf("an aligned check changed the value to %q", v)
		}
	})
}

func TestCheckMismatch(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		key := tb.key()
		tb.check(t, key, "run-a", "snap-1", 0)
		wantResult(t, tb.check(t, key, "run-b", "snap-2", 0),
			barrier.Result{Outcome: barrier.Mismatch, HolderToken: "run-a", HolderSnapshot: "snap-1"})
		// The holder itself with other inputs: a mismatch too (use Advance).
		wantResult(t, tb.check(t, key, "run-a", "snap-2", 0),
			barrier.Result{Outcome: barrier.Mismatch, HolderToken: "run-a", HolderSnapshot: "snap-1"})
		if v, _ := tb.value(t, key); v != "run-a:snap-1" {
			t.Errorf("a mismatching check changed the value to %q", v)
		}
	})
}

// TestStaleKeyIsMismatch: a key left by an earlier run must never pass as
// alignment — neither by mere existence, nor by the seed's substring or
// 8-character-prefix comparisons.
func TestStaleKeyIsMismatch(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		tests := []struct {
			name, stale, snapshot string
			want                  barrier.Result
		}{
			{"other snapshot", "old-run:e3b0c442", "9f86d081",
				barrier.Result{Outcome: barrier.Mismatch, HolderToken: "old-run", HolderSnapshot: "e3b0c442"}},
			{"ours is a substring of it (seed's string.find)", "old-run:xx9f86d081xx", "9f86d081",
				barrier.Result{Outcome: barrier.Mismatch, HolderToken: "old-run", HolderSnapshot: "xx9f86d081xx"}},
			{"same first 8 characters (seed's tolerance window)", "old-run:9f86d081aaaa", "9f86d081bbbb",
				barrier.Result{Outcome: barrier.Mismatch, HolderToken: "old-run", HolderSnapshot: "9f86d081aaaa"}},
			{"ours extends it", "old-run:9f86", "9f86d081",
				barrier.Result{Outcome: barrier.Mismatch, HolderToken: "old-run", HolderSnapshot: "9f86"}},
			{"token matches our snapshot", "9f86d081:other", "9f86d081",
				barrier.Result{Outcome: barrier.Mismatch, HolderToken: "9f86d081", HolderSnapshot: "other"}},
			{"not our format", "9f86d081", "9f86d081",
				barrier.Result{Outcome: barrier.Mismatch, HolderToken: "", HolderSnapshot: "9f86d081"}},
			{"same snapshot, colons inside", "old-run:a:b:c", "a:b:c",
				barrier.Result{Outcome: barrier.Aligned, HolderToken: "old-run", HolderSnapshot: "a:b:c"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				key := tb.key()
				if err := tb.client.Set(tb.ctx, key, tt.stale, time.Minute).Err(); err != nil {
					t.Fatal(err)
				}
				wantResult(t, tb.check(t, key, "new-run", tt.snapshot, 0), tt.want)
				if v, _ := tb.value(t, key); v != tt.stale {
					t.Errorf("value changed to %q", v)
				}
				res, err := tb.barrier.Verify(tb.ctx, key, tt.snapshot)
				if err != nil {
					t.Fatal(err)
				}
				wantResult(t, res, tt.want)
			})
		}
	})
}

func TestAdvance(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		key := tb.key()
		tb.check(t, key, "run-a", "snap-1", 2*time.Second)

		err := tb.barrier.Advance(tb.ctx, key, "run-b", "snap-2", 0)
		var nh *barrier.NotHolderError
		if !errors.As(err, &nh) || !errors.Is(err, barrier.ErrNotHolder) {
			t.Fatalf("Advance by another token = %v, want *NotHolderError", err)
		}
		if nh.HolderToken != "run-a" || nh.HolderSnapshot != "snap-1" {
			t.Errorf("NotHolderError names %s/%s, want run-a/snap-1", nh.HolderToken, nh.HolderSnapshot)
		}
		if v, _ := tb.value(t, key); v != "run-a:snap-1" {
			t.Errorf("a refused Advance changed the value to %q", v)
		}

		if err := tb.barrier.Advance(tb.ctx, key, "run-a", "snap-2", time.Minute); err != nil {
			t.Fatalf("Advance by the holder: %v", err)
		}
		if v, _ := tb.value(t, key); v != "run-a:snap-2" {
			t.Errorf("value after Advance = %q, want run-a:snap-2", v)
		}
		if d := tb.pttl(t, key); d <= 2*time.Second || d > time.Minute {
			t.Errorf("TTL after Advance = %s, want renewed to about 1m", d)
		}
		wantResult(t, tb.check(t, key, "run-b", "snap-1", 0),
			barrier.Result{Outcome: barrier.Mismatch, HolderToken: "run-a", HolderSnapshot: "snap-2"})
		wantResult(t, tb.check(t, key, "run-b", "snap-2", 0),
			barrier.Result{Outcome: barrier.Aligned, HolderToken: "run-a", HolderSnapshot: "snap-2"})

		// An absent barrier (expired, released) cannot be advanced.
		err = tb.barrier.Advance(tb.ctx, tb.key(), "run-a", "snap-3", 0)
		if !errors.As(err, &nh) || nh.HolderToken != "" {
			t.Errorf("Advance of an absent key = %v, want *NotHolderError without a holder", err)
		}
	})
}

func TestRelease(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		key := tb.key()
		tb.check(t, key, "run-a", "snap-1", 0)

		err := tb.barrier.Release(tb.ctx, key, "run-b")
		var nh *barrier.NotHolderError
		if !errors.As(err, &nh) || nh.HolderToken != "run-a" {
			t.Fatalf("Release by another token = %v, want *NotHolderError naming run-a", err)
		}
		if _, ok := tb.value(t, key); !ok {
			t.Fatal("a refused Release deleted the key")
		}
		if err := tb.barrier.Release(tb.ctx, key, "run-a"); err != nil {
			t.Fatalf("Release by the holder: %v", err)
		}
		if _, ok := tb.value(t, key); ok {
			t.Error("the key survived its holder's Release")
		}
		if err := tb.barrier.Release(tb.ctx, key, "run-a"); err != nil {
			t.Errorf("second Release = %v, want nil (already released)", err)
		}
		// Released: the next check defines a new reference point.
		wantResult(t, tb.check(t, key, "run-c", "snap-9", 0),
			barrier.Result{Outcome: barrier.Created, HolderToken: "run-c", HolderSnapshot: "snap-9"})
	})
}

func TestTTL(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		def := tb.key()
		tb.check(t, def, "run-a", "s", 0)
		if d := tb.pttl(t, def); d <= barrier.DefaultTTL-5*time.Second || d > barrier.DefaultTTL {
			t.Errorf("default TTL = %s, want about %s", d, barrier.DefaultTTL)
		}

		set := tb.key()
		tb.check(t, set, "run-a", "s", 1500*time.Millisecond)
		if d := tb.pttl(t, set); d <= 0 || d > 1500*time.Millisecond {
			t.Errorf("TTL = %s, want in (0, 1.5s]", d)
		}
		// An aligned check does not extend the barrier.
		tb.check(t, set, "run-b", "s", time.Hour)
		if d := tb.pttl(t, set); d <= 0 || d > 1500*time.Millisecond {
			t.Errorf("TTL after an aligned check = %s, want still <= 1.5s", d)
		}

		short := tb.key()
		tb.check(t, short, "run-a", "old", 30*time.Millisecond)
		deadline := time.Now().Add(5 * time.Second)
		for {
			if _, ok := tb.value(t, short); !ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the barrier did not expire")
			}
			time.Sleep(10 * time.Millisecond)
		}
		wantResult(t, tb.check(t, short, "run-b", "new", 0),
			barrier.Result{Outcome: barrier.Created, HolderToken: "run-b", HolderSnapshot: "new"})
	})
}

func TestVerify(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		key := tb.key()
		res, err := tb.barrier.Verify(tb.ctx, key, "snap-1")
		if err != nil {
			t.Fatal(err)
		}
		wantResult(t, res, barrier.Result{Outcome: barrier.Missing})
		if _, ok := tb.value(t, key); ok {
			t.Fatal("Verify created the key")
		}
		tb.check(t, key, "coordinator", "snap-1", 0)
		for _, tt := range []struct {
			snapshot string
			want     barrier.Result
		}{
			{"snap-1", barrier.Result{Outcome: barrier.Aligned, HolderToken: "coordinator", HolderSnapshot: "snap-1"}},
			{"snap-2", barrier.Result{Outcome: barrier.Mismatch, HolderToken: "coordinator", HolderSnapshot: "snap-1"}},
		} {
			res, err := tb.barrier.Verify(tb.ctx, key, tt.snapshot)
			if err != nil {
				t.Fatal(err)
			}
			wantResult(t, res, tt.want)
		}
	})
}

// TestKeysSpreadOverShards: named barriers land on every shard of the Ring
// and every master of the Cluster (the hash tag differs per name), and each
// one is still reached through the same client.
func TestKeysSpreadOverShards(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		const n = 60
		keys := make([]string, n)
		for i := range keys {
			keys[i] = tb.key()
			tb.check(t, keys[i], "run-a", "s", 0)
		}
		var (
			mu     sync.Mutex
			counts []int64
		)
		err := testenv.ForEachServer(tb.ctx, tb.client, func(ctx context.Context, c *redis.Client) error {
			var found int64
			iter := c.Scan(ctx, 0, tb.keys.Prefix()+"*", 1000).Iterator()
			for iter.Next(ctx) {
				found++
			}
			mu.Lock()
			counts = append(counts, found)
			mu.Unlock()
			return iter.Err()
		})
		if err != nil {
			t.Fatal(err)
		}
		var total int64
		for _, c := range counts {
			total += c
			if len(counts) > 1 && c == 0 {
				t.Errorf("a server holds none of %d barriers (per server: %v): keys are not spread", n, counts)
			}
		}
		if total != n {
			t.Errorf("servers hold %d keys (%v), want %d", total, counts, n)
		}
		for _, k := range keys {
			wantResult(t, tb.check(t, k, "run-b", "s", 0),
				barrier.Result{Outcome: barrier.Aligned, HolderToken: "run-a", HolderSnapshot: "s"})
		}
	})
}

func TestInvalid(t *testing.T) {
	t.Parallel()
	b := barrier.New(barrier.Params{Client: redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})})
	ctx := t.Context()
	tests := []struct {
		name string
		call func() error
	}{
		{"empty key", func() error { _, err := b.Check(ctx, "", "t", "s", 0); return err }},
		{"empty token", func() error { _, err := b.Check(ctx, "k", "", "s", 0); return err }},
		{"token with colon", func() error { _, err := b.Check(ctx, "k", "a:b", "s", 0); return err }},
		{"empty snapshot", func() error { _, err := b.Check(ctx, "k", "t", "", 0); return err }},
		{"verify empty snapshot", func() error { _, err := b.Verify(ctx, "k", ""); return err }},
		{"advance token with colon", func() error { return b.Advance(ctx, "k", "a:b", "s", 0) }},
		{"release empty token", func() error { return b.Release(ctx, "k", "") }},
		{"no client", func() error {
			_, err := barrier.New(barrier.Params{}).Check(ctx, "k", "t", "s", 0)
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.call(); !errors.Is(err, barrier.ErrInvalid) {
				t.Errorf("err = %v, want ErrInvalid", err)
			}
		})
	}
}

// TestRedisDown: with Redis gone, every call fails with store.ErrUnavailable;
// nothing answers created or aligned, so no worker proceeds unaligned.
func TestRedisDown(t *testing.T) {
	t.Parallel()
	addr, stop, err := startServer(t.TempDir())
	if err != nil {
		unavailable(t, "%v", err)
	}
	tb := setup(t, redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DialTimeout: 200 * time.Millisecond}))
	key := tb.key()
	tb.check(t, key, "run-a", "s", 0)
	stop()
	res, err := tb.barrier.Check(tb.ctx, key, "run-b", "s", 0)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Check with Redis down = %v (%s), want store.ErrUnavailable", err, res.Outcome)
	}
	if _, err := tb.barrier.Verify(tb.ctx, key, "s"); !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Verify with Redis down = %v, want store.ErrUnavailable", err)
	}
	_, err = tb.barrier.Wait(tb.ctx, barrier.WaitParams{Key: key, Token: "run-b", Snapshot: "s",
		Sleep: func(context.Context, time.Duration) error { t.Error("Wait slept on a Redis error"); return nil }})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Wait with Redis down = %v, want store.ErrUnavailable at once", err)
	}
}

// TestConcurrentCheckersConverge: 500 checkers on one key at once: exactly
// one creates the barrier, the other 499 are aligned.
func TestConcurrentCheckersConverge(t *testing.T) {
	t.Parallel()
	forEachBackend(t, func(t *testing.T, tb *bundle) {
		key := tb.key()
		counts, elapsed := runCheckers(t, tb.barrier, key, 500, barrier.WaitParams{})
		if counts[barrier.Created] != 1 || counts[barrier.Aligned] != 499 {
			t.Errorf("outcomes %v, want 1 created and 499 aligned", counts)
		}
		t.Logf("500 concurrent checkers converged in %s", elapsed)
	})
}

// TestCheckersConvergeAfterStaleKey: 500 checkers meet a stale barrier of an
// earlier run; they back off (scaled-down §11 backoff), none proceeds on the
// stale snapshot, and all converge once it expires: one creates, 499 align.
func TestCheckersConvergeAfterStaleKey(t *testing.T) {
	t.Parallel()
	tb := setup(t, redis.NewClient(mainOptions(t)))
	key := tb.key()
	if err := tb.client.Set(tb.ctx, key, "old-run:stale", 150*time.Millisecond).Err(); err != nil {
		t.Fatal(err)
	}
	counts, elapsed := runCheckers(t, tb.barrier, key, 500, barrier.WaitParams{
		Retries: 10,
		Jitter:  func(ceiling time.Duration) time.Duration { return ceiling / 20 },
	})
	// The stale snapshot differs from theirs: an aligned answer can only
	// come from the barrier one of them created after it expired.
	if counts[barrier.Created] != 1 || counts[barrier.Aligned] != 499 {
		t.Errorf("outcomes %v, want 1 created and 499 aligned", counts)
	}
	t.Logf("500 checkers converged %s after meeting a stale key (150 ms TTL)", elapsed)
}

// runCheckers runs n concurrent Waits on key with one snapshot and returns
// the outcome counts and the time until the last one returned.
func runCheckers(t testing.TB, b *barrier.Barrier, key string, n int, p barrier.WaitParams) (map[barrier.Outcome]int, time.Duration) {
	t.Helper()
	var (
		mu     sync.Mutex
		counts = map[barrier.Outcome]int{}
		wg     sync.WaitGroup
		start  = make(chan struct{})
	)
	p.Key, p.Snapshot = key, "snap-converge"
	for i := range n {
		wg.Go(func() {
			p := p
			p.Token = "worker-" + randHex(4) + "-" + string(rune('a'+i%26))
			<-start
			res, err := b.Wait(context.Background(), p)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				t.Errorf("Wait: %v", err)
				return
			}
			counts[res.Outcome]++
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	return counts, time.Since(began)
}

// TestCheckpointKeys: named barriers get their own hash tag, escaped like a
// sync id, so no name can end the tag early or collide with a sync's keys.
func TestCheckpointKeys(t *testing.T) {
	t.Parallel()
	ks := rediskey.Default()
	if got, want := ks.Checkpoint("nightly"), "oncesync:v1:{checkpoint:nightly}:barrier"; got != want {
		t.Errorf("Checkpoint(nightly) = %q, want %q", got, want)
	}
	seen := map[string]string{}
	for _, name := range []string{"nightly", "a}b", "{x}", "a b", "", "sync:nightly", strings.Repeat("n", 200)} {
		k := ks.Checkpoint(name)
		if strings.Count(k, "{") != 1 || strings.Count(k, "}") != 1 || !strings.HasPrefix(k, "oncesync:v1:{checkpoint:") {
			t.Errorf("Checkpoint(%q) = %q: want exactly one {checkpoint:...} hash tag", name, k)
		}
		if prev, ok := seen[k]; ok {
			t.Errorf("names %q and %q share the key %q", prev, name, k)
		}
		seen[k] = name
	}
	if ks.Checkpoint("nightly") == ks.Barrier("nightly", 0) {
		t.Error("a named barrier shares a sync run's barrier key")
	}
}
