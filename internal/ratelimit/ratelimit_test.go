package ratelimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/ratelimit"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/testenv"
)

var tenPerSecond = destination.Limit{Rate: 10, Burst: 1}

// pacedTen is the spacing of requests an apiclient.AccountLimiter under
// tenPerSecond books: AccountHeadroom of the limit.
var pacedTen = func() time.Duration {
	rate := 10 * apiclient.AccountHeadroom
	return time.Duration(float64(time.Second) / rate)
}()

// TestMemorySharesTheAccount: two runs of one account book slots of one
// schedule (100 ms apart at 10/s), another account is not held up, and a
// pause holds the account's next request back.
func TestMemorySharesTheAccount(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	m := ratelimit.NewMemory(clk)
	ctx := context.Background()
	a := apiclient.NewAccountLimiter(clk, m, "brevo-a", tenPerSecond)
	b := apiclient.NewAccountLimiter(clk, m, "brevo-a", tenPerSecond)
	var waits []time.Duration
	for range 3 {
		for _, l := range []*apiclient.AccountLimiter{a, b} {
			d, err := l.Reserve(ctx)
			if err != nil {
				t.Fatal(err)
			}
			waits = append(waits, d)
		}
	}
	for i, d := range waits {
		if want := time.Duration(i) * pacedTen; d != want {
			t.Fatalf("booking %d waits %v, want %v (all: %v)", i, d, want, waits)
		}
	}
	if d, _ := m.Reserve(ctx, "brevo-other", tenPerSecond); d != 0 {
		t.Fatalf("another account waits %v", d)
	}
	clk.Advance(time.Second)
	a.Pause(3 * time.Second)
	if d, _ := b.Reserve(ctx); d != 3*time.Second {
		t.Fatalf("after a pause of 3s the account's next request waits %v", d)
	}
}

// TestMemoryBurst: a burst of 5 lets 5 go at once, then paces.
func TestMemoryBurst(t *testing.T) {
	t.Parallel()
	clk := clock.NewFake(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	m := ratelimit.NewMemory(clk)
	for i := range 7 {
		d, err := m.Reserve(context.Background(), "k", destination.Limit{Rate: 10, Burst: 5})
		if err != nil {
			t.Fatal(err)
		}
		want := time.Duration(0)
		if i >= 5 {
			want = time.Duration(i-4) * 100 * time.Millisecond
		}
		if d != want {
			t.Fatalf("request %d waits %v, want %v", i, d, want)
		}
	}
}

func redisPacer(t *testing.T) (*ratelimit.Redis, *redis.Client, rediskey.Space) {
	t.Helper()
	opt := testenv.RedisOptions(t)
	c := redis.NewClient(opt)
	t.Cleanup(func() { c.Close() })
	keys, err := rediskey.New("rl-" + testenv.RandHex(6))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { testenv.DeletePrefix(t, c, keys.Prefix()) })
	return ratelimit.NewRedis(c, keys), c, keys
}

