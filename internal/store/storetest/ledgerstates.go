package storetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// The ledger states of docs/guide.md#what-a-run-does, docs/guide.md#the-ledger-and-its-retention beyond pending/complete/rejected/
// in_doubt: accepted entries, released keys, claim results, and a prune that
// keeps every slot's last delivered state.

func testLedgerStates(t *testing.T, open OpenFunc) {
	t.Run("Accepted", func(t *testing.T) { t.Parallel(); testLedgerAccepted(t, open) })
	t.Run("Released", func(t *testing.T) { t.Parallel(); testLedgerReleased(t, open) })
	t.Run("ReleasedFenced", func(t *testing.T) { t.Parallel(); testLedgerReleasedFenced(t, open) })
	t.Run("ClaimResults", func(t *testing.T) { t.Parallel(); testLedgerClaimResults(t, open) })
	t.Run("ClaimAbsent", func(t *testing.T) { t.Parallel(); testLedgerClaimAbsent(t, open) })
	t.Run("FinishAbsent", func(t *testing.T) { t.Parallel(); testLedgerFinishAbsent(t, open) })
	t.Run("CheckpointReleases", func(t *testing.T) { t.Parallel(); testCheckpointReleases(t, open) })
	t.Run("PruneKeepsSlots", func(t *testing.T) { t.Parallel(); testLedgerPruneKeepsSlots(t, open) })
	t.Run("Settled", func(t *testing.T) { t.Parallel(); testLedgerSettled(t, open) })
}

func claimKeys(t *testing.T, b *bundle, syncID string, fence, runID int64, ks []string) {
	t.Helper()
	noErr(t, b.st.LedgerClaim(b.ctx, store.LedgerClaimParams{SyncID: syncID, Fence: fence, RunID: runID, Keys: ks}))
}

func finishKeys(t *testing.T, b *bundle, syncID string, fence, runID int64, es ...store.LedgerFinish) {
	t.Helper()
	noErr(t, b.st.LedgerFinish(b.ctx, store.LedgerFinishParams{SyncID: syncID, Fence: fence, RunID: runID, Entries: es}))
}

func listKeys(t *testing.T, b *bundle, syncID string, state store.LedgerState, limit int) []string {
	t.Helper()
	es := must(b.st.LedgerList(b.ctx, syncID, state, limit))(t)
	out := make([]string, len(es))
	for i, e := range es {
		equal(t, fmt.Sprintf("LedgerList(%s)[%d].State", state, i), e.State, state)
		out[i] = e.Key
	}
	return out
}

