package deadman

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// A dead-man check that only the leader runs stops with the leader (
// docs/guide.md#telling-silence-from-outside). Every check therefore records when it ran (CheckLog), and any
// process may run the check itself when none was recorded for a while
// (CheckIfDue, RunFallback): workers and `serve` processes that do not
// lead, whatever stopped the leader's hourly job. The record is claimed
// atomically, so of several processes that find the check overdue at the
// same moment one runs it; the markers' NX keeps alerts to one per
// incident even if two checks ever overlap.

// Fallback timings.
const (
	// FallbackAfter is how old the last check must be for a fallback to
	// run one: the leader checks hourly, at minute 13; the extra ten
	// minutes let its job wait behind busy workers without a fallback
	// doubling it.
	FallbackAfter = 70 * time.Minute
	// FallbackEvery is how often a process looks at the last check.
	FallbackEvery = 5 * time.Minute
	// FutureSkew is how far ahead of this process's clock a recorded check
	// may be and still count as recent: the clocks of two machines. Further
	// ahead, its clock has since stepped back (or runs that far ahead): its
	// age cannot be told, and it does not hold the fallback off.
	FutureSkew = 10 * time.Minute
)

// ErrNoCheckLog is returned by CheckIfDue and LastCheck of a Checker
// without a CheckLog.
var ErrNoCheckLog = errors.New("deadman: no check log (the marker store does not record checks)")

// LastCheck returns the latest recorded check.
func (c *Checker) LastCheck(ctx context.Context) (LastCheck, error) {
	if c.checks == nil {
		return LastCheck{}, ErrNoCheckLog
	}
	lc, err := c.checks.LastDeadmanCheck(ctx)
	if err != nil {
		return lc, storeErr("read the last check", err)
	}
	return lc, nil
}

// record notes a check starting at now, unless a later one was noted.
func (c *Checker) record(ctx context.Context, now time.Time) error {
	if c.checks == nil {
		return nil
	}
	if _, err := c.checks.MarkDeadmanCheck(ctx, now, now.Add(time.Nanosecond), c.who); err != nil {
		return storeErr("record the check", err)
	}
	return nil
}

// CheckIfDue runs Check when no check was recorded within after (0:
// FallbackAfter) and this call won the claim; ran says whether it did.
func (c *Checker) CheckIfDue(ctx context.Context, after time.Duration) (rep Report, ran bool, err error) {
	if c.checks == nil {
		return Report{}, false, ErrNoCheckLog
	}
	if after <= 0 {
		after = FallbackAfter
	}
	now := c.clock.Now()
	notBefore := now.Add(-after)
	lc, err := c.checks.LastDeadmanCheck(ctx)
	if err != nil {
		return Report{}, false, storeErr("read the last check", err)
	}
	if lc.At.After(now.Add(FutureSkew)) {
		// Claim that record, replacing it with this clock's time. Of
		// several fallbacks that find it at once, more than one may check:
		// the markers keep alerts to one per incident.
		notBefore = lc.At.Add(time.Nanosecond)
	}
	claimed, err := c.checks.MarkDeadmanCheck(ctx, now, notBefore, c.who+" (fallback)")
	if err != nil {
		return Report{}, false, storeErr("claim the check", err)
	}
	if !claimed {
		return Report{}, false, nil
	}
	rep, err = c.run(ctx, true)
	rep.First = lc.At.IsZero()
	return rep, true, err
}

// FallbackParams configure RunFallback.
type FallbackParams struct {
	// Every is how often the last check is looked at (0: FallbackEvery).
	Every time.Duration
	// After is how old it must be for this process to check (0:
	// FallbackAfter).
	After time.Duration
	// Ticks, when set, replaces the ticker of Every (tests); RunFallback
	// returns when it is closed.
	Ticks <-chan time.Time
}

// RunFallback runs CheckIfDue at every tick until ctx ends, logging what it
// did: a process that runs the check says so at warn level, since it means
// the leader's hourly check did not happen.
func (c *Checker) RunFallback(ctx context.Context, p FallbackParams) {
	ticks := p.Ticks
	if ticks == nil {
		every := p.Every
		if every <= 0 {
			every = FallbackEvery
		}
		t := time.NewTicker(every)
		defer t.Stop()
		ticks = t.C
	}
	after := p.After
	if after <= 0 {
		after = FallbackAfter
	}
	for {
		select {
		case <-ctx.Done():
			return
		case _, ok := <-ticks:
			if !ok {
				return
			}
		}
		rep, ran, err := c.CheckIfDue(ctx, after)
		switch {
		case ran && rep.First:
			// A new store: the leader's first hourly check may be up to an
			// hour away, which is no sign of trouble.
			c.log.LogAttrs(ctx, slog.LevelInfo, "deadman: no check was ever recorded (a new store, or Redis lost its data with the record of the last one); this process ran it",
				slog.Int("silent", rep.Count("", StatusSilent)), slog.Int("alerted", len(rep.Alerted())), slog.Any("err", err))
		case ran:
			c.log.LogAttrs(ctx, slog.LevelWarn, "deadman: no check was recorded for "+fmtWindow(after)+"; this process ran it (is the leader's hourly job running?)",
				slog.Int("silent", rep.Count("", StatusSilent)), slog.Int("alerted", len(rep.Alerted())), slog.Any("err", err))
		case err != nil:
			c.log.LogAttrs(ctx, slog.LevelError, "deadman: fallback check failed", slog.Any("err", err))
		}
	}
}
