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
	// Slots makes each page the runner's page of docs/guide.md#what-a-run-does (last delivered
	// state per slot) instead of the earlier one: LedgerGet of the page's
	// slot keys, LedgerGet of its delivery keys, LedgerClaim of the
	// delivery keys with a Result each (the slot the delivery writes), then
	// one Checkpoint (lease renewal, cursor, run, page row) whose Finish
	// completes the slots (Result: the slot's last delivered state) and
	// releases the delivery keys. The ledger grows by Records slots; the
	// delivery keys leave it again.
	Slots bool
	// OneEntry, with Slots, is the store's share of a ledger that keeps
	// one entry per record (the slot's, carrying its claim): no lookup of
	// delivery keys, the claim of the slot keys themselves, and a Finish
	// that completes the slots and releases nothing. The runner does not
	// work this way; it measures what such a model would save
	// (docs/PERFORMANCE.md#one-ledger-entry-per-record-what-the-stores-would-save).
	OneEntry bool
}

// Sizes of the runner's Results in the Slots pattern (runner/entry.go).
const (
	benchClaimResultLen = 68 // a claim's Result: the slot the delivery writes
	benchSlotResultLen  = 45 // a complete slot's Result: its last delivered state
)

// benchResult is a Result of n bytes, distinct per (page, i).
func benchResult(prefix string, page, i, n int) string {
	r := fmt.Sprintf("%s-%d-%d-", prefix, page, i)
	for len(r) < n {
		r += "0123456789abcdef"
	}
	return r[:n]
}

// BenchSyncPath measures the store's share of a sync: per page it makes
// exactly the calls the runner (internal/runner/page.go) makes for a page of
// new records: LedgerGet, LedgerClaim, LedgerFinish (all complete),
// LeaseRenew, SaveCursor, UpdateRun; or, with p.Slots, the calls of the
// runner's page with slots (see SyncPathParams.Slots). Each iteration is one
// whole sync of p.Records hashed keys on a fresh store from open, so the
// ledger grows from empty to p.Records entries. It reports records/s and
// the store time of each call (ms per page).
func BenchSyncPath(b *testing.B, open func(b *testing.B) store.Store, p SyncPathParams) {
	if p.Slots {
		benchSlotsPath(b, open, p)
		return
	}
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

// benchSlotsPath is BenchSyncPath with p.Slots.
func benchSlotsPath(b *testing.B, open func(b *testing.B) store.Store, p SyncPathParams) {
	ctx := context.Background()
	pages := (p.Records + p.PageSize - 1) / p.PageSize
	type page struct {
		slots, deliveries, claimResults []string
		finish                          []store.LedgerFinish
	}
	ps := make([]page, pages)
	for i := range ps {
		pg := page{slots: HashedKeys(i, p.PageSize), deliveries: HashedKeys(1<<40+i, p.PageSize)}
		for j := range pg.slots {
			pg.claimResults = append(pg.claimResults, benchResult("slot", i, j, benchClaimResultLen))
			pg.finish = append(pg.finish, store.LedgerFinish{Key: pg.slots[j], State: store.LedgerComplete,
				Result: benchResult("state", i, j, benchSlotResultLen)})
		}
		if p.OneEntry {
			pg.deliveries = pg.slots
		} else {
			for _, k := range pg.deliveries {
				pg.finish = append(pg.finish, store.LedgerFinish{Key: k, State: store.LedgerReleased})
			}
		}
		ps[i] = pg
	}
	var (
		total   time.Duration
		records int
		calls   [4]time.Duration
	)
	names := [4]string{"get-slots", "get-deliveries", "claim", "checkpoint"}
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
		for i, pg := range ps {
			t0 := time.Now()
			got, err := st.LedgerGet(ctx, syncID, pg.slots)
			if err != nil || len(got) != 0 {
				b.Fatalf("LedgerGet(slots): %d entries, %v", len(got), err)
			}
			t1 := time.Now()
			if !p.OneEntry {
				if got, err = st.LedgerGet(ctx, syncID, pg.deliveries); err != nil || len(got) != 0 {
					b.Fatalf("LedgerGet(deliveries): %d entries, %v", len(got), err)
				}
			}
			t2 := time.Now()
			if err := st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: syncID, Fence: l.Fence, RunID: run.ID,
				Keys: pg.deliveries, Results: pg.claimResults}); err != nil {
				b.Fatal(err)
			}
			t3 := time.Now()
			n := int64(len(pg.slots))
			run.Read += n
			run.Written += n
			run.Pages++
			run.Requests++
			if err := st.Checkpoint(ctx, store.CheckpointParams{
				Cursor: store.SaveCursorParams{SyncID: syncID, Value: fmt.Sprint((i + 1) * p.PageSize), Fence: l.Fence, RunID: run.ID},
				Run:    run,
				Page:   &store.RunPage{RunID: run.ID, Page: int64(i + 1), Read: n, Claimed: n, Sent: n, Requests: 1},
				Lease:  &store.CheckpointLease{Token: "t", TTL: time.Hour},
				Finish: pg.finish,
			}); err != nil {
				b.Fatal(err)
			}
			t4 := time.Now()
			for c, d := range []time.Duration{t1.Sub(t0), t2.Sub(t1), t3.Sub(t2), t4.Sub(t3)} {
				calls[c] += d
			}
			records += len(pg.slots)
		}
		total += time.Since(start)
		b.StopTimer()
		// The last page reads back: slots complete, deliveries released.
		last := ps[len(ps)-1]
		got, err := st.LedgerGet(ctx, syncID, last.slots)
		if err != nil || len(got) != len(last.slots) || got[last.slots[0]].State != store.LedgerComplete {
			b.Fatalf("after the sync LedgerGet(slots) = %d entries (%v), want %d complete", len(got), err, len(last.slots))
		}
		if p.OneEntry {
			if e := got[last.slots[0]]; e.Result != last.finish[0].Result {
				b.Fatalf("after the sync a slot's Result is %q, want %q", e.Result, last.finish[0].Result)
			}
		} else if got, err = st.LedgerGet(ctx, syncID, last.deliveries); err != nil || len(got) != 0 {
			b.Fatalf("after the sync LedgerGet(deliveries) = %d entries (%v), want none", len(got), err)
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
