package main

import (
	"context"
	"fmt"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// Asynchronous imports (docs/guide.md#the-ledger-and-its-retention "Asynchronous outcomes", issue 13 finding
// 2): Brevo's POST /contacts/import answers 202 with a process id; the
// process later skips the rows it refuses and may fail whole. A 202 is not
// a delivery: the records are `accepted` until their process reports, a
// skipped row is rejected (and retried once acceptable), a failed process
// leaves its records to be sent again.

// asyncImportDelay is how long an import process runs before it reports.
const asyncImportDelay = 1500 * time.Millisecond

// asyncImportFaults: `oncesync run` on SQLite, bulk, 2,000 rows in pages of
// 100, imports processed 1.5 s after their 202 (importSeam in front of the
// fake, see there). First run: 40 seeded rows are skipped by their import
// (refused for their content) and 2 seeded imports fail whole. Then the
// rows become acceptable; the second run meets one more failed import (its
// first); a third run has no fault. Checks: the runs never count written
// more records than the destination applied (a skipped row or a failed
// process is not a delivery); in the end every row is there with its values
// (the value checker), none written twice.
func asyncImportFaults(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	const records, pageSize = 2000, 100
	f, err := e.newForeground(foregroundParams{Records: records, PageSize: pageSize, Mode: "bulk",
		Fake: fakebrevo.Options{Latency: 5 * time.Millisecond, ProcessDelay: asyncImportDelay}})
	if err != nil {
		return row, err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go f.pollCursor(pctx)
	seam := f.dest.useImportSeam(asyncImportDelay)

	skipped := map[string]bool{}
	for _, i := range pickIDs(e, 1, records, 40) {
		skipped[f.csv.email(i)] = true
	}
	seam.setRefused(func(email string) bool { return skipped[email] })
	pages := records / pageSize
	fail := pickIDs(e, 2, pages-1, 2)
	seam.setFailAt(fail...)
	row.notef("run 1: 40 rows skipped by their imports, imports %v of %d fail whole", fail, pages)

	var hits []killRecord
	runOnce := func(what string) error {
		p, err := f.start()
		if err != nil {
			return err
		}
		code, ok := p.wait(ctx, 5*time.Minute)
		switch {
		case !ok:
			p.stop()
			row.problemf("%s (%s) did not finish within 5 minutes", p.name, what)
		case code != 0:
			row.notef("%s (%s) exited %d: %s", p.name, what, code, p.lastLine())
		default:
			row.notef("%s (%s): %s", p.name, what, summaryLine(p))
		}
		return nil
	}
	if err := runOnce("skips and failures"); err != nil {
		return row, err
	}
	hits = append(hits, killRecord{At: time.Now(), Proc: "rows acceptable", Syncs: []string{f.syncID}})
	seam.setRefused(nil)
	next := seam.imports() + 1
	seam.setFailAt(next)
	if err := runOnce(fmt.Sprintf("rows acceptable, its import %d fails", next)); err != nil {
		return row, err
	}
	seam.setFailAt()
	if err := runOnce("no fault"); err != nil {
		return row, err
	}
	// Let the last imports finish before anything is counted (the fake
	// applies a due import when it is next touched).
	if err := sleep(ctx, 2*asyncImportDelay); err != nil {
		return row, err
	}
	_ = f.dest.fake.Stats()
	cancel()
	skippedRows, failedProcs, failedRows := seam.counters()
	row.notef("the imports skipped %d rows; %d processes failed whole, carrying %d rows", skippedRows, failedProcs, failedRows)
	if f.probe != nil {
		written, rejected, err := f.probe.writtenRejected(ctx)
		applied := f.dest.fake.Stats().ContactsWritten
		switch {
		case err != nil:
			row.problemf("read the runs' counters: %v", err)
		case written > applied:
			row.problemf("the runs counted %d records written, the destination applied %d: skipped rows or failed processes were counted as delivered", written, applied)
		default:
			row.notef("the runs counted %d written and %d rejected; the destination applied %d", written, rejected, applied)
		}
	}
	f.finish(ctx, row, hits)
	return row, nil
}
