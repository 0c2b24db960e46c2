package config

import (
	"testing"
	"time"
)

// TestParseScheduleIsUTC: a schedule fires at the same instants whatever
// the zone of the clock it is asked with (the leader's local zone), unless
// it names its own with CRON_TZ.
func TestParseScheduleIsUTC(t *testing.T) {
	t.Parallel()
	paris, err := time.LoadLocation("Europe/Paris")
	if err != nil {
		t.Fatal(err)
	}
	// 2026-07-01 06:30 UTC, seen from three zones.
	now := time.Date(2026, 7, 1, 6, 30, 0, 0, time.UTC)
	for _, tc := range []struct {
		spec string
		want time.Time
	}{
		{"0 9 * * *", time.Date(2026, 7, 1, 9, 0, 0, 0, time.UTC)},
		{"@daily", time.Date(2026, 7, 2, 0, 0, 0, 0, time.UTC)},
		{"CRON_TZ=Europe/Paris 0 9 * * *", time.Date(2026, 7, 1, 7, 0, 0, 0, time.UTC)}, // 09:00 CEST
		{"  */15 * * * *", time.Date(2026, 7, 1, 6, 45, 0, 0, time.UTC)},
		{"@every 90m", now.Add(90 * time.Minute)},
	} {
		s, err := ParseSchedule(tc.spec)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		for _, from := range []time.Time{now, now.In(paris), now.In(time.FixedZone("UTC-5", -5*3600))} {
			if got := s.Next(from); !got.Equal(tc.want) {
				t.Errorf("%q from %s: next %s, want %s", tc.spec, from, got.UTC(), tc.want)
			}
		}
	}
	for _, bad := range []string{"", "* * *", "CRON_TZ=Nowhere/Land 0 9 * * *", "@fortnightly"} {
		if _, err := ParseSchedule(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestScheduleAcrossDST: a schedule at a fixed local time runs once on the
// days its zone changes the clock, as cron does: on the spring-forward day
// a time the clock skips runs when the skip ends (it was skipped: a daily
// sync went 48 h without a run), and on the fall-back day a time the clock
// shows twice runs the first time only. Schedules with `*` in the hour or
// minute field follow the clock as it is.
func TestScheduleAcrossDST(t *testing.T) {
	t.Parallel()
	utc := func(s string) time.Time {
		at, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return at
	}
	for _, tc := range []struct {
		spec, from string
		want       []string
	}{
		// Paris, 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00Z).
		{"CRON_TZ=Europe/Paris 30 2 * * *", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:30:00Z"}},
		{"CRON_TZ=Europe/Paris 0 2 * * *", "2026-03-28T12:00:00Z",
			[]string{"2026-03-29T01:00:00Z", "2026-03-30T00:00:00Z"}},
		// New York, 2026-03-08: 02:00 EST becomes 03:00 EDT (07:00Z).
		{"CRON_TZ=America/New_York 30 2 * * *", "2026-03-07T12:00:00Z",
			[]string{"2026-03-08T07:00:00Z", "2026-03-09T06:30:00Z"}},
		// New York, 2026-11-01: 02:00 EDT becomes 01:00 EST (06:00Z); 01:30
		// is shown at 05:30Z and at 06:30Z.
		{"CRON_TZ=America/New_York 30 1 * * *", "2026-10-31T12:00:00Z",
			[]string{"2026-11-01T05:30:00Z", "2026-11-02T06:30:00Z"}},
		// Paris, 2026-10-25: 03:00 CEST becomes 02:00 CET (01:00Z).
		{"CRON_TZ=Europe/Paris 30 2 * * *", "2026-10-24T12:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-26T01:30:00Z"}},
		{"CRON_TZ=Europe/Paris 30 1 * * *", "2026-10-24T12:00:00Z",
			[]string{"2026-10-24T23:30:00Z", "2026-10-26T00:30:00Z"}},
		// Every hour: as the clock shows it.
		{"CRON_TZ=Europe/Paris 30 * * * *", "2026-10-25T00:00:00Z",
			[]string{"2026-10-25T00:30:00Z", "2026-10-25T01:30:00Z", "2026-10-25T02:30:00Z"}},
		{"CRON_TZ=Europe/Paris 30 * * * *", "2026-03-29T00:00:00Z",
			[]string{"2026-03-29T00:30:00Z", "2026-03-29T01:30:00Z"}},
		// Not a day of change.
		{"CRON_TZ=Europe/Paris 30 2 * * *", "2026-07-01T12:00:00Z",
			[]string{"2026-07-02T00:30:00Z", "2026-07-03T00:30:00Z"}},
	} {
		s, err := ParseSchedule(tc.spec)
		if err != nil {
			t.Fatalf("%q: %v", tc.spec, err)
		}
		at := utc(tc.from)
		for _, w := range tc.want {
			at = s.Next(at)
			if !at.Equal(utc(w)) {
				t.Errorf("%q from %s: next %s, want %s", tc.spec, tc.from, at.UTC().Format(time.RFC3339), w)
				break
			}
		}
	}
}
