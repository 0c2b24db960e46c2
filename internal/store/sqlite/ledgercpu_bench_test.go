//go:build unix

package sqlite

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

// BenchmarkLedgerCPU200k is BenchmarkSyncPath200k with the process's CPU
// time (user+system, every goroutine: background merges included) reported
// per sync of 200,000 records. The machine running it may be shared, so CPU
// is steadier than the wall-clock records/s.
func BenchmarkLedgerCPU200k(b *testing.B) {
	cpu0 := cpuTime()
	storetest.BenchSyncPath(b, func(b *testing.B) store.Store {
		s, _ := openTemp(b, clock.Real{})
		return s
	}, storetest.SyncPathParams{Records: 200_000, PageSize: 500})
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/sync")
}

// BenchmarkLedgerCPUSlots200k is BenchmarkLedgerCPU200k for the runner's
// page with slots (storetest.SyncPathParams.Slots): 200,000 slots completed
// and 200,000 delivery keys claimed and released in the same checkpoints.
func BenchmarkLedgerCPUSlots200k(b *testing.B) {
	cpu0 := cpuTime()
	storetest.BenchSyncPath(b, func(b *testing.B) store.Store {
		s, _ := openTemp(b, clock.Real{})
		return s
	}, storetest.SyncPathParams{Records: 200_000, PageSize: 500, Slots: true})
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/sync")
}

// BenchmarkLedgerCPUOneEntry200k is BenchmarkLedgerCPUSlots200k with one
// ledger entry per record (storetest.SyncPathParams.OneEntry): what the
// store would spend if a slot's entry carried its claim.
func BenchmarkLedgerCPUOneEntry200k(b *testing.B) {
	cpu0 := cpuTime()
	storetest.BenchSyncPath(b, func(b *testing.B) store.Store {
		s, _ := openTemp(b, clock.Real{})
		return s
	}, storetest.SyncPathParams{Records: 200_000, PageSize: 500, Slots: true, OneEntry: true})
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/sync")
}

// BenchmarkLedgerMergeSlots32k is BenchmarkLedgerMerge32k for the runner's
// page with slots: per page of 500, a claim of 500 delivery keys with
// Results and one finish completing 500 slots and releasing the 500
// deliveries; 64 pages, then one timed inline merge. "deliveries=none" is
// the same slots without deliveries: the difference is what the released
// claims cost the merge (nothing, when claim and release meet in memory).
func BenchmarkLedgerMergeSlots32k(b *testing.B) {
	for _, withDeliveries := range []bool{true, false} {
		name := "deliveries=released"
		if !withDeliveries {
			name = "deliveries=none"
		}
		b.Run(name, func(b *testing.B) { benchMergeSlots(b, withDeliveries) })
	}
}

func benchMergeSlots(b *testing.B, withDeliveries bool) {
	s, fence := benchStore(b)
	s.mergeEntries = 1 << 30 // no merge but the timed one
	ctx := context.Background()
	results := make([]string, 500)
	for i := range results {
		results[i] = fmt.Sprintf("slot-%064d", i)[:68]
	}
	var cpu time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		for p := range 64 {
			slots, deliveries := benchKeys(i*64+p, 500), benchKeys(1<<40+i*64+p, 500)
			es := make([]store.LedgerFinish, 0, 1000)
			for _, k := range slots {
				es = append(es, store.LedgerFinish{Key: k, State: store.LedgerComplete, Result: "state-" + k[:39]})
			}
			if withDeliveries {
				if err := s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "bench", Fence: fence, RunID: 1, Keys: deliveries, Results: results}); err != nil {
					b.Fatal(err)
				}
				for _, k := range deliveries {
					es = append(es, store.LedgerFinish{Key: k, State: store.LedgerReleased})
				}
			}
			if err := s.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "bench", Fence: fence, RunID: 1, Entries: es}); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		c0 := cpuTime()
		if err := s.mergeLog(ctx); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
	}
	if s.mem.size() != 0 {
		b.Fatalf("memory holds %d entries after the merge", s.mem.size())
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "cpu-ms/merge")
}

// BenchmarkLedgerMerge32k times one inline merge of 32,000 fresh complete
// entries (64 pages of 500, claimed and finished) per iteration, into a
// ledger that grows by that much each iteration; CPU per merge is reported.
func BenchmarkLedgerMerge32k(b *testing.B) {
	s, fence := benchStore(b)
	s.mergeEntries = 1 << 30 // no merge but the timed one
	ctx := context.Background()
	var cpu time.Duration
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		for p := range 64 {
			ks := benchKeys(i*64+p, 500)
			if err := claim(ctx, s, fence, ks); err != nil {
				b.Fatal(err)
			}
			if err := finish(ctx, s, fence, ks); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		c0 := cpuTime()
		if err := s.mergeLog(ctx); err != nil {
			b.Fatal(err)
		}
		cpu += cpuTime() - c0
	}
	if s.mem.size() != 0 {
		b.Fatalf("memory holds %d entries after the merge", s.mem.size())
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N)/1000, "cpu-ms/merge")
}

// BenchmarkBuildFilter131k builds the key filter of a sync with 131,072
// keys in ledger and no persisted part (a store from before migration 0019):
// every part is scanned.
func BenchmarkBuildFilter131k(b *testing.B) {
	s, _ := benchStore(b)
	ctx := context.Background()
	if _, err := s.w.ExecContext(ctx, `INSERT INTO ledger_syncs (id, sync_id) VALUES (1, 'bench')`); err != nil {
		b.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 131072)
		INSERT INTO ledger (sid, key, state, fence, run_id, result, claimed_at, completed_at, seen_at)
		SELECT 1, randomblob(32), 'complete', 1, 1, 'contact-' || i, i, i, i FROM n`); err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	for b.Loop() {
		if err := s.loadFilter(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N)/1000, "cpu-ms/op")
	if f := s.mem.filters[1]; f == nil || filterKeys(f) != 131072 {
		b.Fatal("the filter does not hold the 131,072 keys")
	}
}

// BenchmarkEncodeFinishBody500 encodes the log body of a finish of 500
// complete hex keys.
func BenchmarkEncodeFinishBody500(b *testing.B) {
	keys := benchKeys(0, 500)
	items := make([]logItem, len(keys))
	for i, k := range keys {
		items[i] = logItem{key: memKeyOf(k), state: store.LedgerComplete, attempts: 1, claimedAt: 1e18, result: "contact-" + k[56:]}
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = encodeBody(kindFinish, 1e18+5e6, items)
	}
}
