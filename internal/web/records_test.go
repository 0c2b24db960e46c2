package web

import (
	"fmt"
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
