package brevo_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// processReads counts the fake's answers about processes: by id, and
// listings.
func processReads(f *fakebrevo.Server) (byID, listings int64) {
	st := f.Stats()
	return st.ByRoute["GET /v3/processes/{processId}"], st.ByRoute["GET /v3/processes"]
}

// writeImports writes n pages of size records each, one import each, and
// returns the pages and their process ids.
func writeImports(t *testing.T, d *brevo.Destination, n, size int) ([][]destination.Record, []string) {
	t.Helper()
	all := recs(n * size)
	pages := make([][]destination.Record, n)
	refs := make([]string, n)
	for i := range pages {
		pages[i] = all[i*size : (i+1)*size]
		res, err := d.Write(t.Context(), pages[i])
		if err != nil {
			t.Fatalf("Write page %d: %v", i, err)
		}
		if res[0].Outcome != destination.Accepted {
			t.Fatalf("page %d: %+v, want accepted", i, res[0])
		}
		refs[i] = res[0].Ref
	}
	return pages, refs
}

// wantSettled asks Outcomes once about each import refs[i] of pages[i] and
// checks that every import is done, the records numbered rejected (in the
// order of the pages) rejected and every other delivered.
func wantSettled(t *testing.T, d *brevo.Destination, pages [][]destination.Record, refs []string, rejected ...int) {
	t.Helper()
	n := 0
	for i, ref := range refs {
		res, done, err := d.Outcomes(t.Context(), ref, pages[i])
		if err != nil || !done {
			t.Fatalf("Outcomes(import %d) = %v, %v; want done", i, done, err)
		}
		got := byKey(t, pages[i], res)
		for _, r := range pages[i] {
			want := destination.Delivered
			if slices.Contains(rejected, n) {
				want = destination.Rejected
			}
			if g := got[r.Key]; g.Outcome != want {
				t.Errorf("record %d: %+v, want %s", n, g, want)
			}
			n++
		}
	}
}

// TestOutcomesOfManyImportsShareOneListing: Brevo allows 100 process reads
// an hour. While a run waits for several imports, each poll asked
// GET /processes/{processId} (55 reads for 20 imports of 3 s); one
// GET /processes answers for all of them, reports included.
func TestOutcomesOfManyImportsShareOneListing(t *testing.T) {
	t.Parallel()
	all := recs(6 * 20)
	refused := []destination.Record{all[25], all[90]} // pages 1 and 4
	b := setup(t, fakebrevo.Options{ProcessDelay: 10 * time.Second, RefuseEmails: []string{emailOf(refused[0]), emailOf(refused[1])}},
		func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	pages, refs := writeImports(t, b.dest, 6, 20)

	for i, ref := range refs { // every import still queued
		if res, done, err := b.dest.Outcomes(t.Context(), ref, pages[i]); err != nil || done || len(res) != 0 {
			t.Fatalf("Outcomes(page %d) before processing = %v, %v, %v", i, res, done, err)
		}
	}
	b.clock.Advance(11 * time.Second)
	wantSettled(t, b.dest, pages, refs, 25, 90)
	byID, listings := processReads(b.fake)
	// Round one: the first import alone is asked by id, the second reads a
	// listing that answers for the other four; round two: one listing.
	if byID+listings > 3 {
		t.Errorf("%d reads by id and %d listings for 12 polls of 6 imports; want 3 reads at most", byID, listings)
	}
	if st := b.fake.Stats(); st.ReportRequests != 2 {
		t.Errorf("%d report reads, want 2 (one per import that skipped a row)", st.ReportRequests)
	}
}

// TestOutcomesAfterAnImportEndedReadsAgain: imports sent one after another
// end one after another. A listing that showed one of them ended does not
// answer for the others it showed running: the next poll reads a new one,
// so a poll an instant later is not told a process runs that has ended.
func TestOutcomesAfterAnImportEndedReadsAgain(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: 10 * time.Second}, func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	first, ref1 := writeImports(t, b.dest, 1, 5)
	b.clock.Advance(time.Second)
	second, refs2 := writeImports(t, b.dest, 1, 5)
	pages, refs := [][]destination.Record{first[0], second[0]}, append(ref1, refs2...)
	b.dest.Outcomes(t.Context(), refs[0], pages[0])
	b.dest.Outcomes(t.Context(), refs[1], pages[1])
	b.clock.Advance(9*time.Second + 500*time.Millisecond) // the first has ended, not the second
	if _, done, err := b.dest.Outcomes(t.Context(), refs[0], pages[0]); err != nil || !done {
		t.Fatalf("first import: %v, %v; want done", done, err)
	}
	if _, done, err := b.dest.Outcomes(t.Context(), refs[1], pages[1]); err != nil || done {
		t.Fatalf("second import: %v, %v; want running", done, err)
	}
	b.clock.Advance(600 * time.Millisecond) // within a second of the listing
	if _, done, err := b.dest.Outcomes(t.Context(), refs[1], pages[1]); err != nil || !done {
		t.Errorf("second import, ended 100 ms ago: done %v, %v; want done (asked anew)", done, err)
	}
}

