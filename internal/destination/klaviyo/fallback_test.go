package klaviyo_test

import (
	"net/http"
	"slices"
	"strings"
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

// TestFallbackNeverDeliveredOutsideTheList: when the records cannot join
// list_id (Klaviyo has no such list), or a profile import's outcome is
// unknown, no record is counted delivered and none is left in doubt: each
// is not sent (to go out again) or rejected, and the page fails.
func TestFallbackNeverDeliveredOutsideTheList(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts fakeklaviyo.Options
		p    klaviyo.Params
		code failure.Code
	}{
		{"no such list", fakeklaviyo.Options{Lists: []string{"Real"}}, klaviyo.Params{ListID: "Nope"}, failure.InvalidSyncDefinition},
		{"import answered 500", fakeklaviyo.Options{ErrorAfterWriteRate: 1}, klaviyo.Params{}, failure.DestinationUnavailable},
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
			for _, r := range byKey(t, recs, res) {
				if r.Outcome != destination.NotSent {
					t.Errorf("%+v, want not sent", r)
				}
			}
		})
	}
}
