package webhook

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/url"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

var _ destination.Checker = (*Destination)(nil)

// checkTimeout bounds the connection check.
const checkTimeout = 10 * time.Second

// Check connects to the webhook's host (and completes the TLS handshake for
// https) without sending a request: a webhook has nothing to read, and any
// request to it would be a delivery.
func (d *Destination) Check(ctx context.Context) ([]string, error) {
	u, err := url.Parse(d.url)
	if err != nil {
		return nil, failure.New(failure.InvalidSyncDefinition, "webhook url cannot be parsed")
	}
	port := u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	addr := net.JoinHostPort(u.Hostname(), port)
	conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, failure.Wrap(failure.DestinationUnavailable, err, "webhook: %s cannot be reached", d.host)
	}
	defer conn.Close()
	checked := []string{fmt.Sprintf("webhook: %s accepts connections (nothing was sent)", d.host)}
	if u.Scheme != "https" {
		return checked, nil
	}
	tc := tls.Client(conn, &tls.Config{ServerName: u.Hostname(), MinVersion: tls.VersionTLS12})
	if err := tc.HandshakeContext(ctx); err != nil {
		return checked, failure.Wrap(failure.DestinationUnavailable, err, "webhook: the TLS handshake with %s failed (%v)", d.host, err)
	}
	return append(checked, fmt.Sprintf("webhook: %s's TLS certificate is valid", d.host)), nil
}
