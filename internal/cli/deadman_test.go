package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/breaker"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

// alertHook is a webhook alert sink's endpoint recording the alerts' kinds
// and syncs.
type alertHook struct {
	mu   sync.Mutex
	got  []alert.WebhookData
	srv  *httptest.Server
	down bool // answer 503 and record nothing
}

func newAlertHook(t *testing.T) *alertHook {
	t.Helper()
	h := &alertHook{}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p alert.WebhookPayload
		b, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(b, &p); err != nil {
			t.Errorf("alert webhook body: %v: %s", err, b)
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.down {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		h.got = append(h.got, p.Data)
	}))
	t.Cleanup(h.srv.Close)
	return h
}

func (h *alertHook) setDown(down bool) {
	h.mu.Lock()
	h.down = down
	h.mu.Unlock()
}

func (h *alertHook) take() []alert.WebhookData {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := h.got
	h.got = nil
	return out
}

// deadmanBundle is a cron deployment: a SQLite store, no Redis, no serve,
// a webhook alert sink, and a fake clock shared by the command and the
// test's own store handle.
type deadmanBundle struct {
	config, db string
	clk        *clock.Fake
	hook       *alertHook
}

func setupDeadmanCLI(t *testing.T) *deadmanBundle {
	t.Helper()
	dir := t.TempDir()
	b := &deadmanBundle{config: filepath.Join(dir, "oncesync.yaml"), db: filepath.Join(dir, "s.db"),
		clk: clock.NewFake(time.Date(2026, 3, 3, 10, 13, 0, 0, time.UTC)), hook: newAlertHook(t)}
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	writeFile(t, b.config, `store: sqlite://`+b.db+`
alerts: {webhook: {url: "`+b.hook.srv.URL+`/alerts"}}
syncs:
  - id: quiet
    workspace: acme
    source: {type: csv, path: contacts.csv}
    destination: {type: webhook, url: "http://127.0.0.1:1/hook"}
  - id: busy
    workspace: acme
    source: {type: csv, path: contacts.csv}
    destination: {type: webhook, url: "http://127.0.0.1:1/hook"}
`)
	return b
}

func (b *deadmanBundle) check(t *testing.T) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"deadman", "check", "--config", b.config},
		Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }, Clock: b.clk})
	if errOut.Len() > 0 && code != ExitFailed {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), code
}

// openStore opens the deployment's store as the test's own handle, on its
// clock (commands open their own).
func (b *deadmanBundle) openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	st, err := sqlite.Open(context.Background(), sqlite.OpenParams{Path: b.db, Clock: b.clk})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// succeed records a successful run of syncID now.
func (b *deadmanBundle) succeed(t *testing.T, syncID string) {
	t.Helper()
	ctx := context.Background()
	st := b.openStore(t)
	defer st.Close()
	if _, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: syncID, State: store.RunSucceeded}); err != nil {
		t.Fatal(err)
	}
}

