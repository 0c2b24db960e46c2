package web

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
)

// TestPartitionRunPage: a partition's run is stored under the partition's
// id (partition.SyncID), which has no sync row of its own. Its page, its
// API view and settling its in-doubt records answer as the sync's: the
// records page links every record to its run, and the run page is the only
// place a person settles a record in doubt.
func TestPartitionRunPage(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const id = "parted"
	def := fmt.Sprintf(`{"id":%q,"workspace":"data","partitions":2}`, id)
	if _, err := b.st.PutSync(b.ctx, store.PutSyncParams{ID: id, Workspace: "data", Definition: def}); err != nil {
		t.Fatal(err)
	}
	part := partition.SyncID(id, 2)
	s := seeder{tb: t, ctx: b.ctx, st: b.st, clk: b.clk}
	run := s.run(part, store.RunSucceeded, "", "", store.Counters{Read: 2, Written: 0, InDoubt: 2}, 0)
	doubt := []string{key("parted-doubt", 0), key("parted-doubt", 1)}
	s.records(part, run.ID, nil, doubt, "offset:2")

	page := b.get(fmt.Sprintf("/runs/%d", run.ID))
	if page.code != http.StatusOK {
		t.Fatalf("run page of a partition's run: %d", page.code)
	}
	// The crumbs link the sync, not /syncs/parted#p2 (a fragment).
	mustContain(t, page.body, `href="/syncs/parted"`, doubt[0])
	mustNotContain(t, page.body, `href="/syncs/parted#p2"`)

	got := b.api(testToken, "GET", fmt.Sprintf("/api/v1/runs/%d", run.ID), "")
	if got.code != http.StatusOK {
		t.Fatalf("API run of a partition's run: %d %s", got.code, got.body)
	}
	var d RunDetail
	mustJSON(t, got.body, &d)
	if d.Workspace != "data" || d.InDoubtTotal != 2 {
		t.Errorf("run detail: workspace %q, in doubt %d", d.Workspace, d.InDoubtTotal)
	}

	body := fmt.Sprintf(`{"keys":[%q],"outcome":"delivered","why":"found it in Brevo"}`, doubt[0])
	got = b.api(testToken, "POST", fmt.Sprintf("/api/v1/runs/%d/settle", run.ID), body)
	if got.code != http.StatusOK {
		t.Fatalf("settle a partition's record: %d %s", got.code, got.body)
	}
	es, err := b.st.LedgerGet(b.ctx, part, doubt)
	if err != nil {
		t.Fatal(err)
	}
	if es[doubt[0]].State != store.LedgerComplete || es[doubt[1]].State != store.LedgerInDoubt {
		t.Errorf("after settling: %s, %s", es[doubt[0]].State, es[doubt[1]].State)
	}
	// The settlement is audited under the sync, where its page shows it.
	audit, err := b.st.ListAudit(b.ctx, id, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(audit) == 0 || audit[0].Action != AuditSettle || !strings.Contains(audit[0].Why, "found it in Brevo") {
		t.Errorf("audit of %s: %+v", id, audit)
	}
}

// TestRunningPartitionedRunFigures: a running coordinated run's figures are
// its partitions' so far, in the API's runs and on the sync page; they were
// 0 until the run ended.
func TestRunningPartitionedRunFigures(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const id = "split"
	def := fmt.Sprintf(`{"id":%q,"workspace":"data","partitions":2}`, id)
	if _, err := b.st.PutSync(b.ctx, store.PutSyncParams{ID: id, Workspace: "data", Definition: def}); err != nil {
		t.Fatal(err)
	}
	s := seeder{tb: t, ctx: b.ctx, st: b.st, clk: b.clk}
	coord := s.run(id, store.RunRunning, "", "", store.Counters{}, 0)
	s.run(partition.SyncID(id, 1), store.RunRunning, "", "", store.Counters{Read: 300, Written: 290}, 0)
	s.run(partition.SyncID(id, 2), store.RunRunning, "", "", store.Counters{Read: 200, Written: 200}, 0)
	var l RunList
	mustJSON(t, b.api(testToken, "GET", "/api/v1/syncs/"+id+"/runs", "").body, &l)
	if len(l.Runs) != 1 || l.Runs[0].ID != coord.ID || l.Runs[0].Read != 500 || l.Runs[0].Written != 490 {
		t.Fatalf("runs %+v, want the running run with its partitions' 500 read, 490 written", l.Runs)
	}
	var d SyncDetail
	mustJSON(t, b.api(testToken, "GET", "/api/v1/syncs/"+id, "").body, &d)
	if len(d.Runs) != 1 || d.Runs[0].Read != 500 {
		t.Fatalf("sync detail runs %+v, want read 500", d.Runs)
	}
}
