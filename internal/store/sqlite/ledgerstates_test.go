package sqlite

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

// tablesOf returns the ledger tables holding key (of any sync).
func tablesOf(t *testing.T, s *Store, key string) []string {
	t.Helper()
	var out []string
	for _, table := range []string{"ledger", "ledger_done", "ledger_claims"} {
		var n int
		if err := s.r.QueryRow(`SELECT count(*) FROM `+table+` WHERE key = `+sqlKey("?1"), keyArg(key)).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			out = append(out, table)
		}
	}
	return out
}

func (lb *logBundle) merge(t *testing.T, s *Store) {
	t.Helper()
	if err := s.mergeLog(lb.ctx); err != nil {
		t.Fatal(err)
	}
}

func (lb *logBundle) release(t *testing.T, s *Store, keys ...string) {
	t.Helper()
	lb.finish(t, s, keys, store.LedgerReleased, "")
}

// inMemory reports whether s's memory holds an entry (or a tombstone) of key.
func inMemory(s *Store, key string) bool {
	s.mem.mu.Lock()
	defer s.mem.mu.Unlock()
	for _, es := range s.mem.entries {
		if _, ok := es[memKeyOf(key)]; ok {
			return true
		}
	}
	return false
}

// TestLedgerReleaseAcrossMerges: a released key reads as absent from
// memory and from the tables, and after the merge is in no table, wherever
// its entry was (a merged claim, a merged accepted entry, an entry written
// over a merged complete one); a claim and a release that meet in memory
// leave nothing for the merge; a released key claimed again is found again
// by a store with a key filter.
func TestLedgerReleaseAcrossMerges(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	a, b := lb.a, lb.b
	ks := storetest.HashedKeys(31, 8)
	mergedClaim, sameWindow, accepted, doubtOverDone, claimOverDone, complete, slot := ks[0], ks[1], ks[2], ks[3], ks[4], ks[5], ks[6]
	absent := func(when string, keys ...string) {
		t.Helper()
		for _, s := range []*Store{a, b} {
			got := lb.get(t, s, keys)
			for _, k := range keys {
				if e, ok := got[k]; ok {
					t.Fatalf("%s: key %s… read back %+v", when, k[:8], e)
				}
			}
		}
	}
	if got := lb.get(t, b, ks); len(got) != 0 { // b builds its key filter on empty tables
		t.Fatalf("entries before any write: %d", len(got))
	}

	lb.claim(t, a, []string{mergedClaim, accepted, doubtOverDone, claimOverDone, complete})
	lb.finish(t, a, []string{accepted}, store.LedgerAccepted, "process-1")
	lb.finish(t, a, []string{doubtOverDone, claimOverDone, complete}, store.LedgerComplete, "contact")
	lb.merge(t, a)
	for k, table := range map[string]string{mergedClaim: "ledger_claims", accepted: "ledger", doubtOverDone: "ledger_done", complete: "ledger_done"} {
		if got := tablesOf(t, a, k); len(got) != 1 || got[0] != table {
			t.Fatalf("after the first merge key %s… is in %v, want %s", k[:8], got, table)
		}
	}

	// Entries written over a complete one in ledger_done, then released.
	lb.finish(t, a, []string{doubtOverDone}, store.LedgerInDoubt, "")
	lb.finish(t, a, []string{claimOverDone}, store.LedgerRejected, "")
	lb.claim(t, a, []string{claimOverDone})
	// A claim and its release in the same window (the runner's page).
	lb.claim(t, a, []string{sameWindow})
	logBefore := countRows(t, a, "ledger_log")
	lb.release(t, a, mergedClaim, sameWindow, accepted, doubtOverDone, claimOverDone, complete)
	if n := countRows(t, a, "ledger_log"); n != logBefore+1 {
		t.Fatalf("ledger_log rows after the release: %d, want %d", n, logBefore+1)
	}
	if inMemory(a, sameWindow) {
		t.Fatal("a claim released in its own merge window is still in memory")
	}
	absent("before the merge", mergedClaim, sameWindow, accepted, doubtOverDone, claimOverDone)
	if inMemory(b, sameWindow) {
		t.Fatal("b still holds the claim released in its own merge window")
	}
	lb.merge(t, b)
	absent("after the merge", mergedClaim, sameWindow, accepted, doubtOverDone, claimOverDone)
	for _, k := range []string{mergedClaim, sameWindow, accepted, doubtOverDone, claimOverDone} {
		if got := tablesOf(t, a, k); len(got) != 0 {
			t.Fatalf("released key %s… is still in %v after the merge", k[:8], got)
		}
	}
	if a.mem.size() != 0 || b.mem.size() != 0 {
		t.Fatalf("memory after the merge: a %d, b %d entries", a.mem.size(), b.mem.size())
	}
	if e := lb.get(t, b, []string{complete})[complete]; e.State != store.LedgerComplete || e.Result != "contact" {
		t.Fatalf("released complete key: %+v, want it kept", e)
	}
	if got := tablesOf(t, a, complete); len(got) != 1 || got[0] != "ledger_done" {
		t.Fatalf("released complete key is in %v, want ledger_done", got)
	}

	// A release of complete and absent keys only writes no log row.
	logBefore = countRows(t, a, "ledger_log")
	lb.release(t, a, complete, slot)
	if n := countRows(t, a, "ledger_log"); n != logBefore {
		t.Fatalf("a release with nothing to remove wrote %d log rows", n-logBefore)
	}

	// Claimed again: found by b (whose key filter saw the keys merged and
	// deleted) from memory, and from the tables after a merge.
	lb.claim(t, a, []string{mergedClaim, sameWindow})
	lb.get(t, b, ks[7:]) // b applies the claim's log row before a merges it
	lb.merge(t, a)
	got := lb.get(t, b, []string{mergedClaim, sameWindow})
	for _, k := range []string{mergedClaim, sameWindow} {
		if e := got[k]; e.State != store.LedgerPending || e.Attempts != 1 {
			t.Fatalf("re-claimed key %s…: %+v, want pending attempts 1", k[:8], e)
		}
	}
	if !b.mem.hasFilter(1) {
		t.Fatal("b read the re-claimed keys without a key filter: the test did not exercise it")
	}
}