func sameKeys(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

// testLedgerAccepted: an accepted entry keeps its Result and Message, is left alone by
// a claim (even under a newer fence), is listed newest first, survives a
// prune, and becomes complete or rejected when its process reports.
func testLedgerAccepted(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	l1 := acquire(t, b, "s1", "tok-1", time.Minute)
	ks := keys("a", 4)
	for i, k := range ks[:3] {
		claimKeys(t, b, "s1", l1.Fence, 1, []string{k})
		// A mirror's accepted entry keeps the handle it writes to as its Message.
		finishKeys(t, b, "s1", l1.Fence, 1, store.LedgerFinish{Key: k, State: store.LedgerAccepted, Result: fmt.Sprint("process-", i), Message: fmt.Sprint("to-", i)})
		b.clk.Advance(time.Second)
	}
	claimKeys(t, b, "s1", l1.Fence, 1, ks[3:])
	finishKeys(t, b, "s1", l1.Fence, 1, store.LedgerFinish{Key: ks[3], State: store.LedgerRejected, Message: "bad"})
	acceptedAt := Start
	got := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	a := got[ks[0]]
	equal(t, "accepted State", a.State, store.LedgerAccepted)
	equal(t, "accepted Result", a.Result, "process-0")
	equal(t, "accepted Message", a.Message, "to-0")
	equal(t, "accepted Fence", a.Fence, l1.Fence)
	equal(t, "accepted Attempts (its claim's)", a.Attempts, 1)
	sameTime(t, "accepted ClaimedAt", a.ClaimedAt, acceptedAt)
	sameTime(t, "accepted SeenAt", a.SeenAt, acceptedAt)
	if !a.CompletedAt.IsZero() {
		t.Fatalf("accepted CompletedAt = %v, want zero", a.CompletedAt)
	}

	// A claim under a newer fence leaves accepted entries alone (the
	// process is asked, never written again) and claims the rejected one.
	b.clk.Advance(2 * time.Minute)
	l2 := acquire(t, b, "s1", "tok-2", time.Minute)
	claimKeys(t, b, "s1", l2.Fence, 2, ks)
	after := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	for _, k := range ks[:3] {
		if after[k] != got[k] {
			t.Fatalf("accepted entry changed by a claim under a newer fence: %+v -> %+v", got[k], after[k])
		}
	}
	equal(t, "rejected re-claimed", after[ks[3]].State, store.LedgerPending)

	// Listed newest first, with a limit, per sync; not with other states.
	sameKeys(t, "accepted of s1", listKeys(t, b, "s1", store.LedgerAccepted, 0), ks[2], ks[1], ks[0])
	sameKeys(t, "accepted of s1, limit 2", listKeys(t, b, "s1", store.LedgerAccepted, 2), ks[2], ks[1])
	sameKeys(t, "accepted of s2", listKeys(t, b, "s2", store.LedgerAccepted, 0))
	sameKeys(t, "rejected of s1", listKeys(t, b, "s1", store.LedgerRejected, 0))
	listed := must(b.st.LedgerList(ctx, "s1", store.LedgerAccepted, 0))(t)
	if listed[2] != got[ks[0]] {
		t.Fatalf("listed accepted entry %+v, LedgerGet %+v", listed[2], got[ks[0]])
	}

	// A prune of everything seen before now keeps accepted entries.
	b.clk.Advance(30 * 24 * time.Hour)
	equal(t, "pruned", must(b.st.LedgerPrune(ctx, b.clk.Now()))(t), int64(0))
	equal(t, "accepted after a prune", len(listKeys(t, b, "s1", store.LedgerAccepted, 0)), 3)

	// The process reports: one record landed, one was refused.
	finishKeys(t, b, "s1", l2.Fence, 2,
		store.LedgerFinish{Key: ks[0], State: store.LedgerComplete, Result: "contact-0"},
		store.LedgerFinish{Key: ks[1], State: store.LedgerRejected, Message: "invalid email"})
	fin := must(b.st.LedgerGet(ctx, "s1", ks[:2]))(t)
	equal(t, "reported complete", fin[ks[0]].State, store.LedgerComplete)
	equal(t, "reported complete Result", fin[ks[0]].Result, "contact-0")
	equal(t, "reported complete Attempts", fin[ks[0]].Attempts, 1)
	equal(t, "reported rejected", fin[ks[1]].State, store.LedgerRejected)
	sameKeys(t, "accepted after the report", listKeys(t, b, "s1", store.LedgerAccepted, 0), ks[2])
}

// testLedgerReleased: a release removes pending, rejected, accepted and
// in_doubt entries and leaves complete ones (and absent keys) as they are; a
// released key reads and lists as absent, and a claim claims it afresh.
func testLedgerReleased(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	l := acquire(t, b, "s1", "tok", time.Hour)
	ks := keys("r", 7)
	pending, rejected, accepted, doubt, complete, absent, twice := ks[0], ks[1], ks[2], ks[3], ks[4], ks[5], ks[6]
	claimKeys(t, b, "s1", l.Fence, 1, []string{pending, rejected, accepted, doubt, complete, twice})
	claimKeys(t, b, "s2", acquire(t, b, "s2", "tok", time.Hour).Fence, 1, []string{pending}) // another sync's
	finishKeys(t, b, "s1", l.Fence, 1,
		store.LedgerFinish{Key: rejected, State: store.LedgerRejected, Message: "bad"},
		store.LedgerFinish{Key: accepted, State: store.LedgerAccepted, Result: "process-1"},
		store.LedgerFinish{Key: doubt, State: store.LedgerInDoubt},
		store.LedgerFinish{Key: complete, State: store.LedgerComplete, Result: "contact-1"})
	before := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	equal(t, "entries before the release", len(before), 6)

	b.clk.Advance(time.Second)
	var rel []store.LedgerFinish
	for _, k := range ks {
		rel = append(rel, store.LedgerFinish{Key: k, State: store.LedgerReleased})
	}
	// A key given twice: its last outcome wins (released, then complete).
	rel = append(rel, store.LedgerFinish{Key: twice, State: store.LedgerComplete, Result: "contact-2"})
	finishKeys(t, b, "s1", l.Fence, 1, rel...)

	got := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	equal(t, "entries after the release", len(got), 2)
	if got[complete] != before[complete] {
		t.Fatalf("complete entry changed by a release: %+v -> %+v", before[complete], got[complete])
	}
	equal(t, "released then complete", got[twice].State, store.LedgerComplete)
	equal(t, "released then complete Result", got[twice].Result, "contact-2")
	for _, k := range []string{pending, rejected, accepted, doubt, absent} {
		if e, ok := got[k]; ok {
			t.Fatalf("released key %s read back: %+v", k, e)
		}
	}
	equal(t, "other sync's pending key", must(b.st.LedgerGet(ctx, "s2", []string{pending}))(t)[pending].State, store.LedgerPending)
	for _, st := range []store.LedgerState{store.LedgerPending, store.LedgerRejected, store.LedgerAccepted, store.LedgerInDoubt} {
		sameKeys(t, "LedgerList("+string(st)+") after the release", listKeys(t, b, "s1", st, 0))
	}

	// Released again: nothing to remove (the two complete keys stay).
	finishKeys(t, b, "s1", l.Fence, 1, rel[:len(ks)]...)
	equal(t, "entries after a second release", len(must(b.st.LedgerGet(ctx, "s1", ks))(t)), 2)

	// Claimed again: as absent (attempts 1, this claim's time); the
	// complete key is left alone.
	b.clk.Advance(time.Second)
	claimAt := b.clk.Now()
	claimKeys(t, b, "s1", l.Fence, 2, ks[:5])
	again := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	for _, k := range ks[:4] {
		e := again[k]
		equal(t, "re-claimed State", e.State, store.LedgerPending)
		equal(t, "re-claimed Attempts", e.Attempts, 1)
		equal(t, "re-claimed RunID", e.RunID, int64(2))
		equal(t, "re-claimed Message", e.Message, "")
		sameTime(t, "re-claimed ClaimedAt", e.ClaimedAt, claimAt)
	}
	if again[complete] != before[complete] {
		t.Fatalf("complete entry changed by a claim: %+v -> %+v", before[complete], again[complete])
	}
	sameKeys(t, "pending after the claim", listKeys(t, b, "s1", store.LedgerPending, 0), ks[0], ks[1], ks[2], ks[3])

	// And finished again from the new claim.
	finishKeys(t, b, "s1", l.Fence, 2, store.LedgerFinish{Key: accepted, State: store.LedgerComplete, Result: "contact-3"})
	e := must(b.st.LedgerGet(ctx, "s1", []string{accepted}))(t)[accepted]
	equal(t, "finished after a release", e.State, store.LedgerComplete)
	equal(t, "finished after a release Attempts", e.Attempts, 1)
	sameTime(t, "finished after a release ClaimedAt", e.ClaimedAt, claimAt)
}

// testLedgerReleasedFenced: a release is fenced like every finish.
func testLedgerReleasedFenced(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	old := acquire(t, b, "s1", "tok-old", time.Minute)
	ks := keys("rf", 2)
	claimKeys(t, b, "s1", old.Fence, 1, ks)
	before := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	b.clk.Advance(2 * time.Minute)
	acquire(t, b, "s1", "tok-new", time.Minute)
	err := b.st.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s1", Fence: old.Fence, RunID: 1, Entries: []store.LedgerFinish{
		{Key: ks[0], State: store.LedgerReleased}, {Key: ks[1], State: store.LedgerReleased},
	}})
	wantErr(t, err, store.ErrFenced)
	after := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	equal(t, "entries after a fenced release", len(after), 2)
	for k, e := range before {
		if after[k] != e {
			t.Fatalf("entry %s changed by a fenced release: %+v -> %+v", k, e, after[k])
		}
	}
}

