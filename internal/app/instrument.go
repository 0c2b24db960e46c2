package app

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/clock"
)

// Destination types with a route table; any other type's requests are
// labelled by method alone (its URL is configuration and may hold a secret).
const destinationBrevo = "brevo"

// DestinationBuckets are the bounds (seconds) of the destination call
// latency histogram: from a fast API answer to a call near the default
// 30 s destination timeout.
var DestinationBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30}

// DestinationMetrics times and counts the HTTP calls destinations make:
//
//	oncesync_destination_request_duration_seconds{destination,route}
//	oncesync_destination_requests_total{destination,code}
//
// destination is the destination type (brevo, webhook); route a
// low-cardinality name of the call ("POST /v3/contacts/import", never a URL
// with an identifier in it); code the HTTP status, or "error" when no
// response came back (refused connection, timeout, cancellation). Every
// attempt counts, in-run retries included. A nil *DestinationMetrics
// instruments nothing.
type DestinationMetrics struct {
	duration *prometheus.HistogramVec
	requests *prometheus.CounterVec
	clock    clock.Clock
}

// DestinationMetricsParams configure NewDestinationMetrics.
type DestinationMetricsParams struct {
	// Registerer receives the two families; nil registers nothing.
	Registerer prometheus.Registerer
	// Clock times the calls (default clock.Real).
	Clock clock.Clock
}

// NewDestinationMetrics creates the destination call metrics and registers
// them on p.Registerer.
func NewDestinationMetrics(p DestinationMetricsParams) (*DestinationMetrics, error) {
	m := &DestinationMetrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "oncesync_destination_request_duration_seconds",
			Help:    "Latency of destination HTTP calls (to the response headers), every attempt, by destination type and route.",
			Buckets: DestinationBuckets,
		}, []string{"destination", "route"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "oncesync_destination_requests_total",
			Help: `Destination HTTP calls, every attempt, by destination type and status code ("error": no response).`,
		}, []string{"destination", "code"}),
		clock: p.Clock,
	}
	if m.clock == nil {
		m.clock = clock.Real{}
	}
	if p.Registerer == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.duration, m.requests} {
		if err := p.Registerer.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Client returns a copy of base (nil: apiclient.NewHTTPClient) whose transport
// records every call in m under destination (the destination type). With a
// nil m it returns base unchanged.
func (m *DestinationMetrics) Client(base *http.Client, destination string) *http.Client {
	if m == nil {
		return base
	}
	if base == nil {
		// Not http.DefaultTransport: a destination's own pool, whose
		// transport tells a proxy's refusal apart (apiclient.ProxyError,
		// docs/guide.md#http-answers-proxies-and-tls).
		base = apiclient.NewHTTPClient()
	}
	c := *base
	next := c.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	c.Transport = &instrumentedTransport{next: next, m: m, destination: destination}
	return &c
}

// instrumentedTransport is an http.RoundTripper recording its calls.
type instrumentedTransport struct {
	next        http.RoundTripper
	m           *DestinationMetrics
	destination string
}

// RoundTrip implements http.RoundTripper.
func (t *instrumentedTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	start := t.m.clock.Now()
	resp, err := t.next.RoundTrip(r)
	elapsed := t.m.clock.Now().Sub(start)
	code := "error"
	if err == nil {
		code = strconv.Itoa(resp.StatusCode)
	}
	t.m.duration.WithLabelValues(t.destination, Route(t.destination, r)).Observe(elapsed.Seconds())
	t.m.requests.WithLabelValues(t.destination, code).Inc()
	return resp, err
}

// CloseIdleConnections passes http.Client.CloseIdleConnections on.
func (t *instrumentedTransport) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// Route names request r of a destination of type destination for metric
// labels: a method and a path template from a fixed set, so that neither an
// identifier (an e-mail address in GET /v3/contacts/{identifier}) nor a
// configured URL (a webhook's, which may carry a token) becomes a label.
//
//	brevo:  "POST /v3/contacts/import", "POST /v3/contacts",
//	        "GET /v3/contacts/attributes", "GET /v3/contacts/{identifier}",
//	        "GET /v3/processes/{processId}", "GET /v3/account",
//	        "GET /v3/{other}" for any other path
//	others: "POST {url}"
func Route(destination string, r *http.Request) string {
	method := routeMethod(r.Method)
	if destination != destinationBrevo {
		return method + " {url}"
	}
	segs := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	// The base URL's path ends in /v3 (it may have a prefix, a proxy's).
	for i, s := range segs {
		if s == "v3" {
			segs = segs[i+1:]
			break
		}
	}
	tmpl := "/{other}"
	switch {
	case len(segs) == 1 && (segs[0] == "contacts" || segs[0] == "processes" || segs[0] == "account"):
		tmpl = "/" + segs[0]
	case len(segs) == 2 && segs[0] == "contacts" && (segs[1] == "import" || segs[1] == "attributes"):
		tmpl = "/contacts/" + segs[1]
	case len(segs) == 2 && segs[0] == "contacts":
		tmpl = "/contacts/{identifier}"
	case len(segs) == 2 && segs[0] == "processes":
		tmpl = "/processes/{processId}"
	}
	return method + " /v3" + tmpl
}

// routeMethod keeps the standard methods and folds anything else.
func routeMethod(m string) string {
	switch m {
	case "":
		return http.MethodGet
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	default:
		return "OTHER"
	}
}
