package example_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/destination/destinationtest"
	"github.com/oncesync/oncesync/internal/destination/example"
	"github.com/oncesync/oncesync/internal/runner"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/testenv"
)

const token = "tok-EXAMPLE-s3cret"

// recordStore is the example's server: PUT /records/{key} with the bearer
// token stores the body; faults as the acceptance suite asks.
type recordStore struct {
	srv      *httptest.Server
	faults   destinationtest.Faults
	refuse   map[string]bool
	requests atomic.Int64
	errors5  atomic.Int64

	mu     sync.Mutex
	stored map[string]json.RawMessage
}

func newRecordStore(t *testing.T, f destinationtest.Faults) *recordStore {
	rs := &recordStore{faults: f, refuse: map[string]bool{}, stored: map[string]json.RawMessage{}}
	for _, r := range f.Refuse {
		rs.refuse[r.Key] = true
	}
	rs.srv = httptest.NewServer(http.HandlerFunc(rs.serve))
	t.Cleanup(rs.srv.Close)
	return rs
}

func (rs *recordStore) serve(w http.ResponseWriter, r *http.Request) {
	n := rs.requests.Add(1)
	body, err := io.ReadAll(r.Body)
	key, ok := strings.CutPrefix(r.URL.Path, "/records/")
	switch {
	case rs.faults.RedirectTo != "":
		http.Redirect(w, r, rs.faults.RedirectTo+r.URL.RequestURI(), http.StatusTemporaryRedirect)
	case rs.faults.RateLimited > 0:
		w.Header().Set("Retry-After", strconv.Itoa(int(rs.faults.RateLimited/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
	case rs.faults.Unauthorized || r.Header.Get("Authorization") != "Bearer "+token:
		w.WriteHeader(http.StatusUnauthorized)
	case rs.faults.Unavailable || (rs.faults.Flaky && n%2 == 1):
		rs.errors5.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	case err != nil || !ok || r.Method != http.MethodPut || !json.Valid(body):
		w.WriteHeader(http.StatusBadRequest)
	case rs.refuse[key]:
		w.WriteHeader(http.StatusUnprocessableEntity)
		io.WriteString(w, `{"error":"refused"}`)
	default:
		rs.mu.Lock()
		rs.stored[key] = body
		rs.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}
}

func (rs *recordStore) count() int64 {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return int64(len(rs.stored))
}

// TestAcceptance: the example passes the suite every destination passes.
func TestAcceptance(t *testing.T) {
	destinationtest.Run(t, destinationtest.Harness{
		Setup: func(t *testing.T, cfg destinationtest.Config) destinationtest.Target {
			rs := newRecordStore(t, cfg.Faults)
			base := rs.srv.URL
			if cfg.Faults.Refused {
				base = "http://" + testenv.RefusedAddr(t)
			}
			d, err := example.New(example.Params{URL: base, Token: token, Clock: cfg.Clock, Sleep: cfg.Sleep, MaxRetries: cfg.MaxRetries})
			if err != nil {
				t.Fatal(err)
			}
			return destinationtest.Target{Dest: d, Secrets: []string{token}, Requests: rs.requests.Load,
				ServerErrors: rs.errors5.Load, Stored: rs.count}
		},
	})
}

// TestRegisteredConnectorRunsASync: registered in a registry (the one line
// a connector adds to internal/connector), the example is configured from
// YAML, checked, redacted and built by the product's own wiring, and a run
// delivers every row once, with the mapped values.
func TestRegisteredConnectorRunsASync(t *testing.T) {
	reg := connector.Default().WithDestinations(example.Kind{})
	rs := newRecordStore(t, destinationtest.Faults{})
	dir := t.TempDir()
	var csv strings.Builder
	csv.WriteString("id,email,name\n")
	for i := 1; i <= 120; i++ {
		csv.WriteString(strconv.Itoa(i) + ",u" + strconv.Itoa(i) + "@example.com,Name" + strconv.Itoa(i) + "\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "people.csv"), []byte(csv.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := `store: sqlite://./oncesync.db
syncs:
  - id: people
    source: {type: csv, path: people.csv, identity: id, page_size: 50}
    destination: {type: example, url: "` + rs.srv.URL + `", token: "${EXAMPLE_TOKEN}", concurrency: 2}
    mapping:
      fields: {who: name, mail: email}
`
	env := func(k string) (string, bool) {
		if k == "EXAMPLE_TOKEN" {
			return token, true
		}
		return "", false
	}
	path := filepath.Join(dir, "oncesync.yaml")
	// Unregistered, the type is refused with the registered ones named.
	if _, err := config.Parse(path, []byte(yaml), env, connector.Default().Kinds()); err == nil ||
		!strings.Contains(err.Error(), `unknown destination type "example" (valid: brevo, webhook, hubspot, klaviyo)`) {
		t.Fatalf("without the registration: %v", err)
	}
	// Its own checks run: a missing token is reported at its line.
	if _, err := config.Parse(path, []byte(strings.Replace(yaml, `token: "${EXAMPLE_TOKEN}", `, "", 1)), env, reg.Kinds()); err == nil ||
		!strings.Contains(err.Error(), "syncs[0].destination.token: is required for example destinations") {
		t.Fatalf("without a token: %v", err)
	}
	cfg, err := config.Parse(path, []byte(yaml), env, reg.Kinds())
	if err != nil {
		t.Fatal(err)
	}
	sc := &cfg.Syncs[0]
	if sc.Destination.Mode != config.ModeSingle {
		t.Fatalf("mode %q, want the kind's default single", sc.Destination.Mode)
	}
	def, err := sc.DefinitionJSON()
	if err != nil || strings.Contains(def, token) || !strings.Contains(def, `"destination":{"type":"example","mode":"single","concurrency":2,"timeout":"30s","url":"`) {
		t.Fatalf("definition %s, %v", def, err)
	}
	found := false
	for _, s := range cfg.SecretValues() {
		found = found || s == token
	}
	if !found {
		t.Fatal("the token (from ${EXAMPLE_TOKEN}) is not among the secrets scrubbed from output")
	}

	ctx := context.Background()
	a, err := app.Open(ctx, app.OpenParams{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(ctx)
	built, err := app.Build(cfg, sc, app.Options{Connectors: reg})
	if err != nil {
		t.Fatal(err)
	}
	defer built.Close()
	run, err := runner.Run(ctx, runner.Params{Store: a.Store, Leases: a.Leases, Source: built.Source,
		Destination: built.Destination, Sync: built.Sync, LeaseTTL: cfg.Settings.LeaseTTL, LeaseRenew: cfg.Settings.LeaseRenew})
	if err != nil || run.State != store.RunSucceeded || run.Written != 120 {
		t.Fatalf("run %+v, %v", run, err)
	}
	if n := rs.count(); n != 120 {
		t.Fatalf("the store holds %d records, want 120", n)
	}
	rs.mu.Lock()
	defer rs.mu.Unlock()
	for _, body := range rs.stored {
		var v map[string]any
		if err := json.Unmarshal(body, &v); err != nil || len(v) != 2 || !strings.HasPrefix(v["who"].(string), "Name") || !strings.HasSuffix(v["mail"].(string), "@example.com") {
			t.Fatalf("stored %s: want the mapped fields who and mail only", body)
		}
	}
}
