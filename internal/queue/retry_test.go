package queue_test

import (
	"context"
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/alert"
	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/breaker"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/store"
)

// alerts records the alerts the breaker raises.
type alerts struct {
	mu  sync.Mutex
	got []alert.Alert
}

func (a *alerts) Notify(_ context.Context, al alert.Alert) (alert.Alert, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.got = append(a.got, al)
	return al, nil
}

func (a *alerts) list() []alert.Alert {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]alert.Alert(nil), a.got...)
}

// serviceBundle is an in-process queue.Service on PostgreSQL (random
// schema) against a fake Brevo behind a switchable 503 outage.
type serviceBundle struct {
	ctx    context.Context
	svc    *queue.Service
	st     store.Store
	dbURL  string
	schema string
	fake   *fakebrevo.Server
	alerts *alerts
	prefix string

	outageUntil atomic.Int64 // unix nanos; 503 on /v3 until then
	n503        atomic.Int64
}

const retryRecords = 300

func setupService(t *testing.T, backoff time.Duration) *serviceBundle {
	t.Helper()
	dbURL := testDatabaseURL(t)
	storeURL, schema := newSchema(t, dbURL)
	b := &serviceBundle{ctx: t.Context(), dbURL: dbURL, schema: schema, alerts: &alerts{}}
	b.fake = fakebrevo.New(fakebrevo.Options{APIKey: apiKey, Validate: true})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The outage is the "ok" sync's (the only one with the right key
		// that runs): the 401 sync must see its 401.
		if strings.HasPrefix(r.URL.Path, "/v3/") && r.Header.Get("api-key") == apiKey && time.Now().UnixNano() < b.outageUntil.Load() {
			b.n503.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprint(w, `{"code":"service_unavailable","message":"down for maintenance"}`)
			return
		}
		b.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	dir := t.TempDir()
	f, err := os.Create(filepath.Join(dir, "people.csv"))
	if err != nil {
		t.Fatal(err)
	}
	cw := csv.NewWriter(f)
	_ = cw.Write([]string{"id", "email", "first_name"})
	for i := 1; i <= retryRecords; i++ {
		_ = cw.Write([]string{strconv.Itoa(i), fmt.Sprintf("retry%04d@example.com", i), "F" + strconv.Itoa(i)})
	}
	cw.Flush()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	prefix := "rt" + randHex(3) + "-"
	b.prefix = prefix
	brevoSync := func(id, key string) config.Sync {
		return config.Sync{ID: prefix + id, Workspace: "acme",
			Source: config.Source{Type: "csv", Spec: &file.Config{Path: "people.csv"}, PageSize: 100, Identity: "id"},
			Destination: config.Destination{Type: "brevo", Mode: "bulk", Concurrency: 1, Timeout: 5 * time.Second, RateLimit: 1000,
				Spec: &brevo.Config{BaseURL: srv.URL + "/v3", APIKey: key, ListIDs: []int64{2},
					Email: "email", Attributes: map[string]string{"FIRSTNAME": "first_name"}}}}
	}
	cfg := &config.Config{
		Path:     filepath.Join(dir, "oncesync.yaml"),
		Store:    storeURL,
		Settings: config.Defaults(),
		Syncs: []config.Sync{
			brevoSync("ok", apiKey),
			brevoSync("auth", "xkeysib-wrong-0000"),
			brevoSync("paused", apiKey),
			{ID: prefix + "broken", Workspace: "acme", Source: config.Source{Type: "parquet"},
				Destination: config.Destination{Type: "webhook", Spec: &webhook.Config{URL: "http://127.0.0.1:1/hook"}}},
		},
	}
	st, err := app.OpenStore(b.ctx, cfg, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	b.st = st
	// The paused sync is on a 1 s schedule, paused before the scheduler
	// starts: every tick must be skipped.
	paused := &cfg.Syncs[2]
	paused.Schedule = "@every 1s"
	def, err := paused.DefinitionJSON()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutSync(b.ctx, store.PutSyncParams{ID: paused.ID, Workspace: paused.Workspace, Definition: def}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.SetSyncState(b.ctx, store.SetSyncStateParams{ID: paused.ID, State: store.SyncPaused, Reason: "person", By: "test", Why: "maintenance"}); err != nil {
		t.Fatal(err)
	}
	b.svc, err = queue.New(b.ctx, queue.Params{
		Config: cfg, Store: st, Leases: &lease.SQL{Store: st}, Workers: 3, Scheduler: true,
		Breaker:           breaker.New(breaker.Params{Store: st, Notifier: b.alerts}),
		RetryBackoff:      backoff,
		FetchPollInterval: 20 * time.Millisecond,
		// In-run retries happen (6 requests per page), without their waits.
		Sleep: func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.svc.Start(b.ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := b.svc.Shutdown(ctx); err != nil {
			t.Errorf("shutdown: %v", err)
		}
	})
	return b
}

// id is the id of the bundle's sync name (ok, auth, paused, broken).
func (b *serviceBundle) id(name string) string { return b.prefix + name }

// job reads the River job of syncID from the store's schema.
func (b *serviceBundle) job(t *testing.T, syncID string) (state string, attempt, errs int) {
	t.Helper()
	err := pgxQueryRow(t, b.dbURL, `SELECT state::text, attempt, coalesce(array_length(errors, 1), 0) FROM `+
		pgx.Identifier{b.schema, "river_job"}.Sanitize()+` WHERE kind = '`+queue.KindRunSync+`' AND args->>'sync_id' = '`+syncID+`' ORDER BY id DESC LIMIT 1`,
		&state, &attempt, &errs)
	if err != nil {
		t.Fatalf("river job of %s: %v", syncID, err)
	}
	return state, attempt, errs
}

// jobs counts the River jobs of syncID.
func (b *serviceBundle) jobs(t *testing.T, syncID string) int {
	t.Helper()
	var n int
	if err := pgxQueryRow(t, b.dbURL, `SELECT count(*) FROM `+pgx.Identifier{b.schema, "river_job"}.Sanitize()+
		` WHERE kind = '`+queue.KindRunSync+`' AND args->>'sync_id' = '`+syncID+`'`, &n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRetries is docs/guide.md#running-on-a-schedule-serve-and-worker with the first backoff scaled from 60 s to 500 ms:
// a destination answering 503 (through every in-run retry) until after the
// third attempt sees attempts 500 ms, 1 s and 2 s apart (×2 each time,
// ±10 %), then the fourth attempt succeeds with every record written once;
// a 401 is one attempt, cancelled, destination_auth. Also: a paused sync's
// job runs nothing, and five enqueue-time failures trip the breaker (pause,
// audit, critical alert).
func TestRetries(t *testing.T) {
	t.Parallel()
	const base = 500 * time.Millisecond
	b := setupService(t, base)
	ctx := b.ctx

	t.Run("503 then recovery", func(t *testing.T) {
		t.Parallel()
		id := b.id("ok")
		// 503 until three attempts failed (at ~0, ~1 and ~3 units); the
		// outage ends then, within the 4 units before the fourth attempt.
		// Ended by count, not by a clock, so a loaded machine that starts
		// the first attempt late does not shift which attempt succeeds.
		b.outageUntil.Store(time.Now().Add(time.Hour).UnixNano())
		if _, err := b.svc.Enqueue(ctx, id, queue.ReasonManual); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 20*time.Second, "three failed attempts", func() bool {
			n := 0
			for _, r := range runsOf(t, b.st, id) {
				if r.State == store.RunFailed {
					n++
				}
			}
			return n >= 3
		})
		b.outageUntil.Store(0)
		var runs []store.Run
		waitFor(t, 20*time.Second, "a run to succeed", func() bool {
			runs = runsOf(t, b.st, id)
			return len(runs) > 0 && runs[len(runs)-1].State == store.RunSucceeded
		})
		if len(runs) != 4 {
			t.Fatalf("%d runs, want 3 failed attempts and 1 success: %+v", len(runs), runs)
		}
		for i, r := range runs {
			if r.Attempt != i+1 {
				t.Fatalf("run %d is attempt %d, want %d", i, r.Attempt, i+1)
			}
			if i < 3 && (r.State != store.RunFailed || r.FailureCode != string(failure.DestinationUnavailable)) {
				t.Fatalf("attempt %d: %s %s, want failed destination_unavailable", i+1, r.State, r.FailureCode)
			}
		}
		var gaps []string
		for k := 1; k < len(runs); k++ {
			want := base << (k - 1)
			gap := runs[k].StartedAt.Sub(runs[k-1].FinishedAt)
			gaps = append(gaps, gap.Round(time.Millisecond).String())
			// River schedules the retry after the run's end is recorded;
			// polling and starting the next run add at most a few polls.
			lo, hi := time.Duration(float64(want)*0.9), time.Duration(float64(want)*1.1)+400*time.Millisecond
			if gap < lo || gap > hi {
				t.Fatalf("attempt %d started %s after attempt %d ended; want %s ±10 %% (%s..%s)", k+1, gap, k, want, lo, hi)
			}
		}
		waitFor(t, 5*time.Second, "the job to complete", func() bool {
			state, _, _ := b.job(t, id)
			return state != "running"
		})
		if state, attempt, errs := b.job(t, id); state != "completed" || attempt != 4 || errs != 3 {
			t.Fatalf("river job: %s, attempt %d, %d errors; want completed, 4, 3", state, attempt, errs)
		}
		// Each failed attempt made its in-run retries (1 + 5 requests).
		if n := b.n503.Load(); n < 3*6 {
			t.Fatalf("%d answers 503, want at least 18 (6 per failed attempt)", n)
		}
		st := b.fake.Stats()
		if st.Contacts != retryRecords || st.ContactsWritten != retryRecords || st.DuplicateWrites != 0 {
			t.Fatalf("fake: %d contacts, %d written, %d duplicates; want %d once", st.Contacts, st.ContactsWritten, st.DuplicateWrites, retryRecords)
		}
		t.Logf("gaps between attempts: %s (policy 500ms, 1s, 2s ±10%%); %d answers 503", strings.Join(gaps, ", "), b.n503.Load())
	})

	t.Run("401 fails at once", func(t *testing.T) {
		t.Parallel()
		id := b.id("auth")
		if _, err := b.svc.Enqueue(ctx, id, queue.ReasonManual); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the job to be cancelled", func() bool {
			state, _, _ := b.job(t, id)
			return state == "cancelled"
		})
		time.Sleep(2 * base) // a retry, if there were one, would start by now
		runs := runsOf(t, b.st, id)
		if len(runs) != 1 || runs[0].State != store.RunFailed || runs[0].FailureCode != string(failure.DestinationAuth) {
			t.Fatalf("runs %+v, want one failed destination_auth", runs)
		}
		if _, attempt, _ := b.job(t, id); attempt != 1 {
			t.Fatalf("attempt %d, want 1", attempt)
		}
	})

	t.Run("paused sync runs nothing", func(t *testing.T) {
		t.Parallel()
		id := b.id("paused")
		// Its 1 s schedule fires (the leader is elected within a second or
		// two) and inserts nothing.
		time.Sleep(3 * time.Second)
		if n := b.jobs(t, id); n != 0 {
			t.Fatalf("the schedule of a paused sync queued %d jobs", n)
		}
		if row, err := b.st.GetSync(ctx, id); err != nil || row.State != store.SyncPaused {
			t.Fatalf("sync %+v, %v: want still paused", row, err)
		}
		// A job queued anyway (by hand) completes without a run.
		if _, err := b.svc.Enqueue(ctx, id, queue.ReasonManual); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the job to complete", func() bool {
			state, _, _ := b.job(t, id)
			return state == "completed"
		})
		if runs := runsOf(t, b.st, id); len(runs) != 0 {
			t.Fatalf("a paused sync recorded runs: %+v", runs)
		}
	})

	t.Run("enqueue-time failures trip the breaker", func(t *testing.T) {
		t.Parallel()
		id := b.id("broken")
		for i := range 5 {
			if _, err := b.svc.Enqueue(ctx, id, queue.ReasonManual); failure.CodeOf(err) != failure.InvalidSyncDefinition {
				t.Fatalf("enqueue %d: %v", i+1, err)
			}
		}
		row, err := b.st.GetSync(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if row.State != store.SyncPaused || row.PauseReason != "breaker" {
			t.Fatalf("sync %s is %s (%s) after 5 failed runs, want paused by the breaker", id, row.State, row.PauseReason)
		}
		audit, err := b.st.ListAudit(ctx, id, 10)
		if err != nil || len(audit) == 0 || audit[0].Action != string(failure.CircuitBreakerTripped) {
			t.Fatalf("audit %+v, %v", audit, err)
		}
		found := false
		for _, a := range b.alerts.list() {
			if a.SyncID == id && a.Kind == alert.KindCircuitBreakerTripped && a.Severity == alert.SeverityCritical {
				found = true
			}
		}
		if !found {
			t.Fatalf("no critical breaker alert for %s: %+v", id, b.alerts.list())
		}
	})
}