// TestLedgerReleaseDuringRound: claims that a background round has set out
// to merge are released or completed by another store before the round
// writes them: the round writes the claims into ledger_claims, and the
// released keys must still read as absent everywhere, the completed ones as
// complete, and the next merge must delete the claims (round_through tells
// the other store the claims may be written).
func TestLedgerReleaseDuringRound(t *testing.T) {
	t.Parallel()
	lb := setupLog(t)
	a, b := lb.a, lb.b
	ks := storetest.HashedKeys(32, 40)
	lb.claim(t, a, ks)
	lb.get(t, b, ks[:1]) // b reads the claims into memory
	released, completed := ks[:20], ks[20:]
	a.merger.betweenTx = func(step int) {
		if step == 0 { // the round has registered; it has written nothing yet
			lb.release(t, b, released...)
			lb.finish(t, b, completed, store.LedgerComplete, "c")
		}
	}
	if err := a.mergeRound(lb.ctx); err != nil {
		t.Fatal(err)
	}
	if n := countRows(t, a, "ledger_claims"); n != len(ks) {
		t.Fatalf("ledger_claims after the round: %d rows, want the %d claims it merged", n, len(ks))
	}
	c, err := Open(lb.ctx, OpenParams{Path: lb.path, Clock: lb.clk})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	expect := func(when string) {
		t.Helper()
		for i, s := range []*Store{a, b, c} {
			if got := lb.get(t, s, released); len(got) != 0 {
				t.Fatalf("%s: store %d reads %d released keys", when, i, len(got))
			}
			got := lb.get(t, s, completed)
			for _, k := range completed {
				if e := got[k]; e.State != store.LedgerComplete || e.Result != "c" {
					t.Fatalf("%s: store %d reads completed key %s… as %+v", when, i, k[:8], e)
				}
			}
		}
	}
	expect("after the round")
	lb.merge(t, c)
	if n := countRows(t, a, "ledger_claims"); n != 0 {
		t.Fatalf("ledger_claims after the next merge: %d rows, want 0", n)
	}
	if n := countRows(t, a, finalRows); n != len(completed) {
		t.Fatalf("final rows after the next merge: %d, want %d", n, len(completed))
	}
	expect("after the merge")
}

