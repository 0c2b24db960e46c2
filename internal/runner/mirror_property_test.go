package runner

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// propDest is a Brevo-like list for the mirror's model test: writes are
// imports that answer "accepted" and apply later, in any order; a write may
// fail before applying (5xx), or be queued and lose its answer (applied
// then 500, or the connection cut); a removal may apply and lose its answer.
// Every choice comes from rng, so a seed replays the same story as long as
// the runner asks the same questions in the same order.
type propDest struct {
	mu       sync.Mutex
	rng      *rand.Rand
	list     map[string]string // e-mail (lower case) on the list -> FIRSTNAME
	attrs    map[string]string // every contact's FIRSTNAME, on the list or not
	procs    map[string]*propProc
	queued   []*propProc
	nprocs   int
	faults   bool
	log      *story
	onWrite  func(n int) // called at every write, after it was handled (outside mu)
	writes   int
	inflight int
}

type propProc struct {
	id      string
	lost    bool // its answer was lost: it lands within the run's grace
	recs    []destination.Record
	applied bool
}

func (d *propDest) logf(format string, args ...any) {
	d.log.add(fmt.Sprintf(format, args...))
}

func (d *propDest) Capability() destination.Capability { return destination.CapVerify }
func (d *propDest) PagesInFlight() int                 { return d.inflight }
func (d *propDest) Close() error                       { return nil }

func (d *propDest) Handle(rec destination.Record) (string, error) {
	return strings.ToLower(fmt.Sprint(rec.Data["email"])), nil
}

func propName(r destination.Record) string {
	attrs, _ := r.Data["attributes"].(map[string]any)
	return fmt.Sprint(attrs["FIRSTNAME"])
}

// apply applies p (its rows upserted onto the list). Caller holds mu.
func (d *propDest) apply(p *propProc) {
	if p.applied {
		return
	}
	p.applied = true
	for _, r := range p.recs {
		e := strings.ToLower(fmt.Sprint(r.Data["email"]))
		d.list[e] = propName(r)
		d.attrs[e] = propName(r)
		d.logf("  import %s applied %s=%s", p.id, e, propName(r))
	}
	d.queued = slices.DeleteFunc(d.queued, func(q *propProc) bool { return q == p })
}

// tick applies some queued imports, in any order. Caller holds mu.
func (d *propDest) tick() {
	for _, p := range slices.Clone(d.queued) {
		if d.rng.Intn(3) == 0 {
			d.apply(p)
		}
	}
}

// landLost applies the queued imports whose answer was lost: the runner
// knows no process to ask about them and counts on settings.in_doubt_grace.
func (d *propDest) landLost() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, p := range slices.Clone(d.queued) {
		if p.lost {
			d.apply(p)
		}
	}
}

// drain applies every queued import.
func (d *propDest) drain() {
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.queued) > 0 {
		d.apply(d.queued[d.rng.Intn(len(d.queued))])
	}
}

func (d *propDest) Write(ctx context.Context, recs []destination.Record) ([]destination.Result, error) {
	d.mu.Lock()
	d.writes++
	n := d.writes
	d.tick()
	var out []destination.Result
	var err error
	roll := d.rng.Float64()
	if d.faults && roll < 0.08 {
		d.logf("  write %d: 5xx before applying (%d recs)", n, len(recs))
		err = failure.New(failure.DestinationUnavailable, "503")
	} else {
		destination.CountRequest(ctx)
		d.nprocs++
		p := &propProc{id: strconv.Itoa(d.nprocs), recs: slices.Clone(recs)}
		d.procs[p.id] = p
		d.queued = append(d.queued, p)
		var names []string
		for _, r := range recs {
			names = append(names, fmt.Sprintf("%v=%s", r.Data["email"], propName(r)))
		}
		switch {
		case d.faults && roll < 0.14:
			p.lost = true
			d.logf("  write %d: import %s queued, answer 500 %v", n, p.id, names)
			err = failure.New(failure.DestinationUnavailable, "500")
		case d.faults && roll < 0.20:
			p.lost = true
			d.logf("  write %d: import %s queued, connection cut %v", n, p.id, names)
			err = failure.New(failure.DestinationUnavailable, "connection cut")
		default:
			d.logf("  write %d: import %s accepted %v", n, p.id, names)
			for _, r := range recs {
				out = append(out, destination.Result{Key: r.Key, Outcome: destination.Accepted, Ref: p.id})
			}
		}
		if d.rng.Intn(4) == 0 {
			d.apply(p)
		}
	}
	hook := d.onWrite
	d.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	return out, err
}

