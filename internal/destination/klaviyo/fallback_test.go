package klaviyo_test

import (
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/klaviyo"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

// TestRefusedJobFallbackJoinsTheList: Klaviyo refuses a page's bulk job
// whole, so its records go one profile import each, which does not add a
// profile to list_id. Every record delivered that way must be in list_id
// (what the sync promises a bulk page), and read back as landed; the
// record Klaviyo refuses is rejected and not listed.
func TestRefusedJobFallbackJoinsTheList(t *testing.T) {
	t.Parallel()
	recs := records(6)
	bad := recs[2]
	b := setup(t, fakeklaviyo.Options{JobRefuseRate: 1, RefuseEmails: []string{emailOf(bad)}}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	if st := b.fake.Stats(); st.JobsRefused != 1 || st.ByRoute["POST /api/profile-import"] != int64(len(recs)) {
		t.Fatalf("stats %+v: want the job refused and one profile import per record", st)
	}
	var delivered []destination.Record
	for _, r := range recs {
		g := byKey(t, recs, res)[r.Key]
		switch {
		case r.Key == bad.Key:
			if g.Outcome != destination.Rejected {
				t.Errorf("refused record: %+v, want rejected", g)
			}
			if p, ok := b.fake.Profile(emailOf(r)); ok && slices.Contains(p.Lists, listID) {
				t.Errorf("refused record is in list_id")
			}
		case g.Outcome != destination.Delivered:
			t.Errorf("%s: %+v, want delivered", emailOf(r), g)
		default:
			delivered = append(delivered, r)
			if p, _ := b.fake.Profile(emailOf(r)); !slices.Contains(p.Lists, listID) {
				t.Errorf("%s delivered but its lists are %v, want %s among them", emailOf(r), p.Lists, listID)
			}
		}
	}
	checkValues(t, b.fake, delivered)
	// Read back later (a later write of the same page in doubt): the
	// profiles were updated before since, so list_id decides.
	b.clk.Advance(time.Minute)
	landed, err := b.dest.Verify(t.Context(), delivered, b.clk.Now())
	if err != nil || len(landed) != len(delivered) {
		t.Errorf("Verify = %d of %d landed, %v", len(landed), len(delivered), err)
	}
}

// TestFallbackListAdditionRetried: the answer to adding the profiles to
// list_id is lost once; adding again changes nothing, so it is retried
// in-run and the records are delivered, each in the list.
func TestFallbackListAdditionRetried(t *testing.T) {
	t.Parallel()
	var lost atomic.Bool
	b := setup(t, fakeklaviyo.Options{JobRefuseRate: 1, AfterWrite: func(r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/lists/") && lost.CompareAndSwap(false, true) {
			panic(http.ErrAbortHandler) // applied, its answer cut
		}
	}}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	recs := records(3)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range byKey(t, recs, res) {
		if r.Outcome != destination.Delivered {
			t.Errorf("%+v, want delivered", r)
		}
	}
	for _, r := range recs {
		if p, _ := b.fake.Profile(emailOf(r)); !slices.Contains(p.Lists, listID) {
			t.Errorf("%s not in list_id: %v", emailOf(r), p.Lists)
		}
	}
	if st := b.fake.Stats(); !lost.Load() || st.ByRoute["POST /api/lists/{id}/relationships/profiles"] != 2 || st.DuplicateWrites != 0 {
		t.Errorf("stats %+v: want the list addition sent twice, no profile written twice", st)
	}
}

// TestFallbackNeverDeliveredOutsideTheList: a record whose profile import
// landed but whose profile could not join list_id is never counted
// delivered, and never sent again (its write landed): it is accepted under
// a list reference, and Outcomes adds it to the list once it can. With no
// such list, the page fails with the fix to make. An import answered 500
// (applied, outcome unknown) has no result: the runner reads it back.
func TestFallbackNeverDeliveredOutsideTheList(t *testing.T) {
	t.Parallel()
	t.Run("list addition fails, then succeeds", func(t *testing.T) {
		t.Parallel()
		var failing atomic.Bool
		failing.Store(true)
		b := setup(t, fakeklaviyo.Options{JobRefuseRate: 1}, klaviyo.Params{Mode: klaviyo.ModeBulk})
		// Klaviyo's list endpoint answers 503 (nothing applied) for a while.
		wrap := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.URL.Path, "/api/lists/") && failing.Load() {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			b.fake.ServeHTTP(w, r)
		}))
		t.Cleanup(wrap.Close)
		dest, err := klaviyo.New(klaviyo.Params{APIKey: apiKey, BaseURL: wrap.URL, Clock: b.clk, Sleep: b.sleeps.sleep,
			ListID: listID, Mode: klaviyo.ModeBulk, MaxRetries: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { dest.Close() })
		b.dest = dest
		recs := records(4)
		res, err := b.dest.Write(t.Context(), recs)
		if err != nil {
			t.Fatalf("Write: %v (the records are accounted for: accepted)", err)
		}
		refs := map[string][]destination.Record{}
		for _, r := range recs {
			g := byKey(t, recs, res)[r.Key]
			if g.Outcome != destination.Accepted || !strings.HasPrefix(g.Ref, "list-add:") {
				t.Fatalf("%+v, want accepted under a list reference", g)
			}
			refs[g.Ref] = append(refs[g.Ref], r)
		}
		failing.Store(false)
		for ref, rs := range refs {
			out, done, err := b.dest.Outcomes(t.Context(), ref, rs)
			if err != nil || !done || len(out) != len(rs) || out[0].Outcome != destination.Delivered {
				t.Fatalf("Outcomes(%s) = %+v, %v, %v; want delivered", ref, out, done, err)
			}
		}
		for _, r := range recs {
			if p, _ := b.fake.Profile(emailOf(r)); !slices.Contains(p.Lists, listID) {
				t.Errorf("%s not in list_id after Outcomes: %v", emailOf(r), p.Lists)
			}
		}
		if st := b.fake.Stats(); st.ByRoute["POST /api/profile-import"] != int64(len(recs)) || st.DuplicateWrites != 0 {
			t.Errorf("stats %+v: want each profile imported once", st)
		}
	})
	for _, tc := range []struct {
		name string
		opts fakeklaviyo.Options
		p    klaviyo.Params
		code failure.Code
		// accepted: every record is accepted under a list reference; else
		// none has a result.
		accepted bool
	}{
		{"no such list", fakeklaviyo.Options{Lists: []string{"Real"}}, klaviyo.Params{ListID: "Nope"}, failure.InvalidSyncDefinition, true},
		{"import answered 500", fakeklaviyo.Options{ErrorAfterWriteRate: 1}, klaviyo.Params{}, failure.DestinationUnavailable, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.JobRefuseRate = 1
			tc.p.Mode = klaviyo.ModeBulk
			b := setup(t, tc.opts, tc.p)
			recs := records(4)
			res, err := b.dest.Write(t.Context(), recs)
			if failure.CodeOf(err) != tc.code {
				t.Fatalf("Write error %v, want %s", err, tc.code)
			}
			for _, r := range res {
				switch {
				case tc.accepted && r.Outcome == destination.Accepted && strings.HasPrefix(r.Ref, "list-add:"):
				case !tc.accepted && r.Outcome == destination.NotSent:
					// A record the failed write never handed out (the first
					// import's failure can come before the next is started).
				default:
					t.Errorf("%+v: want accepted under a list reference, or not sent (never delivered outside the list)", r)
				}
			}
			if tc.accepted && len(res) != len(recs) {
				t.Errorf("%d results, want %d", len(res), len(recs))
			}
			if !tc.accepted && len(res) == len(recs) {
				t.Errorf("every record has a result; want the imports answered 500 left without one (their outcome is unknown: read back)")
			}
		})
	}
}