// testLedgerClaimResults: a claim's Results are its pending entries'
// Result, read back by LedgerGet and LedgerList(pending); a re-claim
// replaces them, a finish's outcome replaces them, and Results that are
// not one per key refuse the claim.
func testLedgerClaimResults(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	l := acquire(t, b, "s1", "tok", time.Hour)
	ks := keys("cr", 4)
	results := []string{"slot:a|gen:1", "slot:b|gen:1", "slot:c|gen:1", "slot:d|gen:1"}
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l.Fence, RunID: 1, Keys: ks[:3], Results: results[:3]}))
	claimKeys(t, b, "s1", l.Fence, 1, ks[3:]) // no Results
	got := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	for i, k := range ks[:3] {
		equal(t, "claimed Result", got[k].Result, results[i])
		equal(t, "claimed State", got[k].State, store.LedgerPending)
	}
	equal(t, "claimed without Results", got[ks[3]].Result, "")
	pend := must(b.st.LedgerList(ctx, "s1", store.LedgerPending, 0))(t)
	equal(t, "pending listed", len(pend), 4)
	for _, e := range pend {
		if e != got[e.Key] {
			t.Fatalf("listed pending %+v, LedgerGet %+v", e, got[e.Key])
		}
	}

	// Re-claimed (a rejected key, a pending one): the new claim's Results;
	// a key given twice keeps its last.
	finishKeys(t, b, "s1", l.Fence, 1, store.LedgerFinish{Key: ks[0], State: store.LedgerRejected, Message: "bad"})
	b.clk.Advance(time.Second)
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l.Fence, RunID: 2,
		Keys: []string{ks[0], ks[1], ks[0]}, Results: []string{"first", "slot:b|gen:2", "slot:a|gen:2"}}))
	again := must(b.st.LedgerGet(ctx, "s1", ks[:2]))(t)
	equal(t, "re-claimed rejected Result", again[ks[0]].Result, "slot:a|gen:2")
	equal(t, "re-claimed rejected Attempts", again[ks[0]].Attempts, 2)
	equal(t, "re-claimed pending Result", again[ks[1]].Result, "slot:b|gen:2")

	// A finish's Result replaces the claim's.
	finishKeys(t, b, "s1", l.Fence, 2, store.LedgerFinish{Key: ks[1], State: store.LedgerAccepted, Result: "process-9"},
		store.LedgerFinish{Key: ks[2], State: store.LedgerInDoubt})
	fin := must(b.st.LedgerGet(ctx, "s1", ks[1:3]))(t)
	equal(t, "accepted Result", fin[ks[1]].Result, "process-9")
	equal(t, "in_doubt Result", fin[ks[2]].Result, "")

	// Results that are not one per key: refused, nothing written.
	fresh := keys("crx", 2)
	err := b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l.Fence, RunID: 3, Keys: fresh, Results: results[:1]})
	if err == nil || errors.Is(err, store.ErrFenced) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("claim of 2 keys with 1 result = %v, want an invalid-argument error", err)
	}
	equal(t, "entries of a refused claim", len(must(b.st.LedgerGet(ctx, "s1", fresh))(t)), 0)
}

