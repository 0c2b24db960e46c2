package webhook

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"time"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

var _ destination.Checker = (*Destination)(nil)

// checkTimeout bounds the connection check.
const checkTimeout = 10 * time.Second

// Check connects to the webhook's host (and completes the TLS handshake for
// https) without sending a request: a webhook has nothing to read, and any
// request to it would be a delivery. It goes the way the requests go: through
// the proxy HTTPS_PROXY or HTTP_PROXY names for the url (unless NO_PROXY
// excludes it), with the requests' TLS settings
// (docs/guide.md#http-answers-proxies-and-tls); a direct connection would
// pass where every request is refused, or fail where they all get through.
func (d *Destination) Check(ctx context.Context) ([]string, error) {
	u, err := url.Parse(d.url)
	if err != nil {
		return nil, failure.New(failure.InvalidSyncDefinition, "webhook url cannot be parsed")
	}
	addr := hostPort(u)
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	proxy, err := d.proxyFor(u)
	if err != nil {
		return nil, failure.Wrap(failure.InvalidSyncDefinition, err, "webhook: the proxy for %s cannot be read from HTTPS_PROXY or HTTP_PROXY", d.host)
	}
	var (
		conn    net.Conn
		checked []string
	)
	if proxy == nil {
		if conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", addr); err != nil {
			return nil, failure.Wrap(failure.DestinationUnavailable, err, "webhook: %s cannot be reached", d.host)
		}
		checked = []string{fmt.Sprintf("webhook: %s accepts connections (nothing was sent)", d.host)}
	} else {
		if conn, err = (&net.Dialer{}).DialContext(ctx, "tcp", hostPort(proxy)); err != nil {
			return nil, failure.Wrap(failure.DestinationUnavailable, err, "webhook: the proxy %s cannot be reached (check HTTPS_PROXY, HTTP_PROXY and NO_PROXY)", proxy.Host)
		}
		if proxy.Scheme == "https" {
			tc := tls.Client(conn, &tls.Config{ServerName: proxy.Hostname(), MinVersion: tls.VersionTLS12})
			if err := tc.HandshakeContext(ctx); err != nil {
				conn.Close()
				return nil, failure.Wrap(failure.DestinationUnavailable, err, "webhook: the TLS handshake with the proxy %s failed (%v)", proxy.Host, err)
			}
			conn = tc
		}
		if u.Scheme != "https" || (proxy.Scheme != "http" && proxy.Scheme != "https") {
			// A plain-HTTP request goes to the proxy whole, and a SOCKS
			// proxy's tunnel is not asked for here: reaching the proxy
			// is all that is checked.
			conn.Close()
			return []string{fmt.Sprintf("webhook: the proxy %s for %s accepts connections (nothing was sent)", proxy.Host, d.host)}, nil
		}
		if err := connect(ctx, conn, proxy, addr); err != nil {
			conn.Close()
			return nil, err
		}
		checked = []string{fmt.Sprintf("webhook: %s accepts connections through the proxy %s (nothing was sent)", d.host, proxy.Host)}
	}
	defer conn.Close()
	if u.Scheme != "https" {
		return checked, nil
	}
	tc := tls.Client(conn, d.tlsConfig(u.Hostname()))
	if err := tc.HandshakeContext(ctx); err != nil {
		return checked, failure.Wrap(failure.DestinationUnavailable, err, "webhook: the TLS handshake with %s failed (%v): %s", d.host, err, apiclient.TLSAdvice)
	}
	return append(checked, fmt.Sprintf("webhook: %s's TLS certificate is valid", d.host)), nil
}

// proxyFor is the proxy the requests to u go through, nil for none: the
// client's transport's when it is a plain *http.Transport, else the
// environment's (HTTPS_PROXY, HTTP_PROXY, NO_PROXY).
func (d *Destination) proxyFor(u *url.URL) (*url.URL, error) {
	proxy := http.ProxyFromEnvironment
	if t, ok := d.client.Transport.(*http.Transport); ok {
		if proxy = t.Proxy; proxy == nil {
			return nil, nil
		}
	}
	return proxy(&http.Request{Method: http.MethodPost, URL: u, Header: http.Header{}})
}

// tlsConfig is the requests' TLS configuration (a custom authority
// included) for host.
func (d *Destination) tlsConfig(host string) *tls.Config {
	c := &tls.Config{}
	if t, ok := d.client.Transport.(*http.Transport); ok && t.TLSClientConfig != nil {
		c = t.TLSClientConfig.Clone()
	}
	c.ServerName = host
	if c.MinVersion < tls.VersionTLS12 {
		c.MinVersion = tls.VersionTLS12
	}
	return c
}

// connect asks the proxy on conn for a tunnel to addr, as the transport
// does (with the proxy URL's user and password), and fails with the
// proxy's answer when it is not 200.
func connect(ctx context.Context, conn net.Conn, proxy *url.URL, addr string) error {
	req := &http.Request{Method: http.MethodConnect, URL: &url.URL{Opaque: addr}, Host: addr, Header: http.Header{}}
	if u := proxy.User; u != nil {
		pw, _ := u.Password()
		req.Header.Set("Proxy-Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(u.Username()+":"+pw)))
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
		defer conn.SetDeadline(time.Time{})
	}
	if err := req.Write(conn); err != nil {
		return failure.Wrap(failure.DestinationUnavailable, err, "webhook: the proxy %s dropped the connection", proxy.Host)
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return failure.Wrap(failure.DestinationUnavailable, err, "webhook: the proxy %s did not answer CONNECT", proxy.Host)
	}
	// resp.Body is not closed: a CONNECT answer has no body, and closing
	// one read without a length would wait for the tunnel's bytes.
	if resp.StatusCode != http.StatusOK {
		return failure.New(failure.DestinationUnavailable, fmt.Sprintf(
			"webhook: the proxy %s refused to connect oncesync to %s (HTTP %d %s); check HTTPS_PROXY, HTTP_PROXY and NO_PROXY (a proxy's user and password go in its URL)",
			proxy.Host, addr, resp.StatusCode, http.StatusText(resp.StatusCode)))
	}
	return nil
}

// hostPort is u's host with its scheme's default port when it has none
// (as net/http has them: 80, 443, and 1080 for a SOCKS proxy).
func hostPort(u *url.URL) string {
	if u.Port() != "" {
		return u.Host
	}
	port := "80"
	switch u.Scheme {
	case "https":
		port = "443"
	case "socks5", "socks5h":
		port = "1080"
	}
	return net.JoinHostPort(u.Hostname(), port)
}
