package destinationtest

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
)

// runLostAnswers runs the cases about answers lost after the server applied
// a write, and about 429 storms, for harnesses whose Target counts
// duplicate writes (Duplicates): a record whose answer was lost is in
// doubt, never Delivered or NotSent, and settling it the way the runner
// does (Verify, or an idempotent resend) writes nothing twice
// (docs/guide.md#the-ledger-and-its-retention).
func runLostAnswers(t *testing.T, h Harness, records func(int) []destination.Record) {
	setup := func(t *testing.T, f Faults, retries int) Target {
		t.Helper()
		tg := h.Setup(t, Config{Faults: f, Sleep: NoSleep, MaxRetries: retries, Clock: clock.NewFake(time.Now())})
		t.Cleanup(func() { _ = tg.Dest.Close() })
		return tg
	}
	if h.Storms {
		runStorm(t, h, records, setup)
	}
	if !h.LostAnswers {
		return
	}
	t.Run("LostAnswerIsInDoubtAndSettledOnce", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{DropAnswers: 1}, suiteRetries)
		if tg.Duplicates == nil {
			t.Fatal("Harness.LostAnswers needs Target.Duplicates")
		}
		if tg.Dest.Capability() == destination.CapNone {
			t.Fatal("Harness.LostAnswers on a destination that can neither verify nor resend")
		}
		recs := records(3)
		res, err := tg.Dest.Write(t.Context(), recs)
		if err == nil {
			t.Fatal("Write whose answer was lost returned no error")
		}
		if code := failure.CodeOf(err); code != failure.DestinationUnavailable {
			t.Errorf("Write error %v: code %s, want %s", err, code, failure.DestinationUnavailable)
		}
		res = settle(t, h.Async, tg, recs, res)
		settled := map[string]destination.Result{}
		for _, r := range res {
			settled[r.Key] = r
		}
		if len(settled) == len(recs) {
			t.Fatalf("every record settled (%v) though one write's answer was lost: nothing is in doubt", res)
		}
		// Settle the rest as the runner does: in doubt → Verify (or resend
		// when idempotent); not sent → send again.
		var doubt, again []destination.Record
		for _, r := range recs {
			got, ok := settled[r.Key]
			switch {
			case !ok:
				doubt = append(doubt, r)
			case got.Outcome == destination.NotSent:
				again = append(again, r)
			case got.Outcome != destination.Delivered:
				t.Errorf("record %s: outcome %v, want delivered, not sent or in doubt", r.Key[:8], got.Outcome)
			}
		}
		if tg.Dest.Capability() == destination.CapVerify {
			landed, err := tg.Dest.Verify(t.Context(), doubt, time.Now().Add(-time.Minute))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if len(landed) == 0 {
				t.Errorf("Verify found none of the %d in-doubt records, though the server applied their write", len(doubt))
			}
			for _, r := range doubt {
				if _, ok := landed[r.Key]; !ok {
					again = append(again, r)
				}
			}
		} else {
			again = append(again, doubt...)
		}
		if len(again) > 0 {
			res, err := tg.Dest.Write(t.Context(), again)
			if err != nil {
				t.Fatalf("Write of the records not landed: %v", err)
			}
			for _, r := range settle(t, h.Async, tg, again, res) {
				if r.Outcome != destination.Delivered {
					t.Errorf("record %s sent again: outcome %v", r.Key[:8], r.Outcome)
				}
			}
		}
		if got := tg.Stored(); got != int64(len(recs)) {
			t.Errorf("server stores %d records, want %d", got, len(recs))
		}
		if n := tg.Duplicates(); n != 0 {
			t.Errorf("%d duplicate writes after settling a lost answer, want 0", n)
		}
	})
}

func runStorm(t *testing.T, h Harness, records func(int) []destination.Record, setup func(*testing.T, Faults, int) Target) {
	t.Run("RateLimitStormEnds", func(t *testing.T) {
		t.Parallel()
		tg := setup(t, Faults{RateLimitStorm: 3}, 10)
		recs := records(10)
		res, err := tg.Dest.Write(t.Context(), recs)
		if err != nil {
			t.Fatalf("Write through a 429 storm that ends: %v", err)
		}
		byKey := checkResults(t, recs, settle(t, h.Async, tg, recs, res))
		for _, r := range recs {
			if got := byKey[r.Key]; got.Outcome != destination.Delivered {
				t.Errorf("record %s: outcome %v (%q), want delivered", r.Key[:8], got.Outcome, got.Message)
			}
		}
		if n := tg.Requests(); n <= 3 {
			t.Errorf("server got %d requests, want more than the 3 answered 429", n)
		}
		if got := tg.Stored(); got != int64(len(recs)) {
			t.Errorf("server stores %d records, want %d", got, len(recs))
		}
		if tg.Duplicates != nil {
			if n := tg.Duplicates(); n != 0 {
				t.Errorf("%d duplicate writes after a 429 storm, want 0", n)
			}
		}
	})
}

