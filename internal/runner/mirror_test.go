package runner

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/store"
)

// memMirror is memDest that can also remove: it holds the set of e-mails
// present, and counts removals that changed it and those that did not.
type memMirror struct {
	*memDest
	mu       sync.Mutex
	present  map[string]bool
	removed  map[string]int // effective removals per e-mail
	loseNext bool           // the next Remove applies, then loses its answer
}

func (d *memMirror) Write(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	res, err := d.memDest.Write(ctx, recs)
	d.mu.Lock()
	for _, r := range res {
		if r.Outcome == destination.Delivered {
			for _, rec := range recs {
				if rec.Key == r.Key {
					d.present[fmt.Sprint(rec.Data["email"])] = true
				}
			}
		}
	}
	d.mu.Unlock()
	return res, err
}

func (d *memMirror) Handle(rec destination.Record) (string, error) {
	return fmt.Sprint(rec.Data["email"]), nil
}

func (d *memMirror) Remove(ctx context.Context, rms []destination.Removal) ([]destination.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	destination.CountRequest(ctx) // one request, as an HTTP destination counts it
	var out []destination.Result
	for _, rm := range rms {
		if d.present[rm.Handle] {
			delete(d.present, rm.Handle)
			d.removed[rm.Handle]++
		}
		out = append(out, destination.Result{Key: rm.Key, Outcome: destination.Delivered})
	}
	if d.loseNext {
		d.loseNext = false
		return nil, failure.New(failure.DestinationUnavailable, "the answer was lost")
	}
	return out, nil
}

func TestMirrorRemovesGoneRowsOnce(t *testing.T) {
	t.Parallel()
	tb := setup(t, 300, destination.CapVerify)
	d := &memMirror{memDest: tb.dest, present: map[string]bool{}, removed: map[string]int{}}
	params := func(allow bool) Params {
		p := tb.params(t, "id")
		p.Destination = d
		p.AllowRemovals = allow
		p.Sync.Mirror = &Mirror{MaxRemovals: func(total int) int { return total / 10 }, Bound: "10%"}
		return p
	}
	if r, err := Run(context.Background(), params(false)); err != nil || r.Written != 300 {
		t.Fatalf("first run: %v %+v", err, r)
	}
	// Rows 271-300 disappear (10 %); the removal's answer is lost.
	keep := func(n int) {
		var b strings.Builder
		b.WriteString("id,email,first_name\n")
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&b, "%d,c%05d@example.com,N%d\n", i, i, i)
		}
		if err := os.WriteFile(tb.csv, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	keep(270)
	d.loseNext = true
	if _, err := Run(context.Background(), params(false)); failure.CodeOf(err) != failure.DestinationUnavailable {
		t.Fatalf("the run whose removal answer was lost: %v", err)
	}
	pending, err := tb.store.LedgerList(context.Background(), "s1", store.LedgerPending, 0)
	if err != nil || len(pending) != 30 {
		t.Fatalf("want the 30 removals left pending (claimed before the call), got %d (%v)", len(pending), err)
	}
	// The next run claims them again and sends them: removing twice is
	// harmless, and nothing is removed twice at the destination.
	r, err := Run(context.Background(), params(false))
	if err != nil || !strings.Contains(r.FailureDetail, "removed 30") {
		t.Fatalf("resumed removals: %v %+v", err, r)
	}
	if r.Requests != 1 { // the removals' one request; the 270 kept rows replay from the ledger
		t.Fatalf("resumed removals: %d requests, want 1", r.Requests)
	}
	for i := 271; i <= 300; i++ {
		if e := fmt.Sprintf("c%05d@example.com", i); d.removed[e] != 1 || d.present[e] {
			t.Fatalf("%s removed %d time(s), present %v", e, d.removed[e], d.present[e])
		}
	}
	if len(d.present) != 270 {
		t.Fatalf("%d records left at the destination, want 270", len(d.present))
	}
	es, err := tb.store.LedgerList(context.Background(), "s1", store.LedgerComplete, 0)
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, e := range es {
		if rec, ok := ledger.RemovedRecord(e); ok {
			removed++
			if rec.Identity == "" {
				t.Fatalf("a removed record has no identity: %+v", rec)
			}
		}
	}
	if removed != 30 {
		t.Fatalf("%d slots record a removal, want 30", removed)
	}
	// Most of the source gone: refused, nothing removed; allowed, removed.
	keep(100)
	if _, err := Run(context.Background(), params(false)); failure.CodeOf(err) != failure.MirrorRemovalsRefused {
		t.Fatalf("mass removal: %v", err)
	}
	if len(d.present) != 270 {
		t.Fatalf("a refused run removed records: %d left", len(d.present))
	}
	if _, err := Run(context.Background(), params(true)); err != nil {
		t.Fatal(err)
	}
	if len(d.present) != 100 {
		t.Fatalf("%d records left after --allow-removals, want 100", len(d.present))
	}
}

