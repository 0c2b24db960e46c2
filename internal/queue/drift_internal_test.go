package queue

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination/webhook"
	"github.com/oncesync/oncesync/internal/lease"
	"github.com/oncesync/oncesync/internal/source/file"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestWorkerKeepsThePublishedDefinitions: a worker started with another
// config file than serve's used to publish its own definitions over
// serve's, so the sync page showed the worker's mapping while serve queued
// runs with its own. A worker now publishes only the syncs the store does
// not have, and warns about those it defines otherwise.
func TestWorkerKeepsThePublishedDefinitions(t *testing.T) {
	t.Parallel()
	b := setup(t)
	if err := b.svc.Publish(b.ctx); err != nil {
		t.Fatal(err)
	}
	published, err := b.st.GetSync(b.ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	other := *b.cfg
	other.Syncs = append([]config.Sync(nil), b.cfg.Syncs...)
	other.Syncs[0].Destination.Spec = &webhook.Config{URL: "http://127.0.0.1:2/elsewhere"}
	// b's schedule alone differs: the fingerprint leaves it out, so its
	// runs are not refused, and the warning must not name it.
	other.Syncs[1].Schedule = "*/7 * * * *"
	other.Syncs = append(other.Syncs, config.Sync{ID: "c", Workspace: "w", Source: config.Source{Type: "csv", Spec: &file.Config{Path: "c.csv"}, PageSize: 10},
		Destination: config.Destination{Type: "webhook", Spec: &webhook.Config{URL: "http://127.0.0.1:1/hook"}, Mode: "single", Concurrency: 1, Timeout: time.Second}})
	var logs testenv.Output
	w, err := New(b.ctx, Params{Config: &other, Store: b.st, Leases: &lease.SQL{Store: b.st}, Clock: b.clk,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.b.close() })
	if err := w.Publish(b.ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := b.st.GetSync(b.ctx, "a"); err != nil || got.Definition != published.Definition || !got.ChangedAt.Equal(published.ChangedAt) {
		t.Fatalf("sync a after the worker's publish: %v\n%s\nwant serve's\n%s", err, got.Definition, published.Definition)
	}
	if _, err := b.st.GetSync(b.ctx, "c"); err != nil {
		t.Fatalf("a sync only the worker has is not published: %v", err)
	}
	if out := logs.String(); !strings.Contains(out, "config_drift") || !strings.Contains(out, "syncs=a ") {
		t.Fatalf("no warning naming sync a alone:\n%s", out)
	}
}
