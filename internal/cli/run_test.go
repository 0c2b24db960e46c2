package cli

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// TestSummaryTellsInDoubt: the summary says what became of every in-doubt
// record, not only how many were settled.
func TestSummaryTellsInDoubt(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		run  store.Run
		want string
	}{
		{store.Run{ID: 1, State: store.RunSucceeded}, "in doubt 0,"},
		{store.Run{ID: 2, State: store.RunSucceeded, Counters: store.Counters{InDoubt: 750, Settled: 250}},
			"in doubt 750 (250 found already delivered, 500 not found there and written once)"},
		{store.Run{ID: 3, State: store.RunFailed, FailureCode: string(failure.RecordsInDoubt), Counters: store.Counters{InDoubt: 3}},
			"in doubt 3 (0 found already delivered, 3 left for a person to settle"},
		{store.Run{ID: 4, State: store.RunFailed, FailureCode: string(failure.DestinationUnavailable), Counters: store.Counters{InDoubt: 5, Settled: 1}},
			"4 not found there: written once by this run or the next"},
	} {
		var b bytes.Buffer
		printSummary(&b, tc.run, time.Second)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("summary %q lacks %q", b.String(), tc.want)
		}
	}
}
