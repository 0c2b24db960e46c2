package queue

import (
	"errors"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// TestRunFinished: what one finished run adds to each family.
func TestRunFinished(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		run     store.Run
		err     error
		outcome string
		records map[string]float64
		replays float64
		inDoubt float64
		lost    float64
	}{
		{
			name:    "succeeded",
			run:     store.Run{ID: 1, State: store.RunSucceeded, Counters: store.Counters{Read: 10, Written: 6, Rejected: 1, Skipped: 3}},
			outcome: "succeeded",
			records: map[string]float64{RecordsRead: 10, RecordsWritten: 6, RecordsRejected: 1, RecordsSkipped: 3},
		},
		{
			name: "resumed with replays and in-doubt records",
			run: store.Run{ID: 2, State: store.RunSucceeded,
				Counters: store.Counters{Read: 100, Written: 40, Replayed: 50, InDoubt: 10, Settled: 6}},
			outcome: "succeeded",
			records: map[string]float64{RecordsRead: 100, RecordsWritten: 40, RecordsReplayed: 50, RecordsInDoubt: 10, RecordsSettled: 6},
			replays: 50, inDoubt: 10,
		},
		{
			name: "lease lost",
			run: store.Run{ID: 3, State: store.RunFailed, FailureCode: string(failure.LeaseLost),
				Counters: store.Counters{Read: 20, Written: 20}},
			err:     failure.Wrap(failure.LeaseLost, errors.New("lease lost"), "lost"),
			outcome: "failed",
			records: map[string]float64{RecordsRead: 20, RecordsWritten: 20},
			lost:    1,
		},
		{
			name:    "never recorded",
			err:     failure.Wrap(failure.StoreUnavailable, errors.New("down"), "record the run"),
			outcome: "failed",
		},
		{
			name:    "interrupted",
			run:     store.Run{ID: 4, State: store.RunInterrupted, FailureCode: string(failure.Interrupted), Counters: store.Counters{Read: 5, Written: 5}},
			err:     failure.New(failure.Interrupted, "drained"),
			outcome: "interrupted",
			records: map[string]float64{RecordsRead: 5, RecordsWritten: 5},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			reg := prometheus.NewRegistry()
			m, err := newMetrics(reg, map[string]string{"s": "acme", "other": "beta"})
			if err != nil {
				t.Fatal(err)
			}
			// A partition's run counts under its sync.
			m.runFinished("s#p2", tc.run, tc.err)
			for _, o := range []string{"succeeded", "failed", "interrupted", "skipped"} {
				want := 0.0
				if o == tc.outcome {
					want = 1
				}
				if got := counterValue(t, m.runs.WithLabelValues(o, "other", "beta")); got != 0 {
					t.Errorf("runs{%s} of another sync = %v", o, got)
				}
				if got := counterValue(t, m.runs.WithLabelValues(o, "s", "acme")); got != want {
					t.Errorf("runs{%s} = %v, want %v", o, got, want)
				}
			}
			for _, o := range []string{RecordsRead, RecordsWritten, RecordsReplayed, RecordsRejected, RecordsInDoubt, RecordsSettled, RecordsSkipped} {
				if got := counterValue(t, m.records.WithLabelValues(o, "s", "acme")); got != tc.records[o] {
					t.Errorf("records{%s} = %v, want %v", o, got, tc.records[o])
				}
			}
			if got := counterValue(t, m.ledgerReplays); got != tc.replays {
				t.Errorf("ledger replays %v, want %v", got, tc.replays)
			}
			if got := counterValue(t, m.inDoubt); got != tc.inDoubt {
				t.Errorf("in-doubt records %v, want %v", got, tc.inDoubt)
			}
			if got := counterValue(t, m.leaseLosses); got != tc.lost {
				t.Errorf("lease losses %v, want %v", got, tc.lost)
			}
		})
	}
}
