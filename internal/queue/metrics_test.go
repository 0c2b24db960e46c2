package queue_test

import (
	"encoding/csv"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/source/file"
)

// families is a parsed /metrics page (or a registry's Gather).
type families map[string]*dto.MetricFamily

func parseMetrics(t *testing.T, text string) families {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("/metrics is not the Prometheus text format: %v\n%s", err, text)
	}
	return mfs
}

func gather(t *testing.T, reg *prometheus.Registry) families {
	t.Helper()
	list, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := families{}
	for _, mf := range list {
		out[mf.GetName()] = mf
	}
	return out
}

// series returns the series of family name whose labels include want.
func (f families) series(name string, want map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range f[name].GetMetric() {
		ok := true
		for k, v := range want {
			if labelOf(m, k) != v {
				ok = false
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// value is the counter or gauge value of the one series of name with
// labels (label pairs "k", "v", ...); ok is false without exactly one.
func (f families) value(name string, labels ...string) (float64, bool) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	s := f.series(name, want)
	if len(s) != 1 {
		return 0, false
	}
	switch {
	case s[0].GetCounter() != nil:
		return s[0].GetCounter().GetValue(), true
	case s[0].GetGauge() != nil:
		return s[0].GetGauge().GetValue(), true
	case s[0].GetUntyped() != nil:
		return s[0].GetUntyped().GetValue(), true
	}
	return 0, false
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestQueueDepth: oncesync_queue_depth counts the queue's jobs by state with
// one query per scrape, on both River drivers.
func TestQueueDepth(t *testing.T) {
	t.Parallel()
	for _, driver := range []string{"sqlite", "postgres"} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			storeURL := "sqlite://./oncesync.db"
			if driver == "postgres" {
				storeURL, _ = newSchema(t, testDatabaseURL(t))
			}
			hook := config.Destination{Type: "webhook", Spec: &webhook.Config{URL: "http://127.0.0.1:1/hook"}, Mode: "single", Concurrency: 1, Timeout: time.Second}
			cfg := &config.Config{
				Path: filepath.Join(dir, "oncesync.yaml"), Store: storeURL, Settings: config.Defaults(),
				Syncs: []config.Sync{
					{ID: "qd-" + randHex(3), Workspace: "w", Source: config.Source{Type: "csv", Spec: &file.Config{Path: "a.csv"}, PageSize: 10}, Destination: hook},
					{ID: "qd-" + randHex(3), Workspace: "w", Source: config.Source{Type: "csv", Spec: &file.Config{Path: "b.csv"}, PageSize: 10}, Destination: hook},
				},
			}
			st, err := app.OpenStore(t.Context(), cfg, clock.Real{})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			reg := prometheus.NewRegistry()
			svc, err := queue.New(t.Context(), queue.Params{Config: cfg, Store: st, Leases: &lease.SQL{Store: st}, Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			// Never started: the jobs stay available.
			t.Cleanup(func() { _ = svc.Shutdown(t.Context()) })

			depth := func() map[string]float64 {
				f := gather(t, reg)
				out := map[string]float64{}
				for _, m := range f.series("oncesync_queue_depth", nil) {
					out[labelOf(m, "state")] = m.GetGauge().GetValue()
				}
				return out
			}
			want := map[string]float64{"available": 0, "scheduled": 0, "retryable": 0, "running": 0}
			if got := depth(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("empty queue: depth %v, want %v", got, want)
			}
			for _, sc := range cfg.Syncs {
				if _, err := svc.Enqueue(t.Context(), sc.ID, queue.ReasonManual); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := svc.Enqueue(t.Context(), cfg.Syncs[0].ID, queue.ReasonManual); err != nil { // a duplicate
				t.Fatal(err)
			}
			want["available"] = 2
			if got := depth(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("two syncs queued: depth %v, want %v", got, want)
			}
			f := gather(t, reg)
			if v, ok := f.value("oncesync_jobs_enqueued_total", "reason", "manual"); !ok || v != 2 {
				t.Fatalf("jobs_enqueued_total{manual} = %v (%v), want 2", v, ok)
			}
			// A stopped service reports no depth instead of failing the scrape.
			if err := svc.Shutdown(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := depth(); len(got) != 0 {
				t.Fatalf("depth after shutdown: %v, want no series", got)
			}
		})
	}
}

// TestServeMetrics is issue 5's acceptance 3: `oncesync serve` runs one sync
// of 50 records on the fake Brevo, one of which Brevo refuses,
// and /metrics (bearer token) shows exactly what that run did.
func TestServeMetrics(t *testing.T) {
	t.Parallel()
	const (
		records  = 50
		pageSize = 20
		syncID   = "m0"
	)
	refused := fmt.Sprintf("%s-person%06d@example.com", syncID, 7)
	e := &env{t: t, dir: t.TempDir(), total: records - 1, prefix: "m"}
	e.fake = fakebrevo.New(fakebrevo.Options{APIKey: apiKey, Validate: true, RefuseEmails: []string{refused}})
	srv := httptest.NewServer(e.fake)
	t.Cleanup(srv.Close)
	f, err := os.Create(filepath.Join(e.dir, syncID+".csv"))
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"id", "email", "first_name"})
	for i := 1; i <= records; i++ {
		_ = w.Write([]string{strconv.Itoa(i), fmt.Sprintf("%s-person%06d@example.com", syncID, i), "First" + strconv.Itoa(i)})
	}
	w.Flush()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	e.config = filepath.Join(e.dir, "oncesync.yaml")
	cfg := fmt.Sprintf(`store: sqlite://./oncesync.db
web: {api_tokens: [%s]}
settings: {lease_ttl: 30s, lease_renew: 10s}
syncs:
  - id: %s
    workspace: acme
    source: {type: csv, path: %s.csv, page_size: %d, identity: id}
    destination: {type: brevo, base_url: %s/v3, api_key: ${BREVO_API_KEY}, mode: bulk, list_ids: [2], rate_limit: 1000}
    mapping: {email: email, attributes: {FIRSTNAME: first_name}}
`, testAPIToken, syncID, syncID, pageSize, srv.URL)
	if err := os.WriteFile(e.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, p := range e.procs {
			_ = p.Cmd.Process.Kill()
			<-p.Done
		}
		if t.Failed() {
			for _, p := range e.procs {
				t.Logf("--- %s output:\n%s", p.Name, p.Out.String())
			}
		}
	})

	s := e.start("serve", "serve", "--workers", "1", "--listen", "127.0.0.1:0")
	addr := started(t, s)
	base := "http://" + addr
	scrape := func() families {
		t.Helper()
		code, body := get(t, base+"/metrics")
		if code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, body)
		}
		return parseMetrics(t, body)
	}

	// Before any run: every family is there, at zero.
	before := scrape()
	for _, name := range []string{
		"oncesync_runs_total", "oncesync_records_total", "oncesync_ledger_replays_total", "oncesync_lease_losses_total",
		"oncesync_in_doubt_records_total", "oncesync_breaker_trips_total", "oncesync_queue_depth",
	} {
		if _, ok := before[name]; !ok {
			t.Fatalf("/metrics lacks %s before the first run", name)
		}
	}
	if v, _ := before.value("oncesync_records_total", "outcome", "read"); v != 0 {
		t.Fatalf("records read before any run: %v", v)
	}
	// The figures a rule outside oncesync tells silence and pauses by,
	// from the store: never succeeded, not paused.
	for _, tc := range []struct {
		name   string
		labels []string
	}{
		{"oncesync_sync_last_success_timestamp_seconds", []string{"sync", syncID, "workspace", "acme"}},
		{"oncesync_sync_paused", []string{"sync", syncID, "workspace", "acme", "by", "breaker"}},
		{"oncesync_sync_paused", []string{"sync", syncID, "workspace", "acme", "by", "person"}},
	} {
		if v, ok := before.value(tc.name, tc.labels...); !ok || v != 0 {
			t.Errorf("before the first run %s%v = %v (present %v), want 0", tc.name, tc.labels, v, ok)
		}
	}

	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, base+"/api/v1/syncs/"+syncID+"/run",
		strings.NewReader(`{"by":"metrics test","why":"scripted run"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+testAPIToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("run now: %d", resp.StatusCode)
	}

	var m families
	waitFor(t, 15*time.Second, "the run to be counted", func() bool {
		m = scrape()
		v, _ := m.value("oncesync_runs_total", "outcome", "succeeded")
		return v >= 1
	})
	// The job completes just after its run: wait for the queue to empty.
	waitFor(t, 5*time.Second, "the queue to drain", func() bool {
		m = scrape()
		a, okA := m.value("oncesync_queue_depth", "state", "available")
		r, okR := m.value("oncesync_queue_depth", "state", "running")
		return okA && okR && a == 0 && r == 0
	})
	stats := e.fake.Stats()
	if v, ok := m.value("oncesync_sync_last_success_timestamp_seconds", "sync", syncID); !ok || time.Since(time.Unix(int64(v), 0)) > time.Minute {
		t.Errorf("oncesync_sync_last_success_timestamp_seconds after the run = %v (present %v), want about now", v, ok)
	}

	// The run, from the store, agrees with the fake.
	st := e.store()
	runs := runsOf(t, st, syncID)
	if len(runs) != 1 {
		t.Fatalf("%d runs, want 1: %+v", len(runs), runs)
	}
	run := runs[0]
	if run.Read != records || run.Written != records-1 || run.Rejected != 1 || stats.Contacts != records-1 {
		t.Fatalf("run %+v; fake contacts %d: want %d read, %d written, 1 rejected", run.Counters, stats.Contacts, records, records-1)
	}

	for _, tc := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"oncesync_runs_total", []string{"outcome", "succeeded", "sync", syncID, "workspace", "acme"}, 1},
		{"oncesync_runs_total", []string{"outcome", "failed"}, 0},
		{"oncesync_runs_total", []string{"outcome", "interrupted"}, 0},
		{"oncesync_runs_total", []string{"outcome", "skipped"}, 0},
		{"oncesync_jobs_enqueued_total", []string{"reason", "manual"}, 1},
		{"oncesync_records_total", []string{"outcome", "read", "sync", syncID, "workspace", "acme"}, records},
		{"oncesync_records_total", []string{"outcome", "written"}, records - 1},
		{"oncesync_records_total", []string{"outcome", "rejected"}, 1},
		{"oncesync_records_total", []string{"outcome", "replayed"}, 0},
		{"oncesync_records_total", []string{"outcome", "in_doubt"}, 0},
		{"oncesync_records_total", []string{"outcome", "settled"}, 0},
		{"oncesync_ledger_replays_total", nil, 0},
		{"oncesync_lease_losses_total", nil, 0},
		{"oncesync_in_doubt_records_total", nil, 0},
		{"oncesync_breaker_trips_total", nil, 0},
		{"oncesync_queue_depth", []string{"state", "available"}, 0},
		{"oncesync_queue_depth", []string{"state", "scheduled"}, 0},
		{"oncesync_queue_depth", []string{"state", "retryable"}, 0},
		{"oncesync_queue_depth", []string{"state", "running"}, 0},
	} {
		if got, ok := m.value(tc.name, tc.labels...); !ok || got != tc.want {
			t.Errorf("%s%v = %v (present %v), want %v", tc.name, tc.labels, got, ok, tc.want)
		}
	}

	// Status codes: exactly the fake's, call for call (every import's 202,
	// each process asked about answering 200), plus the 200 of the import
	// report that names the skipped row, which the fake counts apart.
	codes := map[string]float64{}
	for _, s := range m.series("oncesync_destination_requests_total", map[string]string{"destination": "brevo"}) {
		codes[labelOf(s, "code")] = s.GetCounter().GetValue()
	}
	wantCodes := map[string]float64{}
	for c, n := range stats.ByStatus {
		wantCodes[c] = float64(n)
	}
	wantCodes["200"] += float64(stats.ReportRequests)
	if fmt.Sprint(codes) != fmt.Sprint(wantCodes) {
		t.Errorf("destination_requests_total by code %v, want the fake's %v", codes, wantCodes)
	}
	if imports := stats.ByRoute["POST /v3/contacts/import"]; codes["202"] != float64(imports) || imports < 2 || stats.ReportRequests != 1 {
		t.Errorf("202s %v for %d imports, %d reports read (one row skipped)", codes["202"], imports, stats.ReportRequests)
	}

	// Latency: one observation per call, per route as the fake counted them.
	var total uint64
	for _, s := range m.series("oncesync_destination_request_duration_seconds", map[string]string{"destination": "brevo"}) {
		route, n := labelOf(s, "route"), s.GetHistogram().GetSampleCount()
		total += n
		if strings.Contains(route, "@") || strings.Contains(route, "%40") {
			t.Errorf("route label with an identifier: %q", route)
		}
		want := stats.ByRoute[route]
		if route == "GET /v3/{other}" {
			want = stats.ReportRequests // the import report, beside the API
		}
		if uint64(want) != n {
			t.Errorf("histogram count of %q = %d, the fake saw %d", route, n, want)
		}
		if s.GetHistogram().GetSampleSum() <= 0 {
			t.Errorf("histogram of %q has sum %v", route, s.GetHistogram().GetSampleSum())
		}
	}
	if total != uint64(stats.Requests+stats.ReportRequests) || total == 0 {
		t.Errorf("histogram count %d, the fake saw %d requests", total, stats.Requests)
	}

	_ = s.Cmd.Process.Signal(os.Interrupt)
	if code := s.Wait(t, 30*time.Second); code != 0 {
		t.Fatalf("serve exit %d", code)
	}
	e.checkNoSecrets(t)
	t.Logf("run: read %d, written %d, rejected %d; %d destination calls %v", run.Read, run.Written, run.Rejected, stats.Requests, stats.ByStatus)
}
