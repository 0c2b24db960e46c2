package breaker

import (
	"context"
	"fmt"
	"time"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// Counts reports whether a failed run with code lengthens its sync's failure
// streak (docs/guide.md#guardrails): only failures the sync's owner fixes (owner `you` in the
// catalog: its definition, data or credentials). A failure the operator owns
// (store_unavailable, lease_lost, destination_unavailable,
// destination_rate_limited, interrupted, ...) neither counts nor resets the
// streak, so an outage of Redis or the destination pauses nothing.
func Counts(code string) bool {
	return failure.Lookup(failure.Code(code)).Owner == failure.OwnerYou
}

// Streak is a sync's failure streak, computed from its stored runs: the one
// definition the breaker, `oncesync status` and the sync pages share.
type Streak struct {
	// Failures counts the failed runs owned by `you` since the sync's last
	// success and its changed_at (publish, enable, resume). The breaker
	// trips when it reaches the sync's threshold.
	Failures int
	// Operator counts the failed runs the operator owns in the same span:
	// shown and alerted, never counted.
	Operator int
	// Last is the newest counted failure, LastOperator the newest operator
	// failure (zero ID: none).
	Last, LastOperator store.Run
	// Newest is the newest finished or interrupted run since changed_at
	// (zero ID: none): the run an evaluation is about.
	Newest store.Run
	// Since is when the span began: the sync's changed_at, or the end of
	// its last success when later.
	Since time.Time
	// Ended: the runs read reached where the streak ends (a success, a run
	// before changed_at, or, from Read, the sync's first run). When false
	// the counts are lower bounds: older runs were not read.
	Ended bool
}

// Compute folds runs (newest first, as store.ListRuns returns them) into the
// streak of s. Skipped, queued and running runs neither count nor reset.
func Compute(s store.Sync, runs []store.Run) Streak {
	st := Streak{Since: s.ChangedAt}
	for _, r := range runs {
		if r.StartedAt.Before(s.ChangedAt) {
			st.Ended = true // older than the last publish or resume: re-armed
			return st
		}
		switch r.State {
		case store.RunSucceeded:
			st.notice(r)
			if r.FinishedAt.After(st.Since) {
				st.Since = r.FinishedAt
			}
			st.Ended = true
			return st
		case store.RunFailed:
			st.notice(r)
			if Counts(r.FailureCode) {
				if st.Failures == 0 {
					st.Last = r
				}
				st.Failures++
			} else {
				if st.Operator == 0 {
					st.LastOperator = r
				}
				st.Operator++
			}
		case store.RunInterrupted:
			st.notice(r)
		}
	}
	return st // ran out of runs: Ended says nothing of older ones
}

func (st *Streak) notice(r store.Run) {
	if st.Newest.ID == 0 {
		st.Newest = r
	}
}

// Read windows: the first read covers a threshold's worth of runs with room
// for operator failures in between; each further read doubles, up to
// maxRead runs (a streak longer than that is reported as at least that).
const (
	firstRead = 64
	maxRead   = 4096
)

// StreakReader is what Read needs of the store.
type StreakReader interface {
	GetSync(ctx context.Context, id string) (store.Sync, error)
	ListRuns(ctx context.Context, syncID string, limit int) ([]store.Run, error)
}

// Read loads the sync and its streak from the store. It reads further back
// until the streak ends, or, when enough > 0, until Failures reaches enough
// (all the breaker needs to know).
func Read(ctx context.Context, st StreakReader, syncID string, enough int) (store.Sync, Streak, error) {
	s, err := st.GetSync(ctx, syncID)
	if err != nil {
		return s, Streak{}, fmt.Errorf("breaker: load sync %s: %w", syncID, err)
	}
	for limit := firstRead; ; limit *= 2 {
		runs, err := st.ListRuns(ctx, syncID, limit)
		if err != nil {
			return s, Streak{}, fmt.Errorf("breaker: list runs of %s: %w", syncID, err)
		}
		k := Compute(s, runs)
		if len(runs) < limit {
			k.Ended = true // every run of the sync was read
		}
		if k.Ended || (enough > 0 && k.Failures >= enough) || limit >= maxRead {
			return s, k, nil
		}
	}
}
