package sqlite

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

// logBundle is two Stores on one file (two processes' views) and a fence.
type logBundle struct {
	ctx   context.Context
	clk   *clock.Fake
	a, b  *Store
	path  string
	fence int64
}

func setupLog(t *testing.T) *logBundle {
	t.Helper()
	ctx := t.Context()
	clk := clock.NewFake(storetest.Start)
	a, path := openTemp(t, clk)
	b, err := Open(ctx, OpenParams{Path: path, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	l, err := a.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s", Token: "t", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return &logBundle{ctx: ctx, clk: clk, a: a, b: b, path: path, fence: l.Fence}
}

func (lb *logBundle) claim(t *testing.T, s *Store, keys []string) {
	t.Helper()
	if err := s.LedgerClaim(lb.ctx, store.LedgerClaimParams{SyncID: "s", Fence: lb.fence, RunID: 1, Keys: keys}); err != nil {
		t.Fatal(err)
	}
}

func (lb *logBundle) finish(t *testing.T, s *Store, keys []string, state store.LedgerState, result string) {
	t.Helper()
	fin := make([]store.LedgerFinish, len(keys))
	for i, k := range keys {
		fin[i] = store.LedgerFinish{Key: k, State: state, Result: result}
	}
	if err := s.LedgerFinish(lb.ctx, store.LedgerFinishParams{SyncID: "s", Fence: lb.fence, RunID: 1, Entries: fin}); err != nil {
		t.Fatal(err)
	}
}

func (lb *logBundle) get(t *testing.T, s *Store, keys []string) map[string]store.LedgerEntry {
	t.Helper()
	got, err := s.LedgerGet(lb.ctx, "s", keys)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// finalRows, as countRows's table, is every final entry: ledger's and
// ledger_done's.
const finalRows = `(SELECT key FROM ledger UNION ALL SELECT key FROM ledger_done)`

func countRows(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.r.QueryRow(`SELECT count(*) FROM ` + table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestLedgerLogSharedFile: what one Store writes (claims, finishes, a
// merge) the other sees at once, whichever of memory and tables holds it.
func TestLedgerLogSharedFile(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	ks := storetest.HashedKeys(1, 40)

	// b looks first: nothing, and builds its key filter on empty tables.
	if got := lb.get(t, lb.b, ks); len(got) != 0 {
		t.Fatalf("entries before any claim: %d", len(got))
	}
	lb.claim(t, lb.a, ks)
	lb.finish(t, lb.a, ks[:20], store.LedgerComplete, "c1")
	if n := countRows(t, lb.a, "ledger_log"); n != 2 {
		t.Fatalf("ledger_log rows = %d, want 2 (one per call)", n)
	}
	if n := countRows(t, lb.a, finalRows); n != 0 {
		t.Fatalf("ledger rows before a merge = %d, want 0", n)
	}
	got := lb.get(t, lb.b, ks)
	if len(got) != 40 || got[ks[0]].State != store.LedgerComplete || got[ks[0]].Result != "c1" || got[ks[39]].State != store.LedgerPending {
		t.Fatalf("b after a's writes: %d entries, %+v / %+v", len(got), got[ks[0]], got[ks[39]])
	}

	// a merges; b's memory still holds the entries, its filter and the
	// tables must agree after it sees the merge.
	if err := lb.a.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, lb.a, "ledger_log"); n != 0 {
		t.Fatalf("ledger_log rows after a merge = %d, want 0", n)
	}
	if l, c := countRows(t, lb.a, finalRows), countRows(t, lb.a, "ledger_claims"); l != 20 || c != 20 {
		t.Fatalf("after the merge: ledger %d, ledger_claims %d; want 20 and 20", l, c)
	}
	got = lb.get(t, lb.b, ks)
	if len(got) != 40 || got[ks[5]].Result != "c1" || got[ks[30]].State != store.LedgerPending || got[ks[30]].Attempts != 1 {
		t.Fatalf("b after a's merge: %d entries, %+v / %+v", len(got), got[ks[5]], got[ks[30]])
	}
	if lb.b.mem.size() != 0 {
		t.Fatalf("b holds %d entries after seeing the merge, want 0", lb.b.mem.size())
	}

	// b finishes the pending half; a's memory gets it from the log.
	lb.clk.Advance(time.Second)
	lb.finish(t, lb.b, ks[20:], store.LedgerRejected, "")
	got = lb.get(t, lb.a, ks[20:])
	if len(got) != 20 || got[ks[25]].State != store.LedgerRejected || got[ks[25]].Attempts != 1 {
		t.Fatalf("a after b's finish: %d entries, %+v", len(got), got[ks[25]])
	}
	// A re-claim of the rejected keys counts attempts across the merge.
	lb.claim(t, lb.a, ks[20:])
	if e := lb.get(t, lb.b, ks[20:21])[ks[20]]; e.State != store.LedgerPending || e.Attempts != 2 {
		t.Fatalf("re-claimed rejected key: %+v, want pending attempts 2", e)
	}
	if err := lb.b.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	if l, c := countRows(t, lb.a, finalRows), countRows(t, lb.a, "ledger_claims"); l != 20 || c != 20 {
		t.Fatalf("after the second merge: ledger %d, ledger_claims %d; want 20 and 20", l, c)
	}

	// A third store (a restarted process) reads the same from the file.
	lb.finish(t, lb.a, ks[20:], store.LedgerComplete, "c2") // left in the log
	c, err := Open(lb.ctx, OpenParams{Path: lb.path, Clock: lb.clk})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got = lb.get(t, c, ks)
	for i, k := range ks {
		want := "c1"
		if i >= 20 {
			want = "c2"
		}
		if e := got[k]; e.State != store.LedgerComplete || e.Result != want {
			t.Fatalf("reopened store, key %d: %+v, want complete %s", i, e, want)
		}
	}
	if e := got[ks[20]]; e.Attempts != 2 {
		t.Fatalf("reopened store: attempts %d, want 2", e.Attempts)
	}
}

// TestLedgerLogFilterMissedMerge: a Store whose memory never saw the log rows
// of another Store's merge must not trust its key filter afterwards.
func TestLedgerLogFilterMissedMerge(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	ks := storetest.HashedKeys(2, 30)
	lb.claim(t, lb.a, storetest.HashedKeys(3, 1)) // the sync exists
	// b builds a filter on empty tables.
	if got := lb.get(t, lb.b, ks); len(got) != 0 {
		t.Fatal("entries before any claim")
	}
	if !lb.b.mem.hasFilter(1) {
		t.Fatal("b has no key filter after a lookup")
	}
	// a writes and merges while b looks away: b never applies those rows.
	lb.claim(t, lb.a, ks)
	lb.finish(t, lb.a, ks, store.LedgerComplete, "x")
	if err := lb.a.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
	// A row after the merge: b reads it first (the log tail, then
	// ledger_meta), past a gap where the merged rows were.
	lb.claim(t, lb.a, storetest.HashedKeys(4, 1))
	got := lb.get(t, lb.b, ks)
	if len(got) != len(ks) {
		t.Fatalf("b sees %d of %d merged entries (stale key filter?)", len(got), len(ks))
	}
	// And a claim through b leaves the complete keys alone.
	lb.claim(t, lb.b, ks)
	if e := lb.get(t, lb.a, ks[:1])[ks[0]]; e.State != store.LedgerComplete {
		t.Fatalf("claim through b changed a complete key: %+v", e)
	}
}

// TestLedgerLogMergeThreshold: the log is merged once it holds mergeEntries
// entries, and memory stays bounded by it.
func TestLedgerLogMergeThreshold(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	lb.a.mergeEntries, lb.a.syncMerge = 100, true
	for page := range 10 {
		ks := storetest.HashedKeys(100+page, 30)
		lb.claim(t, lb.a, ks)
		lb.finish(t, lb.a, ks, store.LedgerComplete, fmt.Sprint("p", page))
		if n := lb.a.mem.size(); n >= 100 {
			t.Fatalf("page %d: memory holds %d entries, want < 100", page, n)
		}
	}
	if l := countRows(t, lb.a, finalRows); l < 200 {
		t.Fatalf("ledger rows = %d after 300 finishes with merges every 100, want >= 200", l)
	}
	for page := range 10 {
		ks := storetest.HashedKeys(100+page, 30)
		got := lb.get(t, lb.b, ks)
		if len(got) != 30 || got[ks[29]].Result != fmt.Sprint("p", page) {
			t.Fatalf("page %d: %d entries, last %+v", page, len(got), got[ks[29]])
		}
	}
}

// TestLedgerLogBody: a log body decodes to what was encoded, and a truncated
// one is an error, not a panic.
func TestLedgerLogBody(t *testing.T) {
	t.Parallel()
	items := []logItem{
		{key: memKeyOf(storetest.HashedKeys(1, 1)[0]), state: store.LedgerComplete, attempts: 3, claimedAt: 90, result: "r", message: ""},
		{key: memKeyOf("text-key"), state: store.LedgerRejected, attempts: 1, claimedAt: 100, message: "bad email"},
		{key: memKeyOf("k3"), state: store.LedgerInDoubt, attempts: 2, claimedAt: 120},
	}
	b := encodeBody(kindFinish, 100, items)
	got, err := decodeBody(kindFinish, 100, len(items), b)
	if err != nil {
		t.Fatal(err)
	}
	for i := range items {
		if got[i] != items[i] {
			t.Fatalf("item %d: %+v, want %+v", i, got[i], items[i])
		}
	}
	for n := range len(b) - 1 {
		if _, err := decodeBody(kindFinish, 100, len(items), b[:n]); err == nil {
			t.Fatalf("a body cut at %d of %d bytes decoded", n, len(b))
		}
	}
}

// expect fails unless every store reads keys with the wanted results.
func (lb *logBundle) expect(t *testing.T, want map[string]string, stores ...*Store) {
	t.Helper()
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	for i, s := range stores {
		got := lb.get(t, s, keys)
		for k, w := range want {
			if e := got[k]; e.State != store.LedgerComplete || e.Result != w {
				t.Fatalf("store %d, key %s…: %+v, want complete %q", i, k[:8], e, w)
			}
		}
	}
}

// TestLedgerMergeRound: a background round writes the log in several
// transactions while another Store finishes keys of ranges already written
// and not yet written; every store (and a reopened one) reads the newest
// outcome of every key, and the newer log rows survive the round.
func TestLedgerMergeRound(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	ks := storetest.HashedKeys(7, 400)
	want := map[string]string{}
	for i := 0; i < len(ks); i += 100 {
		lb.claim(t, lb.a, ks[i:i+100])
		lb.finish(t, lb.a, ks[i:i+100], store.LedgerComplete, "old")
	}
	for _, k := range ks {
		want[k] = "old"
	}
	// Mid-round, b rewrites every 7th key (all ranges).
	var newer []string
	for i := 0; i < len(ks); i += 7 {
		newer = append(newer, ks[i])
		want[ks[i]] = "new"
	}
	var steps []int
	lb.a.merger.betweenTx = func(step int) {
		steps = append(steps, step)
		if step == 3 {
			lb.finish(t, lb.b, newer, store.LedgerComplete, "new")
		}
	}
	if err := lb.a.mergeRound(lb.ctx); err != nil {
		t.Fatal(err)
	}
	if len(steps) != mergeRounds+1 {
		t.Fatalf("round steps %v, want %d transactions of writes", steps, mergeRounds)
	}
	if n := countRows(t, lb.a, "ledger_log"); n != 1 {
		t.Fatalf("ledger_log rows after the round = %d, want 1 (b's finish, newer than the round)", n)
	}
	if n := countRows(t, lb.a, finalRows); n != len(ks) {
		t.Fatalf("ledger rows = %d, want %d", n, len(ks))
	}
	c, err := Open(lb.ctx, OpenParams{Path: lb.path, Clock: lb.clk})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	lb.expect(t, want, lb.a, lb.b, c)
	if n := lb.a.mem.size(); n != len(newer) {
		t.Fatalf("a holds %d entries after the round and a lookup, want the %d newer ones", n, len(newer))
	}
	var owner string
	if err := lb.a.r.QueryRow(`SELECT merge_owner FROM ledger_meta`).Scan(&owner); err != nil || owner != "" {
		t.Fatalf("merge_owner after the round = %q, %v; want released", owner, err)
	}
}

// TestLedgerMergeRoundExclusion: a second round (another process) is refused
// while the first holds the lease; an inline merge elsewhere stops the first
// round; an expired lease is taken over.
func TestLedgerMergeRoundExclusion(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	ks := storetest.HashedKeys(8, 200)
	lb.claim(t, lb.a, ks)
	lb.finish(t, lb.a, ks[:100], store.LedgerComplete, "a1")
	want := map[string]string{}
	for _, k := range ks[:100] {
		want[k] = "a1"
	}
	var bErr error
	lb.a.merger.betweenTx = func(step int) {
		switch step {
		case 1:
			bErr = lb.b.mergeRound(lb.ctx) // refused: a holds the lease
		case 2:
			// b finishes more and merges inline (LedgerList does): a's
			// round must stop at its next transaction.
			lb.finish(t, lb.b, ks[100:], store.LedgerComplete, "b1")
			if err := lb.b.mergeLog(lb.ctx); err != nil {
				t.Error(err)
			}
		}
	}
	if err := lb.a.mergeRound(lb.ctx); !errors.Is(err, errMergeLost) {
		t.Fatalf("a's round after b's inline merge: %v, want errMergeLost", err)
	}
	if !errors.Is(bErr, errMergeLost) {
		t.Fatalf("b's round while a held the lease: %v, want errMergeLost", bErr)
	}
	for _, k := range ks[100:] {
		want[k] = "b1"
	}
	lb.expect(t, want, lb.a, lb.b)
	if n := countRows(t, lb.a, "ledger_log"); n != 0 {
		t.Fatalf("ledger_log rows = %d, want 0 (b merged everything)", n)
	}

	// A lease left by a dead round expires.
	lb.a.merger.betweenTx = nil
	if _, err := lb.a.w.Exec(`UPDATE ledger_meta SET merge_owner = 'dead', merge_until = ?`, nanos(lb.clk.Now().Add(mergeLeaseTTL))); err != nil {
		t.Fatal(err)
	}
	lb.finish(t, lb.a, ks[:1], store.LedgerComplete, "a2")
	want[ks[0]] = "a2"
	if err := lb.a.mergeRound(lb.ctx); !errors.Is(err, errMergeLost) {
		t.Fatalf("round under a live foreign lease: %v, want errMergeLost", err)
	}
	lb.clk.Advance(mergeLeaseTTL + time.Second)
	if err := lb.a.mergeRound(lb.ctx); err != nil {
		t.Fatalf("round after the foreign lease expired: %v", err)
	}
	lb.expect(t, want, lb.a, lb.b)
	if n := countRows(t, lb.a, "ledger_log"); n != 0 {
		t.Fatalf("ledger_log rows = %d after the takeover round, want 0", n)
	}
}

// TestLedgerFinishStartsBackgroundMerge: finishes past mergeEntries start a
// round in the background, which merges the log.
func TestLedgerFinishStartsBackgroundMerge(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	lb.a.mergeEntries = 50
	ks := storetest.HashedKeys(9, 60)
	lb.claim(t, lb.a, ks)
	lb.finish(t, lb.a, ks, store.LedgerComplete, "x") // 60 >= 50: a round starts
	lb.a.merger.wg.Wait()
	if n := countRows(t, lb.a, "ledger_log"); n != 0 {
		t.Fatalf("ledger_log rows after the background round = %d, want 0", n)
	}
	if n := countRows(t, lb.a, finalRows); n != len(ks) {
		t.Fatalf("ledger rows = %d, want %d", n, len(ks))
	}
}

// FuzzLedgerLogBody: a log body never panics the decoder, and whatever
// decodes re-encodes to a body that decodes alike (the same bytes for a
// body with minimal varints in the current form).
func FuzzLedgerLogBody(f *testing.F) {
	f.Add(encodeBody(kindClaim, 5, []logItem{{key: memKeyOf("k"), attempts: 1}}), 1, true)
	f.Add(encodeBody(kindClaim, 5, []logItem{{key: memKeyOf("k"), attempts: 1, result: "slot", may: inClaims},
		{key: memKeyOf(storetest.HashedKeys(1, 1)[0]), attempts: 2, may: inAny}}), 2, true)
	f.Add(encodeBody(kindFinish, 100, []logItem{{key: memKeyOf(storetest.HashedKeys(1, 1)[0]), state: store.LedgerRejected, attempts: 2, claimedAt: 90, message: "bad"}}), 1, false)
	f.Add(encodeBody(kindFinish, 100, []logItem{{key: memKeyOf("a"), state: store.LedgerAccepted, attempts: 1, claimedAt: 90, result: "p", may: inClaims},
		{key: memKeyOf("r"), state: store.LedgerReleased, claimedAt: 100, may: inLedger}, {key: memKeyOf("c"), state: store.LedgerComplete, attempts: 1, claimedAt: 100}}), 3, false)
	// Bodies as stores before migration 0009 wrote them (TestLogBodyGolden).
	f.Add([]byte("\x03tk1\x01"), 1, true)
	f.Add([]byte("\x03tk1\x01c\x14\x02r1\x00\x03tk2\x02r\x00\x00\x03bad"), 2, false)
	f.Fuzz(func(t *testing.T, body []byte, n int, claim bool) {
		kind := kindFinish
		if claim {
			kind = kindClaim
		}
		items, err := decodeBody(kind, 1000, n, body)
		if err != nil {
			return
		}
		if again := encodeBody(kind, 1000, items); string(again) != string(body) {
			// Varints have one canonical form only when minimal; a
			// non-minimal one decodes too, so compare the decoded items.
			back, err := decodeBody(kind, 1000, n, again)
			if err != nil || len(back) != len(items) {
				t.Fatalf("re-encoded body does not decode alike: %v", err)
			}
			for i := range items {
				if back[i] != items[i] {
					t.Fatalf("item %d: %+v != %+v", i, back[i], items[i])
				}
			}
		}
	})
}

// TestLedgerMergeDropsMergedClaims: claims merged while pending (in flight
// at a merge) leave ledger_claims when a later merge writes them final,
// whether the table is small next to the merge (read once and intersected)
// or not (one DELETE lookup per key); other claims stay.
func TestLedgerMergeDropsMergedClaims(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name          string
		inFlight, new int
	}{
		{"small claims table", 10, 200},
		{"large claims table", 100, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			lb := setupLog(t)
			ks := storetest.HashedKeys(11, tc.inFlight+tc.new+5)
			inFlight, fresh, open := ks[:tc.inFlight], ks[tc.inFlight:tc.inFlight+tc.new], ks[tc.inFlight+tc.new:]
			lb.claim(t, lb.a, inFlight)
			lb.claim(t, lb.a, open)
			if err := lb.a.mergeLog(lb.ctx); err != nil {
				t.Fatal(err)
			}
			if n := countRows(t, lb.a, "ledger_claims"); n != len(inFlight)+len(open) {
				t.Fatalf("ledger_claims after the first merge: %d rows, want %d", n, len(inFlight)+len(open))
			}
			lb.claim(t, lb.a, fresh)
			lb.finish(t, lb.a, append(append([]string(nil), fresh...), inFlight...), store.LedgerComplete, "r")
			if err := lb.a.mergeLog(lb.ctx); err != nil {
				t.Fatal(err)
			}
			if n := countRows(t, lb.a, "ledger_claims"); n != len(open) {
				t.Fatalf("ledger_claims after the second merge: %d rows, want the %d still open", n, len(open))
			}
			if n := countRows(t, lb.a, finalRows); n != len(inFlight)+len(fresh) {
				t.Fatalf("ledger: %d rows, want %d", n, len(inFlight)+len(fresh))
			}
			got := lb.get(t, lb.b, ks)
			for _, k := range append(append([]string(nil), fresh...), inFlight...) {
				if got[k].State != store.LedgerComplete {
					t.Fatalf("key %s: %+v, want complete", k[:8], got[k])
				}
			}
			for _, k := range open {
				if got[k].State != store.LedgerPending {
					t.Fatalf("open key %s: %+v, want pending", k[:8], got[k])
				}
			}
		})
	}
}
