package sqlite

import (
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

func TestLedgerDoneValueRoundTrip(t *testing.T) {
	t.Parallel()
	for _, e := range []memEntry{
		{state: store.LedgerComplete, fence: 1, runID: 1, attempts: 1, claimedAt: 1_800_000_000_000_000_000, completedAt: 1_800_000_000_500_000_000, seenAt: 7, result: "contact-42"},
		{state: store.LedgerComplete, fence: 1 << 40, runID: 99, attempts: 7, claimedAt: 5, seenAt: 9, message: "ok", result: strings.Repeat("é", 300)},
		{state: store.LedgerComplete, claimedAt: 10, completedAt: 3, seenAt: 1}, // completed before claimed: a clock step back
	} {
		v := appendDone(nil, e)
		got, err := decodeDone(v, e.seenAt)
		if err != nil {
			t.Fatalf("decode %+v: %v", e, err)
		}
		if got != e {
			t.Fatalf("round trip:\n got %+v\nwant %+v", got, e)
		}
		for i := range v { // every truncation is refused, never misread
			if _, err := decodeDone(v[:i], 0); err == nil {
				t.Fatalf("decodeDone accepted %d of %d bytes of %+v", i, len(v), e)
			}
		}
		if _, err := decodeDone(append(v, 0), 0); err == nil {
			t.Fatalf("decodeDone accepted a trailing byte after %+v", e)
		}
	}
	if _, err := decodeDone([]byte{0x80}, 0); err == nil {
		t.Fatal("decodeDone accepted unknown flags")
	}
}

// TestLedgerDoneTables: a merge writes complete entries to ledger_done and
// rejected and in_doubt ones to ledger, and a key that changes state moves
// (it is in one table only); a complete row left in ledger by a store from
// before migration 0008 is read, listed and touched like the others,
// and moves to ledger_done when a merge writes its key again; prunes keep
// complete entries in either table.
func TestLedgerDoneTables(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	s := lb.a
	ks := storetest.HashedKeys(21, 5)
	done, rejected, doubt, pending, legacy := ks[0], ks[1], ks[2], ks[3], ks[4]
	in := func(table, key string) bool {
		t.Helper()
		var n int
		if err := s.r.QueryRow(`SELECT count(*) FROM `+table+` WHERE key = `+sqlKey("?1"), keyArg(key)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	where := func(key string) []string {
		t.Helper()
		var out []string
		for _, table := range []string{"ledger", "ledger_done", "ledger_claims"} {
			if in(table, key) {
				out = append(out, table)
			}
		}
		return out
	}
	want := func(key, table string) {
		t.Helper()
		if got := where(key); len(got) != 1 || got[0] != table {
			t.Fatalf("key %s… is in %v, want only %s", key[:8], got, table)
		}
	}

	lb.claim(t, s, ks[:4])
	lb.clk.Advance(time.Second)
	lb.finish(t, s, []string{done}, store.LedgerComplete, "ref-1")
	lb.finish(t, s, []string{rejected}, store.LedgerRejected, "")
	lb.finish(t, s, []string{doubt}, store.LedgerInDoubt, "")
	if err := s.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	want(done, "ledger_done")
	want(rejected, "ledger")
	want(doubt, "ledger")
	want(pending, "ledger_claims")

	// The rejected key is claimed again and lands: it moves to ledger_done.
	lb.claim(t, s, []string{rejected})
	if err := s.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	want(rejected, "ledger_claims")
	lb.finish(t, s, []string{rejected}, store.LedgerComplete, "ref-2")
	if err := s.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	want(rejected, "ledger_done")

	// A complete row as a store before migration 0008 wrote it.
	at := nanos(lb.clk.Now())
	if _, err := s.w.Exec(`INSERT INTO ledger (sid, key, state, fence, run_id, result, attempts, claimed_at, completed_at, seen_at)
		VALUES ((SELECT id FROM ledger_syncs WHERE sync_id = 's'), `+sqlKey("?1")+`, 'complete', ?2, 1, 'ref-old', 1, ?3, ?4, ?5)`,
		keyArg(legacy), lb.fence, at-int64(time.Hour), at-int64(time.Hour), at-int64(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec(`UPDATE ledger_meta SET generation = generation + 1`); err != nil {
		t.Fatal(err)
	}
	got := lb.get(t, lb.b, ks)
	for k, st := range map[string]store.LedgerState{done: store.LedgerComplete, rejected: store.LedgerComplete,
		doubt: store.LedgerInDoubt, pending: store.LedgerPending, legacy: store.LedgerComplete} {
		if got[k].State != st {
			t.Fatalf("key %s…: %s, want %s", k[:8], got[k].State, st)
		}
	}
	if got[done].Result != "ref-1" || got[done].Fence != lb.fence || got[done].Attempts != 1 ||
		!got[done].CompletedAt.Equal(storetest.Start.Add(time.Second)) || !got[done].ClaimedAt.Equal(storetest.Start) {
		t.Fatalf("complete entry read back from ledger_done: %+v", got[done])
	}
	if got[rejected].Attempts != 2 || got[rejected].Result != "ref-2" {
		t.Fatalf("re-claimed entry read back from ledger_done: %+v", got[rejected])
	}

	list, err := s.LedgerList(lb.ctx, "s", store.LedgerComplete, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 3 || list[2].Key != legacy {
		t.Fatalf("complete entries %+v: want 3, the old one (claimed first) last", list)
	}
	if list, err = s.LedgerList(lb.ctx, "s", store.LedgerComplete, 1); err != nil || len(list) != 1 || list[0].Key == legacy {
		t.Fatalf("complete entries, limit 1: %+v %v", list, err)
	}

	// Pruned with a cut-off after every entry was last seen: complete
	// entries (the old row too) are never pruned, the in-doubt one goes.
	lb.clk.Advance(time.Hour)
	n, err := s.LedgerPrune(lb.ctx, lb.clk.Now())
	if err != nil || n != 1 {
		t.Fatalf("pruned %d (%v), want the in-doubt entry only", n, err)
	}
	if w := where(doubt); len(w) != 0 {
		t.Fatalf("the pruned in-doubt entry is still in %v", w)
	}
	want(legacy, "ledger")
	want(done, "ledger_done")

	// The old row, finished again: the merge moves it to ledger_done.
	lb.finish(t, s, []string{legacy}, store.LedgerComplete, "ref-new")
	if err := s.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	want(legacy, "ledger_done")
	if e := lb.get(t, lb.b, []string{legacy})[legacy]; e.Result != "ref-new" {
		t.Fatalf("moved entry: %+v", e)
	}
}