// TestRedisSharesTheAccount: two processes' pacers (two clients) book one
// schedule on Redis's clock; a pause set by one holds the other.
func TestRedisSharesTheAccount(t *testing.T) {
	t.Parallel()
	p1, _, keys := redisPacer(t)
	c2 := redis.NewClient(testenv.RedisOptions(t))
	t.Cleanup(func() { c2.Close() })
	p2 := ratelimit.NewRedis(c2, keys)
	ctx := context.Background()
	start := time.Now()
	var last time.Time
	for i := range 20 {
		p := p1
		if i%2 == 1 {
			p = p2
		}
		d, err := p.Reserve(ctx, "brevo-x", destination.Limit{Rate: 50, Burst: 1})
		if err != nil {
			t.Fatal(err)
		}
		last = time.Now().Add(d)
	}
	// 20 bookings at 50/s on one schedule span about 380 ms from the
	// first; two schedules, 10 bookings each, would span about 180 ms.
	// (A booking's own gap to the one before is not checked: each is
	// measured on this clock after its call returned, and on a loaded
	// machine the calls' latencies differ by more than the 20 ms.)
	if span := last.Sub(start); span < 300*time.Millisecond || span > 2*time.Second {
		t.Fatalf("20 bookings at 50/s shared by two pacers span %v, want about 380ms", span)
	}
	if err := p1.Pause(ctx, "brevo-y", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	d, err := p2.Reserve(ctx, "brevo-y", tenPerSecond)
	if err != nil || d < 1500*time.Millisecond || d > 2*time.Second {
		t.Fatalf("after a 2s pause by another process: wait %v (%v)", d, err)
	}
}

// TestAccountLimiterFallsBackWhenRedisIsGone: with the shared pacer
// unreachable, requests are paced by the process alone, never refused.
func TestAccountLimiterFallsBackWhenRedisIsGone(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	clk := clock.NewFake(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	l := apiclient.NewAccountLimiter(clk, ratelimit.NewRedis(dead, rediskey.Default()), "brevo-z", tenPerSecond)
	for i := range 3 {
		d, err := l.Reserve(context.Background())
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if want := time.Duration(i) * pacedTen; d != want {
			t.Fatalf("request %d waits %v, want %v (paced alone)", i, d, want)
		}
	}
}

// TestFallbackSharesTheProcessWhileRedisIsGone: with Redis unreachable, the
// runs of one process book one schedule in the process (not one each: k
// runs would send k times the account's budget), never refused.
func TestFallbackSharesTheProcessWhileRedisIsGone(t *testing.T) {
	t.Parallel()
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { dead.Close() })
	clk := clock.NewFake(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	f := ratelimit.NewFallback(ratelimit.NewRedis(dead, rediskey.Default()), ratelimit.NewMemory(clk))
	ctx := context.Background()
	a := apiclient.NewAccountLimiter(clk, f, "brevo-f", tenPerSecond)
	b := apiclient.NewAccountLimiter(clk, f, "brevo-f", tenPerSecond)
	for i := range 6 {
		l := a
		if i%2 == 1 {
			l = b
		}
		d, err := l.Reserve(ctx)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if want := time.Duration(i) * pacedTen; d != want {
			t.Fatalf("request %d waits %v, want %v (two runs of one process, one schedule)", i, d, want)
		}
	}
	clk.Advance(time.Second)
	a.Pause(2 * time.Second)
	if d, _ := b.Reserve(ctx); d != 2*time.Second {
		t.Fatalf("after another run's pause of 2s, with Redis gone: wait %v", d)
	}
	if _, err := f.Reserve(ctx, "brevo-f", destination.Limit{}); err == nil {
		t.Fatal("a limit without a rate was accepted")
	}
}

// TestFallbackBooksOnRedisWhenItAnswers: with Redis up, Fallback books on
// Redis (another process's pacer sees the booking), not in the process.
func TestFallbackBooksOnRedisWhenItAnswers(t *testing.T) {
	t.Parallel()
	p, c, keys := redisPacer(t)
	clk := clock.NewFake(time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC))
	f := ratelimit.NewFallback(p, ratelimit.NewMemory(clk))
	ctx := context.Background()
	slow := destination.Limit{Rate: 0.5, Burst: 1} // 2 s apart: wall-clock noise cannot matter
	if d, err := f.Reserve(ctx, "brevo-g", slow); err != nil || d != 0 {
		t.Fatalf("first booking: wait %v (%v), want 0", d, err)
	}
	if n, err := c.Exists(ctx, keys.AccountRate("brevo-g")).Result(); err != nil || n != 1 {
		t.Fatalf("the account's rate key in Redis: exists %d (%v)", n, err)
	}
	other := ratelimit.NewRedis(c, keys) // another process
	d, err := other.Reserve(ctx, "brevo-g", slow)
	if err != nil || d < time.Second || d > 2*time.Second {
		t.Fatalf("another process's next booking waits %v (%v), want about 2s", d, err)
	}
}
