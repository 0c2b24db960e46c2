//go:build unix

package postgres

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

// cpuTime is the process's user+system CPU time: the machine running the
// benchmarks may be busy, so ms/page (wall) is reported next to cpu-ms/page
// (the client's share only; the server's CPU is not counted).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// report adds per-page wall and CPU metrics; call it after the loop with the
// CPU time read before it.
func report(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N)/1000, "ms/page")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N)/1000, "cpu-ms/page")
}

// benchKeys returns n distinct keys for page i, hashed like real delivery
// keys (hex SHA-256) so they scatter over the ledger as in production.
func benchKeys(page, n int) []string { return storetest.HashedKeys(page, n) }

func benchStore(b *testing.B) (*Store, int64) {
	s, _ := openTest(b, clock.Real{})
	l, err := s.LeaseAcquire(context.Background(), store.LeaseAcquireParams{SyncID: "bench", Token: "t", TTL: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	return s, l.Fence
}

// benchPage runs one step of the hot path (per page of n keys) per iteration,
// each iteration on a fresh page so claims insert.
func benchPage(b *testing.B, n int, step func(ctx context.Context, s *Store, fence int64, keys []string) error) {
	s, fence := benchStore(b)
	ctx := context.Background()
	pages := make([][]string, 64)
	for i := range pages {
		pages[i] = benchKeys(i, n)
	}
	cpu0 := cpuTime()
	for i := 0; b.Loop(); i++ {
		ks := pages[i%len(pages)]
		if i >= len(pages) { // reuse pages under fresh names so the table keeps growing
			ks = benchKeys(i, n)
		}
		if err := step(ctx, s, fence, ks); err != nil {
			b.Fatal(err)
		}
	}
	report(b, cpu0)
}

func claim(ctx context.Context, s *Store, fence int64, keys []string) error {
	return s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "bench", Fence: fence, RunID: 1, Keys: keys})
}

func finish(ctx context.Context, s *Store, fence int64, keys []string) error {
	es := make([]store.LedgerFinish, len(keys))
	for i, k := range keys {
		es[i] = store.LedgerFinish{Key: k, State: store.LedgerComplete, Result: "contact-" + k[56:]}
	}
	return s.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "bench", Fence: fence, RunID: 1, Entries: es})
}

func BenchmarkLedgerClaim250(b *testing.B)  { benchPage(b, 250, claim) }
func BenchmarkLedgerClaim1000(b *testing.B) { benchPage(b, 1000, claim) }

// wholePage is the ledger's share of one page: get, claim, finish (3 round trips).
func wholePage(ctx context.Context, s *Store, fence int64, keys []string) error {
	if _, err := s.LedgerGet(ctx, "bench", keys); err != nil {
		return err
	}
	if err := claim(ctx, s, fence, keys); err != nil {
		return err
	}
	return finish(ctx, s, fence, keys)
}

func BenchmarkLedgerPage250(b *testing.B)  { benchPage(b, 250, wholePage) }
func BenchmarkLedgerPage1000(b *testing.B) { benchPage(b, 1000, wholePage) }

func BenchmarkLedgerFinish250(b *testing.B)  { benchFinish(b, 250) }
func BenchmarkLedgerFinish1000(b *testing.B) { benchFinish(b, 1000) }

// benchFinish marks one claimed page complete per iteration.
func benchFinish(b *testing.B, n int) {
	s, fence := benchStore(b)
	ctx := context.Background()
	ks := benchKeys(0, n)
	if err := claim(ctx, s, fence, ks); err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	for b.Loop() {
		if err := finish(ctx, s, fence, ks); err != nil {
			b.Fatal(err)
		}
	}
	report(b, cpu0)
}

