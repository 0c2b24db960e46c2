package web

import (
	"fmt"
	"github.com/oncesync/oncesync/internal/store"
	"net/http"
	"strings"
	"testing"
)

// TestLastSuccessIsWhenItFinished: "last success" on the pages and in the
// API is when the newest successful run finished, as `oncesync status`,
// the dead-man check and oncesync_sync_last_success_timestamp_seconds say
// it: a run of an hour that just succeeded is not an hour-old success.
func TestLastSuccessIsWhenItFinished(t *testing.T) {
	t.Parallel()
	_, router := loadDoc(t)
	b := setup(t)
	want := b.d.RecordsRun.FinishedAt.UTC()
	if want.IsZero() || !want.After(b.d.RecordsRun.StartedAt) {
		t.Fatalf("fixture run %+v", b.d.RecordsRun)
	}
	got := apiCall(t, b, router, "GET", "/api/v1/syncs/"+b.d.Healthy, "")
	if got.code != http.StatusOK {
		t.Fatalf("%d %s", got.code, got.body)
	}
	var d SyncDetail
	mustJSON(t, got.body, &d)
	if d.LastSuccessAt == nil || !d.LastSuccessAt.Equal(want) {
		t.Errorf("sync detail: last success %v, want %v (the run finished)", d.LastSuccessAt, want)
	}
	var l SyncList
	mustJSON(t, apiCall(t, b, router, "GET", "/api/v1/syncs", "").body, &l)
	for _, s := range l.Syncs {
		if s.ID == b.d.Healthy && (s.LastSuccessAt == nil || !s.LastSuccessAt.Equal(want)) {
			t.Errorf("overview: last success %v, want %v", s.LastSuccessAt, want)
		}
	}
	mustContain(t, b.get("/syncs/"+b.d.Healthy).body, "Last success</dt><dd>"+want.Format("2006-01-02 15:04:05")+" UTC")
}

// TestSilenceSameOnEveryView: the dead-man's silence of a sync the breaker
// paused (its trip alert may have reached nobody) shows on the sync's own
// page and API view as on the overview; a person's pause shows none.
func TestSilenceSameOnEveryView(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var l SyncList
	mustJSON(t, b.api(testToken, "GET", "/api/v1/syncs", "").body, &l)
	for _, s := range l.Syncs {
		var d SyncDetail
		mustJSON(t, b.api(testToken, "GET", "/api/v1/syncs/"+s.ID, "").body, &d)
		if d.Silence != s.Silence || d.Health != s.Health {
			t.Errorf("sync %s: detail silence %q health %s, overview %q %s", s.ID, d.Silence, d.Health, s.Silence, s.Health)
		}
	}
	mustContain(t, b.get("/syncs/"+b.d.Breaker).body, `id="silence"`)
	mustNotContain(t, b.get("/syncs/"+b.d.Person).body, `id="silence"`)
}

// TestRunInDoubtWording: a run's in-doubt figure counts the records whose
// answer this run lost as well as those earlier runs left (the runner's
// outcomes and settle); the run page said "left by earlier runs" of a
// first run whose 26 dropped answers it read back itself.
func TestRunInDoubtWording(t *testing.T) {
	t.Parallel()
	b := setup(t)
	page := b.get(fmt.Sprintf("/runs/%d", b.d.RecordsRun.ID))
	mustNotContain(t, page.body, "left by earlier runs:")
	mustContain(t, page.body, "whose write's answer was lost, in this run or left by an earlier one")
	// Which records, and how each was settled: the records page narrowed.
	mustContain(t, page.body, fmt.Sprintf("/records?state=settled&amp;run=%d", b.d.RecordsRun.ID))
}