// TestMirrorRemovesTheHandleARowLeft: a row whose e-mail changed leaves its
// old contact behind (an upsert creates the new one); the mirror removes
// that contact, unless another row holds the e-mail now (two rows that
// swapped theirs, a deleted row's e-mail taken by another row).
func TestMirrorRemovesTheHandleARowLeft(t *testing.T) {
	t.Parallel()
	tb, d, params := setupMirror(t, 10)
	if r, err := Run(context.Background(), params()); err != nil || r.Written != 10 {
		t.Fatalf("first run: %v %+v", err, r)
	}
	email := func(i int) string { return fmt.Sprintf("c%05d@example.com", i) }
	rows := map[int]string{}
	for i := 1; i <= 10; i++ {
		rows[i] = email(i)
	}
	rows[1] = "new1@example.com"          // moved: c00001 is the sync's no more
	rows[2], rows[3] = email(3), email(2) // swapped: both still held
	delete(rows, 4)                       // gone, but its e-mail ...
	rows[5] = email(4)                    // ... is row 5's now; c00005 is left
	writeMirrorRows(t, tb.csv, rows)
	for run := 2; run <= 3; run++ {
		if _, err := Run(context.Background(), params()); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
	}
	for _, e := range []string{email(1), email(5)} {
		if d.present[e] || d.removed[e] != 1 {
			t.Errorf("%s: present %v, removed %d time(s); want removed once", e, d.present[e], d.removed[e])
		}
	}
	for _, e := range []string{"new1@example.com", email(2), email(3), email(4), email(6), email(10)} {
		if !d.present[e] || d.removed[e] != 0 {
			t.Errorf("%s: present %v, removed %d time(s); want it kept", e, d.present[e], d.removed[e])
		}
	}
	if len(d.present) != 9 {
		t.Errorf("%d contacts at the destination, want 9", len(d.present))
	}
	es, err := tb.store.LedgerList(context.Background(), "s1", store.LedgerComplete, 0)
	if err != nil {
		t.Fatal(err)
	}
	settled := 0
	for _, e := range es {
		if s, ok := ledger.DecodeSlot(e, true); ok {
			if _, _, moved := ledger.RefMoved(s.Ref); moved {
				t.Errorf("a left handle is still pending after the mirror settled it: %s", e.Key[:8])
			}
			if ledger.RefSettled(s.Ref) {
				settled++
			}
		}
	}
	if settled != 5 { // rows 1, 2, 3 and 5 left a handle; row 4's is row 5's now
		t.Errorf("%d slots settled, want 5", settled)
	}
}

// TestMirrorWritesARowThatCameBack: a row removed by the mirror that comes
// back to the source unchanged is written again. Its delivery key is the one
// its first write completed; only the slot's last delivered state (removed)
// says the destination no longer holds it (docs/guide.md#write-modes).
func TestMirrorWritesARowThatCameBack(t *testing.T) {
	t.Parallel()
	tb, d, params := setupMirror(t, 20)
	write := func(n int) {
		rows := map[int]string{}
		for i := 1; i <= n; i++ {
			rows[i] = fmt.Sprintf("c%05d@example.com", i)
		}
		writeMirrorRows(t, tb.csv, rows)
	}
	if _, err := Run(context.Background(), params()); err != nil {
		t.Fatal(err)
	}
	write(18)
	if _, err := Run(context.Background(), params()); err != nil {
		t.Fatal(err)
	}
	back := []string{"c00019@example.com", "c00020@example.com"}
	for _, e := range back {
		if d.present[e] {
			t.Fatalf("%s was not removed", e)
		}
	}
	write(20)
	r, err := Run(context.Background(), params())
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range back {
		if !d.present[e] {
			t.Errorf("%s came back to the source and was not written again (run: %+v)", e, r)
		}
	}
	if len(d.present) != 20 {
		t.Errorf("%d contacts at the destination, want 20", len(d.present))
	}
	// And once there, nothing more is sent.
	r, err = Run(context.Background(), params())
	if err != nil || r.Written != 0 {
		t.Errorf("the run after: %v, written %d, want 0", err, r.Written)
	}
}

