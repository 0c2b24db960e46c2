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
