package alert

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"io"
	"log"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/oncesync/oncesync/internal/clock"
)

// received is one message accepted by the test SMTP server.
type received struct {
	from     string
	to       []string
	data     []byte
	tls      bool
	authUser string
	authPass string
}

// smtpServer is a real SMTP server (emersion/go-smtp) on 127.0.0.1.
type smtpServer struct {
	addr string
	port int
	msgs chan received

	mu    sync.Mutex
	auths int // AUTH exchanges seen
}

type smtpServerOpts struct {
	tls  *tls.Config // offer STARTTLS
	user string      // require AUTH PLAIN with user/pass
	pass string
	// insecureAuth advertises AUTH before TLS.
	insecureAuth bool
	// echoAuth refuses every AUTH with a reply that echoes the
	// credentials as the client encoded them (base64 of "\x00user\x00pass").
	echoAuth bool
}

func startSMTP(t *testing.T, o smtpServerOpts) *smtpServer {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &smtpServer{addr: l.Addr().String(), port: l.Addr().(*net.TCPAddr).Port, msgs: make(chan received, 10)}
	srv := smtp.NewServer(smtp.BackendFunc(func(c *smtp.Conn) (smtp.Session, error) {
		return &smtpSession{srv: s, conn: c, opts: o}, nil
	}))
	srv.Domain = "127.0.0.1"
	srv.TLSConfig = o.tls
	srv.AllowInsecureAuth = o.insecureAuth
	srv.ReadTimeout = 10 * time.Second
	srv.WriteTimeout = 10 * time.Second
	srv.ErrorLog = log.New(io.Discard, "", 0)
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

type smtpSession struct {
	srv  *smtpServer
	conn *smtp.Conn
	opts smtpServerOpts
	msg  received
}

func (s *smtpSession) AuthMechanisms() []string {
	if s.opts.user == "" {
		return nil
	}
	return []string{sasl.Plain}
}

func (s *smtpSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		s.srv.mu.Lock()
		s.srv.auths++
		s.srv.mu.Unlock()
		if s.opts.echoAuth {
			enc := base64.StdEncoding.EncodeToString([]byte("\x00" + user + "\x00" + pass))
			return &smtp.SMTPError{Code: 535, EnhancedCode: smtp.EnhancedCode{5, 7, 8}, Message: "bad credentials " + enc}
		}
		if user != s.opts.user || pass != s.opts.pass {
			return errors.New("invalid credentials")
		}
		s.msg.authUser, s.msg.authPass = user, pass
		return nil
	}), nil
}

func (s *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if s.opts.user != "" && s.msg.authUser == "" {
		return smtp.ErrAuthRequired
	}
	s.msg.from = from
	return nil
}

func (s *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s.msg.to = append(s.msg.to, to)
	return nil
}

func (s *smtpSession) Data(r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	m := s.msg
	m.data = b
	_, m.tls = s.conn.TLSConnectionState()
	s.srv.msgs <- m
	return nil
}

func (s *smtpSession) Reset()        { s.msg = received{authUser: s.msg.authUser, authPass: s.msg.authPass} }
func (s *smtpSession) Logout() error { return nil }

// decodeMail parses a message and returns its headers and decoded text body.
func decodeMail(t *testing.T, data []byte) (mail.Header, string) {
	t.Helper()
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		t.Fatalf("parse message: %v\n%s", err, data)
	}
	var body io.Reader = m.Body
	if strings.EqualFold(m.Header.Get("Content-Transfer-Encoding"), "quoted-printable") {
		body = quotedprintable.NewReader(m.Body)
	}
	b, err := io.ReadAll(body)
	if err != nil {
		t.Fatal(err)
	}
	return m.Header, string(b)
}

func TestEmailArrivesAtLocalSMTPServer(t *testing.T) {
	t.Parallel()
	cert, pool := testCert(t)
	tests := []struct {
		name     string
		server   smtpServerOpts
		startTLS bool
		user     string
		pass     string
		wantTLS  bool
	}{
		{name: "plain server, opportunistic STARTTLS, no auth", server: smtpServerOpts{}},
		{
			name:     "mandatory STARTTLS with AUTH PLAIN",
			server:   smtpServerOpts{tls: &tls.Config{Certificates: []tls.Certificate{cert}}, user: "alerts", pass: "smtp-s3cret"},
			startTLS: true, user: "alerts", pass: "smtp-s3cret", wantTLS: true,
		},
		{
			name:     "opportunistic STARTTLS upgrades when offered",
			server:   smtpServerOpts{tls: &tls.Config{Certificates: []tls.Certificate{cert}}},
			startTLS: false, wantTLS: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startSMTP(t, tt.server)
			now := time.Date(2025, 3, 4, 6, 0, 0, 0, time.UTC)
			sink, err := NewEmailSink(EmailSinkParams{
				Host: "127.0.0.1", Port: srv.port, Username: tt.user, Password: tt.pass,
				From: "oncesync@example.com", To: []string{"ops@example.com", "owner@example.com"},
				StartTLS: tt.startTLS, TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
				Clock: clock.NewFake(now),
			})
			if err != nil {
				t.Fatal(err)
			}
			a := testAlert()
			if err := sink.Send(context.Background(), a); err != nil {
				t.Fatalf("Send: %v", err)
			}
			var got received
			select {
			case got = <-srv.msgs:
			case <-time.After(5 * time.Second):
				t.Fatal("no message arrived")
			}
			if got.tls != tt.wantTLS {
				t.Errorf("TLS = %v, want %v", got.tls, tt.wantTLS)
			}
			if got.authUser != tt.user || got.authPass != tt.pass {
				t.Errorf("AUTH = %q/%q, want %q/%q", got.authUser, got.authPass, tt.user, tt.pass)
			}
			if got.from != "oncesync@example.com" || strings.Join(got.to, ",") != "ops@example.com,owner@example.com" {
				t.Errorf("envelope from %q to %q", got.from, got.to)
			}
			h, body := decodeMail(t, got.data)
			if s := h.Get("Subject"); s != "[oncesync critical] circuit_breaker_tripped: acme/contacts-to-brevo" {
				t.Errorf("Subject = %q", s)
			}
			if id := h.Get("Message-Id"); id != "<"+a.ID+"@oncesync>" {
				t.Errorf("Message-ID = %q", id)
			}
			if d, err := h.Date(); err != nil || !d.Equal(now) {
				t.Errorf("Date = %v, %v; want %v", d, err, now)
			}
			if ct := h.Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
				t.Errorf("Content-Type = %q", ct)
			}
			for _, want := range []string{
				"What happened: " + a.WhatHappened,
				"Next step: " + a.NextStep,
				"Owner: you",
				"Workspace: acme",
				"Sync: contacts-to-brevo",
				"Link: " + a.Link,
				a.ID,
			} {
				if !strings.Contains(body, want) {
					t.Errorf("body lacks %q:\n%s", want, body)
				}
			}
		})
	}
}

