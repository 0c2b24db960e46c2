package brevo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/oncesync/oncesync/internal/apiclient"
	"github.com/oncesync/oncesync/internal/failure"
)

// Brevo allows 100 requests an hour on the routes outside /contacts (200 on
// the advanced tier), /processes among them (developers.brevo.com/docs/api-limits).
// Asked by id, each import's process costs a read or more (a run's pages
// are polled while they process: 55 reads for 20 imports of 3 s), so a sync
// of a few hundred imports would spend hours of that budget settling. One
// GET /processes answers for the account's newest 50 processes, each with
// the same fields as GET /processes/{processId}, the report URLs of a
// completed import included (developers.brevo.com/reference/get-processes):
// while two or more of the destination's processes are waited for, they
// are asked about together.
const (
	// maxProcessList is the largest page of GET /processes (swagger.yaml).
	maxProcessList = 50
	// processListFresh is how long a listing answers for a process it showed
	// running: a poll of another import within it is answered from it.
	processListFresh = time.Second
	// processListKept is how long a listing answers for a process it showed
	// ended (an ended process does not change; its report URLs may expire).
	processListKept = time.Minute
	// processForget is how long a process asked about and never asked again
	// counts as waited for (its run ended, or gave up on it).
	processForget = 10 * time.Minute
	// maxReadGap is the longest pause between process reads that pacing
	// makes: less than the runner's wait for a process (2 minutes), so
	// every process waited for is asked at least once meanwhile. A budget
	// too small to spread that thin is spent faster, down to its reserve.
	maxReadGap = 90 * time.Second
	// spentProbe is how often a budget told spent (none left) is asked
	// again before its reset (readBudget.pace).
	spentProbe = 2 * time.Minute
)

// processBoard is what the destination knows of its account's processes:
// the last listing, and the processes it waits for.
type processBoard struct {
	mu     sync.Mutex
	read   time.Time // when the last listing was answered
	listed map[int64]processDetails
	// moved: the last listing showed a process waited for as ended. Its
	// others may be ending too (imports sent one after another end one
	// after another): a poll of one it showed running reads a new listing,
	// which a poll an instant later would otherwise be told was running.
	moved   bool
	waiting map[int64]time.Time // process id -> last asked about, while not done
	flight  singleflight.Group
	budget  readBudget // what Brevo last said of the hourly budget
	last    time.Time  // when the last process read was sent
}

// A run of more than a few dozen imports would spend the hourly budget
// (the listing answers for many imports only while they end together) and
// then fail destination_rate_limited until it resets. So once half the
// budget is gone, process reads are paced: the time left to the reset
// spread evenly over the reads left (less a reserve for the account's other
// uses), one listing answering for every import waited for between reads
// (whatever it showed, running or ended). The budget is the account's, told
// by Brevo's x-sib-ratelimit-* headers on every answer of the routes
// outside /contacts (developers.brevo.com/docs/limit-headers), so reads by
// other syncs, processes or tools of the account slow these down.

// readBudget is what the x-sib-ratelimit-* headers of the last answer of a
// route outside /contacts said.
type readBudget struct {
	known            bool
	limit, remaining int
	reset            time.Time
}

// readReserve is the part of a budget of limit reads that pacing leaves
// unspent, for the account's other uses (a check's GET /account, a
// read-back's polls, a person's).
func readReserve(limit int) int { return max(2, limit/20) }

// pace reports how long after now the next process read may be sent, last
// being when the previous one was, and whether the budget is spent (down to
// its reserve: no read before the reset).
func (g readBudget) pace(now, last time.Time) (wait time.Duration, spent bool) {
	if !g.known || !now.Before(g.reset) || 2*g.remaining > g.limit {
		return 0, false
	}
	spare := g.remaining - readReserve(g.limit)
	left := g.reset.Sub(now)
	if g.remaining <= 0 && now.Sub(last) >= spentProbe {
		// Told spent (a 429 says so), it is asked again now and then: one
		// 429 (a burst limit's, a gateway's) said the hour's budget was
		// gone moments after an answer said most of it was left, and held
		// the sync's accepted records until the hour's end (make chaos
		// destination-faults, seed 43). Asking a budget truly spent costs
		// one refused request; the reserve left for others (remaining
		// above 0) is never probed into.
		return 0, false
	}
	if spare <= 0 {
		return left, true
	}
	gap := min(left/time.Duration(spare), maxReadGap)
	return max(0, last.Add(gap).Sub(now)), false
}

