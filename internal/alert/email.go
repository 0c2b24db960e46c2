package alert

import (
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"

	"github.com/oncesync/oncesync/internal/clock"
)

// EmailSinkParams configures an EmailSink.
type EmailSinkParams struct {
	// Host and Port address the SMTP server (Port defaults to 587). Port 465
	// uses implicit TLS (SMTPS).
	Host string
	Port int
	// Username and Password enable SMTP AUTH when Username is set. The
	// mechanism is negotiated; PLAIN and LOGIN are only used over TLS (or to
	// localhost), so a password never crosses the network in clear.
	Username string
	Password string
	// From is the sender address; To the recipients (at least one).
	From string
	To   []string
	// StartTLS makes STARTTLS mandatory: delivery fails when the server does
	// not offer it. When false, STARTTLS is used if the server offers it.
	StartTLS bool
	// TLSConfig overrides the TLS configuration (for example a private CA);
	// ServerName defaults to Host.
	TLSConfig *tls.Config
	// Timeout bounds one delivery when ctx has no earlier deadline (default 30s).
	Timeout time.Duration
	// Clock dates the messages; nil uses the wall clock.
	Clock clock.Clock
}

// EmailSink sends alerts as plain-text e-mail over SMTP.
type EmailSink struct {
	p EmailSinkParams
}

// NewEmailSink returns an EmailSink.
func NewEmailSink(p EmailSinkParams) (*EmailSink, error) {
	if p.Host == "" {
		return nil, fmt.Errorf("alert: email: host is required: %w", ErrInvalidConfig)
	}
	if p.Port == 0 {
		p.Port = 587
	}
	if p.Port < 1 || p.Port > 65535 {
		return nil, fmt.Errorf("alert: email: port %d out of range: %w", p.Port, ErrInvalidConfig)
	}
	if p.From == "" || len(p.To) == 0 {
		return nil, fmt.Errorf("alert: email: a sender and at least one recipient are required: %w", ErrInvalidConfig)
	}
	if p.Timeout <= 0 {
		p.Timeout = 30 * time.Second
	}
	if p.Clock == nil {
		p.Clock = clock.Real{}
	}
	p.To = append([]string(nil), p.To...)
	if p.TLSConfig != nil {
		p.TLSConfig = p.TLSConfig.Clone()
	} else {
		p.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	if p.TLSConfig.ServerName == "" {
		p.TLSConfig.ServerName = p.Host
	}
	return &EmailSink{p: p}, nil
}

// Name returns "email".
func (*EmailSink) Name() string { return "email" }

// Body returns the plain-text body sent for a.
func (*EmailSink) Body(a Alert) string {
	var b strings.Builder
	fmt.Fprintf(&b, "What happened: %s\n\n", a.WhatHappened)
	fmt.Fprintf(&b, "Next step: %s\n\n", a.NextStep)
	fmt.Fprintf(&b, "Owner: %s\n", a.Owner)
	fmt.Fprintf(&b, "Workspace: %s\n", a.Workspace)
	if a.SyncID != "" {
		fmt.Fprintf(&b, "Sync: %s\n", a.SyncID)
	}
	if a.Link != "" {
		fmt.Fprintf(&b, "Link: %s\n", a.Link)
	}
	fmt.Fprintf(&b, "\nAlert %s (%s, %s) raised at %s.\n", a.ID, a.Kind, a.Severity, a.At.UTC().Format(time.RFC3339))
	return b.String()
}

// Send delivers a to every recipient in one SMTP transaction.
func (s *EmailSink) Send(ctx context.Context, a Alert) error {
	m := mail.NewMsg()
	if err := m.From(s.p.From); err != nil {
		return s.fail("sender address", errors.Join(err, ErrPermanent))
	}
	if err := m.To(s.p.To...); err != nil {
		return s.fail("recipient address", errors.Join(err, ErrPermanent))
	}
	m.Subject(a.Subject())
	m.SetMessageIDWithValue(a.ID + "@oncesync")
	m.SetDateWithValue(s.p.Clock.Now())
	m.SetGenHeader("X-Oncesync-Alert-Id", a.ID)
	m.SetGenHeader("X-Oncesync-Alert-Kind", a.Kind)
	m.SetBodyString(mail.TypeTextPlain, s.Body(a))

	timeout := s.p.Timeout
	if dl, ok := ctx.Deadline(); ok {
		if d := time.Until(dl); d < timeout {
			timeout = max(d, time.Millisecond)
		}
	}
	var stops []func() bool
	defer func() {
		for _, stop := range stops {
			stop()
		}
	}()
	opts := []mail.Option{
		mail.WithPort(s.p.Port),
		mail.WithTimeout(timeout),
		mail.WithTLSConfig(s.p.TLSConfig),
		mail.WithDialContextFunc(s.dialer(ctx, &stops)),
	}
	if s.p.Port == 465 {
		opts = append(opts, mail.WithSSL())
	} else if s.p.StartTLS {
		opts = append(opts, mail.WithTLSPolicy(mail.TLSMandatory))
	} else {
		opts = append(opts, mail.WithTLSPolicy(mail.TLSOpportunistic))
	}
	if s.p.Username != "" {
		opts = append(opts,
			mail.WithSMTPAuth(mail.SMTPAuthAutoDiscover),
			mail.WithUsername(s.p.Username),
			mail.WithPassword(s.p.Password))
	}
	c, err := mail.NewClient(s.p.Host, opts...)
	if err != nil {
		return s.fail("client", errors.Join(err, ErrPermanent))
	}
	if err := c.DialAndSendWithContext(ctx, m); err != nil {
		return s.fail("send", err)
	}
	return nil
}

// dialer returns a dial function whose connections are closed when ctx is
// done, so a hanging server cannot outlive the caller's deadline or a
// dispatcher shutdown.
func (s *EmailSink) dialer(ctx context.Context, stops *[]func() bool) mail.DialContextFunc {
	return func(dctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		var err error
		if s.p.Port == 465 {
			d := &tls.Dialer{Config: s.p.TLSConfig}
			conn, err = d.DialContext(dctx, network, addr)
		} else {
			var d net.Dialer
			conn, err = d.DialContext(dctx, network, addr)
		}
		if err != nil {
			return nil, err
		}
		*stops = append(*stops, context.AfterFunc(ctx, func() { _ = conn.Close() }))
		return conn, nil
	}
}

// fail wraps err without the password or any e-mail address, nor the
// credentials as AUTH encodes them (PLAIN's base64 of "\x00user\x00pass",
// LOGIN's of each), which a refusing server may echo.
func (s *EmailSink) fail(step string, err error) error {
	secrets := append([]string{s.p.Password, s.p.Username, s.p.From}, s.p.To...)
	if s.p.Password != "" {
		b64 := base64.StdEncoding.EncodeToString
		secrets = append(secrets, b64([]byte("\x00"+s.p.Username+"\x00"+s.p.Password)),
			b64([]byte(s.p.Username+"\x00"+s.p.Username+"\x00"+s.p.Password)), b64([]byte(s.p.Password)))
	}
	return fmt.Errorf("alert: email via %s: %s: %w", net.JoinHostPort(s.p.Host, strconv.Itoa(s.p.Port)), step, scrub(err, secrets...))
}
