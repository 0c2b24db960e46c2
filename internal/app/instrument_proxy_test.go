package app

import (
	"net/http"
	"testing"

	"github.com/oncesync/oncesync/internal/clock"
)

// TestDestinationMetricsClientHasItsOwnTransport: under serve (metrics on,
// no client given) every destination went through http.DefaultTransport,
// which reports a proxy's refused CONNECT as a bare status text: a 407
// behind HTTPS_PROXY was retried 6 times as "could not be reached" there,
// though `oncesync run` named the proxy at once. The instrumented client
// now wraps apiclient.NewHTTPClient's transport.
func TestDestinationMetricsClientHasItsOwnTransport(t *testing.T) {
	t.Parallel()
	m, err := NewDestinationMetrics(DestinationMetricsParams{Clock: clock.Real{}})
	if err != nil {
		t.Fatal(err)
	}
	c := m.Client(nil, "brevo")
	it, ok := c.Transport.(*instrumentedTransport)
	if !ok {
		t.Fatalf("transport %T, want the instrumented one", c.Transport)
	}
	tr, ok := it.next.(*http.Transport)
	if !ok || tr == http.DefaultTransport || tr.OnProxyConnectResponse == nil {
		t.Fatalf("next transport %T (default: %v): want apiclient.NewHTTPClient's, which names a proxy's refusal", it.next, it.next == http.DefaultTransport)
	}
	if tr.Proxy == nil {
		t.Error("the transport does not go through HTTPS_PROXY/HTTP_PROXY")
	}
}
