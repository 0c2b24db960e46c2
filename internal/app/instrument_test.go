package app_test

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/clock"
)

func TestRoute(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		destination, method, url, want string
	}{
		{"brevo", "POST", "https://api.brevo.com/v3/contacts/import", "POST /v3/contacts/import"},
		{"brevo", "GET", "https://api.brevo.com/v3/contacts/attributes", "GET /v3/contacts/attributes"},
		{"brevo", "POST", "https://api.brevo.com/v3/contacts", "POST /v3/contacts"},
		{"brevo", "GET", "https://api.brevo.com/v3/contacts?limit=1000&modifiedSince=2025-01-01", "GET /v3/contacts"},
		{"brevo", "GET", "https://api.brevo.com/v3/contacts/jane%40example.com", "GET /v3/contacts/{identifier}"},
		{"brevo", "GET", "https://api.brevo.com/v3/contacts/jane@example.com?identifierType=email_id", "GET /v3/contacts/{identifier}"},
		{"brevo", "GET", "https://api.brevo.com/v3/processes/42", "GET /v3/processes/{processId}"},
		{"brevo", "GET", "http://127.0.0.1:9999/proxy/v3/processes", "GET /v3/processes"},
		{"brevo", "DELETE", "https://api.brevo.com/v3/contacts/lists/2/contacts/jane@example.com", "DELETE /v3/{other}"},
		{"brevo", "", "https://api.brevo.com/v3/account", "GET /v3/account"},
		{"brevo", "", "https://api.brevo.com/v3/senders", "GET /v3/{other}"},
		{"brevo", "BREW", "https://api.brevo.com/v3/contacts", "OTHER /v3/contacts"},
		{"webhook", "POST", "https://hooks.example.com/services/T000/B000/s3cr3t-token", "POST {url}"},
	} {
		t.Run(tc.destination+" "+tc.method+" "+tc.url, func(t *testing.T) {
			t.Parallel()
			r, err := http.NewRequest(tc.method, tc.url, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := app.Route(tc.destination, r); got != tc.want {
				t.Fatalf("Route = %q, want %q", got, tc.want)
			}
		})
	}
}

// stepClock advances by step at every Now, so every call lasts step.
type stepClock struct {
	f    *clock.Fake
	step time.Duration
}

func (c stepClock) Now() time.Time {
	now := c.f.Now()
	c.f.Advance(c.step)
	return now
}

func TestDestinationMetricsClient(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path == "/v3/contacts/import":
			w.WriteHeader(http.StatusAccepted)
		case strings.HasPrefix(r.URL.Path, "/v3/contacts/"):
			w.WriteHeader(http.StatusNotFound)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	}))
	t.Cleanup(srv.Close)
	reg := prometheus.NewRegistry()
	m, err := app.NewDestinationMetrics(app.DestinationMetricsParams{
		Registerer: reg, Clock: stepClock{f: clock.NewFake(time.Unix(0, 0)), step: 300 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	base := &http.Client{Timeout: 7 * time.Second}
	brevo := m.Client(base, "brevo")
	if brevo == base || brevo.Timeout != base.Timeout || base.Transport != nil {
		t.Fatalf("Client must copy base (timeout kept) and leave it untouched")
	}
	hook := m.Client(nil, "webhook")
	do := func(c *http.Client, method, url string) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), method, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			if strings.HasPrefix(url, srv.URL) {
				t.Fatal(err)
			}
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	for range 3 {
		do(brevo, "POST", srv.URL+"/v3/contacts/import")
	}
	do(brevo, "GET", srv.URL+"/v3/contacts/jane%40example.com")
	do(brevo, "GET", srv.URL+"/v3/contacts/joe%40example.com")
	do(hook, "POST", srv.URL+"/hook/secret-token")
	do(hook, "POST", "http://127.0.0.1:1/refused") // no response: code "error"

	wantCounts := map[[2]string]float64{
		{"brevo", "202"}: 3, {"brevo", "404"}: 2, {"webhook", "201"}: 1, {"webhook", "error"}: 1,
	}
	for k, want := range wantCounts {
		if got := counter(t, reg, k[0], k[1]); got != want {
			t.Errorf("requests{destination=%s,code=%s} = %v, want %v", k[0], k[1], got, want)
		}
	}
	if n := seriesCount(t, reg, "oncesync_destination_requests_total"); n != len(wantCounts) {
		t.Errorf("%d request series, want %d", n, len(wantCounts))
	}
	hists := histograms(t, reg)
	wantHists := map[string]uint64{
		"brevo POST /v3/contacts/import":      3,
		"brevo GET /v3/contacts/{identifier}": 2,
		"webhook POST {url}":                  2,
	}
	if len(hists) != len(wantHists) {
		t.Errorf("histogram series %v, want %v", keys(hists), wantHists)
	}
	for k, want := range wantHists {
		h, ok := hists[k]
		if !ok {
			t.Errorf("no histogram for %s; have %v", k, keys(hists))
			continue
		}
		if h.GetSampleCount() != want {
			t.Errorf("%s: count %d, want %d", k, h.GetSampleCount(), want)
		}
		// Every call took one clock step, 300 ms.
		if sum := h.GetSampleSum(); sum < 0.3*float64(want)-1e-9 || sum > 0.3*float64(want)+1e-9 {
			t.Errorf("%s: sum %v s, want %v s", k, sum, 0.3*float64(want))
		}
	}
	for k := range hists {
		if strings.Contains(k, "@") || strings.Contains(k, "%40") || strings.Contains(k, "secret") {
			t.Errorf("a route label carries an identifier or a URL: %q", k)
		}
	}
}

func TestDestinationMetricsNil(t *testing.T) {
	t.Parallel()
	var m *app.DestinationMetrics
	base := &http.Client{}
	if m.Client(base, "brevo") != base {
		t.Fatal("a nil DestinationMetrics must return the client unchanged")
	}
	reg := prometheus.NewRegistry()
	if _, err := app.NewDestinationMetrics(app.DestinationMetricsParams{Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	_, err := app.NewDestinationMetrics(app.DestinationMetricsParams{Registerer: reg})
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Fatalf("registering twice: %v, want AlreadyRegisteredError", err)
	}
}

// counter returns the value of requests{destination, code} (0 if absent).
func counter(t *testing.T, reg *prometheus.Registry, destination, code string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "oncesync_destination_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label(m, "destination") == destination && label(m, "code") == code {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// seriesCount counts the series of family name.
func seriesCount(t *testing.T, reg *prometheus.Registry, name string) int {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return len(mf.GetMetric())
		}
	}
	return 0
}

func histograms(t *testing.T, reg *prometheus.Registry) map[string]*dto.Histogram {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.Histogram{}
	for _, mf := range mfs {
		if mf.GetName() != "oncesync_destination_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			out[label(m, "destination")+" "+label(m, "route")] = m.GetHistogram()
		}
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}