// TestOutcomesOfAnImportTheListingLeavesOut: the listing holds the newest
// 50 processes; an older import of the run is asked about by id.
func TestOutcomesOfAnImportTheListingLeavesOut(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: 100 * time.Second}, func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	pages, refs := writeImports(t, b.dest, 60, 1)
	for i := range refs { // the run waits for all 60
		if _, _, err := b.dest.Outcomes(t.Context(), refs[i], pages[i]); err != nil {
			t.Fatal(err)
		}
	}
	b.clock.Advance(200 * time.Second)
	before, _ := processReads(b.fake)
	for i := range refs {
		res, done, err := b.dest.Outcomes(t.Context(), refs[i], pages[i])
		if err != nil || !done || res[0].Outcome != destination.Delivered {
			t.Fatalf("import %d: %v, %v, %v; want delivered", i, res, done, err)
		}
	}
	if after, _ := processReads(b.fake); after-before != 10 {
		t.Errorf("%d reads by id after the listing; want 10 (the imports older than the newest 50)", after-before)
	}
}

// TestOutcomesListingWithoutReports: a completed import whose listing entry
// has no info (should a listing leave it out) is asked about by id, whose
// answer lists the skipped rows: a row is never taken for delivered because
// the listing was short.
func TestOutcomesListingWithoutReports(t *testing.T) {
	t.Parallel()
	all := recs(10)
	b := &bundle{clock: clock.NewFake(t0)}
	b.fake = fakebrevo.New(testAccount(fakebrevo.Options{APIKey: apiKey, Clock: b.clock, ProcessDelay: 5 * time.Second,
		RefuseEmails: []string{emailOf(all[1]), emailOf(all[7])}}))
	b.startProxy(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != fakebrevo.BasePath+"/processes" {
			b.fake.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		b.fake.ServeHTTP(rec, r)
		var list map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &list); err != nil {
			t.Errorf("listing: %v", err)
		}
		for _, p := range list["processes"].([]any) {
			delete(p.(map[string]any), "info")
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(list)
	}))
	d := b.newDest(t, brevo.Params{BaseURL: b.url, APIKey: apiKey, Mode: brevo.ModeBulk, ListIDs: []int64{1}, Clock: b.clock, Sleep: destinationNoSleep})
	pages, refs := writeImports(t, d, 2, 5)
	for i := range refs { // both waited for
		if _, done, err := d.Outcomes(t.Context(), refs[i], pages[i]); err != nil || done {
			t.Fatalf("import %d before processing: %v, %v", i, done, err)
		}
	}
	b.clock.Advance(6 * time.Second)
	wantSettled(t, d, pages, refs, 1, 7)
	if _, listings := processReads(b.fake); listings == 0 {
		t.Error("no listing read: the case under test did not happen")
	}
}

// TestVerifyPollsImportsWithOneListing: the read-back of a page whose 202
// was lost polls the account's running imports; several are polled with
// one listing each time, not one read each.
func TestVerifyPollsImportsWithOneListing(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: 9 * time.Second}, func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	_, refs := writeImports(t, b.dest, 5, 4)
	lost := recs(5*4 + 3)[5*4:] // never written: Verify waits for the running imports
	for i := range lost {
		lost[i].Key = strings.Repeat("e", 63) + string(rune('0'+i))
	}
	before := b.fake.Stats().Requests
	if _, err := b.dest.Verify(t.Context(), lost, t0); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	byID, listings := processReads(b.fake)
	if listings == 0 || byID > 1 {
		t.Errorf("Verify polled %d running imports with %d reads by id and %d listings (of %d requests); want listings, not reads by id",
			len(refs), byID, listings, b.fake.Stats().Requests-before)
	}
	var buf bytes.Buffer
	for _, w := range b.sleeps.nonZero() {
		buf.WriteString(w.String() + " ")
	}
	if buf.Len() == 0 {
		t.Error("Verify did not wait for the running imports: the case under test did not happen")
	}
}