// testLedgerClaimAbsent: a claim whose caller read every key as absent
// (LedgerClaimParams.Absent) claims them; when some were present after all
// (an earlier holder's write landed between the read and the claim) it
// claims exactly as without Absent: a complete or in-doubt key left
// alone, a rejected one claimed again, nothing written twice; under a
// stale fence it writes nothing.
func testLedgerClaimAbsent(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	l1 := acquire(t, b, "s1", "tok-1", time.Minute)
	ks := keys("ab", 6)
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l1.Fence, RunID: 1,
		Keys: ks[:2], Results: []string{"slot:a|gen:1", "slot:b|gen:1"}, Absent: true}))
	got := must(b.st.LedgerGet(ctx, "s1", ks[:2]))(t)
	for _, k := range ks[:2] {
		equal(t, "claimed absent State", got[k].State, store.LedgerPending)
		equal(t, "claimed absent Attempts", got[k].Attempts, 1)
	}
	equal(t, "claimed absent Result", got[ks[1]].Result, "slot:b|gen:1")

	// Present after all: ks[0] complete, ks[1] rejected, ks[2] in doubt.
	finishKeys(t, b, "s1", l1.Fence, 1,
		store.LedgerFinish{Key: ks[0], State: store.LedgerComplete, Result: "ref-0"},
		store.LedgerFinish{Key: ks[1], State: store.LedgerRejected, Message: "bad"},
		store.LedgerFinish{Key: ks[2], State: store.LedgerInDoubt})
	b.clk.Advance(time.Second)
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l1.Fence, RunID: 2, Keys: ks[:4], Absent: true}))
	got = must(b.st.LedgerGet(ctx, "s1", ks[:4]))(t)
	equal(t, "complete key claimed as absent: State", got[ks[0]].State, store.LedgerComplete)
	equal(t, "complete key claimed as absent: Result", got[ks[0]].Result, "ref-0")
	equal(t, "rejected key claimed as absent: State", got[ks[1]].State, store.LedgerPending)
	equal(t, "rejected key claimed as absent: Attempts", got[ks[1]].Attempts, 2)
	equal(t, "in-doubt key claimed as absent: State", got[ks[2]].State, store.LedgerInDoubt)
	equal(t, "absent key beside present ones: State", got[ks[3]].State, store.LedgerPending)
	equal(t, "absent key beside present ones: Attempts", got[ks[3]].Attempts, 1)

	// A newer holder's fence refuses an older holder's claim whole.
	b.clk.Advance(2 * time.Minute)
	l2 := acquire(t, b, "s1", "tok-2", time.Minute)
	claimKeys(t, b, "s1", l2.Fence, 3, ks[5:])
	err := b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l1.Fence, RunID: 2, Keys: ks[4:], Absent: true})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("claim of absent keys under a stale fence = %v, want ErrFenced", err)
	}
	got = must(b.st.LedgerGet(ctx, "s1", ks[4:]))(t)
	equal(t, "entries of a fenced claim", len(got), 1)
	equal(t, "the newer holder's claim: Fence", got[ks[5]].Fence, l2.Fence)
}