// observe records the budget an answer of a route outside /contacts states
// (apiclient.Params.Observe of that bucket's client).
func (b *processBoard) observe(h http.Header, now time.Time) {
	limit, err1 := strconv.Atoi(strings.TrimSpace(h.Get("x-sib-ratelimit-limit")))
	rem, err2 := strconv.ParseFloat(strings.TrimSpace(h.Get("x-sib-ratelimit-remaining")), 64)
	reset, ok := sibReset(h)
	if err1 != nil || err2 != nil || !ok || limit <= 0 {
		return
	}
	b.mu.Lock()
	b.budget = readBudget{known: true, limit: limit, remaining: int(rem), reset: now.Add(reset)}
	b.mu.Unlock()
}

// spentError is the failure of a read the budget does not allow: what it
// was for names it ("ask about import process 42").
func spentError(what string, g readBudget) error {
	return failure.New(failure.DestinationRateLimited, fmt.Sprintf(
		"brevo's hourly budget of requests outside /contacts (%d, GET /processes among them) has %d left until %s UTC, "+
			"too few to %s before then",
		g.limit, g.remaining, g.reset.UTC().Format(time.TimeOnly), what))
}

// mayRead reports whether a process read may be sent now for what (see
// spentError), and notes it sent if so: wait is how long until the pace
// allows one, err a spent budget's failure.
func (b *processBoard) mayRead(now time.Time, what string) (wait time.Duration, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mayReadLocked(now, what)
}

// mayReadLocked is mayRead for a caller that holds mu.
func (b *processBoard) mayReadLocked(now time.Time, what string) (wait time.Duration, err error) {
	wait, spent := b.budget.pace(now, b.last)
	switch {
	case spent:
		return 0, spentError(what, b.budget)
	case wait > 0:
		return wait, nil
	}
	b.last = now
	return 0, nil
}

// process is what Brevo says of process id now, or as of a listing younger
// than processListFresh that showed it running and none of the processes
// waited for ended (processBoard.moved). While the destination
// waits for two processes or more, it asks GET /processes (one request for
// all of them) instead of GET /processes/{processId}; a process the listing
// does not show (more than 50 newer ones) is asked about by id.
func (d *Destination) process(ctx context.Context, id int64) (processDetails, error) {
	b := &d.board
	now := d.clock.Now()
	b.mu.Lock()
	for w, at := range b.waiting {
		if now.Sub(at) > processForget {
			delete(b.waiting, w)
		}
	}
	wait, spent := b.budget.pace(now, b.last)
	paced := wait > 0 || spent
	if p, ok := b.listed[id]; ok && b.answers(p, now, paced) {
		b.note(id, p, now)
		b.mu.Unlock()
		return p, nil
	}
	b.waiting[id] = now
	n := len(b.waiting)
	if _, err := b.mayReadLocked(now, fmt.Sprintf("ask about import process %d", id)); err != nil || paced {
		b.mu.Unlock()
		if err != nil {
			return processDetails{}, err
		}
		// Not asked until the pace allows: running, as far as is known.
		return processDetails{ID: id, Status: statusInProcess}, nil
	}
	b.mu.Unlock()
	if n < 2 {
		return d.askByID(ctx, id, now)
	}
	limit := listLimit(n)
	v, err, _ := b.flight.Do(strconv.Itoa(limit), func() (any, error) {
		return d.listProcesses(apiclient.Unplaced(ctx), limit) // others wait for it
	})
	if err != nil {
		return processDetails{}, err
	}
	listed := byID(v.([]processDetails))
	b.mu.Lock()
	if at := d.clock.Now(); !at.Before(b.read) {
		b.read, b.listed, b.moved = at, listed, false
		for w := range b.waiting {
			if q, ok := listed[w]; ok && !running(q.Status) {
				b.moved = true
			}
		}
	}
	b.mu.Unlock()
	p, ok := listed[id]
	if !ok || !running(p.Status) && !reported(p) {
		return d.askByID(ctx, id, now)
	}
	b.mu.Lock()
	b.note(id, p, now)
	b.mu.Unlock()
	return p, nil
}

