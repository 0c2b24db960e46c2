package web

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
)

// TestPartitionedSyncRecords: a partitioned sync's records live under its
// partitions' ids; its page's ledger figures and its records list count
// them.
func TestPartitionedSyncRecords(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const id = "parted"
	def := fmt.Sprintf(`{"id":%q,"workspace":"data","partitions":2}`, id)
	if _, err := b.st.PutSync(b.ctx, store.PutSyncParams{ID: id, Workspace: "data", Definition: def}); err != nil {
		t.Fatal(err)
	}
	part := partition.SyncID(id, 2)
	l, err := b.st.LeaseAcquire(b.ctx, store.LeaseAcquireParams{SyncID: part, Token: "t", Holder: "h", RunID: 1, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	k := key("parted", 1)
	if err := b.st.LedgerClaim(b.ctx, store.LedgerClaimParams{SyncID: part, Fence: l.Fence, RunID: 1, Keys: []string{k}}); err != nil {
		t.Fatal(err)
	}
	if err := b.st.LedgerFinish(b.ctx, store.LedgerFinishParams{SyncID: part, Fence: l.Fence, RunID: 1, Entries: []store.LedgerFinish{{
		Key: k, State: store.LedgerRejected, Message: "invalid", Result: ledger.RejectedResult(ledger.Slot(part, "csv:/x", "9"), "9"),
	}}}); err != nil {
		t.Fatal(err)
	}
	d, err := b.srv.syncDetail(b.ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if d.Ledger.Rejected != 1 {
		t.Fatalf("ledger figures %+v, want the partition's rejection", d.Ledger)
	}
	l2, err := b.srv.records(b.ctx, id, recordFilter{}, 10)
	if err != nil || l2.Total != 1 || l2.Records[0].Identity != "9" {
		t.Fatalf("records %+v, %v", l2, err)
	}
}

// TestRemovedRecords: a mirror sync's removed records are listed with the
// others (rejected, in doubt, removed) on the records page, its
// CSV and the API, and filtered by state=removed; a sync that is not a
// mirror lists no complete entry.
func TestRemovedRecords(t *testing.T) {
	t.Parallel()
	_, router := loadDoc(t)
	b := setup(t)
	const id = "mirror-list"
	if _, err := b.st.PutSync(b.ctx, store.PutSyncParams{ID: id, Workspace: "marketing",
		Definition: `{"destination":{"type":"brevo","write_mode":"mirror"}}`}); err != nil {
		t.Fatal(err)
	}
	run, err := b.st.InsertRun(b.ctx, store.InsertRunParams{SyncID: id, State: store.RunSucceeded, Attempt: 1})
	if err != nil {
		t.Fatal(err)
	}
	l, err := b.st.LeaseAcquire(b.ctx, store.LeaseAcquireParams{SyncID: id, Token: "tok", Holder: "host-a/boot-1/pid-1", RunID: run.ID, TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	gone := ledger.Slot(id, "csv:/seed.csv", "row-7")
	kept := ledger.Slot(id, "csv:/seed.csv", "row-8")
	if err := b.st.LedgerFinish(b.ctx, store.LedgerFinishParams{SyncID: id, Fence: l.Fence, RunID: run.ID, Entries: []store.LedgerFinish{
		{Key: gone, State: store.LedgerComplete, Result: ledger.SlotState{Gen: 2, Ref: ledger.RemovedRef("row-7")}.Encode()},
		{Key: kept, State: store.LedgerComplete, Result: ledger.SlotState{Gen: 1, Hash: [ledger.SlotHashLen]byte{1}, Ref: "h1:aA:cm93LTg"}.Encode()},
	}}); err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"", "?state=removed"} {
		got := apiCall(t, b, router, "GET", "/api/v1/syncs/"+id+"/records"+q, "")
		var l RecordList
		mustJSON(t, got.body, &l)
		if got.code != 200 || l.Total != 1 || l.Records[0].Identity != "row-7" || l.Records[0].State != ledger.RecordRemoved {
			t.Errorf("records%s: %d %+v", q, got.code, l)
		}
	}
	if got := apiCall(t, b, router, "GET", "/api/v1/syncs/"+id+"/records?state=rejected", ""); !strings.Contains(got.body, `"total":0`) {
		t.Errorf("state=rejected lists the removed record: %s", got.body)
	}
	mustContain(t, b.get("/syncs/"+id+"/records").body, "row-7", "removed")
	mustContain(t, b.get("/syncs/"+id+"/records.csv").body, "row-7,removed")
	// An identity a spreadsheet would run as a formula is downloaded as text.
	formula := ledger.Slot(id, "csv:/seed.csv", "=HYPERLINK(1)")
	if err := b.st.LedgerFinish(b.ctx, store.LedgerFinishParams{SyncID: id, Fence: l.Fence, RunID: run.ID, Entries: []store.LedgerFinish{
		{Key: formula, State: store.LedgerComplete, Result: ledger.SlotState{Gen: 2, Ref: ledger.RemovedRef("=HYPERLINK(1)")}.Encode()},
	}}); err != nil {
		t.Fatal(err)
	}
	if body := b.get("/syncs/" + id + "/records.csv").body; !strings.Contains(body, "'=HYPERLINK(1),removed") {
		t.Errorf("records.csv starts a cell with a formula:\n%s", body)
	}
	// Not a mirror: complete entries are not read as removals.
	var l2 RecordList
	mustJSON(t, apiCall(t, b, router, "GET", "/api/v1/syncs/"+b.d.Healthy+"/records?state=removed", "").body, &l2)
	if l2.Total != 0 {
		t.Errorf("a sync that is not a mirror lists %d removed records", l2.Total)
	}
}

// TestRecordsCappedSaysSo: a sync with more records of a state than a
// request reads (recordsMax) says so on the records page, instead of
// "Showing 500 of 10,000; the CSV holds them all" when neither holds
// them all.
func TestRecordsCappedSaysSo(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const id = "many-rejected"
	if _, err := b.st.PutSync(b.ctx, store.PutSyncParams{ID: id, Workspace: "data", Definition: fmt.Sprintf(`{"id":%q,"workspace":"data"}`, id)}); err != nil {
		t.Fatal(err)
	}
	s := seeder{tb: t, ctx: b.ctx, st: b.st, clk: b.clk}
	run := s.run(id, store.RunSucceeded, "", "", store.Counters{}, time.Second)
	var rejected []string
	for i := range recordsMax + 1 {
		rejected = append(rejected, key("many", i))
	}
	s.records(id, run.ID, rejected, nil, "offset:1")
	page := b.get("/syncs/" + id + "/records")
	if page.code != 200 {
		t.Fatalf("records page: %d", page.code)
	}
	mustNotContain(t, page.body, "the CSV holds them all")
	mustContain(t, page.body, `id="capped"`, "of at least 10,000", "at most 10,000 records of each state")
}
