package queue

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the queue's Prometheus counters.
type metrics struct {
	runs      *prometheus.CounterVec // by outcome (run state)
	enqueued  *prometheus.CounterVec // by reason
	recovered prometheus.Counter
	tripped   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncesync_runs_total",
			Help: "Runs finished by this process, by outcome (succeeded, failed, interrupted, skipped).",
		}, []string{"outcome"}),
		enqueued: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncesync_jobs_enqueued_total",
			Help: "Run jobs inserted into the queue by this process, by reason (schedule, manual, recovery).",
		}, []string{"reason"}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oncesync_runs_recovered_total",
			Help: "Runs found running with an expired lease and resumed by lease-expiry recovery.",
		}),
		tripped: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "oncesync_breaker_trips_total",
			Help: "Syncs paused by the circuit breaker after an evaluation by this process.",
		}),
	}
	// Every series exists from the start, at 0, so that rates and alerts
	// work before the first event.
	for _, o := range []string{"succeeded", "failed", "interrupted", "skipped"} {
		m.runs.WithLabelValues(o)
	}
	for _, r := range []string{ReasonSchedule, ReasonManual, ReasonRecovery} {
		m.enqueued.WithLabelValues(r)
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.runs, m.enqueued, m.recovered, m.tripped} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}