func (d *propDest) Outcomes(ctx context.Context, ref string, recs []destination.Record) ([]destination.Result, bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.procs[ref]
	if !ok {
		return nil, false, failure.Wrap(failure.DestinationUnavailable, destination.ErrUnknownRef, "no such process")
	}
	if !p.applied && d.rng.Intn(3) == 0 {
		d.apply(p)
	}
	d.tick()
	if !p.applied {
		return nil, false, nil
	}
	keys := map[string]bool{}
	for _, r := range p.recs {
		keys[r.Key] = true
	}
	var out []destination.Result
	for _, r := range recs {
		if keys[r.Key] {
			out = append(out, destination.Result{Key: r.Key, Outcome: destination.Delivered, Ref: ref})
		}
	}
	return out, true, nil
}

func (d *propDest) Verify(ctx context.Context, recs []destination.Record, since time.Time) (map[string]string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	destination.CountRequest(ctx)
	d.tick()
	out := map[string]string{}
	for _, r := range recs {
		e := strings.ToLower(fmt.Sprint(r.Data["email"]))
		if v, ok := d.list[e]; ok && v == propName(r) {
			out[r.Key] = "verified"
		}
	}
	return out, nil
}

func (d *propDest) Remove(ctx context.Context, rms []destination.Removal) ([]destination.Result, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	destination.CountRequest(ctx)
	d.tick()
	if d.faults && d.rng.Float64() < 0.05 {
		d.logf("  remove: 5xx before applying")
		return nil, failure.New(failure.DestinationUnavailable, "503")
	}
	var out []destination.Result
	for _, rm := range rms {
		delete(d.list, strings.ToLower(rm.Handle))
		d.logf("  removed %s", rm.Handle)
		out = append(out, destination.Result{Key: rm.Key, Outcome: destination.Delivered})
	}
	if d.faults && d.rng.Float64() < 0.05 {
		d.logf("  remove: applied, answer lost")
		return nil, failure.New(failure.DestinationUnavailable, "500")
	}
	return out, nil
}

// propModel drives one seed of TestMirrorPropertyEmailChanges.
// story is a seed's story, told by the model and the stand-in from any
// goroutine.
type story struct {
	mu    sync.Mutex
	lines []string
}

func (s *story) add(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lines = append(s.lines, line)
}

func (s *story) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.lines, "\n")
}

type propModel struct {
	t    *testing.T
	rng  *rand.Rand
	src  *keysetSource
	hist map[int][]string // every e-mail a row held
	next int              // next fresh address number
	nid  int              // next new row id
	log  *story
}

func (m *propModel) fresh() string {
	m.next++
	return fmt.Sprintf("e%03d@example.com", m.next)
}

// taken reports whether some row holds e (caller holds src.mu).
func (m *propModel) taken(e string) bool {
	for id := range m.src.rows {
		if m.src.emails[id] == e {
			return true
		}
	}
	return false
}

