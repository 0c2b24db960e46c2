package alert

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/testenv"
)

// sentryEnvelope is one envelope received by the fake Sentry endpoint.
type sentryEnvelope struct {
	path   string
	auth   string
	header map[string]any
	items  []sentryItem
}

type sentryItem struct {
	header  map[string]any
	payload map[string]any
}

// parseEnvelope parses Sentry's envelope format: a JSON header line, then
// (item header line, payload line) pairs.
func parseEnvelope(body []byte) (map[string]any, []sentryItem, error) {
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var lines [][]byte
	for sc.Scan() {
		lines = append(lines, append([]byte(nil), sc.Bytes()...))
	}
	if len(lines) < 3 {
		return nil, nil, fmt.Errorf("envelope has %d lines:\n%s", len(lines), body)
	}
	var header map[string]any
	if err := json.Unmarshal(lines[0], &header); err != nil {
		return nil, nil, fmt.Errorf("envelope header: %w", err)
	}
	var items []sentryItem
	for i := 1; i+1 < len(lines); i += 2 {
		var it sentryItem
		if err := json.Unmarshal(lines[i], &it.header); err != nil {
			return nil, nil, fmt.Errorf("item header: %w", err)
		}
		if err := json.Unmarshal(lines[i+1], &it.payload); err != nil {
			return nil, nil, fmt.Errorf("item payload: %w", err)
		}
		items = append(items, it)
	}
	return header, items, nil
}

// sentryServer is a fake Sentry ingest endpoint; handler decides the answer.
func sentryServer(t *testing.T, handler func(w http.ResponseWriter, r *http.Request)) (dsn string, got chan sentryEnvelope) {
	t.Helper()
	got = make(chan sentryEnvelope, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		header, items, err := parseEnvelope(body)
		if err != nil {
			t.Errorf("fake Sentry: %v", err)
		}
		got <- sentryEnvelope{path: r.URL.Path, auth: r.Header.Get("X-Sentry-Auth"), header: header, items: items}
		handler(w, r)
	}))
	t.Cleanup(srv.Close)
	return "http://public@" + strings.TrimPrefix(srv.URL, "http://") + "/1", got
}

func TestSentryEventArrivesViaHTTPTransport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		severity  Severity
		wantLevel string
	}{
		{SeverityCritical, "error"},
		{SeverityWarning, "warning"},
		{SeverityInfo, "info"},
	}
	for _, tt := range tests {
		t.Run(string(tt.severity), func(t *testing.T) {
			t.Parallel()
			dsn, got := sentryServer(t, func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = io.WriteString(w, `{"id":"x"}`)
			})
			sink, err := NewSentrySink(SentrySinkParams{DSN: dsn, Environment: "test"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = sink.Close(context.Background()) })
			a := testAlert()
			a.Severity = tt.severity
			if err := sink.Send(context.Background(), a); err != nil {
				t.Fatalf("Send: %v", err)
			}
			// Send returns after the flush, so the envelope has arrived.
			var env sentryEnvelope
			select {
			case env = <-got:
			default:
				t.Fatal("Send returned before the event reached Sentry")
			}
			if env.path != "/api/1/envelope/" {
				t.Errorf("path = %q", env.path)
			}
			if !strings.Contains(env.auth, "sentry_key=public") {
				t.Errorf("X-Sentry-Auth = %q", env.auth)
			}
			if env.header["event_id"] != a.ID {
				t.Errorf("envelope event_id = %v, want the alert id %s", env.header["event_id"], a.ID)
			}
			if len(env.items) != 1 || env.items[0].header["type"] != "event" {
				t.Fatalf("items = %+v", env.items)
			}
			ev := env.items[0].payload
			if ev["message"] != a.WhatHappened {
				t.Errorf("message = %v", ev["message"])
			}
			if ev["level"] != tt.wantLevel {
				t.Errorf("level = %v, want %s", ev["level"], tt.wantLevel)
			}
			if ev["environment"] != "test" || ev["release"] != "oncesync" {
				t.Errorf("environment/release = %v/%v", ev["environment"], ev["release"])
			}
			tags, _ := ev["tags"].(map[string]any)
			for k, want := range map[string]string{
				"workspace": "acme", "sync": "contacts-to-brevo", "kind": KindCircuitBreakerTripped,
				"severity": string(tt.severity), "owner": "you", "alert_id": a.ID,
			} {
				if tags[k] != want {
					t.Errorf("tag %s = %v, want %q (tags %v)", k, tags[k], want, tags)
				}
			}
			ctxs, _ := ev["contexts"].(map[string]any)
			actx, _ := ctxs["alert"].(map[string]any)
			if actx["next_step"] != a.NextStep || actx["link"] != a.Link {
				t.Errorf("alert context = %v", actx)
			}
		})
	}
}

func TestSentryFailuresAreReported(t *testing.T) {
	t.Parallel()
	t.Run("server error", func(t *testing.T) {
		t.Parallel()
		dsn, got := sentryServer(t, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(http.StatusInternalServerError)
		})
		sink, err := NewSentrySink(SentrySinkParams{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sink.Close(context.Background()) })
		err = sink.Send(context.Background(), testAlert())
		if err == nil || !strings.Contains(err.Error(), "500") {
			t.Fatalf("err = %v, want a 500 failure", err)
		}
		if len(got) != 1 {
			t.Errorf("%d envelopes reached the server, want 1", len(got))
		}
		// A retry of the same alert is sent again (same event id, so Sentry dedups).
		a := testAlert()
		_ = sink.Send(context.Background(), a)
		_ = sink.Send(context.Background(), a)
		if len(got) != 3 {
			t.Errorf("%d envelopes after two retries, want 3", len(got))
		}
	})
	t.Run("connection refused", func(t *testing.T) {
		t.Parallel()
		dsn := "http://public@" + testenv.RefusedAddr(t) + "/1"
		sink, err := NewSentrySink(SentrySinkParams{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sink.Close(context.Background()) })
		err = sink.Send(context.Background(), testAlert())
		if err == nil || !strings.Contains(err.Error(), "refused") {
			t.Fatalf("err = %v, want connection refused", err)
		}
		if strings.Contains(err.Error(), dsn) || strings.Contains(err.Error(), "public@") {
			t.Errorf("error %q leaks the DSN", err)
		}
	})
	t.Run("hanging server", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		dsn, _ := sentryServer(t, func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		})
		t.Cleanup(func() { close(release) })
		sink, err := NewSentrySink(SentrySinkParams{DSN: dsn})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err = sink.Send(ctx, testAlert())
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err = %v, want the deadline", err)
		}
	})
}

func TestNewSentrySinkHidesDSN(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"", "not a dsn s3cret", "https://s3cret@/1", "ftp://s3cret@host/1", "https://s3cret@host/", "http://s3cret@host:%zz/1"} {
		_, err := NewSentrySink(SentrySinkParams{DSN: dsn})
		if !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("DSN %q: err = %v, want ErrInvalidConfig", dsn, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("error %q leaks the DSN", err)
		}
	}
}
