package barrier_test

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/barrier"
)

// benchClients is the concurrency of BenchmarkCheck and of the
// redis-benchmark baseline it is compared with (redis-benchmark's default).
const benchClients = 50

// BenchmarkCheck measures barrier checks per second on one Redis (the test
// Redis), benchClients checkers on one key, next to redis-benchmark's EVALSHA
// rate for a trivial script on the same server with as many clients. The
// ratio checks/s ÷ baseline is the figure (goal ≥ 0.5).
//
//	go test -run '^$' -bench BenchmarkCheck -benchtime 5s ./internal/barrier/
func BenchmarkCheck(b *testing.B) {
	opt := mainOptions(b)
	opt.PoolSize = benchClients
	tb := setup(b, redis.NewClient(opt))
	key := tb.key()
	if _, err := tb.barrier.Check(tb.ctx, key, "bench", "snap", time.Hour); err != nil {
		b.Fatal(err)
	}
	b.SetParallelism(max(1, benchClients/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			res, err := tb.barrier.Check(context.Background(), key, "worker", "snap", time.Hour)
			if err != nil || res.Outcome != barrier.Aligned {
				b.Errorf("Check = %v, %v", res.Outcome, err)
				return
			}
		}
	})
	rate := float64(b.N) / time.Since(start).Seconds()
	b.StopTimer()
	b.ReportMetric(rate, "checks/s")
	if baseline, err := evalshaBaseline(tb.ctx, tb.client.(*redis.Client)); err != nil {
		b.Logf("redis-benchmark baseline unavailable: %v", err)
	} else {
		b.ReportMetric(baseline, "evalsha_baseline/s")
		b.ReportMetric(rate/baseline, "ratio")
	}
}

var rpsRE = regexp.MustCompile(`([0-9.]+) requests per second`)

// evalshaBaseline runs redis-benchmark's EVALSHA of `return 1` against c's
// server with benchClients clients and returns its requests per second.
func evalshaBaseline(ctx context.Context, c *redis.Client) (float64, error) {
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		return 0, err
	}
	sha, err := c.ScriptLoad(ctx, "return 1").Result()
	if err != nil {
		return 0, err
	}
	o := c.Options()
	host, port := "127.0.0.1", "6379"
	if h, p, ok := cutHostPort(o.Addr); ok {
		host, port = h, p
	}
	args := []string{"-h", host, "-p", port, "-n", "200000", "-c", strconv.Itoa(benchClients), "-q", "--dbnum", strconv.Itoa(o.DB)}
	if o.Password != "" {
		args = append(args, "-a", o.Password)
	}
	out, err := exec.CommandContext(ctx, bin, append(args, "EVALSHA", sha, "0")...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("%v: %s", err, out)
	}
	m := rpsRE.FindAllSubmatch(out, -1)
	if len(m) == 0 {
		return 0, fmt.Errorf("no rate in %q", out)
	}
	return strconv.ParseFloat(string(m[len(m)-1][1]), 64)
}

func cutHostPort(addr string) (string, string, bool) {
	for i := len(addr) - 1; i >= 0; i-- {
		if addr[i] == ':' {
			return addr[:i], addr[i+1:], true
		}
	}
	return "", "", false
}

// BenchmarkConverge500 measures the load spike of docs/guide.md#the-checkpoint-barrier: 500 checkers
// start at once on one fresh key; the time until every one of them has an
// answer (1 created, 499 aligned) is reported as ms/convergence.
func BenchmarkConverge500(b *testing.B) {
	for _, be := range backends() {
		b.Run(be.name, func(b *testing.B) {
			tb := setup(b, be.new(b))
			var total time.Duration
			for b.Loop() {
				counts, elapsed := runCheckers(b, tb.barrier, tb.key(), 500, barrier.WaitParams{})
				if counts[barrier.Created] != 1 || counts[barrier.Aligned] != 499 {
					b.Fatalf("outcomes %v, want 1 created and 499 aligned", counts)
				}
				total += elapsed
			}
			b.ReportMetric(float64(total.Microseconds())/1000/float64(b.N), "ms/convergence")
			b.ReportMetric(0, "ns/op")
		})
	}
}