// step changes the source once (caller holds src.mu).
func (m *propModel) step() {
	s := m.src
	ids := make([]int, 0, len(s.rows))
	for id := range s.rows {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if len(ids) == 0 {
		m.insert()
		return
	}
	id := ids[m.rng.Intn(len(ids))]
	switch k := m.rng.Intn(10); {
	case k < 3: // a new e-mail
		e := m.fresh()
		m.log.add(fmt.Sprintf("row %d: e-mail %s -> %s", id, s.emails[id], e))
		s.emails[id] = e
		s.touch(id)
		m.hist[id] = append(m.hist[id], e)
	case k < 5: // back to an earlier e-mail
		h := m.hist[id]
		e := h[m.rng.Intn(len(h))]
		if m.taken(e) {
			return
		}
		m.log.add(fmt.Sprintf("row %d: e-mail %s -> back to %s", id, s.emails[id], e))
		s.emails[id] = e
		s.touch(id)
	case k < 6: // swap with another row
		o := ids[m.rng.Intn(len(ids))]
		if o == id {
			return
		}
		m.log.add(fmt.Sprintf("rows %d,%d swap e-mails %s,%s", id, o, s.emails[id], s.emails[o]))
		s.emails[id], s.emails[o] = s.emails[o], s.emails[id]
		s.touch(id)
		s.touch(o)
		m.hist[id] = append(m.hist[id], s.emails[id])
		m.hist[o] = append(m.hist[o], s.emails[o])
	case k < 7: // delete
		m.log.add(fmt.Sprintf("row %d (%s) deleted", id, s.emails[id]))
		delete(s.rows, id)
	case k < 8:
		m.insert()
	default: // a field
		s.rows[id] = fmt.Sprintf("N%d-%d", id, m.rng.Intn(1000))
		s.touch(id)
		m.log.add(fmt.Sprintf("row %d: name -> %s", id, s.rows[id]))
	}
}

// insert adds a new row, or re-inserts a deleted one with one of its
// earlier e-mails (caller holds src.mu).
func (m *propModel) insert() {
	s := m.src
	for _, id := range slices.Sorted(maps.Keys(m.hist)) {
		h := m.hist[id]
		if _, there := s.rows[id]; !there && m.rng.Intn(2) == 0 {
			e := h[m.rng.Intn(len(h))]
			if m.taken(e) {
				e = m.fresh()
				m.hist[id] = append(m.hist[id], e)
			}
			s.rows[id], s.emails[id] = fmt.Sprintf("N%d-r%d", id, m.rng.Intn(1000)), e
			s.touch(id)
			m.log.add(fmt.Sprintf("row %d re-inserted with %s", id, e))
			return
		}
	}
	m.nid++
	id := m.nid
	e := m.fresh()
	s.rows[id], s.emails[id] = fmt.Sprintf("N%d", id), e
	s.touch(id)
	m.hist[id] = []string{e}
	m.log.add(fmt.Sprintf("row %d inserted with %s", id, e))
}

// dumpLedger logs the sync's ledger (with ONCESYNC_MIRROR_LOG).
func (m *propModel) dumpLedger(tb *testBundle) {
	if os.Getenv("ONCESYNC_MIRROR_LOG") == "" {
		return
	}
	for _, st := range []store.LedgerState{store.LedgerPending, store.LedgerAccepted, store.LedgerComplete, store.LedgerInDoubt, store.LedgerRejected} {
		es, _ := tb.store.LedgerList(context.Background(), "s1", st, 0)
		for _, e := range es {
			m.log.add(fmt.Sprintf("    L %s %s f%d r%d %q %q", e.Key[:12], e.State, e.Fence, e.RunID, e.Result, e.Message))
		}
	}
}

// TestMirrorPropertyEmailChanges is a model test of a mirror sync to a
// Brevo-like list (propDest) under e-mail changes, changes back, swaps,
// deletes and re-inserts, between and during runs, with imports that end
// late and out of order, lost answers and killed runs: after clean runs the
// list holds exactly the source's rows' e-mails with their values.
// It runs propertySeeds seeds; ONCESYNC_MIRROR_PROPERTY=N runs N (from
// ONCESYNC_MIRROR_SEED, 1 by default), ONCESYNC_MIRROR_LOG=1 prints a
// failing seed's story and ledger. Even seeds read the source by version
// (a row changed during a pass is read again by it), which found a row's
// first address left on the list once in 200 seeds before that was fixed.
// 599 of seeds 1-600 passed on 2026-12-07; seed 333 is a known defect
// (docs/RELIABILITY.md): two rows swap e-mails while a run reads them, the
// run sends both rows' imports to one address, and the older view's import
// lands last.
func TestMirrorPropertyEmailChanges(t *testing.T) {
	t.Parallel()
	n := propertySeeds
	if v := os.Getenv("ONCESYNC_MIRROR_PROPERTY"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil || n < 1 {
			t.Fatalf("ONCESYNC_MIRROR_PROPERTY=%q: want a number of seeds", v)
		}
	}
	first := int64(1)
	if v := os.Getenv("ONCESYNC_MIRROR_SEED"); v != "" {
		first, _ = strconv.ParseInt(v, 10, 64)
	}
	seeds := make([]int64, 0, n+len(regressionSeeds))
	for seed := first; seed < first+int64(n); seed++ {
		seeds = append(seeds, seed)
	}
	if os.Getenv("ONCESYNC_MIRROR_PROPERTY") == "" && os.Getenv("ONCESYNC_MIRROR_SEED") == "" {
		seeds = append(seeds, regressionSeeds...)
	}
	for _, seed := range seeds {
		if !t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) { mirrorProperty(t, seed) }) && os.Getenv("ONCESYNC_MIRROR_ALL") == "" {
			return
		}
	}
}