// runWriteModes runs a case for each write mode the harness declares
// (docs/guide.md#write-modes).
func runWriteModes(t *testing.T, h Harness, records func(int) []destination.Record) {
	if len(h.WriteModes) == 0 {
		return
	}
	if h.Changed == nil {
		t.Fatal("Harness.WriteModes needs Harness.Changed")
	}
	setup := func(t *testing.T, m destination.WriteMode) Target {
		t.Helper()
		tg := h.Setup(t, Config{WriteMode: m, Sleep: NoSleep, MaxRetries: suiteRetries, Clock: clock.NewFake(time.Now())})
		t.Cleanup(func() { _ = tg.Dest.Close() })
		if tg.Put == nil || tg.Lookup == nil {
			t.Fatal("write-mode cases need Target.Put and Target.Lookup")
		}
		return tg
	}
	write := func(t *testing.T, tg Target, recs []destination.Record) map[string]destination.Result {
		t.Helper()
		return writeSettled(t, h.Async, tg, recs)
	}
	expect := func(t *testing.T, tg Target, r destination.Record, present, same bool) {
		t.Helper()
		p, s := tg.Lookup(r)
		if p != present || (present && s != same) {
			t.Errorf("record %s at the server: present %v, same data %v; want %v, %v", r.Key[:8], p, s, present, same)
		}
	}
	if slices.Contains(h.WriteModes, destination.Update) {
		t.Run("UpdateSkipsMissingAndCreatesNothing", func(t *testing.T) {
			t.Parallel()
			tg := setup(t, destination.Update)
			old := records(2)
			for _, r := range old {
				tg.Put(r)
			}
			recs := []destination.Record{h.Changed(0), h.Changed(1), h.Changed(2)}
			byKey := write(t, tg, recs)
			for i, r := range recs {
				got := byKey[r.Key]
				want := ""
				if i == 2 {
					want = destination.SkipNotFound
				}
				if got.Outcome != destination.Delivered || got.Skipped != want {
					t.Errorf("record %d: %v skipped %q (%s), want delivered skipped %q", i, got.Outcome, got.Skipped, got.Message, want)
				}
			}
			expect(t, tg, recs[0], true, true)
			expect(t, tg, recs[1], true, true)
			expect(t, tg, recs[2], false, false)
			if got := tg.Stored(); got != 2 {
				t.Errorf("server stores %d records, want 2 (update creates nothing)", got)
			}
		})
	}
	if slices.Contains(h.WriteModes, destination.Create) {
		t.Run("CreateSkipsExistingAndChangesNothing", func(t *testing.T) {
			t.Parallel()
			tg := setup(t, destination.Create)
			old := records(1)[0]
			tg.Put(old)
			recs := []destination.Record{h.Changed(0), records(3)[1], records(3)[2]}
			byKey := write(t, tg, recs)
			for i, r := range recs {
				got := byKey[r.Key]
				want := ""
				if i == 0 {
					want = destination.SkipExists
				}
				if got.Outcome != destination.Delivered || got.Skipped != want {
					t.Errorf("record %d: %v skipped %q (%s), want delivered skipped %q", i, got.Outcome, got.Skipped, got.Message, want)
				}
			}
			expect(t, tg, old, true, true) // left as it was
			expect(t, tg, recs[1], true, true)
			expect(t, tg, recs[2], true, true)
			if got := tg.Stored(); got != 3 {
				t.Errorf("server stores %d records, want 3", got)
			}
		})
	}
	if slices.Contains(h.WriteModes, destination.Mirror) {
		t.Run("RemoverRemovesIdempotently", func(t *testing.T) {
			t.Parallel()
			tg := setup(t, destination.Mirror)
			rm, ok := tg.Dest.(destination.Remover)
			if !ok {
				t.Fatalf("%T supports mirror but is no destination.Remover", tg.Dest)
			}
			recs := records(4)
			for _, got := range write(t, tg, recs[:3]) {
				if got.Outcome != destination.Delivered {
					t.Fatalf("record %s: %v, want delivered", got.Key[:8], got.Outcome)
				}
			}
			removal := func(i int, r destination.Record) destination.Removal {
				hd, err := rm.Handle(r)
				if err != nil || hd == "" {
					t.Fatalf("Handle(record %d) = %q, %v", i, hd, err)
				}
				return destination.Removal{Key: fmt.Sprintf("%064x", 1000+i), Handle: hd}
			}
			remove := func(rms []destination.Removal) {
				t.Helper()
				res, err := rm.Remove(t.Context(), rms)
				if err != nil {
					t.Fatalf("Remove: %v", err)
				}
				want := map[string]bool{}
				for _, r := range rms {
					want[r.Key] = true
				}
				for _, r := range res {
					if !want[r.Key] || r.Outcome != destination.Delivered {
						t.Errorf("removal %s: %v (%s), want delivered", r.Key[:8], r.Outcome, r.Message)
					}
					delete(want, r.Key)
				}
				if len(want) != 0 {
					t.Errorf("%d removals without a result", len(want))
				}
			}
			rms := []destination.Removal{removal(0, recs[0]), removal(1, recs[1])}
			remove(rms)
			expect(t, tg, recs[0], false, false)
			expect(t, tg, recs[1], false, false)
			expect(t, tg, recs[2], true, true)
			// Again, with a record that never was there: both already gone.
			remove([]destination.Removal{rms[0], removal(3, recs[3])})
			expect(t, tg, recs[2], true, true)
			if got := tg.Stored(); got != 1 {
				t.Errorf("server stores %d records after the removals, want 1", got)
			}
		})
	}
}

