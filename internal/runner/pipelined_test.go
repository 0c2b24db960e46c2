package runner

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/store"
)

// pipelinedDest is a memDest that lets n pages be in flight.
type pipelinedDest struct {
	*memDest
	n int
}

func (d pipelinedDest) PagesInFlight() int { return d.n }

// flight watches the writes in flight: how many at most, and whether two
// of them ever held the same e-mail.
type flight struct {
	mu      sync.Mutex
	active  int
	most    int
	holding map[string]int
	clash   string
	// gate, while open, holds each write until a second one is in flight
	// (or the gate is closed): the proof that pages overlap needs no timing.
	gate chan struct{}
}

func newFlight() *flight { return &flight{holding: map[string]int{}} }

func (f *flight) onWrite(recs []destination.Record) func() {
	f.mu.Lock()
	f.active++
	f.most = max(f.most, f.active)
	for _, r := range recs {
		e := fmt.Sprint(r.Data["email"])
		if f.holding[e]++; f.holding[e] > 1 && f.clash == "" {
			f.clash = e
		}
	}
	gate, alone := f.gate, f.active < 2
	f.mu.Unlock()
	if gate != nil && alone {
		select {
		case <-gate:
		case <-time.After(10 * time.Second): // depth 1 never gets a second write: the test then fails on most
		}
	}
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.active--
		for _, r := range recs {
			f.holding[fmt.Sprint(r.Data["email"])]--
		}
		if f.active >= 1 && f.gate != nil {
			select {
			case <-f.gate:
			default:
				close(f.gate)
			}
		}
	}
}

func (f *flight) stats() (most int, clash string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.most, f.clash
}

// A destination that takes two pages in flight gets the next page's write
// while the last one's is still out, and every record once.
func TestPagesInFlightOverlap(t *testing.T) {
	t.Parallel()
	for _, depth := range []int{1, 2} {
		t.Run(fmt.Sprintf("depth=%d", depth), func(t *testing.T) {
			t.Parallel()
			tb := setup(t, 1000, destination.CapVerify)
			fl := newFlight()
			if depth == 2 {
				fl.gate = make(chan struct{})
			}
			tb.dest.onWrite = fl.onWrite
			p := tb.params(t, "id")
			p.Destination = pipelinedDest{tb.dest, depth}
			r, err := Run(context.Background(), p)
			if err != nil {
				t.Fatal(err)
			}
			if r.State != store.RunSucceeded || r.Written != 1000 || r.Pages != 10 {
				t.Fatalf("run: %+v", r)
			}
			calls, recs, dups := tb.dest.stats()
			if calls != 10 || recs != 1000 || dups != 0 {
				t.Fatalf("dest: calls %d records %d dups %d", calls, recs, dups)
			}
			tb.assertPages(t, r, 10)
			if most, _ := fl.stats(); most != depth {
				t.Fatalf("at most %d writes in flight, want %d", most, depth)
			}
		})
	}
}

// Two pages in flight never hold the same slot: a row seen again on the
// next page waits for the earlier page's outcome, and the destination ends
// with the later value.
func TestPagesInFlightNeverShareASlot(t *testing.T) {
	t.Parallel()
	tb := setup(t, 0, destination.CapVerify)
	var b strings.Builder
	b.WriteString("id,email,first_name\n")
	for i := 1; i <= 600; i++ {
		// Every 100-row page repeats a row of the page before it, changed.
		id := i
		if i%100 == 50 && i > 100 {
			id = i - 100
		}
		fmt.Fprintf(&b, "%d,c%05d@example.com,N%d\n", id, id, i)
	}
	if err := os.WriteFile(tb.csv, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	fl := newFlight()
	tb.dest.onWrite = fl.onWrite
	tb.dest.delay = 2 * time.Millisecond
	p := tb.params(t, "id")
	p.Destination = pipelinedDest{tb.dest, 2}
	r, err := Run(context.Background(), p)
	if err != nil {
		t.Fatal(err)
	}
	if r.State != store.RunSucceeded || r.Written != 600 {
		t.Fatalf("run: %+v", r)
	}
	if _, clash := fl.stats(); clash != "" {
		t.Fatalf("%s was in two writes in flight at once", clash)
	}
	// The repeated rows end with their last value (row 550 repeats id 450).
	if got := tb.dest.value("c00450@example.com"); got != "N550" {
		t.Fatalf("c00450 ends as %v, want N550", got)
	}
}

// When a page's write fails while the next one is already out, the next
// page's outcomes are still recorded, the cursor does not pass the failed
// page, and the run after delivers every record exactly once.
func TestPagesInFlightFailure(t *testing.T) {
	t.Parallel()
	tb := setup(t, 1000, destination.CapVerify)
	fl := newFlight()
	fl.gate = make(chan struct{})
	// The first page's write is held until the second page's returned, and
	// then refused before it leaves.
	var once sync.Once
	tb.dest.onWrite = func(recs []destination.Record) func() {
		done := fl.onWrite(recs)
		if fmt.Sprint(recs[0].Data["email"]) == "c00001@example.com" {
			once.Do(func() {
				tb.dest.mu.Lock()
				tb.dest.notSent = 1
				tb.dest.mu.Unlock()
			})
		}
		return done
	}
	p := tb.params(t, "id")
	p.Destination = pipelinedDest{tb.dest, 2}
	r, err := Run(context.Background(), p)
	if err == nil || r.State != store.RunFailed {
		t.Fatalf("first run: %+v, %v", r, err)
	}
	// The second page was out when the first failed: it is recorded.
	if r.Written != 100 {
		t.Fatalf("first run wrote %d records, want the second page's 100", r.Written)
	}
	if most, _ := fl.stats(); most != 2 {
		t.Fatalf("at most %d writes in flight, want 2", most)
	}
	fl.gate = nil
	r2, err := Run(context.Background(), tb.params(t, "id"))
	if err != nil {
		t.Fatal(err)
	}
	// The cursor stayed before the failed page: it is sent now, and the
	// page written beside it is answered by its slots.
	if r2.State != store.RunSucceeded || r2.Written != 900 || r2.Replayed != 100 {
		t.Fatalf("second run: %+v", r2)
	}
	_, recs, dups := tb.dest.stats()
	if recs != 1000 || dups != 0 {
		t.Fatalf("dest: records %d dups %d", recs, dups)
	}
	for _, e := range []string{"c00001@example.com", "c00150@example.com", "c01000@example.com"} {
		if tb.dest.value(e) == nil {
			t.Fatalf("%s never reached the destination", e)
		}
	}
}
