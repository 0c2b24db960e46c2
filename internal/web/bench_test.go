package web

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// BenchmarkPages renders, through the full handler (session check, store
// reads, template), the overview of a workspace set of 1,000 syncs (5 runs
// each) and the page of a run of 10,000 pages with 10,000 rejected and 1,000
// in-doubt records, on a real SQLite store seeded with store methods.
// Issue 5's goal: under 300 ms server time each.
func BenchmarkPages(b *testing.B) {
	ctx := context.Background()
	clk := clock.NewFake(t0)
	st := openStore(b, clk)
	sd := seeder{tb: b, ctx: ctx, st: st, clk: clk}
	start := time.Now()
	for i := range 1000 {
		id := fmt.Sprintf("sync-%04d", i)
		sched := ""
		if i%3 != 0 {
			sched = "*/30 * * * *"
		}
		sd.sync(id, fmt.Sprintf("team-%02d", i%20), sched)
		for j := range 5 {
			state, code := store.RunSucceeded, failure.Code("")
			if (i+j)%7 == 0 {
				state, code = store.RunFailed, failure.DestinationUnavailable
			}
			sd.run(id, state, code, "", store.Counters{Read: 1000, Written: 990, Rejected: 10, Pages: 2, Requests: 2}, time.Second)
		}
		if i%50 == 0 {
			if _, err := st.SetSyncState(ctx, store.SetSyncStateParams{ID: id, State: store.SyncPaused, Reason: "person", By: "bench", Why: "bench"}); err != nil {
				b.Fatal(err)
			}
		}
	}
	sd.sync("big", "team-00", "@hourly")
	big := sd.run("big", store.RunSucceeded, "", "", store.Counters{Read: 5_000_000, Written: 4_989_000, Rejected: 10_000, InDoubt: 1_000, Pages: 10_000, Requests: 10_000}, 3*time.Hour)
	var rejected, inDoubt []string
	for p := range 10_000 {
		rejected = append(rejected, key("bench-rejected", p))
	}
	for p := range 1_000 {
		inDoubt = append(inDoubt, key("bench-in-doubt", p))
	}
	sd.records("big", big.ID, rejected, inDoubt, "offset:5000000")
	b.Logf("seeded 1,001 syncs, 5,001 runs, 11,000 ledger entries in %s", time.Since(start).Round(time.Millisecond))

	srv, err := New(Params{Store: st, Clock: clk, Users: map[string]User{testUser: {Hash: passwordHash(b), Access: Access{Role: RoleAdmin}}},
		Enqueue: func(context.Context, string, string) error { return nil }})
	if err != nil {
		b.Fatal(err)
	}
	id, err := srv.createSession(context.Background(), principalOf(testUser, Access{Role: RoleAdmin}), providerPassword)
	if err != nil {
		b.Fatal(err)
	}
	cookie := &http.Cookie{Name: srv.cookieName(), Value: id}
	render := func(b *testing.B, path, want string) {
		b.Helper()
		var size int
		b.ReportAllocs()
		for b.Loop() {
			req := httptest.NewRequest("GET", path, nil)
			req.AddCookie(cookie)
			rec := httptest.NewRecorder()
			srv.ServeHTTP(rec, req)
			if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
				b.Fatalf("%s: %d", path, rec.Code)
			}
			size = rec.Body.Len()
		}
		b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N), "ms/render")
		b.ReportMetric(float64(size)/1024, "KiB/page")
	}
	b.Run("overview_1000_syncs", func(b *testing.B) { render(b, "/", "sync-0999") })
	b.Run("run_10000_pages", func(b *testing.B) { render(b, fmt.Sprintf("/runs/%d", big.ID), "Showing 500 of 10,000") })
	b.Run("sync_page_big_ledger", func(b *testing.B) { render(b, "/syncs/big", "10,000 rejected") })
}