// BenchmarkLedgerGet1000 reads a page of keys that all exist (a replay).
func BenchmarkLedgerGet1000(b *testing.B) {
	s, fence := benchStore(b)
	ctx := context.Background()
	ks := benchKeys(0, 1000)
	if err := claim(ctx, s, fence, ks); err != nil {
		b.Fatal(err)
	}
	cpu0 := cpuTime()
	for b.Loop() {
		got, err := s.LedgerGet(ctx, "bench", ks)
		if err != nil || len(got) != len(ks) {
			b.Fatalf("LedgerGet: %d entries, %v", len(got), err)
		}
	}
	report(b, cpu0)
}

func BenchmarkSaveCursor(b *testing.B) {
	s, fence := benchStore(b)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		if err := s.SaveCursor(ctx, store.SaveCursorParams{SyncID: "bench", Value: fmt.Sprint(i), Fence: fence, RunID: 1}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLeaseRenew(b *testing.B) {
	s, _ := benchStore(b)
	ctx := context.Background()
	for b.Loop() {
		if _, err := s.LeaseRenew(ctx, "bench", "t", time.Hour); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSyncPath200k is the store's share of a whole 200,000-record sync
// in pages of 500, call for call what the runner does per page (see
// storetest.BenchSyncPath): records/s is the ceiling the store puts on a run.
func BenchmarkSyncPath200k(b *testing.B) {
	storetest.BenchSyncPath(b, func(b *testing.B) store.Store {
		s, _ := openTest(b, clock.Real{})
		return s
	}, storetest.SyncPathParams{Records: 200_000, PageSize: 500})
}

// BenchmarkSyncPathSlots200k is BenchmarkSyncPath200k for the runner's
// page with slots (storetest.SyncPathParams.Slots).
func BenchmarkSyncPathSlots200k(b *testing.B) {
	storetest.BenchSyncPath(b, func(b *testing.B) store.Store {
		s, _ := openTest(b, clock.Real{})
		return s
	}, storetest.SyncPathParams{Records: 200_000, PageSize: 500, Slots: true})
}

// BenchmarkSyncPathOneEntry200k is BenchmarkSyncPathSlots200k with one
// ledger entry per record (storetest.SyncPathParams.OneEntry).
func BenchmarkSyncPathOneEntry200k(b *testing.B) {
	storetest.BenchSyncPath(b, func(b *testing.B) store.Store {
		s, _ := openTest(b, clock.Real{})
		return s
	}, storetest.SyncPathParams{Records: 200_000, PageSize: 500, Slots: true, OneEntry: true})
}

// BenchmarkLedgerPrune prunes ledgers of 400,000 and 1,600,000 entries of
// which a quarter are rejected and due (rows inserted directly, then
// analyzed, as autovacuum would): a window must cost the same whatever the
// number of rejected rows elsewhere in the ledger, so the time per entry
// stays flat.
func BenchmarkLedgerPrune(b *testing.B) {
	for _, n := range []int{400_000, 1_600_000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) { benchPrune(b, n) })
	}
}

func benchPrune(b *testing.B, entries int) {
	ctx := context.Background()
	for range b.N {
		b.StopTimer()
		s, _ := openTest(b, clock.Real{})
		if _, err := s.pool.Exec(ctx, `INSERT INTO ledger
			(sync_id, key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at)
			SELECT 'bench', encode(sha256(('prune-' || g)::bytea), 'hex'),
				CASE WHEN g % 4 = 0 THEN 'rejected' ELSE 'complete' END, 1, 1, '', '', 1, 1,
				CASE WHEN g % 4 = 0 THEN NULL ELSE 1 END, 1
			FROM generate_series(1, $1::bigint) AS g`, entries); err != nil {
			b.Fatal(err)
		}
		if _, err := s.pool.Exec(ctx, `VACUUM ANALYZE ledger`); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		n, err := s.LedgerPrune(ctx, time.Unix(0, 2))
		if err != nil {
			b.Fatal(err)
		}
		if n != int64(entries/4) {
			b.Fatalf("pruned %d, want %d", n, entries/4)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(entries), "ns/entry")
}
