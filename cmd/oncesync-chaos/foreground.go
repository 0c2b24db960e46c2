package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// foreground is one sync run by `oncesync run` on the embedded SQLite store.
type foreground struct {
	e      *env
	dest   *dest
	src    chaosSource
	csv    *csvSource // src, when it is a CSV (the flipper appends to it)
	config string
	store  string // the store's URL
	syncID string
	runs   int
	probe  *probe
}

type foregroundParams struct {
	Records  int
	PageSize int
	Mode     string
	Fake     fakebrevo.Options
	Settings string
	// Store is the store's URL (default: SQLite in the work directory);
	// Redis, when set, holds the leases.
	Store, Redis string
	// Source, when set, is read instead of a CSV of Records rows.
	Source chaosSource
}

func (e *env) newForeground(p foregroundParams) (*foreground, error) {
	d, err := e.newDest(p.Fake)
	if err != nil {
		return nil, err
	}
	f := &foreground{e: e, dest: d, syncID: "fg-" + p.Mode, src: p.Source, store: p.Store}
	if f.src == nil {
		if f.csv, err = newCSVSource(e.dir, f.syncID, p.Mode, p.Records); err != nil {
			return nil, err
		}
		f.src = f.csv
	}
	f.syncID = f.src.syncID()
	if p.Settings == "" {
		p.Settings = "{lease_ttl: 30s, lease_renew: 10s}"
	}
	if f.store == "" {
		f.store = "sqlite://./oncesync.db"
	}
	redisLine := ""
	if p.Redis != "" {
		redisLine = "redis: " + p.Redis + "\n"
	}
	f.config = filepath.Join(e.dir, "oncesync.yaml")
	cfg := fmt.Sprintf(`store: %s
%ssettings: %s
syncs:
  - id: %s
    workspace: chaos
%s    destination: {type: brevo, base_url: %s, api_key: ${BREVO_API_KEY}, mode: %s, list_ids: [2], rate_limit: 1000}
`, f.store, redisLine, p.Settings, f.syncID, f.src.yaml(p.PageSize), d.URL(f.syncID), p.Mode)
	if err := os.WriteFile(f.config, []byte(cfg), 0o600); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *foreground) start() (*proc, error) {
	f.runs++
	return f.e.oncesync(fmt.Sprintf("run%d", f.runs), "run", "--config", f.config, f.syncID, "--log-level", "info")
}

// pollCursor starts recording cursor moves once the store exists.
func (f *foreground) pollCursor(ctx context.Context) {
	if !strings.HasPrefix(f.store, "sqlite:") {
		p, err := openPGProbe(f.store, "")
		if err != nil {
			f.e.logf("no probe of the store: %v", err)
			return
		}
		f.probe = p
		go p.pollCursors(ctx, 100*time.Millisecond)
		return
	}
	path := filepath.Join(f.e.dir, "oncesync.db")
	for ctx.Err() == nil {
		if _, err := os.Stat(path); err == nil {
			p, err := openSQLiteProbe(path)
			if err == nil {
				f.probe = p
				go p.pollCursors(ctx, 100*time.Millisecond)
				return
			}
		}
		_ = sleep(ctx, 50*time.Millisecond)
	}
}

// runToSuccess starts a run of f and waits up to limit for it to exit 0: a
// run that does not end (stopped then) or exits otherwise is a problem of
// row, naming what the run was for. ok is whether it succeeded.
func (f *foreground) runToSuccess(ctx context.Context, row *Row, what string, limit time.Duration) (p *proc, ok bool, err error) {
	p, err = f.start()
	if err != nil {
		return nil, false, err
	}
	code, ended := p.wait(ctx, limit)
	switch {
	case !ended:
		p.stop()
		row.problemf("%s (%s) did not finish within %s", p.name, what, limit)
	case code != 0:
		row.problemf("%s (%s) exited %d: %s", p.name, what, code, p.lastLine())
	default:
		return p, true, nil
	}
	return p, false, nil
}

