package webhook_test

import (
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/failure"
)

// connectProxy is a CONNECT proxy answering status to every CONNECT, and
// tunnelling when it is 200; connects counts the CONNECTs.
func connectProxy(t *testing.T, status int) (*url.URL, *atomic.Int64) {
	t.Helper()
	var connects atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodConnect {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		connects.Add(1)
		if status != http.StatusOK {
			w.WriteHeader(status)
			return
		}
		up, err := net.Dial("tcp", r.Host)
		if err != nil {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
		c, buf, err := http.NewResponseController(w).Hijack()
		if err != nil {
			up.Close()
			return
		}
		go func() { _, _ = io.Copy(up, buf); up.Close() }()
		_, _ = io.Copy(c, up)
		c.Close()
	}))
	t.Cleanup(srv.Close)
	u, _ := url.Parse(srv.URL)
	return u, &connects
}

// TestCheckGoesThroughTheProxy: `oncesync check` of a webhook dialled its
// host directly, whatever HTTPS_PROXY said: behind a proxy that refused
// oncesync (407) the check passed and every run failed; where only the
// proxy leads out, the check failed and the runs passed. The check now
// takes the requests' way (their proxy and TLS settings) and sends the
// receiver nothing.
func TestCheckGoesThroughTheProxy(t *testing.T) {
	t.Parallel()
	var posts atomic.Int64
	rv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { posts.Add(1) }))
	t.Cleanup(rv.Close)
	roots := x509.NewCertPool()
	roots.AddCert(rv.Certificate())
	dest := func(t *testing.T, proxy *url.URL) *webhook.Destination {
		tr := &http.Transport{Proxy: http.ProxyURL(proxy)}
		tr.TLSClientConfig = rv.Client().Transport.(*http.Transport).TLSClientConfig.Clone()
		tr.TLSClientConfig.RootCAs = roots
		d, err := webhook.New(webhook.Params{URL: rv.URL + "/hook", HTTPClient: &http.Client{Transport: tr}})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	t.Run("tunnel", func(t *testing.T) {
		t.Parallel()
		proxy, connects := connectProxy(t, http.StatusOK)
		lines, err := dest(t, proxy).Check(t.Context())
		if err != nil || len(lines) != 2 || !strings.Contains(lines[0], "through the proxy "+proxy.Host) || !strings.Contains(lines[1], "certificate is valid") {
			t.Fatalf("check: %q, %v", lines, err)
		}
		if connects.Load() != 1 || posts.Load() != 0 {
			t.Errorf("%d CONNECTs, %d requests to the receiver; want 1 and 0", connects.Load(), posts.Load())
		}
	})
	t.Run("407", func(t *testing.T) {
		t.Parallel()
		proxy, _ := connectProxy(t, http.StatusProxyAuthRequired)
		_, err := dest(t, proxy).Check(t.Context())
		if failure.CodeOf(err) != failure.DestinationUnavailable || !strings.Contains(err.Error(), "407") || !strings.Contains(err.Error(), proxy.Host) {
			t.Fatalf("check behind a proxy answering 407: %v; want destination_unavailable naming the proxy and its 407", err)
		}
	})
}
