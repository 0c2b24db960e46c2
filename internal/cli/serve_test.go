package cli

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/sqlite"
	"github.com/oncesync/oncesync/internal/web"
)

// TestWebDeadLetters: the sync page lists a sync's parked partition work,
// and re-queueing it queues a new run of the sync once, on the real queue
// (River beside the SQLite store), as `oncesync deadletter requeue` does.
func TestWebDeadLetters(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := sqlite.Open(ctx, sqlite.OpenParams{Path: filepath.Join(dir, "s.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	cfg := &config.Config{
		Path: filepath.Join(dir, "oncesync.yaml"), Store: "sqlite://./s.db", Settings: config.Defaults(),
		Syncs: []config.Sync{{ID: "s", Workspace: "w", Source: config.Source{Type: "csv", Spec: &file.Config{Path: "s.csv"}, PageSize: 10},
			Destination: config.Destination{Type: "webhook", Spec: &webhook.Config{URL: "http://127.0.0.1:1/hook"}, Mode: "single", Concurrency: 1}}},
	}
	svc, err := queue.New(ctx, queue.Params{Config: cfg, Store: st, EnqueueOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = svc.Shutdown(ctx) }()
	d, err := st.AddDeadLetter(ctx, barrier.DeadLetter{SyncID: "s", RunID: 7, Partition: 2, Key: "k",
		Reason: barrier.ReasonSourceChanged, Attempts: 4})
	if err != nil {
		t.Fatal(err)
	}
	other, err := st.AddDeadLetter(ctx, barrier.DeadLetter{SyncID: "t", RunID: 8, Partition: 1, Key: "k2",
		Reason: barrier.ReasonSourceChanged, Attempts: 4})
	if err != nil {
		t.Fatal(err)
	}
	list, requeue := webDeadLetters(st, svc.Enqueue)
	got, err := list(ctx, "s")
	if err != nil || len(got) != 1 || got[0].ID != strconv.FormatInt(d.ID, 10) || got[0].RunID != 7 || got[0].Partition != 2 || got[0].Code != barrier.ReasonSourceChanged {
		t.Fatalf("list: %+v %v", got, err)
	}
	// Another sync's entry is not this sync page's to re-queue.
	if err := requeue(ctx, web.RequeueParams{SyncID: "s", ID: strconv.FormatInt(other.ID, 10), By: "ada"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("re-queueing another sync's entry: %v, want not found", err)
	}
	if err := requeue(ctx, web.RequeueParams{SyncID: "s", ID: got[0].ID, By: "ada", Why: "source settled"}); err != nil {
		t.Fatal(err)
	}
	jobs := queuedJobs(t, filepath.Join(dir, "s.db.queue"))
	if len(jobs) != 1 || jobs[0].Kind != queue.KindRunSync || jobs[0].SyncID != "s" || jobs[0].State != "available" {
		t.Fatalf("River's jobs after the requeue: %+v, want one available run of s", jobs)
	}
	if after, _ := list(ctx, "s"); len(after) != 0 {
		t.Fatalf("a re-queued entry is still listed as parked: %+v", after)
	}
	if err := requeue(ctx, web.RequeueParams{SyncID: "s", ID: got[0].ID, By: "ada"}); !errors.Is(err, web.ErrConflict) {
		t.Fatalf("re-queueing twice: %v, want a conflict", err)
	}
	if n := len(queuedJobs(t, filepath.Join(dir, "s.db.queue"))); n != 1 {
		t.Fatalf("%d jobs, want 1", n)
	}
}

// TestWebQueueError: serve tells the web a run of a sync that is in the
// store but not in the config is a conflict with the reason (its page
// shows the sync, so "no such sync" was untrue), and Check and Preview
// say the same.
func TestWebQueueError(t *testing.T) {
	for _, err := range []error{
		webQueueError("gone", fmt.Errorf("enqueue: %w", queue.ErrUnknownSync)),
		func() error { _, err := configured(&config.Config{}, "gone"); return err }(),
	} {
		if !errors.Is(err, web.ErrConflict) || errors.Is(err, store.ErrNotFound) || !strings.Contains(err.Error(), "not in this server's config") {
			t.Errorf("got %v", err)
		}
	}
	if err := webQueueError("x", queue.ErrRunPending); !errors.Is(err, web.ErrConflict) {
		t.Errorf("run pending: %v", err)
	}
	if err := webQueueError("x", nil); err != nil {
		t.Errorf("nil: %v", err)
	}
}

// TestSignInNotice: serve of a config that lets nobody in says so, and what
// to set, next to its start line; a first `oncesync serve` otherwise showed
// a sign-in form that no name passes, with no word why (an independent
// check, 2026-12-04). A config with users says nothing more.
func TestSignInNotice(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		web  config.Web
		want string
	}{
		{config.Web{}, "notice: nobody can sign in to the web UI or call /api/v1 and /metrics: set web.users (or web.oidc) and web.api_tokens"},
		{config.Web{APITokens: []config.APIToken{{Name: "ci", Token: "t"}}}, "notice: nobody can sign in to the web UI (only web.api_tokens are set, for /api/v1 and /metrics): set web.users or web.oidc"},
		{config.Web{Users: map[string]config.User{"ada": {}}}, ""},
		{config.Web{OIDC: &config.OIDC{}}, ""},
	} {
		got := signInNotice(&config.Config{Web: tc.web})
		if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) {
			t.Errorf("web %+v: notice %q, want %q", tc.web, got, tc.want)
		}
	}
}

// TestProbesSendHSTSWhenSecure: with web.secure every response carries HSTS,
// the unauthenticated probes' too (docs/config.md says every response).
func TestProbesSendHSTSWhenSecure(t *testing.T) {
	t.Parallel()
	for _, secure := range []bool{true, false} {
		rec := httptest.NewRecorder()
		daemonMux(nil, prometheus.NewRegistry(), nil, secure).ServeHTTP(rec, httptest.NewRequest("GET", "/healthz", nil))
		if got := rec.Header().Get("Strict-Transport-Security"); rec.Code != 200 || (got != "") != secure {
			t.Errorf("secure %v: /healthz %d, HSTS %q", secure, rec.Code, got)
		}
	}
}

// TestServeListenLinks: serve's --listen is where its alerts link to when
// web.url is unset; without it, web.listen, else the default.
func TestServeListenLinks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, webListen, flag string
		set                   bool
		want, link            string
	}{
		{"flag over web.listen", "127.0.0.1:8080", "127.0.0.1:18710", true, "127.0.0.1:18710", "http://127.0.0.1:18710/syncs/s1"},
		{"web.listen", "127.0.0.1:9090", "", false, "127.0.0.1:9090", "http://127.0.0.1:9090/syncs/s1"},
		{"default", "", "", false, config.DefaultListen, "http://" + config.DefaultListen + "/syncs/s1"},
	} {
		cfg := &config.Config{Web: config.Web{Listen: tc.webListen}}
		if got := serveListen(cfg, tc.flag, tc.set); got != tc.want {
			t.Errorf("%s: listens on %q, want %q", tc.name, got, tc.want)
		}
		if got := app.SyncLink(cfg)("s1"); got != tc.link {
			t.Errorf("%s: alerts link to %q, want %q", tc.name, got, tc.link)
		}
	}
}

// TestListenAdvice: an address another process holds says what to do.
func TestListenAdvice(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	_, err = net.Listen("tcp", ln.Addr().String())
	got := listenAdvice(ln.Addr().String(), err)
	if got == nil || !strings.Contains(got.Error(), "another process already listens on "+ln.Addr().String()) || !errors.Is(got, syscall.EADDRINUSE) {
		t.Fatalf("listenAdvice = %v", got)
	}
	if other := errors.New("x"); listenAdvice("a", other) != other {
		t.Fatal("another error was changed")
	}
}