// testLedgerFinishAbsent: marks whose caller read their keys as absent
// (LedgerFinish.Absent: a slot's first delivered state) are recorded; when
// one was present after all, by LedgerFinish or in a checkpoint, every mark
// is recorded as it would be without Absent (the checkpoint's cursor and
// run with them), and a fenced one writes nothing.
func testLedgerFinishAbsent(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	run := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	l := acquire(t, b, "s1", "tok", time.Hour)
	slots, dl := keys("fa-slot", 4), keys("fa-dlv", 4)
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l.Fence, RunID: run.ID, Keys: dl}))
	finishKeys(t, b, "s1", l.Fence, run.ID,
		store.LedgerFinish{Key: slots[0], State: store.LedgerComplete, Result: "state-0", Absent: true},
		store.LedgerFinish{Key: dl[0], State: store.LedgerReleased})
	got := must(b.st.LedgerGet(ctx, "s1", []string{slots[0], dl[0]}))(t)
	equal(t, "entries after a finish of an absent slot", len(got), 1)
	equal(t, "absent slot's Result", got[slots[0]].Result, "state-0")
	equal(t, "absent slot's State", got[slots[0]].State, store.LedgerComplete)

	// slots[0] is present now; said to be absent again beside a new one.
	finishKeys(t, b, "s1", l.Fence, run.ID,
		store.LedgerFinish{Key: slots[0], State: store.LedgerComplete, Result: "state-0b", Absent: true},
		store.LedgerFinish{Key: slots[1], State: store.LedgerComplete, Result: "state-1", Absent: true},
		store.LedgerFinish{Key: dl[1], State: store.LedgerReleased})
	got = must(b.st.LedgerGet(ctx, "s1", []string{slots[0], slots[1], dl[1]}))(t)
	equal(t, "entries after a finish of a slot present after all", len(got), 2)
	equal(t, "present slot's Result", got[slots[0]].Result, "state-0b")
	equal(t, "new slot's Result", got[slots[1]].Result, "state-1")

	// The same in a checkpoint, with its cursor and run.
	r := run
	r.Fence, r.Pages = l.Fence, 1
	cp := store.CheckpointParams{
		Cursor: store.SaveCursorParams{SyncID: "s1", Value: "page-1", Fence: l.Fence, RunID: run.ID},
		Run:    r,
		Lease:  &store.CheckpointLease{Token: "tok", TTL: time.Hour},
		Finish: []store.LedgerFinish{
			{Key: slots[1], State: store.LedgerComplete, Result: "state-1b", Absent: true},
			{Key: slots[2], State: store.LedgerComplete, Result: "state-2", Absent: true},
			{Key: dl[2], State: store.LedgerReleased},
		},
	}
	noErr(t, b.st.Checkpoint(ctx, cp))
	got = must(b.st.LedgerGet(ctx, "s1", []string{slots[1], slots[2], dl[2]}))(t)
	equal(t, "entries after a checkpoint of a slot present after all", len(got), 2)
	equal(t, "present slot's Result after the checkpoint", got[slots[1]].Result, "state-1b")
	equal(t, "new slot's Result after the checkpoint", got[slots[2]].Result, "state-2")
	equal(t, "cursor of the checkpoint", must(b.st.GetCursor(ctx, "s1"))(t).Value, "page-1")
	equal(t, "run of the checkpoint", must(b.st.GetRun(ctx, run.ID))(t).Pages, int64(1))

	// Without a renewal (the checkpoint's other path), then fenced.
	cp.Lease, cp.Cursor.Value, cp.Run.Pages = nil, "page-2", 2
	cp.Finish = []store.LedgerFinish{{Key: slots[2], State: store.LedgerComplete, Result: "state-2b", Absent: true},
		{Key: slots[3], State: store.LedgerComplete, Result: "state-3", Absent: true}}
	noErr(t, b.st.Checkpoint(ctx, cp))
	got = must(b.st.LedgerGet(ctx, "s1", slots[2:]))(t)
	equal(t, "present slot's Result after a checkpoint without renewal", got[slots[2]].Result, "state-2b")
	equal(t, "new slot's Result after a checkpoint without renewal", got[slots[3]].Result, "state-3")
	equal(t, "cursor of the checkpoint without renewal", must(b.st.GetCursor(ctx, "s1"))(t).Value, "page-2")

	b.clk.Advance(2 * time.Hour)
	l2 := acquire(t, b, "s1", "tok-2", time.Hour)
	claimKeys(t, b, "s1", l2.Fence, run.ID, keys("fa-new", 1))
	cp.Cursor.Value, cp.Run.Pages = "page-3", 3
	cp.Finish = []store.LedgerFinish{{Key: slots[3], State: store.LedgerComplete, Result: "stale", Absent: true}}
	wantErr(t, b.st.Checkpoint(ctx, cp), store.ErrFenced)
	equal(t, "slot after a fenced checkpoint", must(b.st.LedgerGet(ctx, "s1", slots[3:]))(t)[slots[3]].Result, "state-3")
	equal(t, "cursor after a fenced checkpoint", must(b.st.GetCursor(ctx, "s1"))(t).Value, "page-2")
}