// TestMirrorRewritesARowWhoseHandleAnotherRowHeld: row 4 leaves the source
// while row 5 takes its e-mail (and writes its own name there); later row 5
// moves on and row 4 comes back unchanged. Row 4's slot must not still claim
// that the destination holds row 4's values: the contact shows row 5's name
// until row 4 is written again.
func TestMirrorRewritesARowWhoseHandleAnotherRowHeld(t *testing.T) {
	t.Parallel()
	tb, d, params := setupMirror(t, 6)
	email := func(i int) string { return fmt.Sprintf("c%05d@example.com", i) }
	write := func(rows map[int]string) { writeMirrorRows(t, tb.csv, rows) }
	rows := map[int]string{}
	for i := 1; i <= 6; i++ {
		rows[i] = email(i)
	}
	if _, err := Run(context.Background(), params()); err != nil {
		t.Fatal(err)
	}
	delete(rows, 4)
	rows[5] = email(4)
	write(rows)
	for run := 0; run < 2; run++ {
		if _, err := Run(context.Background(), params()); err != nil {
			t.Fatal(err)
		}
	}
	if got := d.values[email(4)]; got != "N5" {
		t.Fatalf("%s shows %v after row 5 took it, want N5", email(4), got)
	}
	rows[4], rows[5] = email(4), email(5)
	write(rows)
	for run := 0; run < 2; run++ {
		if _, err := Run(context.Background(), params()); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{4, 5} {
		if got := d.values[email(i)]; got != fmt.Sprintf("N%d", i) || !d.present[email(i)] {
			t.Errorf("%s shows %v (present %v), want N%d: the source's row %d", email(i), got, d.present[email(i)], i, i)
		}
	}
}

// setupMirror is setup for a mirror sync that may remove every record, and
// its destination.
func setupMirror(t *testing.T, records int) (*testBundle, *memMirror, func() Params) {
	t.Helper()
	tb := setup(t, records, destination.CapVerify)
	d := &memMirror{memDest: tb.dest, present: map[string]bool{}, removed: map[string]int{}}
	return tb, d, func() Params {
		p := tb.params(t, "id")
		p.Destination = d
		p.Sync.Mirror = &Mirror{MaxRemovals: func(total int) int { return total }, Bound: "100%"}
		return p
	}
}

// writeMirrorRows writes the source path with rows (id -> e-mail), in id
// order, row i named N<i>.
func writeMirrorRows(t *testing.T, path string, rows map[int]string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("id,email,first_name\n")
	for _, i := range slices.Sorted(maps.Keys(rows)) {
		fmt.Fprintf(&b, "%d,%s,N%d\n", i, rows[i], i)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

// queuedMirror is memMirror at a destination that queues removals
// (destination.QueuedRemover), counting the removals it is asked for.
type queuedMirror struct {
	*memMirror
	grace time.Duration
	asked int
}

func (d *queuedMirror) RemovalGrace() time.Duration { return d.grace }

func (d *queuedMirror) Remove(ctx context.Context, rms []destination.Removal) ([]destination.Result, error) {
	d.mu.Lock()
	d.asked += len(rms)
	d.mu.Unlock()
	return d.memMirror.Remove(ctx, rms)
}

// TestQueuedRemovalsWaitForTheirGrace: at a destination that queues
// removals (Klaviyo's unsubscribe jobs), a removal whose answer was lost is
// not sent again by the next run while the earlier one may still be queued
// (Klaviyo would find the profile gone from the list and unsubscribe it
// globally); a run after the grace sends it.
func TestQueuedRemovalsWaitForTheirGrace(t *testing.T) {
	t.Parallel()
	tb := setup(t, 100, destination.CapVerify)
	d := &queuedMirror{memMirror: &memMirror{memDest: tb.dest, present: map[string]bool{}, removed: map[string]int{}}, grace: 10 * time.Minute}
	params := func() Params {
		p := tb.params(t, "id")
		p.Destination = d
		p.Sync.Mirror = &Mirror{MaxRemovals: func(total int) int { return total }, Bound: "100%"}
		return p
	}
	if _, err := Run(context.Background(), params()); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	b.WriteString("id,email,first_name\n")
	for i := 1; i <= 90; i++ {
		fmt.Fprintf(&b, "%d,c%05d@example.com,N%d\n", i, i, i)
	}
	if err := os.WriteFile(tb.csv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	d.loseNext = true
	if _, err := Run(context.Background(), params()); failure.CodeOf(err) != failure.DestinationUnavailable {
		t.Fatalf("the run whose removal answer was lost: %v", err)
	}
	if d.asked != 10 {
		t.Fatalf("%d removals asked for, want 10", d.asked)
	}
	tb.clock.Advance(time.Minute)
	if _, err := Run(context.Background(), params()); err != nil {
		t.Fatal(err)
	}
	if d.asked != 10 {
		t.Fatalf("a run a minute later sent %d removals again; want none within the grace", d.asked-10)
	}
	tb.clock.Advance(10 * time.Minute)
	r, err := Run(context.Background(), params())
	if err != nil || !strings.Contains(r.FailureDetail, "removed 10") || d.asked != 20 {
		t.Fatalf("the run after the grace: %v %+v, %d asked; want the 10 sent again and recorded", err, r, d.asked)
	}
}
