package config

import (
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// ParseSchedule parses a sync's schedule: 5 cron fields or a descriptor
// (@hourly, @every 90m). The fields are read in UTC unless the expression
// names its zone first (CRON_TZ=Europe/Paris 0 9 * * *): a schedule then
// fires at the same instants whichever machine's serve leads, whatever its
// local zone (docs/config.md#syncs). A schedule at a fixed local time runs
// once on the days its zone changes the clock (dstSchedule).
func ParseSchedule(spec string) (cron.Schedule, error) {
	spec = strings.TrimSpace(spec)
	if !strings.HasPrefix(spec, "CRON_TZ=") && !strings.HasPrefix(spec, "TZ=") {
		spec = "CRON_TZ=UTC " + spec
	}
	s, err := cron.ParseStandard(spec)
	if err != nil {
		return nil, err
	}
	if ss, ok := s.(*cron.SpecSchedule); ok && ss.Hour&starBit == 0 && ss.Minute&starBit == 0 {
		return dstSchedule{ss}, nil
	}
	return s, nil
}

// starBit is robfig/cron's mark of a field written with `*` (`*/2`
// included).
const starBit = 1 << 63

// dstSchedule is a schedule at fixed local times (no `*` in its hour or
// minute field) read as cron reads it across a change of the zone's clock
// (docs/config.md#syncs): a local time the clock skips (spring forward)
// runs when the skip ends, where robfig/cron skips it (a daily sync then
// went 48 h without a run), and a local time the clock shows twice (fall
// back) runs the first time only, where robfig/cron runs it twice.
type dstSchedule struct {
	*cron.SpecSchedule
}

// Next implements cron.Schedule.
func (s dstSchedule) Next(t time.Time) time.Time {
	n := s.SpecSchedule.Next(t)
	for i := 0; i < 4 && !n.IsZero() && s.repeated(n); i++ {
		n = s.SpecSchedule.Next(n)
	}
	if g, ok := s.skipped(t, n); ok {
		return g
	}
	return n
}

// localMinute is an instant's local date and time to the minute.
func localMinute(t time.Time) string { return t.Format("2006-01-02 15:04") }

// repeated reports whether the local time of n was already shown earlier
// (the clock went back over it).
func (s dstSchedule) repeated(n time.Time) bool {
	for _, d := range []time.Duration{30 * time.Minute, time.Hour, 2 * time.Hour} {
		if localMinute(n.Add(-d).In(s.Location)) == localMinute(n.In(s.Location)) {
			return true
		}
	}
	return false
}

// skipped returns the end of a forward change of the clock after t and
// before n, if a local time of the schedule fell in the time it skipped.
func (s dstSchedule) skipped(t, n time.Time) (time.Time, bool) {
	loc := s.Location
	if n.IsZero() {
		n = t.AddDate(5, 0, 0) // cron gives up after five years
	}
	_, off := t.In(loc).Zone()
	for day := t; day.Before(n); {
		next := day.Add(24 * time.Hour)
		if next.After(n) {
			next = n
		}
		_, o := next.In(loc).Zone()
		if o > off {
			// The change is in (day, next]: find its instant.
			lo, hi := day, next
			for hi.Sub(lo) > time.Second {
				mid := lo.Add(hi.Sub(lo) / 2)
				if _, om := mid.In(loc).Zone(); om > off {
					hi = mid
				} else {
					lo = mid
				}
			}
			change := hi.Truncate(time.Second)
			// Read the schedule in the zone's offset before the change: a
			// time of it from the change on, and before the clock shows it
			// again, is a local time the change skipped.
			old := *s.SpecSchedule
			old.Location = time.FixedZone("", off)
			if g := old.Next(change.Add(-time.Second)); g.Before(change.Add(time.Duration(o-off)*time.Second)) && change.After(t) && change.Before(n) {
				return change.In(t.Location()), true
			}
		}
		off = o
		day = next
	}
	return time.Time{}, false
}