// TestProcessReadsKeepWithinTheHourlyBudget: Brevo allows 100 process reads
// an hour. A run of 300 imports, each ending 10 s after it is sent, polled
// every second as the runner's poller does with at most 32 waited for at
// once, spent the budget within a few minutes and then had every read
// answered 429 until the hour ended. Paced by the budget's headers, it
// settles every import without a 429, each within the 2 minutes the runner
// waits for a process.
func TestProcessReadsKeepWithinTheHourlyBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: 10 * time.Second, OtherRateLimitPerHour: 100},
		func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	const imports, open = 300, 32
	all := recs(imports)
	type waited struct {
		page []destination.Record
		ref  string
		sent time.Time
	}
	var (
		waiting []waited
		sent    int
		longest time.Duration
	)
	for step := 0; sent < imports || len(waiting) > 0; step++ {
		if step > 3600 {
			t.Fatalf("%d of %d imports sent and %d still waited for after an hour", sent, imports, len(waiting))
		}
		if sent < imports && len(waiting) < open {
			page := all[sent : sent+1]
			res, err := b.dest.Write(t.Context(), page)
			if err != nil || res[0].Outcome != destination.Accepted {
				t.Fatalf("Write import %d: %v, %v", sent, res, err)
			}
			waiting = append(waiting, waited{page, res[0].Ref, b.clock.Now()})
			sent++
		}
		kept := waiting[:0]
		for _, w := range waiting {
			res, done, err := b.dest.Outcomes(t.Context(), w.ref, w.page)
			switch {
			case err != nil:
				t.Fatalf("Outcomes(%s) at %s: %v", w.ref, b.clock.Now().Sub(t0), err)
			case !done:
				kept = append(kept, w)
			case res[0].Outcome != destination.Delivered:
				t.Fatalf("import %s: %+v, want delivered", w.ref, res[0])
			default:
				longest = max(longest, b.clock.Now().Sub(w.sent))
			}
		}
		waiting = kept
		b.clock.Advance(time.Second)
	}
	st := b.fake.Stats()
	if n := st.ByStatus["429"]; n > 0 {
		t.Errorf("%d requests answered 429 (the hourly budget spent)", n)
	}
	byID, listings := processReads(b.fake)
	if byID+listings > 100 {
		t.Errorf("%d process reads (%d by id, %d listings) within the hour, want 100 at most", byID+listings, byID, listings)
	}
	if longest > 2*time.Minute {
		t.Errorf("an import was settled %s after it was sent, want within the runner's 2 minutes", longest)
	}
	t.Logf("%d imports settled in %s with %d reads by id and %d listings; the longest %s",
		imports, b.clock.Now().Sub(t0), byID, listings, longest)
}

// TestSpentProcessBudgetIsNotAsked: once Brevo says the hour's budget is
// down to its reserve, a poll is answered destination_rate_limited, naming
// when the budget resets, without a request (which would be refused).
func TestSpentProcessBudgetIsNotAsked(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: 10 * time.Second, OtherRateLimitPerHour: 100},
		func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	pages, refs := writeImports(t, b.dest, 1, 3)
	for range 96 { // another tool of the account spends the budget
		req := httptest.NewRequest(http.MethodGet, b.url+"/account", nil)
		req.Header.Set("api-key", apiKey)
		rec := httptest.NewRecorder()
		b.fake.ServeHTTP(rec, req)
	}
	if _, done, err := b.dest.Outcomes(t.Context(), refs[0], pages[0]); err != nil || done {
		t.Fatalf("first poll: %v, %v; want running (asked: 3 reads left)", done, err)
	}
	before, _ := processReads(b.fake)
	b.clock.Advance(20 * time.Second)
	_, _, err := b.dest.Outcomes(t.Context(), refs[0], pages[0])
	if failure.CodeOf(err) != failure.DestinationRateLimited || !strings.Contains(err.Error(), "13:00:00 UTC") {
		t.Fatalf("poll with the budget spent: %v; want destination_rate_limited naming the reset at 13:00:00", err)
	}
	if after, _ := processReads(b.fake); after != before {
		t.Errorf("%d process read(s) sent with the budget spent, want none", after-before)
	}
	b.clock.Advance(time.Hour)
	if _, done, err := b.dest.Outcomes(t.Context(), refs[0], pages[0]); err != nil || !done {
		t.Errorf("poll after the reset: %v, %v; want done", done, err)
	}
}

// TestVerifyPacesItsProcessReads: the read-back of a page whose 202 was
// lost waits for the account's running imports; its polls (every 2 s for
// up to 2 minutes) were outside the pace and spent the budget's reserve,
// down to 429s for the account's other tool (an independent check,
// brevo35). Once half the budget is gone they are paced like the runs'.
func TestVerifyPacesItsProcessReads(t *testing.T) {
	t.Parallel()
	b := setup(t, fakebrevo.Options{ProcessDelay: time.Hour, OtherRateLimitPerHour: 100}, func(p *brevo.Params) { p.Mode = brevo.ModeBulk })
	writeImports(t, b.dest, 3, 4)
	for range 55 { // another tool of the account spends half the budget
		req := httptest.NewRequest(http.MethodGet, b.url+"/account", nil)
		req.Header.Set("api-key", apiKey)
		b.fake.ServeHTTP(httptest.NewRecorder(), req)
	}
	lost := recs(3*4 + 2)[3*4:] // never written: Verify waits for the running imports
	for i := range lost {
		lost[i].Key = strings.Repeat("f", 63) + string(rune('0'+i))
	}
	if _, err := b.dest.Verify(t.Context(), lost, t0); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	byID, listings := processReads(b.fake)
	if n := byID + listings; n > 4 {
		t.Errorf("Verify made %d process reads (%d by id, %d listings) in its 2-minute wait with half the budget gone; want 4 at most (paced)", n, byID, listings)
	}
	if n := b.fake.Stats().ByStatus["429"]; n > 0 {
		t.Errorf("%d requests answered 429", n)
	}
}
