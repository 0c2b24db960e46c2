package main

import (
	"context"
	"strconv"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// Rejected records are retried (docs/guide.md#the-ledger-and-its-retention, issue 13 finding 4): a record the
// destination refuses for its content is rejected, and every later run
// tries it again until it succeeds, whatever the source. A keyset source
// (PostgreSQL) whose cursor moved past the row must re-read it by identity.

// rejectedRows is how many of the table's rows the destination refuses at
// first.
const rejectedRows = 10

// rejectedThenAccepted: `oncesync run` on a PostgreSQL store, source a
// PostgreSQL table of 1,000 rows (keyset on updated_at, identity id), single
// path. The router refuses 10 seeded rows (400 invalid_parameter, as Brevo
// refuses a record for its content) during the first run, then accepts
// everything; two more runs follow. Checks: the first run rejects exactly
// those 10 and succeeds; after the next runs every row is at the
// destination with its values (the value checker), none written twice.
func rejectedThenAccepted(ctx context.Context, e *env) (*Row, error) {
	row := &Row{}
	dbURL, src, err := e.newPGSourceDB(ctx, "fg-rejected", 1000)
	if err != nil {
		return row, err
	}
	f, err := e.newForeground(foregroundParams{PageSize: 100, Mode: "single", Source: src, Store: dbURL,
		Fake: fakebrevo.Options{Latency: time.Millisecond}})
	if err != nil {
		return row, err
	}
	pctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go f.pollCursor(pctx)

	ids := pickIDs(e, 1, src.rows(), rejectedRows)
	refused := map[string]bool{}
	for _, i := range ids {
		refused[src.email(i)] = true
	}
	f.dest.setRefused(func(email string) bool { return refused[email] })
	delivered := func() int {
		n := 0
		for _, i := range ids {
			if _, ok := f.dest.fake.Contact(src.email(i)); ok {
				n++
			}
		}
		return n
	}
	runOnce := func(what string) error {
		p, ok, err := f.runToSuccess(ctx, row, what, 3*time.Minute)
		if ok {
			row.notef("%s (%s): %s; %d of the %d refused rows at the destination after it", p.name, what, summaryLine(p), delivered(), len(ids))
		}
		return err
	}
	if err := runOnce(strconv.Itoa(len(ids)) + " rows refused"); err != nil {
		return row, err
	}
	if n := delivered(); n != 0 {
		row.problemf("%d of the %d refused rows reached the destination while refused", n, len(ids))
	}
	f.dest.setRefused(nil)
	accepted := time.Now() // the destination's change of mind: the "hit" of this scenario
	for _, what := range []string{"all accepted", "all accepted, again"} {
		if err := runOnce(what); err != nil {
			return row, err
		}
	}
	cancel()
	f.finish(ctx, row, []killRecord{{At: accepted, Proc: "destination accepts", Syncs: []string{f.syncID}}})
	if n := delivered(); n != len(ids) {
		row.notef("rows refused at first and never delivered once accepted: %d of %d (ids %v)", len(ids)-n, len(ids), ids)
	}
	return row, nil
}