// Injector puts the transport-level faults a harness's server must
// honour for Storms and LostAnswers in front of a vendor's fake: a 429
// storm that ends (Faults.RateLimitStorm) and writes applied whose
// connection is then cut before any answer (Faults.DropAnswers).
type Injector struct {
	f            Faults
	storm, drops atomic.Int64
}

// NewInjector returns the Injector of f.
func NewInjector(f Faults) *Injector { return &Injector{f: f} }

// Handle answers r itself when a fault applies and reports whether it
// did: a storm's 429 is written by tooMany (the vendor's own headers and
// body); a dropped answer is r served by next into nothing (the write is
// applied), then its connection closed. Reads (GET) are never dropped.
func (in *Injector) Handle(w http.ResponseWriter, r *http.Request, next http.Handler, tooMany func(http.ResponseWriter)) bool {
	switch {
	case in.f.RateLimitStorm > 0 && in.storm.Add(1) <= int64(in.f.RateLimitStorm):
		tooMany(w)
		return true
	case in.f.DropAnswers > 0 && r.Method != http.MethodGet && in.drops.Add(1) <= int64(in.f.DropAnswers):
		next.ServeHTTP(httptest.NewRecorder(), r)
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close()
				return true
			}
		}
		panic(http.ErrAbortHandler)
	}
	return false
}

// runCleared is Harness.Cleared's case: a value cleared in the source is
// cleared at the destination, and a read-back tells the two apart.
func runCleared(t *testing.T, h Harness, records func(int) []destination.Record) {
	if h.Cleared == nil {
		return
	}
	t.Run("ClearedValueReachesTheDestination", func(t *testing.T) {
		t.Parallel()
		tg := h.Setup(t, Config{Sleep: NoSleep, MaxRetries: suiteRetries, Clock: clock.NewFake(time.Now())})
		t.Cleanup(func() { _ = tg.Dest.Close() })
		if tg.Lookup == nil {
			t.Fatal("Harness.Cleared needs Target.Lookup")
		}
		write := func(recs []destination.Record) {
			t.Helper()
			for k, r := range writeSettled(t, h.Async, tg, recs) {
				if r.Outcome != destination.Delivered {
					t.Fatalf("record %s: %v (%s), want delivered", k[:8], r.Outcome, r.Message)
				}
			}
		}
		full := records(2)
		cleared := []destination.Record{h.Cleared(0), h.Cleared(1)}
		verify := tg.Dest.Capability() == destination.CapVerify
		landed := func() int {
			t.Helper()
			got, err := tg.Dest.Verify(t.Context(), cleared, time.Now().Add(-time.Hour))
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			return len(got)
		}
		write(full)
		if verify {
			if n := landed(); n != 0 {
				t.Errorf("Verify holds %d cleared records landed while the destination holds their old values", n)
			}
		}
		write(cleared)
		for i, r := range cleared {
			if present, same := tg.Lookup(r); !present || !same {
				t.Errorf("cleared record %d at the server: present %v, same data %v; want the field cleared", i, present, same)
			}
		}
		if verify {
			if n := landed(); n != len(cleared) {
				t.Errorf("Verify holds %d of %d cleared records landed after they were written", n, len(cleared))
			}
		}
	})
}

// writeSettled writes recs, settles what the destination accepted for
// processing later, and returns one checked result per record by key.
func writeSettled(t *testing.T, async bool, tg Target, recs []destination.Record) map[string]destination.Result {
	t.Helper()
	res, err := tg.Dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	return checkResults(t, recs, settle(t, async, tg, recs, res))
}

// SameHeld reports whether a fake holds want for a field: equal as text, an
// absent (nil) field equal to an empty one. Target.Lookup implementations
// use it so that Harness.Cleared's records compare as the suite expects.
func SameHeld(got, want any) bool {
	empty := func(v any) bool { return v == nil || v == "" }
	if empty(got) || empty(want) {
		return empty(got) && empty(want)
	}
	return fmt.Sprint(got) == fmt.Sprint(want)
}

// EmptyValue is the empty value Harness.Cleared(i) maps: "" for even i,
// null for odd i.
func EmptyValue(i int) any {
	if i%2 == 0 {
		return ""
	}
	return nil
}
