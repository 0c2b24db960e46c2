package alert

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/testenv"
)

// captured is one request received by a test webhook endpoint.
type captured struct {
	header http.Header
	body   []byte
}

// webhookServer records requests and answers status.
func webhookServer(t *testing.T, status int) (*httptest.Server, chan captured) {
	t.Helper()
	got := make(chan captured, 100)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- captured{header: r.Header.Clone(), body: body}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, got
}

func TestWebhookSignatureVerifiesWithStandardWebhooksLibrary(t *testing.T) {
	t.Parallel()
	keyBytes := []byte("0123456789abcdef0123456789abcdef")
	whsec := "whsec_" + base64.StdEncoding.EncodeToString(keyBytes)
	tests := []struct {
		name     string
		secret   string
		verifier func(t *testing.T) *standardwebhooks.Webhook
		wrong    func(t *testing.T) *standardwebhooks.Webhook
	}{
		{
			name:   "whsec base64 secret",
			secret: whsec,
			verifier: func(t *testing.T) *standardwebhooks.Webhook {
				wh, err := standardwebhooks.NewWebhook(whsec)
				if err != nil {
					t.Fatal(err)
				}
				return wh
			},
			wrong: func(t *testing.T) *standardwebhooks.Webhook {
				// The undecoded secret as raw bytes must not verify: the sink decodes whsec_.
				wh, _ := standardwebhooks.NewWebhookRaw([]byte(whsec))
				return wh
			},
		},
		{
			name:   "raw secret",
			secret: "plain-s3cret",
			verifier: func(t *testing.T) *standardwebhooks.Webhook {
				wh, _ := standardwebhooks.NewWebhookRaw([]byte("plain-s3cret"))
				return wh
			},
			wrong: func(t *testing.T) *standardwebhooks.Webhook {
				wh, _ := standardwebhooks.NewWebhookRaw([]byte("other-secret"))
				return wh
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, got := webhookServer(t, http.StatusNoContent)
			// A fake clock set near now, so the library's 5-minute tolerance check applies.
			now := time.Now().Add(-30 * time.Second).Truncate(time.Second)
			sink, err := NewWebhookSink(WebhookSinkParams{URL: srv.URL + "/hook", Secret: tt.secret, Clock: clock.NewFake(now)})
			if err != nil {
				t.Fatal(err)
			}
			a := testAlert()
			if err := sink.Send(context.Background(), a); err != nil {
				t.Fatalf("Send: %v", err)
			}
			req := <-got

			if err := tt.verifier(t).Verify(req.body, req.header); err != nil {
				t.Errorf("official verifier rejected the signature: %v", err)
			}
			if err := tt.wrong(t).VerifyIgnoringTimestamp(req.body, req.header); err == nil {
				t.Error("a verifier with the wrong key accepted the signature")
			}
			tampered := append([]byte(nil), req.body...)
			tampered[len(tampered)-2] ^= 1
			if err := tt.verifier(t).VerifyIgnoringTimestamp(tampered, req.header); err == nil {
				t.Error("verifier accepted a tampered body")
			}
			if id := req.header.Get("webhook-id"); id != a.ID {
				t.Errorf("webhook-id = %q, want alert id %q", id, a.ID)
			}
			if ts := req.header.Get("webhook-timestamp"); ts != strconv.FormatInt(now.Unix(), 10) {
				t.Errorf("webhook-timestamp = %q, want %d (from the clock)", ts, now.Unix())
			}
			if sig := req.header.Get("webhook-signature"); !strings.HasPrefix(sig, "v1,") {
				t.Errorf("webhook-signature = %q, want v1,...", sig)
			}
			if ct := req.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type = %q", ct)
			}

			var p WebhookPayload
			if err := json.Unmarshal(req.body, &p); err != nil {
				t.Fatalf("body: %v", err)
			}
			want := WebhookPayload{
				Type: "alert.circuit_breaker_tripped", Timestamp: a.At,
				Data: WebhookData{ID: a.ID, Kind: a.Kind, Severity: a.Severity, Workspace: a.Workspace, Sync: a.SyncID,
					WhatHappened: a.WhatHappened, NextStep: a.NextStep, Owner: "you", Link: a.Link, At: a.At},
			}
			if p != want {
				t.Errorf("payload\n got %+v\nwant %+v", p, want)
			}
		})
	}
}

