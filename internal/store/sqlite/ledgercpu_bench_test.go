//go:build unix

package sqlite

import (
	"context"
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
// keys in ledger (the size at which the first filter of a fresh store fills
// up and is rebuilt).
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
		if err := s.buildFilter(ctx, 1); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N)/1000, "cpu-ms/op")
	if f := s.mem.filters[1]; f == nil || f.n != 131072 {
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