// finish checks the delivery and reads the store's runs into row.
func (f *foreground) finish(ctx context.Context, row *Row, kills []killRecord) {
	f.src.check(ctx, f.dest.fake).fill(row)
	if f.csv != nil && len(f.csv.flipped) > 0 {
		n := len(f.csv.flipped)
		row.notef("%d records changed and changed back between runs (a later line of the CSV with the same id)", n)
	}
	st := f.dest.fake.Stats()
	row.DuplicateWrites = st.DuplicateWrites
	for _, ex := range st.DuplicateExamples {
		row.notef("duplicate write: %s", ex)
	}
	row.Runs = int64(f.runs)
	row.Kills = len(kills)
	for _, k := range kills {
		at, ok := f.dest.firstWriteAfter(f.syncID, k.At)
		if f.probe != nil {
			at, ok = firstOf(at, ok)(f.probe.firstMoveAfter(f.syncID, k.At))
		}
		if ok {
			row.Resume = append(row.Resume, at.Sub(k.At))
		}
	}
	if f.probe != nil {
		inDoubt := int64(-1)
		if rs, err := f.probe.runStats(ctx); err == nil {
			row.InDoubtSettled = rs.Settled
			inDoubt = rs.InDoubt
			row.notef("runs by outcome in the store: %s", rs.outcomes())
			if rs.Running != 0 {
				row.problemf("%d runs left in state running in the store", rs.Running)
			}
		} else {
			row.problemf("read the store's runs: %v", err)
		}
		f.probe.close()
		if inDoubt >= 0 {
			f.checkSettledListed(ctx, row, inDoubt)
		}
	}
	row.notef("fake: %d requests, %d contacts written", st.Requests, st.ContactsWritten)
}

// flipper changes records of a foreground source and changes them back
// between runs: after the first run it appends a Changed line for some
// identities of the first third of the file (already delivered by then), after
// the third the line changing them back. Both are read later in the same
// pass, after the original lines: the destination must end with the original
// value (a key alone would call the third version a replay of the first).
type flipper struct {
	e   *env
	src *csvSource
	ids []int
}

// afterRun is called after each run (killed or not) but the last.
func (fl *flipper) afterRun(n int) error {
	if !fl.e.o.Flips {
		return nil
	}
	switch n {
	case 1:
		fl.ids = pickIDs(fl.e, 1, max(1, fl.src.rows()/3), 25)
		return fl.src.appendVersions(fl.ids, true)
	case 3:
		return fl.src.appendVersions(fl.ids, false)
	}
	return nil
}

// last is called before the final run: the change back, if no third run
// came.
func (fl *flipper) last() error {
	if !fl.e.o.Flips || len(fl.ids) == 0 || !fl.src.changed[fl.ids[0]] {
		return nil
	}
	return fl.src.appendVersions(fl.ids, false)
}