// TestEveryScheduleNextRun: an @every schedule counts from the moment a
// serve became the leader (docs/config.md#syncs), which the pages do not
// know: they showed "next run in 90 min" at every reload, whenever the
// run was due. They now say the interval and give no time.
func TestEveryScheduleNextRun(t *testing.T) {
	t.Parallel()
	b := setup(t)
	s := seeder{tb: t, ctx: b.ctx, st: b.st, clk: b.clk}
	s.sync("every-90m", "data", "@every 90m")
	var d SyncDetail
	mustJSON(t, b.api(testToken, "GET", "/api/v1/syncs/every-90m", "").body, &d)
	if d.NextRunAt != nil {
		t.Errorf("next run %v for @every 90m", d.NextRunAt)
	}
	mustContain(t, b.get("/syncs/every-90m").body, "every 1h30m, counted from the leader")
	mustContain(t, b.get("/").body, "every 1h30m")
	// A cron schedule keeps its next time.
	mustJSON(t, b.api(testToken, "GET", "/api/v1/syncs/"+b.d.Healthy, "").body, &d)
	if d.NextRunAt == nil {
		t.Error("no next run for a cron schedule")
	}
}

// TestOverviewLastRunRejected: a last run that succeeded but had records
// rejected says so on the overview, with a link to them, rather than a
// bare "succeeded" beside "healthy".
func TestOverviewLastRunRejected(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := b.get("/").body
	mustContain(t, body, fmt.Sprintf(`href="/syncs/%s/records?run=%d">2 rejected</a>`, b.d.Healthy, b.d.RecordsRun.ID))
}

// TestOverviewOperatorFailures: a sync failing only for reasons the
// operator owns (the destination down) shows them beside its streak on the
// overview: "failing" with a bare streak of 0 read as a contradiction.
func TestOverviewOperatorFailures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	body := b.get("/").body
	i := strings.Index(body, `href="/syncs/`+b.d.Failing+`"`)
	if i < 0 {
		t.Fatal("no row for the failing sync")
	}
	row := body[i:]
	row = row[:strings.Index(row, "</tr>")]
	mustContain(t, row, `<small class="operator"`, ">+2</small>")
}

// TestSyncNotInServesConfig: a sync serve's config does not have (removed
// from it, or published by a worker whose config has one more) is run by
// nothing: it showed "healthy" or "never_run" with a next run that never
// came, and the dead-man check leaves it alone, so nobody was told.
func TestSyncNotInServesConfig(t *testing.T) {
	t.Parallel()
	var healthy string
	b := setup(t, func(p *Params) {
		p.Configured = func(id string) bool { return id != healthy }
	})
	healthy = b.d.Healthy
	var d SyncDetail
	mustJSON(t, b.api(testToken, "GET", "/api/v1/syncs/"+healthy, "").body, &d)
	if d.Health != HealthNotInConfig || d.NextRunAt != nil {
		t.Errorf("health %s, next run %v; want not_in_config and none", d.Health, d.NextRunAt)
	}
	mustContain(t, b.get("/").body, "not in serve&#39;s config")
	// The others are as before.
	mustJSON(t, b.api(testToken, "GET", "/api/v1/syncs/"+b.d.Silent, "").body, &d)
	if d.Health != HealthSilent {
		t.Errorf("a configured sync's health %s, want silent", d.Health)
	}
}

// TestSkippedRunIsNotTheLastRun: `oncesync run` of a sync serve is running
// is recorded skipped (already_running); the pages and the API showed it as
// the sync's last run, hiding the run in progress (an independent check,
// 2026-12-06).
func TestSkippedRunIsNotTheLastRun(t *testing.T) {
	t.Parallel()
	runs := []store.Run{
		{ID: 10, State: store.RunSkipped, FailureCode: "already_running"},
		{ID: 9, State: store.RunRunning},
		{ID: 8, State: store.RunSucceeded},
	}
	st := statsFromRuns(store.Sync{ID: "s"}, runs)
	if st.LastRun.ID != 9 || !st.Running {
		t.Errorf("last run %d (running %v), want the run in progress, 9", st.LastRun.ID, st.Running)
	}
	// Only skipped runs: the newest is still shown.
	if st := statsFromRuns(store.Sync{ID: "s"}, runs[:1]); st.LastRun.ID != 10 {
		t.Errorf("last run %d, want 10", st.LastRun.ID)
	}
}
