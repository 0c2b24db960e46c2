package queue_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/queue"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestWorkerWithAnotherConfigWritesNothing is a fleet deployed by hand
// (docs/guide.md#one-config-on-every-machine): PostgreSQL and Redis, runs
// queued by a process with the config of record, taken by a worker whose
// config file differs in one thing only: the mapping, the API key, the
// redis_namespace. Each such worker refuses the run, which ends failed
// with config_drift naming the part that differs, and writes nothing. A
// worker with the same config then runs it: every value at the destination
// is the source's, each written once. Before the fix the drifted worker
// ran the sync with its own mapping (every contact's FIRSTNAME its id).
func TestWorkerWithAnotherConfigWritesNothing(t *testing.T) {
	t.Parallel()
	const records = 120
	dbURL := testDatabaseURL(t)
	redisURL := testRedisURL(t)
	storeURL, _ := newSchema(t, dbURL)
	e := setupEnv(t, envParams{syncs: 1, records: records, pageSize: 40, schedule: "",
		settings: "{lease_ttl: 5s, lease_renew: 1s}", store: storeURL, redis: redisURL, prefix: "od" + randHex(3) + "-"})
	syncID := e.syncID(0)
	orig, err := os.ReadFile(e.config)
	if err != nil {
		t.Fatal(err)
	}

	// The process of record: it queues runs as serve's "run now" does.
	st, svc := e.enqueuer(t)
	runOnce := func(t *testing.T) store.Run { t.Helper(); return e.runNow(t, st, svc, syncID) }

	for _, tc := range []struct {
		name   string
		edit   func(string) string
		key    string
		differ string
	}{
		{"mapping", func(c string) string { return strings.Replace(c, "FIRSTNAME: first_name", "FIRSTNAME: id", 1) }, apiKey, "mapping"},
		{"api key", func(c string) string { return c }, "xkeysib-another-account-0123456789", "destination"},
		{"redis_namespace", func(c string) string { return "redis_namespace: elsewhere\n" + c }, apiKey, "redis_namespace"},
	} {
		drifted := filepath.Join(e.dir, "drifted.yaml")
		if err := os.WriteFile(drifted, []byte(tc.edit(string(orig))), 0o600); err != nil {
			t.Fatal(err)
		}
		w := testenv.Start(t, testenv.StartParams{Binary: binary, Dir: e.dir, Name: "worker (" + tc.name + ")",
			Args: append([]string{"worker", "--workers", "1", "--config", drifted, "--log-level", "info"}, daemonArgs...),
			Env:  []string{"BREVO_API_KEY=" + tc.key}})
		started(t, w)
		run := runOnce(t)
		e.stopAll(t, w)
		if run.State != store.RunFailed || run.FailureCode != string(failure.ConfigDrift) {
			t.Fatalf("%s drift: the run is %s (%s: %q), want failed with config_drift\n%s", tc.name, run.State, run.FailureCode, run.FailureDetail, w.Out.String())
		}
		if !strings.Contains(run.FailureDetail, tc.differ+" differ") || strings.Contains(run.FailureDetail, tc.key) {
			t.Errorf("%s drift: detail %q should name %q and no secret", tc.name, run.FailureDetail, tc.differ)
		}
		if s := e.fake.Stats(); s.Contacts != 0 || s.ContactsWritten != 0 {
			t.Fatalf("%s drift: the worker wrote %d contacts with its own config", tc.name, s.ContactsWritten)
		}
	}

	// A worker with the config of record runs the sync.
	w := e.startDaemon("worker (same config)", "worker", 1)
	if run := runOnce(t); run.State != store.RunSucceeded {
		t.Fatalf("the run on a worker with the same config is %s (%s: %q)", run.State, run.FailureCode, run.FailureDetail)
	}
	e.stopAll(t, w)
	e.checkDelivered(t)
	for i := 1; i <= records; i++ {
		c, ok := e.fake.Contact(fmt.Sprintf("%s-person%06d@example.com", syncID, i))
		if !ok || c.Attributes["FIRSTNAME"] != fmt.Sprintf("First%d", i) {
			t.Fatalf("contact %d at the destination: %v %+v, want FIRSTNAME First%d", i, ok, c.Attributes, i)
		}
	}
	e.checkNoSecrets(t)
}

// enqueuer opens the env's store and an enqueue-only queue service on its
// config: a process that queues runs as serve's "run now" does.
func (e *env) enqueuer(t *testing.T) (store.Store, *queue.Service) {
	t.Helper()
	cfg, err := config.Load(e.config, func(k string) (string, bool) {
		if k == "BREVO_API_KEY" {
			return apiKey, true
		}
		return os.LookupEnv(k)
	}, connector.Default().Kinds())
	if err != nil {
		t.Fatal(err)
	}
	st, err := app.OpenStore(t.Context(), cfg, clock.Real{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	svc, err := queue.New(t.Context(), queue.Params{Config: cfg, Store: st, EnqueueOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Shutdown(context.Background()) })
	return st, svc
}

// runNow queues a run of syncID and returns the run that ends it.
func (e *env) runNow(t *testing.T, st store.Store, svc *queue.Service, syncID string) store.Run {
	t.Helper()
	before := runsOf(t, st, syncID)
	if _, err := svc.Enqueue(t.Context(), syncID, queue.ReasonManual); err != nil {
		t.Fatal(err)
	}
	var last store.Run
	waitFor(t, 60*time.Second, "the queued run of "+syncID+" to end", func() bool {
		runs := runsOf(t, st, syncID)
		if len(runs) <= len(before) {
			return false
		}
		last = runs[len(runs)-1]
		return last.State != store.RunRunning
	})
	return last
}
