package queue

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRiverUI: River's own UI is served over the queue (serve mounts it at
// /riverui/ behind its sign-in): its page and its job API answer, and the API
// lists the job just queued.
func TestRiverUI(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if _, err := b.svc.Enqueue(b.ctx, "a", ReasonManual); err != nil {
		t.Fatal(err)
	}
	h, err := b.svc.RiverUI(b.ctx, "/riverui")
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	if code, body := get("/riverui/"); code != 200 || !strings.Contains(strings.ToLower(body), "<html") {
		t.Fatalf("/riverui/: %d %.200s", code, body)
	}
	code, body := get("/riverui/api/jobs?state=available&limit=20")
	if code != 200 || !strings.Contains(body, KindRunSync) {
		t.Fatalf("/riverui/api/jobs: %d %.300s", code, body)
	}
}
