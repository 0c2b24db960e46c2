package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/store"
)

// lifoDest is an asynchronous destination that names its records by e-mail
// and processes an account's imports newest first: an import is done only
// once every import created after it is, and applies its rows then. Brevo
// does not document the order of an account's imports; this is the unkind
// order. Each import is also asked about three times before it is done (an
// import takes a while). release, when set, holds every import until it is
// closed.
type lifoDest struct {
	mu      sync.Mutex
	procs   []*lifoProc
	values  map[string]string // e-mail -> FIRSTNAME, as applied
	writes  map[string]int    // e-mail -> rows applied
	release chan struct{}
}

type lifoProc struct {
	recs    []destination.Record
	asked   int
	applied bool
}

func newLifoDest() *lifoDest {
	return &lifoDest{values: map[string]string{}, writes: map[string]int{}}
}

func (d *lifoDest) Capability() destination.Capability { return destination.CapNone }
func (d *lifoDest) PagesInFlight() int                 { return 3 }
func (d *lifoDest) Close() error                       { return nil }

func (d *lifoDest) Verify(context.Context, []destination.Record, time.Time) (map[string]string, error) {
	return nil, errors.New("lifoDest cannot read back")
}

func (d *lifoDest) Handle(rec destination.Record) (string, error) {
	return strings.ToLower(fmt.Sprint(rec.Data["email"])), nil
}

func (d *lifoDest) Remove(ctx context.Context, rms []destination.Removal) ([]destination.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]destination.Result, len(rms))
	for i, rm := range rms {
		delete(d.values, rm.Handle)
		out[i] = destination.Result{Key: rm.Key, Outcome: destination.Delivered}
	}
	return out, nil
}

func (d *lifoDest) Write(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.procs = append(d.procs, &lifoProc{recs: recs})
	ref := strconv.Itoa(len(d.procs))
	out := make([]destination.Result, len(recs))
	for i, r := range recs {
		out[i] = destination.Result{Key: r.Key, Outcome: destination.Accepted, Ref: ref}
	}
	return out, nil
}

func (d *lifoDest) Outcomes(ctx context.Context, ref string, recs []destination.Record) ([]destination.Result, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.release != nil {
		select {
		case <-d.release:
		default:
			return nil, false, nil
		}
	}
	n, _ := strconv.Atoi(ref)
	if d.procs[n-1].asked++; d.procs[n-1].asked < 3 {
		return nil, false, nil
	}
	for _, later := range d.procs[n:] {
		if !later.applied {
			return nil, false, nil
		}
	}
	p := d.procs[n-1]
	if !p.applied {
		p.applied = true
		for _, r := range p.recs {
			e := fmt.Sprint(r.Data["email"])
			d.values[e] = fmt.Sprint(r.Data["attributes"].(map[string]any)["FIRSTNAME"])
			d.writes[e]++
		}
	}
	out := make([]destination.Result, len(recs))
	for i, r := range recs {
		out[i] = destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: ref}
	}
	return out, true, nil
}

func (d *lifoDest) value(email string) (string, int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.values[email], d.writes[email]
}

// assertHolds fails t unless the contact at email holds want after writes
// rows applied there.
func (d *lifoDest) assertHolds(t *testing.T, email, want string, writes int) {
	t.Helper()
	if v, n := d.value(email); v != want || n != writes {
		t.Fatalf("%s holds %q after %d writes, want %q after %d", email, v, n, want, writes)
	}
}

// runOnce runs p and fails t unless the run succeeded with written records
// written.
func runOnce(t *testing.T, p Params, written int64) {
	t.Helper()
	r, err := Run(context.Background(), p)
	if err != nil || r.State != store.RunSucceeded || r.Written != written {
		t.Fatalf("run: %+v, %v; want succeeded with %d written", r, err, written)
	}
}