// answers reports whether the last listing's entry p answers for its
// process at now; while paced, it answers for every process it shows
// running until the next read. The caller holds mu.
func (b *processBoard) answers(p processDetails, now time.Time, paced bool) bool {
	if running(p.Status) {
		return paced || !b.moved && now.Sub(b.read) < processListFresh
	}
	return reported(p) && now.Sub(b.read) < processListKept
}

// reported reports whether a listing's entry of a process that ended says
// all GET /processes/{processId} would: a completed import shows its
// reports (info), even when none lists a row. One without it is asked about
// by id, in case a listing leaves them out.
func reported(p processDetails) bool {
	return p.Status != statusCompleted || p.Info != nil
}

// note records that id was asked about at now and is p. The caller holds mu.
func (b *processBoard) note(id int64, p processDetails, now time.Time) {
	if running(p.Status) {
		b.waiting[id] = now
		return
	}
	delete(b.waiting, id)
}

// askByID asks GET /processes/{processId} about id, asked about at now,
// and notes whether it still runs.
func (d *Destination) askByID(ctx context.Context, id int64, now time.Time) (processDetails, error) {
	p, err := d.getProcess(ctx, id)
	d.board.mu.Lock()
	defer d.board.mu.Unlock()
	if err != nil {
		if errors.Is(err, ErrProcessNotFound) {
			delete(d.board.waiting, id)
		}
		return p, err
	}
	d.board.note(id, p, now)
	return p, nil
}

// listLimit is the page of GET /processes asked for n processes: room for
// other processes of the account created meanwhile, at most the largest.
func listLimit(n int) int { return min(maxProcessList, 10+2*n) }

// processes is what Brevo says now of the processes ids: one GET
// /processes for two or more, then GET /processes/{processId} for those it
// does not show. A process Brevo does not know is left out. Paced like
// every process read (processBoard.mayRead): until the pace allows a read,
// nothing is read and paced is true.
func (d *Destination) processes(ctx context.Context, ids []int64) (_ map[int64]processDetails, paced bool, _ error) {
	wait, err := d.board.mayRead(d.clock.Now(), "wait for the account's running imports")
	if err != nil || wait > 0 {
		return nil, wait > 0, err
	}
	out := make(map[int64]processDetails, len(ids))
	var listed map[int64]processDetails
	if len(ids) > 1 {
		list, err := d.listProcesses(ctx, listLimit(len(ids)))
		if err != nil {
			return nil, false, err
		}
		listed = byID(list)
	}
	for _, id := range ids {
		if p, ok := listed[id]; ok && reported(p) {
			out[id] = p
			continue
		}
		p, err := d.getProcess(ctx, id)
		switch {
		case errors.Is(err, ErrProcessNotFound):
		case err != nil:
			return nil, false, err
		default:
			out[id] = p
		}
	}
	return out, false, nil
}

// listProcesses reads the account's newest processes (GET /processes),
// at most limit, newest first.
func (d *Destination) listProcesses(ctx context.Context, limit int) ([]processDetails, error) {
	resp, err := d.do(ctx, request{
		method: http.MethodGet,
		path:   "/processes",
		route:  "GET /processes",
		query:  url.Values{"limit": {strconv.Itoa(limit)}, "sort": {"desc"}},
	})
	if err != nil {
		return nil, d.verifyError(err)
	}
	var body struct {
		Processes []processDetails `json:"processes"`
	}
	if err := json.Unmarshal(resp.body, &body); err != nil {
		return nil, failure.Wrap(failure.DestinationUnavailable, errors.New("undecodable process list"),
			"brevo answered GET /processes with an unexpected body")
	}
	return body.Processes, nil
}

// byID indexes a listing's processes by id.
func byID(list []processDetails) map[int64]processDetails {
	out := make(map[int64]processDetails, len(list))
	for _, p := range list {
		if p.ID > 0 && p.Status != "" {
			out[p.ID] = p
		}
	}
	return out
}