// TestFallbackReadBackJoinsTheList: the profile imports standing in for a
// refused job land but their answers are lost, so the records have no
// result and are read back. The profiles hold the values and were updated
// since the write: the read-back must not count them delivered outside
// list_id, it adds them to the list (and writes no profile again).
func TestFallbackReadBackJoinsTheList(t *testing.T) {
	t.Parallel()
	recs := records(3)
	// Every import is applied before any answer is cut: a first answer
	// cut while the other imports had not left yet (a loaded machine) kept
	// them from leaving, not sent.
	var (
		arrived sync.WaitGroup
		n       atomic.Int32
	)
	arrived.Add(len(recs))
	b := setup(t, fakeklaviyo.Options{JobRefuseRate: 1, AfterWrite: func(r *http.Request) {
		if r.URL.Path == "/api/profile-import" || r.URL.Path == "/api/profile-import/" {
			if int(n.Add(1)) <= len(recs) {
				arrived.Done()
			}
			arrived.Wait()
			panic(http.ErrAbortHandler) // applied, its answer cut
		}
	}}, klaviyo.Params{Mode: klaviyo.ModeBulk, MaxRetries: 1, Concurrency: len(recs)})
	since := b.clk.Now()
	res, err := b.dest.Write(t.Context(), recs)
	if err == nil || len(res) != 0 {
		t.Fatalf("Write = %+v, %v; want no result and an error (every answer lost)", res, err)
	}
	for _, r := range recs {
		if p, ok := b.fake.Profile(emailOf(r)); !ok || slices.Contains(p.Lists, listID) {
			t.Fatalf("%s: found %v, lists %v; want written outside the list before the read-back", emailOf(r), ok, p.Lists)
		}
	}
	landed, err := b.dest.Verify(t.Context(), recs, since)
	if err != nil || len(landed) != len(recs) {
		t.Fatalf("Verify = %d of %d landed, %v", len(landed), len(recs), err)
	}
	for _, r := range recs {
		if p, _ := b.fake.Profile(emailOf(r)); !slices.Contains(p.Lists, listID) {
			t.Errorf("%s read back as landed but its lists are %v, want %s among them", emailOf(r), p.Lists, listID)
		}
	}
	checkValues(t, b.fake, recs)
	if st := b.fake.Stats(); st.DuplicateWrites != 0 {
		t.Errorf("stats %+v: want no profile written twice", st)
	}
}