func TestEmailFailuresHideSecrets(t *testing.T) {
	t.Parallel()
	const pass = "smtp-pa55word"
	tests := []struct {
		name     string
		server   smtpServerOpts
		startTLS bool
		want     string
	}{
		{
			name:     "mandatory STARTTLS but server offers none",
			server:   smtpServerOpts{},
			startTLS: true, want: "STARTTLS",
		},
		{
			// The server advertises AUTH PLAIN in clear: the password must not be sent.
			name:   "AUTH PLAIN offered without TLS",
			server: smtpServerOpts{user: "alerts@example.com", pass: pass, insecureAuth: true},
			want:   "auth",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := startSMTP(t, tt.server)
			sink, err := NewEmailSink(EmailSinkParams{
				Host: "127.0.0.1", Port: srv.port, Username: "alerts@example.com", Password: pass,
				From: "oncesync@example.com", To: []string{"ops@example.com"}, StartTLS: tt.startTLS,
			})
			if err != nil {
				t.Fatal(err)
			}
			err = sink.Send(context.Background(), testAlert())
			if err == nil {
				t.Fatal("Send succeeded")
			}
			t.Logf("error: %v", err)
			if !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tt.want)) {
				t.Errorf("error %q does not mention %q", err, tt.want)
			}
			for _, s := range []string{pass, "alerts@example.com", "ops@example.com", "oncesync@example.com"} {
				if strings.Contains(err.Error(), s) {
					t.Errorf("error %q leaks %q", err, s)
				}
			}
			srv.mu.Lock()
			auths := srv.auths
			srv.mu.Unlock()
			if auths != 0 {
				t.Errorf("the password was sent to the server %d times", auths)
			}
			select {
			case m := <-srv.msgs:
				t.Errorf("a message was delivered: %s", m.data)
			default:
			}
		})
	}
}

// TestEmailRefusedAuthHidesEncodedPassword: a server refusing AUTH with
// a reply that echoes the client's (base64) credentials must not put the
// password, so encoded, in the error that is logged.
func TestEmailRefusedAuthHidesEncodedPassword(t *testing.T) {
	t.Parallel()
	cert, pool := testCert(t)
	const user, pass = "alerts", "smtp-pa55word-echo"
	srv := startSMTP(t, smtpServerOpts{tls: &tls.Config{Certificates: []tls.Certificate{cert}}, user: user, pass: pass, echoAuth: true})
	sink, err := NewEmailSink(EmailSinkParams{
		Host: "127.0.0.1", Port: srv.port, Username: user, Password: pass,
		From: "oncesync@example.com", To: []string{"ops@example.com"},
		StartTLS: true, TLSConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = sink.Send(context.Background(), testAlert())
	if err == nil {
		t.Fatal("Send succeeded")
	}
	if !strings.Contains(err.Error(), "535") {
		t.Errorf("error %q does not say the server refused", err)
	}
	enc := base64.StdEncoding.EncodeToString([]byte("\x00" + user + "\x00" + pass))
	for _, leak := range []string{pass, enc, base64.StdEncoding.EncodeToString([]byte(pass))} {
		if strings.Contains(err.Error(), leak) {
			t.Errorf("error %q shows %q", err, leak)
		}
	}
}

func TestEmailHangingServerHonoursContext(t *testing.T) {
	t.Parallel()
	// Accepts connections and never greets.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			accepted <- c
		}
	}()
	sink, err := NewEmailSink(EmailSinkParams{
		Host: "127.0.0.1", Port: l.Addr().(*net.TCPAddr).Port, From: "a@example.com", To: []string{"b@example.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- sink.Send(ctx, testAlert()) }()
	select {
	case c := <-accepted:
		defer c.Close()
	case <-time.After(5 * time.Second):
		t.Fatal("the sink never connected")
	}
	cancel() // the sink is now waiting for a greeting that never comes
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Send to a silent server succeeded")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Send ignored ctx cancellation")
	}
}

func TestNewEmailSinkValidates(t *testing.T) {
	t.Parallel()
	tests := []EmailSinkParams{
		{Port: 25, From: "a@example.com", To: []string{"b@example.com"}},
		{Host: "h", Port: 70000, From: "a@example.com", To: []string{"b@example.com"}},
		{Host: "h", From: "a@example.com"},
		{Host: "h", To: []string{"b@example.com"}},
	}
	for i, p := range tests {
		if _, err := NewEmailSink(p); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("case %d: err = %v, want ErrInvalidConfig", i, err)
		}
	}
}