// kill9Foreground: `oncesync run` killed with SIGKILL at seeded points, then
// run to the end. Kill points, chosen per run:
//   - in doubt: the fake applied a write; the run dies before the answer;
//   - on the wire: the run dies while its request is on its way, before the
//     fake applied it (the router answers 503 to a dead client);
//   - anywhere: a seeded moment once the run has written.
func kill9Foreground(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	records, kills := 20000, 8
	if e.o.Short {
		records, kills = 6000, 4
	}
	f, err := e.newForeground(foregroundParams{Records: records, PageSize: 250, Mode: "bulk",
		Fake: fakebrevo.Options{Latency: 10 * time.Millisecond}})
	if err != nil {
		return row, err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go f.pollCursor(pctx)

	var (
		mu     sync.Mutex
		victim *proc
		done   []killRecord
	)
	killNow := func(kind string) {
		// Called with mu held.
		if victim == nil || !victim.running() {
			return
		}
		done = append(done, killRecord{At: time.Now(), Sig: syscall.SIGKILL, Proc: victim.name + " " + kind, Syncs: []string{f.syncID}})
		_ = victim.signal(syscall.SIGKILL)
		victim = nil
	}
	fl := &flipper{e: e, src: f.csv}
	kinds := map[string]int{}
	for len(done) < kills {
		kind := []string{"in-doubt", "on-the-wire", "anywhere"}[e.intN(3)]
		target := 1 + e.intN(6)
		base := f.dest.writeCount(f.syncID)
		switch kind {
		case "in-doubt":
			f.dest.setAfterWrite(func(string) {
				mu.Lock()
				defer mu.Unlock()
				if f.dest.writeCount(f.syncID)+1-base >= target {
					killNow(kind)
				}
			})
		case "on-the-wire":
			seen := 0
			f.dest.setIntercept(func(_ string, w http.ResponseWriter, r *http.Request) bool {
				if !isWrite(r, r.URL.Path) {
					return false
				}
				mu.Lock()
				defer mu.Unlock()
				if seen++; seen == target && victim != nil {
					killNow(kind)
					w.WriteHeader(http.StatusServiceUnavailable)
					return true
				}
				return false
			})
		}
		p, err := f.start()
		if err != nil {
			return row, err
		}
		mu.Lock()
		victim = p
		mu.Unlock()
		if kind == "anywhere" {
			for p.running() && f.dest.writeCount(f.syncID)-base < target {
				_ = sleep(ctx, 2*time.Millisecond)
			}
			_ = sleep(ctx, e.between(0, 40*time.Millisecond))
			mu.Lock()
			killNow(kind)
			mu.Unlock()
		}
		code, ok := p.wait(ctx, 2*time.Minute)
		f.dest.setAfterWrite(nil)
		f.dest.setIntercept(nil)
		mu.Lock()
		victim = nil
		mu.Unlock()
		switch {
		case !ok:
			p.stop()
			return row, fmt.Errorf("%s did not exit within 2 minutes:\n%s", p.name, p.tail(20))
		case code == -int(syscall.SIGKILL):
			kinds[kind]++
			e.vlogf("%s killed %s after %d writes", p.name, kind, f.dest.writeCount(f.syncID)-base)
		case code == 0:
			row.notef("%s finished before its kill point; %d kills done", p.name, len(done))
			kills = len(done)
		default:
			row.problemf("%s exited %d before its kill point: %s", p.name, code, p.lastLine())
			kills = len(done)
		}
		if err := fl.afterRun(f.runs); err != nil {
			return row, err
		}
	}
	if err := fl.last(); err != nil {
		return row, err
	}
	final, err := f.start()
	if err != nil {
		return row, err
	}
	if code, ok := final.wait(ctx, 5*time.Minute); !ok || code != 0 {
		row.problemf("the final run exited %d (finished: %v): %s", code, ok, final.lastLine())
	} else {
		row.notef("final run: %s", summaryLine(final))
	}
	row.notef("kill points: %v", kinds)
	cancel()
	f.finish(ctx, row, done)
	return row, nil
}

// summaryLine is the "run N succeeded: read ..." line of a run's output.
func summaryLine(p *proc) string {
	for _, l := range strings.Split(p.output(), "\n") {
		if strings.HasPrefix(l, "run ") && strings.Contains(l, ": read ") {
			return l
		}
	}
	return p.lastLine()
}

// sigtermForeground: `oncesync run` sent SIGTERM at seeded moments; each must
// drain (finish the page, checkpoint, release) and exit within 25 s with the
// interrupted line, and the next run must not be skipped.
func sigtermForeground(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	records, terms := 12000, 5
	if e.o.Short {
		records, terms = 6000, 3
	}
	f, err := e.newForeground(foregroundParams{Records: records, PageSize: 200, Mode: "bulk",
		Fake: fakebrevo.Options{Latency: 25 * time.Millisecond}})
	if err != nil {
		return row, err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go f.pollCursor(pctx)
	var done []killRecord
	var drains []time.Duration
	fl := &flipper{e: e, src: f.csv}
	for len(done) < terms {
		p, err := f.start()
		if err != nil {
			return row, err
		}
		base := f.dest.writeCount(f.syncID)
		target := 1 + e.intN(8)
		for p.running() && f.dest.writeCount(f.syncID)-base < target {
			_ = sleep(ctx, 2*time.Millisecond)
		}
		_ = sleep(ctx, e.between(0, 100*time.Millisecond))
		if !p.running() {
			row.notef("%s finished before its SIGTERM", p.name)
			break
		}
		k := killRecord{At: time.Now(), Sig: syscall.SIGTERM, Proc: p.name, Syncs: []string{f.syncID}}
		_ = p.signal(syscall.SIGTERM)
		code, ok := p.wait(ctx, 40*time.Second)
		if !ok {
			p.stop()
			row.problemf("%s did not exit within 40 s of SIGTERM", p.name)
			continue
		}
		took := p.exited.Sub(k.At)
		drains = append(drains, took)
		// Resume is measured from the exit: the drain itself makes progress.
		k.At = p.exited
		done = append(done, k)
		if took > 25*time.Second {
			row.problemf("%s took %s to exit after SIGTERM (limit 25 s)", p.name, took.Round(time.Millisecond))
		}
		switch last := p.lastLine(); {
		case code == 1 && strings.HasPrefix(last, "failed: interrupted: "):
		case code == 0:
			row.notef("%s finished its last page while draining", p.name)
		default:
			row.problemf("%s exited %d after SIGTERM: %s", p.name, code, last)
		}
		if err := fl.afterRun(f.runs); err != nil {
			return row, err
		}
	}
	if err := fl.last(); err != nil {
		return row, err
	}
	final, err := f.start()
	if err != nil {
		return row, err
	}
	switch code, ok := final.wait(ctx, 5*time.Minute); {
	case ok && code == 3:
		row.problemf("the run after the last drain was skipped: the drained run did not release its lease")
	case !ok || code != 0:
		row.problemf("the final run exited %d (finished: %v): %s", code, ok, final.lastLine())
	default:
		row.notef("final run: %s", summaryLine(final))
	}
	if len(drains) > 0 {
		longest := drains[0]
		for _, d := range drains {
			longest = max(longest, d)
		}
		row.notef("SIGTERM to exit: %d drains, longest %s (limit 25 s)", len(drains), longest.Round(time.Millisecond))
	}
	cancel()
	f.finish(ctx, row, done)
	return row, nil
}

// checkSettledListed: every write in doubt the runs settled is listed by
// the record's identity (docs/guide.md#the-ledger-and-its-retention), not
// only counted: `oncesync records --settled` names a record for each, and
// at least one when the runs counted any in doubt (their final
// run succeeded, so none is left unsettled). A key is listed once however
// often it was in doubt, and a run killed between settling a page and its
// checkpoint lists what it did not count, so the two figures are compared
// in a note only.
func (f *foreground) checkSettledListed(ctx context.Context, row *Row, inDoubt int64) {
	cmd := exec.CommandContext(ctx, f.e.o.Bin, "records", "--config", f.config, f.syncID, "--settled", "--format", "json", "--limit", "10000000")
	cmd.Dir = f.e.dir
	cmd.Env = append(os.Environ(), "BREVO_API_KEY="+apiKey)
	out, err := cmd.Output()
	if err != nil {
		row.problemf("oncesync records --settled: %v", err)
		return
	}
	var recs []struct {
		Identity string `json:"identity"`
		State    string `json:"state"`
		Reason   string `json:"reason"`
	}
	if err := json.Unmarshal(out, &recs); err != nil {
		row.problemf("oncesync records --settled: %v", err)
		return
	}
	seen := make(map[string]bool, len(recs))
	for _, r := range recs {
		if r.Identity == "" || r.State != "settled" || r.Reason == "" {
			row.problemf("a settled record without an identity, state or reason: %+v", r)
			return
		}
		seen[r.Identity] = true // one row may have had two values in doubt
	}
	if inDoubt > 0 && len(recs) == 0 {
		row.problemf("the runs counted %d records in doubt and `oncesync records --settled` lists none", inDoubt)
		return
	}
	row.notef("settled writes in doubt listed by identity: %d, of %d rows (the runs counted %d in doubt)", len(recs), len(seen), inDoubt)
}
