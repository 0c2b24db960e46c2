package queue_test

import (
	"encoding/json"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/web"
)

// TestCountersAgree: one source of truth for every counter (docs/guide.md,
// "The sync pages and the API"). A foreground run is SIGKILLed right after
// Brevo applied one of its imports (a page in doubt); serve resumes the
// sync and finishes it, with one e-mail Brevo refuses. Then every place a
// person reads the runs' figures says the same: the store, `oncesync runs`,
// the API's run and sync, and serve's /metrics (the sum of the runs serve
// finished); `oncesync records` lists the refused record by identity.
func TestCountersAgree(t *testing.T) {
	t.Parallel()
	var (
		victim atomic.Pointer[proc]
		writes atomic.Int64
	)
	e := setupEnv(t, envParams{syncs: 1, records: 3000, pageSize: 100, schedule: "0 0 1 1 *",
		settings: "{lease_ttl: 2s, lease_renew: 500ms}", latency: 20 * time.Millisecond, prefix: "ca",
		refuse: []string{"ca0-person000007@example.com"},
		afterWrite: func(*http.Request) {
			if writes.Add(1) == 5 {
				if p := victim.Load(); p != nil {
					_ = p.Cmd.Process.Signal(syscall.SIGKILL)
				}
			}
		}})
	const syncID = "ca0"
	s := e.start("serve", "serve", "--workers", "1", "--listen", "127.0.0.1:0")
	base := "http://" + started(t, s)
	run := e.start("run", "run", syncID)
	victim.Store(run)
	if code := run.Wait(t, time.Minute); code != -int(syscall.SIGKILL) {
		t.Fatalf("the foreground run was not killed: exit %d\n%s", code, run.Out)
	}
	st := e.store()
	newestFirst := func() []store.Run {
		runs, err := st.ListRuns(t.Context(), syncID, 0)
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	waitFor(t, 90*time.Second, "serve to finish the sync", func() bool {
		runs := newestFirst()
		return e.fake.Stats().Contacts >= int64(e.total-1) && len(runs) >= 2 && runs[0].State.Finished()
	})
	runs := newestFirst() // as the API lists them; the last is the killed one
	killed := runs[len(runs)-1]
	var byServe store.Counters
	for _, r := range runs[:len(runs)-1] {
		byServe.Add(r.Counters)
	}
	var all store.Counters
	for _, r := range runs {
		all.Add(r.Counters)
	}
	if killed.State != store.RunInterrupted || all.InDoubt == 0 || all.Rejected == 0 {
		t.Fatalf("the scenario did not happen: killed run %s, in doubt %d, rejected %d", killed.State, all.InDoubt, all.Rejected)
	}

	// The API: each run, and the sync's runs.
	var list web.RunList
	getJSON(t, base+"/api/v1/syncs/"+syncID+"/runs", &list)
	var detail web.SyncDetail
	getJSON(t, base+"/api/v1/syncs/"+syncID, &detail)
	if len(list.Runs) != len(runs) || len(detail.Runs) != len(runs) {
		t.Fatalf("API: %d and %d runs, the store %d", len(list.Runs), len(detail.Runs), len(runs))
	}
	// `oncesync runs`.
	cli := cliRuns(t, e, syncID)
	for i, r := range runs {
		var one web.RunDetail
		getJSON(t, base+"/api/v1/runs/"+strconv.FormatInt(r.ID, 10), &one)
		want := figures{r.Read, r.Written, r.Replayed, r.Rejected, r.InDoubt}
		for where, got := range map[string]figures{
			"API run":       figuresOf(one.Run),
			"API run list":  figuresOf(list.Runs[i]),
			"API sync":      figuresOf(detail.Runs[i]),
			"oncesync runs": cli[r.ID],
		} {
			if got != want {
				t.Errorf("run %d: %s says %+v, the store %+v", r.ID, where, got, want)
			}
		}
		if one.Run.Settled != r.Settled {
			t.Errorf("run %d: API settled %d, the store %d", r.ID, one.Run.Settled, r.Settled)
		}
	}

	// serve's /metrics: what serve's own runs did.
	code, body := get(t, base+"/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	m := parseMetrics(t, body)
	for outcome, want := range map[string]int64{"read": byServe.Read, "written": byServe.Written, "replayed": byServe.Replayed,
		"rejected": byServe.Rejected, "in_doubt": byServe.InDoubt, "settled": byServe.Settled} {
		if got, ok := m.value("oncesync_records_total", "outcome", outcome, "sync", syncID, "workspace", "acme"); !ok || int64(got) != want {
			t.Errorf("/metrics records{%s} = %v (present %v), serve's runs %d", outcome, got, ok, want)
		}
	}

	// `oncesync records`: the refused row, by its identity.
	out := cliOut(t, e, "records", syncID, "--rejected", "--format", "json")
	var recs []ledger.Record
	if err := json.Unmarshal([]byte(out), &recs); err != nil {
		t.Fatalf("records: %v\n%s", err, out)
	}
	if len(recs) != 1 || recs[0].Identity != "7" || recs[0].State != ledger.RecordRejected || recs[0].Reason == "" {
		t.Fatalf("records %+v", recs)
	}
	if detail.Ledger.Rejected != 1 {
		t.Errorf("the sync's ledger says %d rejected now, records lists %d", detail.Ledger.Rejected, len(recs))
	}
	t.Logf("%d runs (killed run %d); all runs: %+v", len(runs), killed.ID, all)
}

type figures struct{ read, written, replayed, rejected, inDoubt int64 }

func figuresOf(r web.RunView) figures {
	return figures{r.Read, r.Written, r.Replayed, r.Rejected, r.InDoubt}
}

func getJSON(t *testing.T, url string, v any) {
	t.Helper()
	code, body := get(t, url)
	if code != http.StatusOK {
		t.Fatalf("GET %s: %d %s", url, code, body)
	}
	if err := json.Unmarshal([]byte(body), v); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
}

// cliOut runs an oncesync command against e's config and returns its stdout.
func cliOut(t *testing.T, e *env, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, append([]string{args[0], "--config", e.config}, args[1:]...)...)
	cmd.Dir = e.dir
	cmd.Env = append(cmd.Environ(), "BREVO_API_KEY="+apiKey)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("oncesync %v: %v", args, err)
	}
	return string(out)
}

// cliRuns reads `oncesync runs`'s table: the figures of each run by id.
func cliRuns(t *testing.T, e *env, syncID string) map[int64]figures {
	t.Helper()
	out := map[int64]figures{}
	for _, line := range strings.Split(cliOut(t, e, "runs", syncID, "--limit", "50"), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 9 {
			continue
		}
		n := make([]int64, 6)
		for i, s := range []string{f[0], f[4], f[5], f[6], f[7], f[8]} {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("oncesync runs line %q: %v", line, err)
			}
			n[i] = v
		}
		out[n[0]] = figures{n[1], n[2], n[3], n[4], n[5]}
	}
	return out
}
