package barrier

import (
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metric names.
const (
	MetricChecks      = "oncesync_checkpoint_checks_total"
	MetricHitRatio    = "oncesync_checkpoint_key_hit_ratio"
	MetricLatency     = "oncesync_checkpoint_duration_seconds"
	MetricDeadLetters = "oncesync_checkpoint_dead_letters_total"
)

// HitRatioAlert is the PromQL of docs/guide.md#the-checkpoint-barrier's alert: the key hit ratio over
// 10 minutes below 95 %. A miss is a Check that found no key (created) or a
// Verify that found none (missing): frequent misses mean keys expire too early
// or are evicted.
const HitRatioAlert = `sum(rate(oncesync_checkpoint_checks_total{outcome=~"aligned|mismatch"}[10m]))
  / sum(rate(oncesync_checkpoint_checks_total{outcome=~"created|aligned|mismatch|missing"}[10m])) < 0.95`

// Metrics are the barrier's Prometheus metrics:
//
//   - oncesync_checkpoint_checks_total{op="check|verify", outcome="created|aligned|mismatch|missing|error"}
//   - oncesync_checkpoint_key_hit_ratio: (aligned + mismatch) / (answered
//     checks and verifies) since the process started; NaN before the first.
//     Alert on HitRatioAlert, which computes it over 10 minutes.
//   - oncesync_checkpoint_duration_seconds{op="check|verify|advance|release"}
//   - oncesync_checkpoint_dead_letters_total
//
// A Metrics is safe for concurrent use and may be shared by several Barriers.
type Metrics struct {
	checks      *prometheus.CounterVec
	latency     *prometheus.HistogramVec
	deadLetters prometheus.Counter
	hits, total atomic.Int64
}

// NewMetrics registers the barrier's metrics on reg (never the global
// registry unless the caller passes it).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		checks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: MetricChecks,
			Help: "Checkpoint barrier checks by operation and outcome (created, aligned, mismatch, missing, error).",
		}, []string{"op", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    MetricLatency,
			Help:    "Latency of checkpoint barrier scripts, seconds.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1},
		}, []string{"op"}),
		deadLetters: prometheus.NewCounter(prometheus.CounterOpts{
			Name: MetricDeadLetters,
			Help: "Work parked in the dead-letter list after repeated checkpoint mismatches.",
		}),
	}
	hitRatio := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: MetricHitRatio,
		Help: "Share of answered checkpoint checks that found the key (aligned or mismatch) since start; alert on the 10-minute rate instead.",
	}, m.HitRatio)
	for _, c := range []prometheus.Collector{m.checks, m.latency, m.deadLetters, hitRatio} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register checkpoint metrics: %w", err)
		}
	}
	// Pre-create the series so dashboards and the alert see zeros.
	for _, op := range []string{"check", "verify"} {
		for _, o := range []string{"created", "aligned", "mismatch", "missing", "error"} {
			if op == "check" && o == "missing" || op == "verify" && o == "created" {
				continue
			}
			m.checks.WithLabelValues(op, o)
		}
	}
	return m, nil
}

// HitRatio returns (aligned + mismatch) / answered checks since start, NaN
// before the first answered check.
func (m *Metrics) HitRatio() float64 {
	total := m.total.Load()
	if total == 0 {
		return math.NaN()
	}
	return float64(m.hits.Load()) / float64(total)
}

func (m *Metrics) observe(op, outcome string, elapsed time.Duration) {
	m.checks.WithLabelValues(op, outcome).Inc()
	m.latency.WithLabelValues(op).Observe(elapsed.Seconds())
	switch outcome {
	case "aligned", "mismatch":
		m.hits.Add(1)
		m.total.Add(1)
	case "created", "missing":
		m.total.Add(1)
	}
}