// TestMigrateLedgerV8: a file at migration 8 with unmerged log rows in the
// old body form and entries in every table opens at migration 9 with every
// entry as it was; old log entries are merged, released and finished
// accepted like new ones.
func TestMigrateLedgerV8(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v8.db")
	db, err := sql.Open("sqlite", path+"?_txlock=immediate&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var v8 []migration
	for _, m := range ms {
		if m.Version <= 8 {
			v8 = append(v8, m)
		}
	}
	if err := migrateList(ctx, db, storetest.Start, v8); err != nil {
		t.Fatal(err)
	}
	ks := storetest.HashedKeys(33, 6)
	rejected, legacy, done, claimed, fromLog, reclaimed := ks[0], ks[1], ks[2], ks[3], ks[4], ks[5]
	at := storetest.Start.UnixNano()
	blob := func(k string) []byte { return []byte(memKeyOf(k)[1:]) }
	exec := func(q string, args ...any) {
		t.Helper()
		if _, err := db.Exec(q, args...); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec(`INSERT INTO ledger_syncs (id, sync_id) VALUES (1, 's')`)
	exec(`INSERT INTO fences (sync_id, fence) VALUES ('s', 1)`)
	exec(`INSERT INTO ledger (sid, key, state, fence, run_id, message, attempts, claimed_at, seen_at) VALUES (1, ?, 'rejected', 1, 1, 'bad', 1, ?, ?)`, blob(rejected), at, at)
	exec(`INSERT INTO ledger (sid, key, state, fence, run_id, result, attempts, claimed_at, completed_at, seen_at) VALUES (1, ?, 'complete', 1, 1, 'old', 1, ?, ?, ?)`, blob(legacy), at, at, at)
	exec(`INSERT INTO ledger_done (sid, key, seen_at, v) VALUES (1, ?, ?, ?)`, blob(done), at,
		appendDone(nil, memEntry{state: store.LedgerComplete, fence: 1, runID: 1, attempts: 1, claimedAt: at, completedAt: at, result: "done"}))
	exec(`INSERT INTO ledger_claims (sid, key, fence, run_id, attempts, claimed_at, seen_at) VALUES (1, ?, 1, 1, 1, ?, ?)`, blob(claimed), at, at)
	// The old log: a claim of a new key and of the rejected one (attempts
	// 2), then the new key's finish, in the bodies of before migration 9.
	hk := func(k string) string { return "\x21" + memKeyOf(k) }
	exec(`INSERT INTO ledger_log (seq, sid, kind, fence, run_id, at, n, body) VALUES (1, 1, 1, 1, 2, ?, 3, ?)`, at+10,
		[]byte(hk(fromLog)+"\x01"+hk(reclaimed)+"\x01"+hk(rejected)+"\x02"))
	exec(`INSERT INTO ledger_log (seq, sid, kind, fence, run_id, at, n, body) VALUES (2, 1, 2, 1, 2, ?, 1, ?)`, at+20,
		[]byte(hk(fromLog)+"\x01c\x14\x04new1\x00"))
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, OpenParams{Path: path, Clock: clock.NewFake(storetest.Start.Add(time.Second))})
	if err != nil {
		t.Fatalf("Open (migrating): %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if v, err := s.SchemaVersion(ctx); err != nil || v < 9 {
		t.Fatalf("schema version %d, %v", v, err)
	}
	check := func(when string, want map[string]store.LedgerState) {
		t.Helper()
		got, err := s.LedgerGet(ctx, "s", ks)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d entries %+v, want %d", when, len(got), got, len(want))
		}
		for k, st := range want {
			if got[k].State != st {
				t.Fatalf("%s: key %s… %+v, want %s", when, k[:8], got[k], st)
			}
		}
	}
	check("after the migration", map[string]store.LedgerState{rejected: store.LedgerPending, legacy: store.LedgerComplete,
		done: store.LedgerComplete, claimed: store.LedgerPending, fromLog: store.LedgerComplete, reclaimed: store.LedgerPending})
	got, err := s.LedgerGet(ctx, "s", []string{rejected, fromLog})
	if err != nil || got[rejected].Attempts != 2 || got[fromLog].Result != "new1" || !got[fromLog].ClaimedAt.Equal(fromNanos(at+10)) {
		t.Fatalf("old log entries read back: %+v, %v", got, err)
	}

	// The old log's claims released and finished accepted, the old claim
	// table's one accepted too; then merged.
	fin := []store.LedgerFinish{
		{Key: rejected, State: store.LedgerReleased}, {Key: reclaimed, State: store.LedgerReleased},
		{Key: claimed, State: store.LedgerAccepted, Result: "process-1"},
	}
	if err := s.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s", Fence: 1, RunID: 3, Entries: fin}); err != nil {
		t.Fatal(err)
	}
	if err := s.mergeLog(ctx); err != nil {
		t.Fatal(err)
	}
	check("after the merge", map[string]store.LedgerState{legacy: store.LedgerComplete, done: store.LedgerComplete,
		claimed: store.LedgerAccepted, fromLog: store.LedgerComplete})
	for _, k := range []string{rejected, reclaimed} {
		if got := tablesOf(t, s, k); len(got) != 0 {
			t.Fatalf("released key %s… is still in %v", k[:8], got)
		}
	}
	if got := tablesOf(t, s, claimed); len(got) != 1 || got[0] != "ledger" {
		t.Fatalf("accepted key is in %v, want ledger", got)
	}
	list, err := s.LedgerList(ctx, "s", store.LedgerAccepted, 0)
	if err != nil || len(list) != 1 || list[0].Key != claimed || list[0].Result != "process-1" || list[0].Attempts != 1 {
		t.Fatalf("accepted list %+v, %v", list, err)
	}
	var index string
	if err := s.r.QueryRow(`SELECT sql FROM sqlite_master WHERE name = 'ledger_listed'`).Scan(&index); err != nil {
		t.Fatalf("index ledger_listed: %v", err)
	}
}