// testCheckpointReleases: the runner's page: a checkpoint whose Finish
// completes the page's slots and releases its delivery keys, in one
// transaction with the cursor, and refused whole when fenced.
func testCheckpointReleases(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	run := must(b.st.InsertRun(ctx, store.InsertRunParams{SyncID: "s1", State: store.RunRunning, Attempt: 1}))(t)
	old := acquire(t, b, "s1", "tok-old", time.Minute)
	slots, deliveries := keys("slot", 3), keys("dlv", 3)
	all := append(append([]string{}, slots...), deliveries...)
	page := func(n int, l store.Lease, renew bool) store.CheckpointParams {
		r := run
		r.Fence = l.Fence
		r.Pages = int64(n)
		cp := store.CheckpointParams{
			Cursor: store.SaveCursorParams{SyncID: "s1", Value: fmt.Sprint("page-", n), Fence: l.Fence, RunID: run.ID},
			Run:    r,
		}
		if renew {
			cp.Lease = &store.CheckpointLease{Token: l.Token, TTL: time.Minute}
		}
		for i := range slots {
			cp.Finish = append(cp.Finish, store.LedgerFinish{Key: slots[i], State: store.LedgerComplete, Result: fmt.Sprint("state-", n, "-", i)},
				store.LedgerFinish{Key: deliveries[i], State: store.LedgerReleased})
		}
		return cp
	}
	results := []string{"slot-0", "slot-1", "slot-2"}
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: old.Fence, RunID: run.ID, Keys: deliveries, Results: results}))

	// The old holder stalls and a new one takes over: the old holder's
	// checkpoint is fenced, and nothing of it is written.
	b.clk.Advance(2 * time.Minute)
	l := acquire(t, b, "s1", "tok-new", time.Minute)
	wantErr(t, b.st.Checkpoint(ctx, page(1, old, false)), store.ErrFenced)
	got := must(b.st.LedgerGet(ctx, "s1", all))(t)
	equal(t, "entries after a fenced checkpoint", len(got), len(deliveries))
	for i, k := range deliveries {
		equal(t, "delivery after a fenced checkpoint", got[k].State, store.LedgerPending)
		equal(t, "delivery Result after a fenced checkpoint", got[k].Result, results[i])
	}
	equal(t, "cursor after a fenced checkpoint", must(b.st.GetCursor(ctx, "s1"))(t).Value, "")

	// The new holder claims the page again and checkpoints it: slots
	// complete, deliveries gone, cursor saved, lease renewed.
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l.Fence, RunID: run.ID, Keys: deliveries, Results: results}))
	b.clk.Advance(time.Second)
	noErr(t, b.st.Checkpoint(ctx, page(1, l, true)))
	got = must(b.st.LedgerGet(ctx, "s1", all))(t)
	equal(t, "entries after the checkpoint", len(got), len(slots))
	for i, k := range slots {
		equal(t, "slot State", got[k].State, store.LedgerComplete)
		equal(t, "slot Result", got[k].Result, fmt.Sprint("state-1-", i))
		equal(t, "slot Fence", got[k].Fence, l.Fence)
		sameTime(t, "slot CompletedAt", got[k].CompletedAt, b.clk.Now())
	}
	equal(t, "cursor", must(b.st.GetCursor(ctx, "s1"))(t).Value, "page-1")
	sameTime(t, "lease renewed", must(b.st.LeaseGet(ctx, "s1"))(t).ExpiresAt, b.clk.Now().Add(time.Minute))
	sameKeys(t, "pending after the checkpoint", listKeys(t, b, "s1", store.LedgerPending, 0))

	// The next page of the same slots: new deliveries, claimed as absent,
	// released with the slots' new state.
	noErr(t, b.st.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s1", Fence: l.Fence, RunID: run.ID, Keys: deliveries, Results: results}))
	equal(t, "re-claimed delivery Attempts", must(b.st.LedgerGet(ctx, "s1", deliveries[:1]))(t)[deliveries[0]].Attempts, 1)
	noErr(t, b.st.Checkpoint(ctx, page(2, l, true)))
	got = must(b.st.LedgerGet(ctx, "s1", all))(t)
	equal(t, "entries after the second checkpoint", len(got), len(slots))
	equal(t, "slot Result after the second checkpoint", got[slots[2]].Result, "state-2-2")
}