// TestDeadmanCheckCommand is docs/guide.md#telling-silence-from-outside's `oncesync deadman check` for a
// deployment without serve or Redis: exit 0 while nothing is silent, 6
// while something is; one alert per incident through the configured sink;
// a resolution notice once the silent sync succeeds again.
func TestDeadmanCheckCommand(t *testing.T) {
	t.Parallel()
	b := setupDeadmanCLI(t)

	// The store has never seen the syncs: the check publishes them, young.
	out, code := b.check(t)
	if code != ExitOK || !strings.Contains(out, "previous check: never") || !strings.Contains(out, "0 silent, 0 ok, 3 young") {
		t.Fatalf("first check: exit %d\n%s", code, out)
	}
	if got := b.hook.take(); len(got) != 0 {
		t.Fatalf("alerts for young syncs: %+v", got)
	}

	b.clk.Advance(20 * time.Hour)
	b.succeed(t, "busy")
	b.clk.Advance(5 * time.Hour) // quiet never ran: silent for 25 h
	out, code = b.check(t)
	if code != ExitSilent {
		t.Fatalf("silent sync: exit %d, want %d\n%s", code, ExitSilent, out)
	}
	if !strings.Contains(out, "SILENT  sync acme/quiet: no_runs since 2026-03-03 10:13 UTC (window 24h); alerted now") ||
		!strings.Contains(out, "previous check: 2026-03-03 10:13 UTC by oncesync deadman check") ||
		!strings.Contains(out, "1 silent, 2 ok, 0 young") {
		t.Errorf("report:\n%s", out)
	}
	got := b.hook.take()
	if len(got) != 1 || got[0].Kind != alert.KindDeadmanNoRuns || got[0].Sync != "quiet" || got[0].Severity != alert.SeverityCritical {
		t.Fatalf("alerts %+v, want one deadman_no_runs for quiet", got)
	}

	// The same incident an hour later: still exit 6, no second alert.
	b.clk.Advance(time.Hour)
	out, code = b.check(t)
	if code != ExitSilent || !strings.Contains(out, "alerted at 2026-03-04 11:13 UTC (one alert per incident)") {
		t.Fatalf("second check: exit %d\n%s", code, out)
	}
	if got := b.hook.take(); len(got) != 0 {
		t.Fatalf("the same silence alerted again: %+v", got)
	}

	// quiet succeeds: exit 0 and a resolution notice.
	b.clk.Advance(time.Minute)
	b.succeed(t, "quiet")
	b.clk.Advance(time.Minute)
	out, code = b.check(t)
	if code != ExitOK || !strings.Contains(out, "ENDED   sync acme/quiet") {
		t.Fatalf("after the success: exit %d\n%s", code, out)
	}
	if got := b.hook.take(); len(got) != 1 || got[0].Kind != alert.KindDeadmanResolved || got[0].Sync != "quiet" {
		t.Fatalf("alerts %+v, want one resolution notice", got)
	}
}

// TestDeadmanCheckStoreDown: a check that cannot read the store exits 1
// with the failure's last line, not 0.
func TestDeadmanCheckStoreDown(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, cfg, `store: sqlite://`+filepath.Join(dir, "missing", "dir", "s.db")+`
syncs:
  - id: quiet
    source: {type: csv, path: contacts.csv}
    destination: {type: webhook, url: "http://127.0.0.1:1/hook"}
`)
	out, _, code := cliRun(t, nil, "deadman", "check", "--config", cfg)
	if code != ExitFailed || !strings.Contains(out, "failed: store_unavailable") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// TestStatusStreakIsTheBreakers: `oncesync status` shows the breaker's own
// streak (issue 15: "failure streak: 6" beside "the last 5 runs failed"):
// failures before the last resume and failures the operator owns are not
// in it, and its number is the one in the pause reason.
func TestStatusStreakIsTheBreakers(t *testing.T) {
	t.Parallel()
	b := setupDeadmanCLI(t)
	ctx := context.Background()
	st := b.openStore(t)
	defer st.Close()
	if _, err := st.PutSync(ctx, store.PutSyncParams{ID: "quiet", Workspace: "acme", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	brk := breaker.New(breaker.Params{Store: st})
	fail := func(code failure.Code) *breaker.Trip {
		t.Helper()
		b.clk.Advance(time.Minute)
		if _, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: "quiet", State: store.RunFailed, FailureCode: string(code), Detail: "x"}); err != nil {
			t.Fatal(err)
		}
		trip, err := brk.AfterFailure(ctx, "quiet", 5)
		if err != nil {
			t.Fatal(err)
		}
		return trip
	}
	fail(failure.DestinationAuth)
	fail(failure.DestinationAuth)
	b.clk.Advance(time.Minute)
	for _, s := range []store.SyncState{store.SyncPaused, store.SyncActive} {
		if _, err := st.SetSyncState(ctx, store.SetSyncStateParams{ID: "quiet", State: s, Reason: "person", By: "ada", Why: "rotated the key"}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		fail(failure.DestinationUnavailable)
	}
	var trip *breaker.Trip
	for range 5 {
		trip = fail(failure.SourceQueryInvalid)
	}
	if trip == nil {
		t.Fatal("the breaker did not trip")
	}
	out, _, code := cliRun(t, nil, "status", "--config", b.config, "quiet")
	if code != ExitOK {
		t.Fatalf("status: exit %d\n%s", code, out)
	}
	for _, want := range []string{
		"failure streak reached 5",
		"failure streak: 5 of 5 (failures that are the sync's to fix, since its last success or change); 3 more the operator owns, not counted",
		"next: Fix what the detail names in the sync's source",
		"dead-man:   last check never",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("status lacks %q:\n%s", want, out)
		}
	}
}

