package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/robfig/cron/v3"
)

// Warner is implemented by a source or destination spec with settings
// that work but are unsafe (a PostgreSQL dsn whose sslmode does not
// verify the server): `oncesync validate` prints its warnings.
type Warner interface {
	// Warnings are "field: what is unsafe, what to do" lines, field
	// relative to the spec (e.g. "dsn").
	Warnings() []string
}

// Positional is implemented by a source spec whose rows, without an
// identity, are known by their place (a file's): `oncesync validate` warns
// when such a sync sets no identity.
type Positional interface {
	// Positional says what a row's place means for the sync, and what to do.
	Positional() string
}

// Keyset is implemented by a source spec whose runs go on from the last row
// read, in the order of a cursor column (postgres, mysql): `oncesync
// validate` warns when that column is the identity, which no update moves.
type Keyset interface {
	// KeysetColumn is the cursor_column as written ("": the identity).
	KeysetColumn() string
}

// keysetByIdentity is the warning of a Keyset source paged by its identity.
const keysetByIdentity = "pages follow the identity: a run reads only rows whose identity is past the last one read, " +
	"so a row changed after it was read never reaches the destination again, and an id committed after a higher one " +
	"is never read; set cursor_column to a time column every write stamps (updated_at), unless the table only ever " +
	"gets new rows (docs/guide.md#rows-committed-late)"

// ListScoper is implemented by a destination spec whose writes add
// contacts to lists of an account: Lists names each list as a warning
// shows it ("Brevo list 2"). Lists of one name are one list when the
// destinations' addresses (DestinationAddress) are one account's.
type ListScoper interface {
	Lists() []string
}

// sharedMirrorLists warns of a mirror sync writing a list another sync
// writes too: a row deleted from the mirror's source takes the contact off
// the list although the other sync's row holds it, and that sync adds it
// back only when its row changes (an independent check, 2026-12-06).
func (c *Config) sharedMirrorLists() []string {
	type list struct{ address, name string }
	writers := map[list][]int{} // sync indexes, in file order
	lists := make([][]list, len(c.Syncs))
	for i, s := range c.Syncs {
		ls, ok := s.Destination.Spec.(ListScoper)
		if !ok {
			continue
		}
		address := DestinationAddress(s.Destination)
		for _, name := range ls.Lists() {
			l := list{address, name}
			lists[i] = append(lists[i], l)
			writers[l] = append(writers[l], i)
		}
	}
	var out []string
	for i, s := range c.Syncs {
		if s.Destination.EffectiveWriteMode() != WriteMirror {
			continue
		}
		for _, l := range lists[i] {
			for _, j := range writers[l] {
				if j == i {
					continue
				}
				other := c.Syncs[j].ID
				out = append(out, fmt.Sprintf("syncs[%d].destination.write_mode: mirror takes contacts off %s, which sync %s writes too: "+
					"a row deleted from this sync's source takes its contact off the list although %s's row holds it, and %s "+
					"adds it back only when that row changes; give each mirror sync a list of its own (docs/guide.md#write-modes)",
					i, l.name, other, other, other))
			}
		}
	}
	return out
}

// Warnings are what `oncesync validate` warns about: settings that work but
// leave a connection unprotected, or rows known only by their place. Each is
// "FIELD: message".
func (c *Config) Warnings() []string {
	var out []string
	gaps := map[string]time.Duration{}
	if w := SSLModeWarning(c.Store); w != "" && isPostgres(c.Store) {
		out = append(out, "store: "+w)
	}
	for i, s := range c.Syncs {
		at := "syncs[" + strconv.Itoa(i) + "]"
		if wr, ok := s.Source.Spec.(Warner); ok {
			for _, w := range wr.Warnings() {
				out = append(out, at+".source."+w)
			}
		}
		if p, ok := s.Source.Spec.(Positional); ok && s.Source.Identity == "" {
			out = append(out, at+".source.identity: not set: "+p.Positional())
		}
		if k, ok := s.Source.Spec.(Keyset); ok {
			if col := k.KeysetColumn(); col == "" || col == s.Source.Identity {
				out = append(out, at+".source.cursor_column: "+keysetByIdentity)
			}
		}
		if wr, ok := s.Destination.Spec.(Warner); ok {
			for _, w := range wr.Warnings() {
				out = append(out, at+".destination."+w)
			}
		}
		if w := deadmanGap(s, c.Settings, gaps); w != "" {
			out = append(out, at+".schedule: "+w)
		}
	}
	return append(out, c.sharedMirrorLists()...)
}

// deadmanMargin is what a dead-man window needs beyond the longest gap
// between a sync's scheduled runs: the check runs hourly (at minute 13), and
// a run takes time, so a run on time may succeed later than the one before.
const deadmanMargin = time.Hour

// deadmanGap warns of a sync whose schedule leaves runs further apart than
// its dead-man window allows: the check would alert it silent between runs
// that are on time (a weekly sync under the default 24h window, six days a
// week), and alerts that are always false teach people to ignore the true
// one. gaps caches LongestGap by schedule.
func deadmanGap(s Sync, set Settings, gaps map[string]time.Duration) string {
	if s.Schedule == "" {
		return ""
	}
	gap, ok := gaps[s.Schedule]
	if !ok {
		sched, err := ParseSchedule(s.Schedule)
		if err != nil {
			return "" // validate refuses it
		}
		gap = LongestGap(sched, gapFrom)
		gaps[s.Schedule] = gap
	}
	window := s.EffectiveDeadmanWindow(set)
	if gap == 0 || window >= gap+deadmanMargin {
		return ""
	}
	return fmt.Sprintf("its runs are up to %s apart, and its dead-man window (deadman_window) is %s: the dead-man check "+
		"would alert it silent between runs that are on time; set deadman_window on the sync to at least %s plus the time a "+
		"run takes (docs/guide.md#guardrails)", fmtHours(gap), fmtHours(window), fmtHours(gap+deadmanMargin))
}

// gapFrom is where LongestGap starts for a warning: a fixed instant, so that
// validate says the same on every day (a year from it covers every month's
// length and the daylight-saving changes of a schedule's time zone).
var gapFrom = time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)

// LongestGap is the longest time between two consecutive runs sched starts
// after from, over a year or 2,000 runs, whichever ends first (a
// frequent schedule shows its weekly pattern long before). 0: it starts
// fewer than two runs.
func LongestGap(sched cron.Schedule, from time.Time) time.Duration {
	var gap time.Duration
	end := from.AddDate(1, 0, 0)
	t := sched.Next(from)
	for i := 0; i < 2000 && !t.IsZero() && t.Before(end); i++ {
		n := sched.Next(t)
		if n.IsZero() {
			break
		}
		gap = max(gap, n.Sub(t))
		t = n
	}
	return gap
}

// fmtHours is d in hours when whole ("168h"), else as time.Duration says.
func fmtHours(d time.Duration) string {
	if d%time.Hour == 0 {
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	}
	return d.String()
}

// WarningProblems are Warnings located as problems are, so `oncesync
// validate` prints each as FILE:LINE: FIELD: MESSAGE.
func (c *Config) WarningProblems() []Problem {
	ws := c.Warnings()
	out := make([]Problem, 0, len(ws))
	for _, w := range ws {
		field, msg, _ := strings.Cut(w, ": ")
		out = append(out, Problem{File: c.Path, Line: c.warnLines[field], Field: field, Msg: msg})
	}
	return out
}