// testLedgerPruneKeepsSlots: a prune deletes old rejected and in_doubt
// entries only: complete (however old), accepted and pending stay, and a
// recently seen rejected entry too.
func testLedgerPruneKeepsSlots(t *testing.T, open OpenFunc) {
	b := setup(t, open)
	ctx := b.ctx
	l := acquire(t, b, "s1", "tok", time.Hour)
	ks := keys("pk", 6)
	claimKeys(t, b, "s1", l.Fence, 1, ks)
	finishKeys(t, b, "s1", l.Fence, 1,
		store.LedgerFinish{Key: ks[0], State: store.LedgerComplete, Result: "slot-state"},
		store.LedgerFinish{Key: ks[1], State: store.LedgerAccepted, Result: "process"},
		store.LedgerFinish{Key: ks[2], State: store.LedgerRejected, Message: "old"},
		store.LedgerFinish{Key: ks[3], State: store.LedgerInDoubt},
		store.LedgerFinish{Key: ks[4], State: store.LedgerRejected, Message: "seen again"})
	b.clk.Advance(365 * 24 * time.Hour)
	noErr(t, b.st.LedgerTouch(ctx, "s1", ks[4:5]))
	equal(t, "pruned", must(b.st.LedgerPrune(ctx, b.clk.Now().Add(-time.Hour)))(t), int64(2))
	left := must(b.st.LedgerGet(ctx, "s1", ks))(t)
	equal(t, "entries left", len(left), 4)
	for k, st := range map[string]store.LedgerState{ks[0]: store.LedgerComplete, ks[1]: store.LedgerAccepted,
		ks[4]: store.LedgerRejected, ks[5]: store.LedgerPending} {
		equal(t, "state left", left[k].State, st)
	}
	equal(t, "a year-old complete entry's Result", left[ks[0]].Result, "slot-state")
}