// setupShared is a sync whose two rows (identities 1 and 2, one page each)
// carry one e-mail: the moment two rows swap addresses, as a pass reads them.
func setupShared(t *testing.T) (*testBundle, *lifoDest, Params) {
	t.Helper()
	tb := setup(t, 0, destination.CapNone)
	csv := "id,email,first_name\n1,same@example.com,Older\n2,same@example.com,Newer\n"
	tb.csv = filepath.Join(t.TempDir(), "shared.csv")
	if err := os.WriteFile(tb.csv, []byte(csv), 0o600); err != nil {
		t.Fatal(err)
	}
	d := newLifoDest()
	p := tb.params(t, "id")
	p.Destination = d
	p.Sync.PageSize = 1
	p.PollInterval = time.Millisecond
	return tb, d, p
}

// TestWritesToOneContactLandInReadOrder: two slots' writes to one contact
// are never in flight at once, so the value read last is what the
// destination keeps, also when it processes imports newest first.
func TestWritesToOneContactLandInReadOrder(t *testing.T) {
	t.Parallel()
	_, d, p := setupShared(t)
	runOnce(t, p, 2)
	d.assertHolds(t, "same@example.com", "Newer", 2)
}

// TestWriteBehindAGivenUpImportWaitsForTheNextRun: when the run stops
// waiting for an import to one contact, another row's write to it is left
// for the next run (which learns first what became of that import), not
// sent to land before it.
func TestWriteBehindAGivenUpImportWaitsForTheNextRun(t *testing.T) {
	t.Parallel()
	_, d, p := setupShared(t)
	d.release = make(chan struct{})
	p.AcceptedWait = 20 * time.Millisecond
	var told []int
	p.HeldBack = func(n int) { told = append(told, n) }
	runOnce(t, p, 0)
	d.mu.Lock()
	imports := len(d.procs)
	d.mu.Unlock()
	if imports != 1 {
		t.Fatalf("the first run sent %d imports, want 1 (the second row held back)", imports)
	}
	if !slices.Equal(told, []int{1}) {
		// The record is in none of the run's figures: only this tells it.
		t.Fatalf("the run told %v records held back, want [1]", told)
	}
	told = nil
	close(d.release) // the first import is processed now
	p.AcceptedWait = 0
	runOnce(t, p, 2)
	d.assertHolds(t, "same@example.com", "Newer", 2)
	if told != nil {
		t.Fatalf("the second run told %v records held back, want none", told)
	}
}

// TestWriteBehindAnEarlierRunsImportWaitsForIt: an earlier run left its
// import to a contact processing (its entry names the contact: a mirror's
// in clear, another sync's by a key); another row that took that address
// since is written only once that import is done, so it lands last.
func TestWriteBehindAnEarlierRunsImportWaitsForIt(t *testing.T) {
	t.Parallel()
	for _, mirror := range []bool{true, false} {
		t.Run(fmt.Sprintf("mirror=%v", mirror), func(t *testing.T) {
			t.Parallel()
			tb, d, p := setupShared(t)
			if mirror {
				p.Sync.Mirror = &Mirror{MaxRemovals: func(total int) int { return total }, Bound: "100%"}
			}
			if err := os.WriteFile(tb.csv, []byte("id,email,first_name\n1,same@example.com,Older\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			d.release = make(chan struct{})
			p.AcceptedWait = 20 * time.Millisecond
			runOnce(t, p, 0)
			// Row 1 moved to another address and row 2 took its old one;
			// row 2 is read first.
			csv := "id,email,first_name\n2,same@example.com,Newer\n1,moved@example.com,Older\n"
			if err := os.WriteFile(tb.csv, []byte(csv), 0o600); err != nil {
				t.Fatal(err)
			}
			time.AfterFunc(100*time.Millisecond, func() { close(d.release) })
			p.AcceptedWait = 10 * time.Second
			runOnce(t, p, 2) // row 2, and row 1 at its new address
			d.assertHolds(t, "same@example.com", "Newer", 2)
			d.assertHolds(t, "moved@example.com", "Older", 1)
		})
	}
}
