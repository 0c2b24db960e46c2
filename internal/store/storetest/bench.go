package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// HashedKeys returns n distinct keys for page, shaped like real delivery
// keys: hex SHA-256, so a page's keys scatter over the ledger's B-tree the
// way production keys do (sequential keys hide most of the cost).
func HashedKeys(page, n int) []string {
	out := make([]string, n)
	var buf [16]byte
	for j := range out {
		binary.BigEndian.PutUint64(buf[:8], uint64(page))
		binary.BigEndian.PutUint64(buf[8:], uint64(j))
		sum := sha256.Sum256(buf[:])
		out[j] = hex.EncodeToString(sum[:])
	}
	return out
}

// SyncPathParams sizes BenchSyncPath.
type SyncPathParams struct {
	Records  int // records per sync (the ledger grows to this many entries)
	PageSize int // records per page
}

// BenchSyncPath measures the store's share of a sync: per page it makes
// exactly the calls the runner (internal/runner/page.go) makes for a page of
// new records: LedgerGet, LedgerClaim, LedgerFinish (all complete),
// LeaseRenew, SaveCursor, UpdateRun. Each iteration is one whole sync of
// p.Records hashed keys on a fresh store from open, so the ledger grows from
// empty to p.Records entries. It reports records/s and the store time of
// each call (ms per page).
func BenchSyncPath(b *testing.B, open func(b *testing.B) store.Store, p SyncPathParams) {
	ctx := context.Background()
	pages := (p.Records + p.PageSize - 1) / p.PageSize
	keys := make([][]string, pages)
	for i := range keys {
		keys[i] = HashedKeys(i, p.PageSize)
	}
	var (
		total   time.Duration
		records int
		calls   [6]time.Duration
	)
	names := [6]string{"get", "claim", "finish", "renew", "cursor", "run"}
	for b.Loop() {
		b.StopTimer()
		st := open(b)
		const syncID = "bench"
		l, err := st.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: syncID, Token: "t", Holder: "bench", TTL: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		run, err := st.InsertRun(ctx, store.InsertRunParams{SyncID: syncID, State: store.RunRunning, Attempt: 1})
		if err != nil {
			b.Fatal(err)
		}
		run.Fence = l.Fence
		b.StartTimer()
		start := time.Now()
		for i, ks := range keys {
			t0 := time.Now()
			got, err := st.LedgerGet(ctx, syncID, ks)
			if err != nil || len(got) != 0 {
				b.Fatalf("LedgerGet: %d entries, %v", len(got), err)
			}
			t1 := time.Now()
			if err := st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: syncID, Fence: l.Fence, RunID: run.ID, Keys: ks}); err != nil {
				b.Fatal(err)
			}
			t2 := time.Now()
			fin := make([]store.LedgerFinish, len(ks))
			for j, k := range ks {
				fin[j] = store.LedgerFinish{Key: k, State: store.LedgerComplete, Result: fmt.Sprintf("contact-%d-%d", i, j)}
			}
			if err := st.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: syncID, Fence: l.Fence, RunID: run.ID, Entries: fin}); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			if _, err := st.LeaseRenew(ctx, syncID, "t", time.Hour); err != nil {
				b.Fatal(err)
			}
			t4 := time.Now()
			if err := st.SaveCursor(ctx, store.SaveCursorParams{SyncID: syncID, Value: fmt.Sprint((i + 1) * p.PageSize), Fence: l.Fence, RunID: run.ID}); err != nil {
				b.Fatal(err)
			}
			t5 := time.Now()
			run.Read += int64(len(ks))
			run.Written += int64(len(ks))
			run.Pages++
			run.Requests++
			if err := st.UpdateRun(ctx, run); err != nil {
				b.Fatal(err)
			}
			t6 := time.Now()
			for c, d := range []time.Duration{t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3), t5.Sub(t4), t6.Sub(t5)} {
				calls[c] += d
			}
			records += len(ks)
		}
		total += time.Since(start)
		b.StopTimer()
		// The last page must read back complete: the benchmark checks the
		// store did the work it timed.
		last := keys[len(keys)-1]
		got, err := st.LedgerGet(ctx, syncID, last)
		if err != nil || len(got) != len(last) || got[last[0]].State != store.LedgerComplete {
			b.Fatalf("after the sync LedgerGet = %d entries (%v), want %d complete", len(got), err, len(last))
		}
		if err := st.Close(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.ReportMetric(float64(records)/total.Seconds(), "records/s")
	n := float64(b.N * pages)
	for c, d := range calls {
		b.ReportMetric(float64(d.Microseconds())/n/1000, names[c]+"-ms/page")
	}
}
