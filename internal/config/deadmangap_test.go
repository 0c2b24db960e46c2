package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/config"
)

// TestWarningsScheduleBeyondTheDeadmanWindow: a sync whose scheduled runs
// are further apart than its dead-man window (less the check's hour) would
// be alerted silent between runs that are on time: a weekly sync under the
// default 24h window six days a week, a daily one whenever a run ends later
// than the day before's check. validate says so and what to set; a sync
// whose window covers its schedule, or that has no schedule, is not warned.
func TestWarningsScheduleBeyondTheDeadmanWindow(t *testing.T) {
	t.Parallel()
	sync := func(id, extra string) string {
		return "  - id: " + id + "\n" + extra +
			"    source: {type: csv, path: c.csv, identity: id}\n    destination: {type: brevo, api_key: k, list_ids: [1]}\n    mapping: {email: email}\n"
	}
	yaml := "store: sqlite://./o.db\nsyncs:\n" +
		sync("weekly", "    schedule: \"@weekly\"\n") +
		sync("hourly", "    schedule: \"@hourly\"\n") +
		sync("daily-covered", "    schedule: \"0 3 * * *\"\n    deadman_window: 26h\n") +
		sync("workdays", "    schedule: \"0 9 * * 1-5\"\n") +
		sync("daily", "    schedule: \"30 2 * * *\"\n") +
		sync("on-demand", "")
	ws := warningsOf(t, yaml)
	want := []string{
		"syncs[0].schedule: its runs are up to 168h apart, and its dead-man window (deadman_window) is 24h",
		"syncs[3].schedule: its runs are up to 72h apart",
		"syncs[4].schedule: its runs are up to 24h apart",
	}
	if len(ws) != len(want) {
		t.Fatalf("warnings %q, want %d", ws, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(ws[i], w) {
			t.Errorf("warning %d: %q, want it to start %q", i, ws[i], w)
		}
	}
	if !strings.Contains(ws[0], "set deadman_window on the sync to at least 169h") {
		t.Errorf("the weekly sync's warning does not say what to set: %q", ws[0])
	}
}

func TestLongestGap(t *testing.T) {
	t.Parallel()
	from := time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
	for spec, want := range map[string]time.Duration{
		"*/15 * * * *":                     15 * time.Minute,
		"0 9 * * 1-5":                      72 * time.Hour,
		"0 0 1 * *":                        31 * 24 * time.Hour,
		"CRON_TZ=Europe/Berlin 30 2 * * *": 25 * time.Hour, // the autumn's extra hour
		"0 0 30 2 *":                       0,              // never
	} {
		sched, err := config.ParseSchedule(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := config.LongestGap(sched, from); got != want {
			t.Errorf("LongestGap(%q) = %v, want %v", spec, got, want)
		}
	}
}
