package alert

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// otherOrigin is where a redirect points; it must receive nothing.
func otherOrigin(t *testing.T) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestWebhookSinkDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	for _, status := range []int{http.StatusTemporaryRedirect, http.StatusPermanentRedirect, http.StatusFound} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			other, leaked := otherOrigin(t)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+"/steal", status)
			}))
			t.Cleanup(srv.Close)
			// A caller's client must not be able to bring redirects back.
			// Its own transport: the default one's idle connections are
			// closed by every other test's httptest server on Close, which
			// cut this request now and then (CI, 2026-12-07).
			client := &http.Client{Transport: &http.Transport{}}
			sink, err := NewWebhookSink(WebhookSinkParams{URL: srv.URL + "/hook?token=T0KEN", Secret: "whsec-s3cret", Client: client})
			if err != nil {
				t.Fatal(err)
			}
			err = sink.Send(context.Background(), testAlert())
			if !errors.Is(err, ErrPermanent) || !strings.Contains(err.Error(), "redirect") {
				t.Errorf("Send = %v, want a permanent redirect failure", err)
			}
			if n := leaked.Load(); n != 0 {
				t.Errorf("the other origin received %d requests, want 0", n)
			}
			if err != nil && (strings.Contains(err.Error(), "T0KEN") || strings.Contains(err.Error(), "s3cret")) {
				t.Errorf("error %q leaks the URL or the secret", err)
			}
		})
	}
}

func TestSentrySinkDoesNotFollowRedirects(t *testing.T) {
	t.Parallel()
	other, leaked := otherOrigin(t)
	dsn, got := sentryServer(t, func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, other.URL+r.URL.Path, http.StatusTemporaryRedirect)
	})
	sink, err := NewSentrySink(SentrySinkParams{DSN: dsn})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sink.Close(context.Background()) })
	err = sink.Send(context.Background(), testAlert())
	if err == nil || !strings.Contains(err.Error(), "redirect") {
		t.Errorf("Send = %v, want a redirect failure", err)
	}
	if n := leaked.Load(); n != 0 {
		t.Errorf("the other origin received %d requests (with X-Sentry-Auth and the event), want 0", n)
	}
	if len(got) != 1 {
		t.Errorf("%d envelopes reached Sentry, want 1", len(got))
	}
}
