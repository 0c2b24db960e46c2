package runner

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/store"
)

// remoteReads is a store that says its reads are round trips
// (store.RemoteReads), so that a run reads a page's keys ahead as it does
// on PostgreSQL. It counts the ledger reads, claims and marks, and fails
// the test when a claim or a mark says its keys were read as absent and
// one is not.
type remoteReads struct {
	store.Store
	t                          *testing.T
	gets, claims, absentClaims atomic.Int64
	absentMarks                atomic.Int64
}

func (s *remoteReads) RemoteReads() bool { return true }

func (s *remoteReads) LedgerGet(ctx context.Context, syncID string, keys []string) (map[string]store.LedgerEntry, error) {
	s.gets.Add(1)
	return s.Store.LedgerGet(ctx, syncID, keys)
}

func (s *remoteReads) LedgerClaim(ctx context.Context, p store.LedgerClaimParams) error {
	s.claims.Add(1)
	if p.Absent {
		s.absentClaims.Add(1)
		present, err := s.Store.LedgerGet(ctx, p.SyncID, p.Keys)
		if err != nil {
			return err
		}
		for k, e := range present {
			s.t.Errorf("a claim said key %.12s was absent; it is %s", k, e.State)
		}
	}
	return s.Store.LedgerClaim(ctx, p)
}

func (s *remoteReads) LedgerFinish(ctx context.Context, p store.LedgerFinishParams) error {
	s.checkAbsent(ctx, p.SyncID, p.Entries)
	return s.Store.LedgerFinish(ctx, p)
}

func (s *remoteReads) Checkpoint(ctx context.Context, p store.CheckpointParams) error {
	s.checkAbsent(ctx, p.Cursor.SyncID, p.Finish)
	return s.Store.Checkpoint(ctx, p)
}

// checkAbsent fails the test for a mark said to be of an absent key whose
// key is present; it counts the marks said to be absent.
func (s *remoteReads) checkAbsent(ctx context.Context, syncID string, es []store.LedgerFinish) {
	var keys []string
	for _, e := range es {
		if e.Absent {
			keys = append(keys, e.Key)
		}
	}
	if len(keys) == 0 {
		return
	}
	s.absentMarks.Add(int64(len(keys)))
	present, err := s.Store.LedgerGet(ctx, syncID, keys)
	if err != nil {
		s.t.Error(err)
	}
	for k, e := range present {
		s.t.Errorf("a mark said key %.12s was absent; it is %s", k, e.State)
	}
}

// TestReadsAheadKeepThePromise: on a store whose reads are round trips, a
// page of new records is read in one round of reads (its first-delivery
// keys beside its slots) and claimed as absent; a dead run's writes in
// doubt, changed rows, a change back and a refused row retried by identity
// still end with the source's values at the destination, each delivered
// once.
func TestReadsAheadKeepThePromise(t *testing.T) {
	t.Parallel()
	tb := setup(t, 1000, destination.CapVerify)
	rs := &remoteReads{Store: tb.store, t: t}
	refuse := true
	tb.dest.reject = func(r destination.Record) bool { return refuse && fmt.Sprint(r.Data["email"]) == email(7) }
	run := func(step string, names map[int]string) store.Run {
		t.Helper()
		tb.writeCSV(t, 1000, names)
		p := tb.params(t, "id")
		p.Store = rs
		r, err := Run(context.Background(), p)
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		for i := 1; i <= 1000; i++ {
			want, ok := names[i]
			if !ok {
				want = fmt.Sprintf("N%d", i)
			}
			if refuse && i == 7 {
				continue
			}
			if got := tb.dest.value(email(i)); got != want {
				t.Fatalf("%s: the destination holds %v for row %d, want %s", step, got, i, want)
			}
		}
		return r
	}

	// A first run dies after writing page 3, before recording it: its
	// rows' slots are new and their keys pending under its fence, found
	// among the keys read ahead by the next run, which settles them.
	tb.writeCSV(t, 1000, nil)
	killed := tb.params(t, "id")
	killed.Store = rs
	tb.killMidPage(context.Background(), t, killed, 3)
	rs.gets.Store(0)
	rs.claims.Store(0)
	rs.absentClaims.Store(0)
	rs.absentMarks.Store(0)
	r := run("the run after", nil)
	if r.Read != 800 || r.InDoubt != 100 || r.Settled != 100 || r.Written != 700 {
		t.Fatalf("the run after: %+v", r)
	}
	// 8 pages of new slots: a read of the slots and one of the keys ahead
	// each, no read after; every claim (pages 4 to 10) of keys read as
	// absent.
	if g, c, a := rs.gets.Load(), rs.claims.Load(), rs.absentClaims.Load(); g != 16 || c != 7 || a != 7 {
		t.Fatalf("the run after: %d ledger reads, %d claims (%d of absent keys); want 16, 7, 7", g, c, a)
	}
	// Each new slot's first delivered state is a mark of an absent key
	// (page 3's settled by a read-back, the rest with their pages); row
	// 7's refusal is no slot.
	if m := rs.absentMarks.Load(); m != 800 {
		t.Fatalf("the run after: %d marks of absent slots, want 800", m)
	}

	// Later runs: the first page is read ahead (rows 3 and 7 on it: row
	// 7's refused key among the keys read ahead, claimed again as present;
	// row 3's next delivery read after), and once most slots are found
	// the pages after read their slots only: 3 + 9 reads.
	refuse = false
	rs.gets.Store(0)
	r = run("row 3 changed, row 7 accepted", map[int]string{3: "Changed3"})
	if r.Written != 2 {
		t.Fatalf("second run: %+v, want rows 3 and 7 written", r)
	}
	if g := rs.gets.Load(); g != 12 {
		t.Fatalf("second run: %d ledger reads, want 12", g)
	}
	rs.gets.Store(0)
	r = run("row 3 changed back", nil)
	if r.Written != 1 {
		t.Fatalf("third run: %+v, want row 3 written", r)
	}
	if g := rs.gets.Load(); g != 12 {
		t.Fatalf("third run: %d ledger reads, want 12", g)
	}
	if _, recs, dups := tb.dest.stats(); recs != 1002 || dups != 0 {
		t.Fatalf("destination: %d deliveries, %d duplicates; want 1002, 0", recs, dups)
	}
}