// TestConcreteHint: catalog hints name the config and the sync, pasteable.
func TestConcreteHint(t *testing.T) {
	t.Parallel()
	e := failure.Lookup(failure.CircuitBreakerTripped)
	got := concreteHint(e.NextStep, "/etc/oncesync.yaml", "crm")
	want := "Fix the cause shown by `oncesync status --config /etc/oncesync.yaml crm`, then resume the sync with `oncesync resume --config /etc/oncesync.yaml crm --by NAME --reason TEXT`."
	if got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}

// TestDeadmanCheckIgnoresSyncsRemovedFromTheConfig: a sync taken out of the
// config stays in the store (its runs, its ledger), but nothing runs it any
// more, by design: the dead-man check must not call that silence, nor keep
// an earlier incident's marker of it. A person who removed a sync is told
// nothing (docs/guide.md#telling-silence-from-outside).
func TestDeadmanCheckIgnoresSyncsRemovedFromTheConfig(t *testing.T) {
	t.Parallel()
	b := setupDeadmanCLI(t)
	if out, code := b.check(t); code != ExitOK {
		t.Fatalf("first check: exit %d\n%s", code, out)
	}
	b.clk.Advance(25 * time.Hour)
	b.succeed(t, "busy")
	if out, code := b.check(t); code != ExitSilent || !strings.Contains(out, "SILENT  sync acme/quiet") {
		t.Fatalf("quiet never ran: exit %d\n%s", code, out)
	}
	got := b.hook.take()
	if len(got) != 1 || got[0].Sync != "quiet" {
		t.Fatalf("alerts %+v, want quiet's", got)
	}
	// Every alert links to the sync's page (docs/guide.md#guardrails): without web.url,
	// serve's default address.
	if want := "http://127.0.0.1:8080/syncs/quiet"; got[0].Link != want {
		t.Errorf("alert link %q, want %q", got[0].Link, want)
	}

	// quiet leaves the config; busy keeps succeeding.
	writeFile(t, b.config, `store: sqlite://`+b.db+`
alerts: {webhook: {url: "`+b.hook.srv.URL+`/alerts"}}
syncs:
  - id: busy
    workspace: acme
    source: {type: csv, path: contacts.csv}
    destination: {type: webhook, url: "http://127.0.0.1:1/hook"}
`)
	for range 3 {
		b.clk.Advance(24 * time.Hour)
		b.succeed(t, "busy")
		out, code := b.check(t)
		if code != ExitOK || strings.Contains(out, "quiet") {
			t.Errorf("a sync removed from the config is judged: exit %d\n%s", code, out)
		}
	}
	if got := b.hook.take(); len(got) != 0 {
		t.Errorf("alerts %+v, want none: the silent sync was removed", got)
	}
	// Its status says nothing runs it (it read "state: active").
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"status", "--config", b.config, "quiet"},
		Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }, Clock: b.clk})
	if code != ExitOK || !strings.Contains(out.String(), "state:      active (not in the config: nothing runs it)") {
		t.Errorf("status of a sync removed from the config: exit %d\n%s%s", code, out.String(), errOut.String())
	}
}