func TestWebhookWithoutSecretIsUnsigned(t *testing.T) {
	t.Parallel()
	srv, got := webhookServer(t, http.StatusOK)
	sink, err := NewWebhookSink(WebhookSinkParams{URL: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	a := testAlert()
	if err := sink.Send(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	req := <-got
	if req.header.Get("webhook-signature") != "" {
		t.Error("unsigned sink sent a signature")
	}
	if req.header.Get("webhook-id") != a.ID || req.header.Get("webhook-timestamp") == "" {
		t.Errorf("headers = %v", req.header)
	}
}

func TestWebhookStatusClassification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status    int
		wantErr   bool
		permanent bool
	}{
		{http.StatusOK, false, false},
		{http.StatusAccepted, false, false},
		{http.StatusTooManyRequests, true, false},
		{http.StatusRequestTimeout, true, false},
		{http.StatusInternalServerError, true, false},
		{http.StatusServiceUnavailable, true, false},
		{http.StatusBadRequest, true, true},
		{http.StatusUnauthorized, true, true},
		{http.StatusNotFound, true, true},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status), func(t *testing.T) {
			t.Parallel()
			srv, _ := webhookServer(t, tt.status)
			sink, err := NewWebhookSink(WebhookSinkParams{URL: srv.URL, Secret: "s"})
			if err != nil {
				t.Fatal(err)
			}
			err = sink.Send(context.Background(), testAlert())
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got := errors.Is(err, ErrPermanent); got != tt.permanent {
				t.Errorf("permanent = %v, want %v (err %v)", got, tt.permanent, err)
			}
			if err != nil && !strings.Contains(err.Error(), strconv.Itoa(tt.status)) {
				t.Errorf("error %q does not name the status", err)
			}
		})
	}
}

func TestWebhookErrorsHideURLAndSecret(t *testing.T) {
	t.Parallel()
	const token, secret = "tok-in-path-5ecret", "whsec-s3cret-value"
	sink, err := NewWebhookSink(WebhookSinkParams{URL: "http://" + testenv.RefusedAddr(t) + "/hooks/" + token + "?k=" + token, Secret: secret})
	if err != nil {
		t.Fatal(err)
	}
	err = sink.Send(context.Background(), testAlert())
	if err == nil {
		t.Fatal("Send to a closed port succeeded")
	}
	if errors.Is(err, ErrPermanent) {
		t.Errorf("connection refused must be retryable: %v", err)
	}
	for _, s := range []string{token, secret} {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q leaks %q", err, s)
		}
	}
	if !strings.Contains(err.Error(), "refused") {
		t.Errorf("error %q lost its cause", err)
	}

	for _, bad := range []string{"", "ftp://x/" + token, "/relative/" + token, "http://%zz/" + token} {
		_, err := NewWebhookSink(WebhookSinkParams{URL: bad})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("NewWebhookSink(%q) err = %v, want ErrInvalidConfig", bad, err)
		}
		if err != nil && strings.Contains(err.Error(), token) {
			t.Errorf("error %q leaks the URL", err)
		}
	}
}

func TestWebhookKey(t *testing.T) {
	t.Parallel()
	tests := []struct{ secret, want string }{
		{"whsec_" + base64.StdEncoding.EncodeToString([]byte("key")), "key"},
		{"whsec_not base64!", "whsec_not base64!"},
		{"raw", "raw"},
	}
	for _, tt := range tests {
		if got := string(webhookKey(tt.secret)); got != tt.want {
			t.Errorf("webhookKey(%q) = %q, want %q", tt.secret, got, tt.want)
		}
	}
}