// regressionSeeds are seeds that found defects, run with the default ones:
// 333 (two rows' imports to one address in flight at once), 1063 and 1591
// (another row written to an address an earlier run's import was still
// processing), 1943 (a delivery learned late taken for the address's last).
var regressionSeeds = []int64{333, 1063, 1591, 1943}

// propertySeeds is how many seeds TestMirrorPropertyEmailChanges runs by
// default: a few seconds (more under -race).
const propertySeeds = 8

func mirrorProperty(t *testing.T, seed int64) {
	rng := rand.New(rand.NewSource(seed))
	tb := setup(t, 0, destination.CapVerify)
	src := &keysetSource{rows: map[int]string{}, emails: map[int]string{}}
	if seed%2 == 0 {
		// Read by version, as a table by updated_at: a row changed while a
		// pass reads it is read again by that pass (an independent check,
		// 2026-12-07: its first read's address was then left on the list).
		src.vers = map[int]int{}
	}
	m := &propModel{t: t, rng: rng, src: src, hist: map[int][]string{}, log: &story{}}
	rows := 10 + rng.Intn(11)
	for i := 0; i < rows; i++ {
		m.insert()
	}
	d := &propDest{rng: rand.New(rand.NewSource(seed * 7919)), list: map[string]string{}, attrs: map[string]string{},
		procs: map[string]*propProc{}, log: m.log, inflight: 1 + rng.Intn(2)}
	pageSize := 2 + rng.Intn(5)
	params := func(ctx context.Context) Params {
		p := tb.params(t, "id")
		p.Source = m.src
		p.Destination = d
		p.Sync.PageSize = pageSize
		// No bound: many e-mail changes among few rows exceed any share
		// (mirror_removals_refused is the bound working, not a defect).
		p.Sync.Mirror = &Mirror{MaxRemovals: func(int) int { return 1 << 30 }, Bound: "unbounded"}
		p.PollInterval, p.AcceptedWait = time.Millisecond, 5*time.Millisecond
		p.InDoubtGrace = time.Millisecond
		return p
	}
	runs := 6 + rng.Intn(10)
	for run := 1; run <= runs; run++ {
		// Changes between runs.
		m.src.mu.Lock()
		for k := rng.Intn(4); k > 0; k-- {
			m.step()
		}
		m.src.mu.Unlock()
		ctx, cancel := context.WithCancel(context.Background())
		killAt := 0
		if rng.Intn(3) == 0 {
			killAt = 1 + rng.Intn(4)
		}
		changeAt := map[int]bool{}
		for k := rng.Intn(3); k > 0; k-- {
			changeAt[1+rng.Intn(5)] = true
		}
		d.mu.Lock()
		d.faults = true
		d.writes = 0
		d.onWrite = func(n int) {
			if changeAt[n] { // during the run
				m.src.mu.Lock()
				m.log.add(fmt.Sprintf("  (during write %d)", n))
				m.step()
				m.src.mu.Unlock()
			}
			if n == killAt {
				m.log.add(fmt.Sprintf("  run killed at write %d", n))
				cancel()
			}
		}
		d.mu.Unlock()
		if rng.Intn(4) == 0 {
			m.src.mu.Lock()
			m.src.onEnd = func() {
				m.src.mu.Lock()
				m.log.add("  (at the pass's end)")
				m.step()
				m.src.mu.Unlock()
			}
			m.src.mu.Unlock()
		}
		m.log.add(fmt.Sprintf("run %d (kill at write %d)", run, killAt))
		d.mu.Lock()
		before := d.nprocs
		d.mu.Unlock()
		_, err := Run(ctx, params(ctx))
		cancel()
		m.log.add(fmt.Sprintf("run %d: %v", run, err))
		m.dumpLedger(tb)
		d.landLost()
		if err != nil && killAt > 0 {
			// A killed run never learned its imports' processes: lost
			// answers, which land within the grace.
			d.mu.Lock()
			for _, p := range d.queued {
				if n, _ := strconv.Atoi(p.id); n > before {
					p.lost = true
				}
			}
			d.mu.Unlock()
			d.landLost()
		}
		m.src.mu.Lock()
		m.src.onEnd = nil
		m.src.mu.Unlock()
		if rng.Intn(2) == 0 {
			tb.clock.Advance(time.Duration(rng.Intn(3)) * time.Minute)
		}
	}
	// Clean runs: every import lands, the waits have passed.
	d.mu.Lock()
	d.faults, d.onWrite = false, nil
	d.mu.Unlock()
	d.drain()
	m.log.add("clean runs")
	var settledWrites int // writes by the last two clean runs: none once settled
	for run := 0; run < 5; run++ {
		if run == 3 {
			d.mu.Lock()
			settledWrites = d.writes
			d.mu.Unlock()
		}
		tb.clock.Advance(10 * time.Minute)
		if _, err := Run(context.Background(), params(context.Background())); err != nil {
			m.log.add(fmt.Sprintf("clean run: %v", err))
		}
		m.dumpLedger(tb)
		d.drain()
	}
	// Row by row.
	want := map[string]string{}
	m.src.mu.Lock()
	for id, name := range m.src.rows {
		want[strings.ToLower(m.src.emails[id])] = name
	}
	m.src.mu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	var bad []string
	if n := d.writes - settledWrites; n > 0 {
		bad = append(bad, fmt.Sprintf("the fourth and fifth clean runs wrote %d times (nothing changed)", n))
	}
	for e, v := range want {
		if got, ok := d.list[e]; !ok {
			bad = append(bad, fmt.Sprintf("%s missing (want %s)", e, v))
		} else if got != v {
			bad = append(bad, fmt.Sprintf("%s holds %s, want %s", e, got, v))
		}
	}
	for e, v := range d.list {
		if _, ok := want[e]; !ok {
			bad = append(bad, fmt.Sprintf("%s (%s) on the list, no row holds it", e, v))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		if os.Getenv("ONCESYNC_MIRROR_LOG") != "" {
			t.Log(m.log.String())
		}
		t.Fatalf("seed %d: %s", seed, strings.Join(bad, "; "))
	}
}