// TestDeadmanAlertNotLostWhenTheSinkIsDown: the alert sink is down while the
// check finds a silence (the receiver is being redeployed, a proxy answers
// 503). The alert is retried, but it must not be marked as told: the check
// says it was not delivered (exit 1), and the next check, with the sink
// back, sends it. Before, the marker was set when the alert was queued, the
// cron check exited 6 "alerted now" and nobody outside the log was ever
// told of that incident.
func TestDeadmanAlertNotLostWhenTheSinkIsDown(t *testing.T) {
	t.Parallel()
	b := setupDeadmanCLI(t)
	if out, code := b.check(t); code != ExitOK {
		t.Fatalf("first check: exit %d\n%s", code, out)
	}
	b.clk.Advance(25 * time.Hour)
	b.succeed(t, "busy")

	b.hook.setDown(true)
	out, code := b.check(t)
	if code != ExitFailed || strings.Contains(out, "alerted now") || !strings.Contains(out, "SILENT  sync acme/quiet") ||
		!strings.Contains(out, "failed: alert_undelivered") || !strings.Contains(out, "webhook") {
		t.Errorf("check with the sink down: exit %d, want %d and no \"alerted now\"\n%s", code, ExitFailed, out)
	}

	b.hook.setDown(false)
	b.clk.Advance(time.Hour)
	out, code = b.check(t)
	if code != ExitSilent || !strings.Contains(out, "SILENT  sync acme/quiet: no_runs since 2026-03-03 10:13 UTC (window 24h); alerted now") {
		t.Errorf("check with the sink back: exit %d\n%s", code, out)
	}
	got := b.hook.take()
	if len(got) != 1 || got[0].Kind != alert.KindDeadmanNoRuns || got[0].Sync != "quiet" {
		t.Fatalf("alerts received %+v, want quiet's deadman_no_runs once the sink is back", got)
	}
}

// TestRunEndsTheSilenceAtOnce: a sync run from cron that succeeds after a
// silence sends its resolution notice as it ends, not at the next `deadman
// check` (which could be an hour later, or never with serve).
func TestRunEndsTheSilenceAtOnce(t *testing.T) {
	t.Parallel()
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(hook.Close)
	b := setupDeadmanCLI(t)
	writeFile(t, b.config, `store: sqlite://`+b.db+`
alerts: {webhook: {url: "`+b.hook.srv.URL+`/alerts"}}
syncs:
  - id: quiet
    workspace: acme
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: "`+hook.URL+`/hook"}
`)
	if _, code := b.check(t); code != ExitOK {
		t.Fatalf("first check: exit %d", code)
	}
	b.clk.Advance(25 * time.Hour)
	if _, code := b.check(t); code != ExitSilent {
		t.Fatalf("silent check: exit %d", code)
	}
	if got := b.hook.take(); len(got) != 2 { // the workspace's and the sync's
		t.Fatalf("alerts %+v, want 2", got)
	}
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"run", "--config", b.config, "quiet"},
		Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }, Clock: b.clk})
	if code != ExitOK {
		t.Fatalf("run: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	got := b.hook.take()
	if len(got) != 2 || got[0].Kind != alert.KindDeadmanResolved || got[1].Kind != alert.KindDeadmanResolved {
		t.Fatalf("after the run: alerts %+v, want the 2 resolution notices", got)
	}
	if _, code := b.check(t); code != ExitOK || len(b.hook.take()) != 0 {
		t.Fatalf("the next check: exit %d, or notices sent again", code)
	}
}

// TestFailedLineNamesTheConfig: the last line of a failed run gives the
// catalog's commands with the run's config and sync, so they can be pasted
// (printed as "oncesync runs SYNC" they failed for a config not named
// oncesync.yaml: an independent check, 2026-12-07).
func TestFailedLineNamesTheConfig(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	env := Env{Stdout: &out, Stderr: io.Discard, hintConfig: "conf/crm.yaml", hintSync: "crm"}
	if err := failed(env, failure.New(failure.RecordsInDoubt, "")); err == nil {
		t.Fatal("failed returned nil")
	}
	if !strings.Contains(out.String(), "`oncesync records --config conf/crm.yaml crm --in-doubt`") {
		t.Errorf("last line: %s", out.String())
	}
	out.Reset()
	env.hintConfig, env.hintSync = "", ""
	_ = failed(env, failure.New(failure.AlreadyRunning, ""))
	if !strings.Contains(out.String(), "`oncesync status --config FILE SYNC`") {
		t.Errorf("last line without a loaded config: %s", out.String())
	}
}
