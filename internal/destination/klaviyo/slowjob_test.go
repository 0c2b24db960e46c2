package klaviyo_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/klaviyo"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

// TestVerifyDoesNotResendBehindAJobStillRunning: a bulk page's 202 was lost
// and its job (first_name "Mid") is queued longer than VerifyWait; the row
// has since cleared first_name. Verify must not report the new value as
// not landed while that job may still run: the resend clears the field by a
// profile import at once, and the old job would then write "Mid" over it (a
// stale record). Verify fails instead (the page stays in doubt), and once
// the job ended, the read-back and resend leave the field cleared.
func TestVerifyDoesNotResendBehindAJobStillRunning(t *testing.T) {
	t.Parallel()
	var jobPosts atomic.Int32
	b := setup(t, fakeklaviyo.Options{JobDelay: 10 * time.Minute, AfterWrite: func(r *http.Request) {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/api/profile-bulk-import-jobs") && jobPosts.Add(1) == 1 {
			panic(http.ErrAbortHandler) // the job is queued, its 202 lost
		}
	}}, klaviyo.Params{Mode: klaviyo.ModeBulk, VerifyWait: 10 * time.Second})
	email := emailOf(record(1))
	b.fake.AddProfile(email, map[string]any{"first_name": "Old"}, listID)
	since := b.clk.Now()

	mid := destination.Record{Key: strings.Repeat("a", 64), Data: map[string]any{"email": email,
		"attributes": map[string]any{"first_name": "Mid"}}}
	if res, err := b.dest.Write(t.Context(), []destination.Record{mid}); !errors.Is(err, klaviyo.ErrOutcomeUnknown) || len(res) != 0 {
		t.Fatalf("Write = %v, %v; want the page in doubt", res, err)
	}
	cleared := destination.Record{Key: strings.Repeat("b", 64), Data: map[string]any{"email": email,
		"attributes": map[string]any{"first_name": nil}}}

	landed, err := b.dest.Verify(t.Context(), []destination.Record{cleared}, since)
	if err == nil {
		// What the runner does with a record not landed: send it again.
		if _, ok := landed[cleared.Key]; !ok {
			if _, werr := b.dest.Write(t.Context(), []destination.Record{cleared}); werr != nil {
				t.Fatalf("resend: %v", werr)
			}
		}
	} else if failure.CodeOf(err) != failure.DestinationUnavailable {
		t.Fatalf("Verify = %v; want destination_unavailable while the job may run", err)
	} else {
		b.clk.Advance(11 * time.Minute) // a later run: the job has ended
		landed, err = b.dest.Verify(t.Context(), []destination.Record{cleared}, since)
		if err != nil {
			t.Fatalf("Verify after the job: %v", err)
		}
		if _, ok := landed[cleared.Key]; !ok {
			if _, werr := b.dest.Write(t.Context(), []destination.Record{cleared}); werr != nil {
				t.Fatalf("resend: %v", werr)
			}
		}
	}
	b.clk.Advance(time.Hour) // every job has run
	p, ok := b.fake.Profile(email)
	if !ok {
		t.Fatal("profile missing")
	}
	if v := p.Attributes["first_name"]; v != nil && v != "" {
		t.Errorf("first_name = %v after the row cleared it; the job left in doubt wrote over the resend", v)
	}
}

// TestPhoneNumberNotInE164IsRejected: Klaviyo takes phone_number in E.164
// form only. A record with another form is rejected with Klaviyo's reason on
// every path (a job's import error, a profile import's or PATCH's 400), the
// others delivered with their values, and the refused one is not in Klaviyo.
func TestPhoneNumberNotInE164IsRejected(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		p    klaviyo.Params
	}{
		{"single", klaviyo.Params{Mode: klaviyo.ModeSingle}},
		{"bulk", klaviyo.Params{Mode: klaviyo.ModeBulk}},
		{"update", klaviyo.Params{Mode: klaviyo.ModeSingle, WriteMode: destination.Update}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeklaviyo.Options{}, tc.p)
			recs := records(3)
			phones := []string{"+33612345678", "06 12 34 56 78", "+1 (555) 010-0000"}
			for i, r := range recs {
				r.Data["attributes"].(map[string]any)["phone_number"] = phones[i]
				if tc.p.WriteMode == destination.Update {
					b.fake.AddProfile(emailOf(r), map[string]any{"first_name": "Old"})
				}
			}
			res, err := b.dest.Write(t.Context(), recs)
			if err != nil {
				t.Fatal(err)
			}
			for i, r := range res {
				if r.Outcome == destination.Accepted {
					got, done, err := b.dest.Outcomes(t.Context(), r.Ref, recs[i:i+1])
					if err != nil || !done || len(got) != 1 {
						t.Fatalf("Outcomes = %v, %v, %v", got, done, err)
					}
					res[i] = got[0]
				}
			}
			got := byKey(t, recs, res)
			if x := got[recs[0].Key]; x.Outcome != destination.Delivered {
				t.Errorf("E.164 phone: %+v, want delivered", x)
			}
			checkValues(t, b.fake, recs[:1])
			for _, r := range recs[1:] {
				x := got[r.Key]
				if x.Outcome != destination.Rejected || !strings.Contains(x.Message, "phone number") {
					t.Errorf("phone %q: %+v, want rejected naming the phone number", r.Data["attributes"].(map[string]any)["phone_number"], x)
				}
				if p, ok := b.fake.Profile(emailOf(r)); ok && p.Attributes["phone_number"] != nil {
					t.Errorf("Klaviyo holds %v for a refused phone number", p.Attributes["phone_number"])
				}
			}
		})
	}
}

// TestRevisionKlaviyoDoesNotServe: Klaviyo answers a revision earlier than
// an operation's first with 404 "No valid revisions found for method". That
// is the revision's fault, not a missing list_id nor an outage: check and a
// bulk write fail with invalid_sync_definition naming the revision, and no
// record is rejected.
func TestRevisionKlaviyoDoesNotServe(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{klaviyo.ModeBulk, klaviyo.ModeSingle} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: mode, Revision: "2021-06-01"})
			_, err := b.dest.Check(t.Context())
			if failure.CodeOf(err) != failure.InvalidSyncDefinition || !strings.Contains(err.Error(), "revision") {
				t.Errorf("Check = %v; want invalid_sync_definition naming the revision", err)
			}
			recs := records(3)
			res, err := b.dest.Write(t.Context(), recs)
			if failure.CodeOf(err) != failure.InvalidSyncDefinition || !strings.Contains(err.Error(), "revision") || strings.Contains(err.Error(), "list_id") {
				t.Errorf("Write = %v; want invalid_sync_definition naming the revision", err)
			}
			for _, r := range res {
				if r.Outcome != destination.NotSent {
					t.Errorf("%+v; want not sent", r)
				}
			}
		})
	}
}

// TestPatchRefusedForItsRevisionIsNotASkip: Klaviyo serves each operation
// from its own first revision, so the profile read may be served and the
// PATCH answered 404 "No valid revisions found for method". That 404 is not
// "the profile was deleted since": the record must not be counted
// delivered (skipped) while Klaviyo never updated it.
func TestPatchRefusedForItsRevisionIsNotASkip(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeSingle, WriteMode: destination.Update})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPatch {
			w.Header().Set("Content-Type", "application/vnd.api+json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"errors":[{"id":"e1","status":404,"code":"not_found","title":"Not found.","detail":"No valid revisions found for method.","source":{}}]}`))
			return
		}
		b.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	d, err := klaviyo.New(klaviyo.Params{BaseURL: front.URL, APIKey: apiKey, Mode: klaviyo.ModeSingle, WriteMode: destination.Update,
		Clock: b.clk, Sleep: b.sleeps.sleep, MaxRetries: 1})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(1)
	b.fake.AddProfile(emailOf(recs[0]), map[string]any{"first_name": "Old"})
	res, err := d.Write(t.Context(), recs)
	for _, r := range res {
		if r.Outcome == destination.Delivered {
			t.Errorf("%+v: counted delivered, Klaviyo still holds first_name Old", r)
		}
	}
	if failure.CodeOf(err) != failure.InvalidSyncDefinition || !strings.Contains(err.Error(), "revision") {
		t.Errorf("Write = %v; want invalid_sync_definition naming the revision", err)
	}
}

// TestCancelledJobThatAppliedSomeProfiles: Klaviyo does not document that
// a cancelled job applied nothing, and its completed_count can say it
// applied some. A record whose profile the job wrote (its values, in
// list_id) must not be reported not sent: it would be written a second
// time (a duplicate write). Those are delivered; the others are not sent.
func TestCancelledJobThatAppliedSomeProfiles(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{JobFailRate: 1, JobFailApplies: 0.5, JobDelay: time.Second}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	recs := records(6)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Second)
	got, done, err := b.dest.Outcomes(t.Context(), res[0].Ref, recs)
	if err != nil || !done {
		t.Fatalf("Outcomes: %v %v", done, err)
	}
	out := byKey(t, recs, got)
	delivered := 0
	for _, r := range recs {
		p, held := b.fake.Profile(emailOf(r))
		x := out[r.Key]
		switch {
		case held && x.Outcome != destination.Delivered:
			t.Errorf("%s: Klaviyo holds the profile (lists %v) and the record is %s", emailOf(r), p.Lists, x.Outcome)
		case !held && x.Outcome != destination.NotSent:
			t.Errorf("%s: not in Klaviyo and the record is %s", emailOf(r), x.Outcome)
		case held:
			delivered++
		}
	}
	if delivered != 3 {
		t.Errorf("%d delivered, want the 3 the job applied", delivered)
	}
	checkValues(t, b.fake, recs[:3])
}

// TestVerifyDoesNotWaitForJobsItWasAnswered: a job of this run's earlier
// page, accepted under its id, cannot be the job of a write in doubt: a
// slow one does not fail the read-back of an earlier run's page.
func TestVerifyDoesNotWaitForJobsItWasAnswered(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{JobDelay: 10 * time.Minute}, klaviyo.Params{Mode: klaviyo.ModeBulk, VerifyWait: 10 * time.Second})
	since := b.clk.Now()
	recs := records(4)
	res, err := b.dest.Write(t.Context(), recs[:2])
	if err != nil || len(res) != 2 || res[0].Outcome != destination.Accepted {
		t.Fatalf("Write = %v, %v", res, err)
	}
	landed, err := b.dest.Verify(t.Context(), recs[2:], since)
	if err != nil || len(landed) != 0 {
		t.Fatalf("Verify = %v, %v; want nothing landed, no error", landed, err)
	}
}

// TestCancelledJobAskedWithALaterValue: the runner asks about an earlier
// run's job with the row's current value (another value than the job
// sent), to learn whether Klaviyo holds the job's value. A profile the
// cancelled job wrote must still count as written, whatever the values
// asked with.
func TestCancelledJobAskedWithALaterValue(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{JobFailRate: 1, JobFailApplies: 0.5, JobDelay: time.Second}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	recs := records(4)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Second)
	back := make([]destination.Record, len(recs))
	for i, r := range recs {
		back[i] = destination.Record{Key: r.Key, Data: map[string]any{"email": emailOf(r),
			"attributes": map[string]any{"first_name": "Original"}}}
	}
	got, done, err := b.dest.Outcomes(t.Context(), res[0].Ref, back)
	if err != nil || !done {
		t.Fatalf("Outcomes: %v %v", done, err)
	}
	out := byKey(t, back, got)
	for _, r := range recs {
		_, held := b.fake.Profile(emailOf(r))
		if x := out[r.Key]; held != (x.Outcome == destination.Delivered) {
			t.Errorf("%s: in Klaviyo %v, outcome %s", emailOf(r), held, x.Outcome)
		}
	}
}

// TestVerifyDoesNotWaitForOlderJobs: a job created well before the write in
// doubt (another tool's, still running) cannot be that write's: Verify
// reads the profiles back without polling it for VerifyWait.
func TestVerifyDoesNotWaitForOlderJobs(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{JobDelay: time.Hour}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	other, err := klaviyo.New(klaviyo.Params{BaseURL: b.url, APIKey: apiKey, ListID: listID, Clock: b.clk, Sleep: b.sleeps.sleep})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(4)
	if res, err := other.Write(t.Context(), recs[:2]); err != nil || res[0].Outcome != destination.Accepted {
		t.Fatalf("Write = %v, %v", res, err)
	}
	b.clk.Advance(10 * time.Minute)
	since := b.clk.Now()
	landed, err := b.dest.Verify(t.Context(), recs[2:], since)
	if err != nil || len(landed) != 0 {
		t.Fatalf("Verify = %v, %v", landed, err)
	}
	if n := b.fake.Stats().ByRoute["GET /api/profile-bulk-import-jobs/{id}"]; n != 0 {
		t.Errorf("%d polls of a job created 10 minutes before the write in doubt", n)
	}
}

// TestJobLimitsSplitAPage: a page larger than a job's limits (10,000
// profiles; 5 MB) goes out as several jobs Klaviyo takes, never as a job
// refused whole (which would cost one profile import per record).
func TestJobLimitsSplitAPage(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		n, bytes int
		jobs     int64
	}{
		{"profiles", klaviyo.MaxJobProfiles + 1, 0, 2},
		{"bytes", 120, 60 << 10, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeBulk})
			recs := make([]destination.Record, tc.n)
			for i := range recs {
				recs[i] = destination.Record{Key: fmt.Sprintf("%064x", i), Data: map[string]any{
					"email": fmt.Sprintf("u%d@example.com", i), "attributes": map[string]any{
						"first_name": "F", "properties.blob": strings.Repeat("x", tc.bytes)}}}
			}
			res, err := b.dest.Write(t.Context(), recs)
			if err != nil || len(res) != len(recs) {
				t.Fatalf("Write: %d results, %v", len(res), err)
			}
			st := b.fake.Stats()
			if st.JobsCreated != tc.jobs || st.ByRoute["POST /api/profile-import"] != 0 || st.ByStatus["400"]+st.ByStatus["413"] != 0 {
				t.Errorf("jobs %d (want %d), profile imports %d, by status %v", st.JobsCreated, tc.jobs, st.ByRoute["POST /api/profile-import"], st.ByStatus)
			}
			if st.Profiles != int64(len(recs)) {
				t.Errorf("%d profiles, want %d", st.Profiles, len(recs))
			}
		})
	}
}

// TestProfileOverTheLimitIsRejectedBeforeTheJob: Klaviyo's "100KB" a
// profile, read in decimal units: a profile of 100,500 bytes is rejected
// without a request, and the page's other profiles go out in one job that
// Klaviyo takes, not refused whole (one profile import per record).
func TestProfileOverTheLimitIsRejectedBeforeTheJob(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	recs := records(5)
	recs[2].Data["attributes"].(map[string]any)["properties.blob"] = strings.Repeat("x", 100_500)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	got := byKey(t, recs, res)
	if x := got[recs[2].Key]; x.Outcome != destination.Rejected || !strings.Contains(x.Message, "100 KB") {
		t.Errorf("large profile: %+v, want rejected before sending", x)
	}
	st := b.fake.Stats()
	if st.JobsCreated != 1 || st.ByRoute["POST /api/profile-import"] != 0 || st.ByStatus["413"] != 0 {
		t.Errorf("jobs %d, profile imports %d, by status %v", st.JobsCreated, st.ByRoute["POST /api/profile-import"], st.ByStatus)
	}
}

// TestUnnamedImportErrorAskedWithALaterValue: import errors without their
// payload name no e-mail. Asked with the row's later value (the runner
// asking about an earlier run's job), a record whose profile the job wrote
// must not read as refused because Klaviyo holds the job's value, not the
// later one: the answer is about the job, whose profiles say what it
// wrote.
func TestUnnamedImportErrorAskedWithALaterValue(t *testing.T) {
	t.Parallel()
	recs := records(4)
	b := setup(t, fakeklaviyo.Options{OmitErrorPayload: true, RefuseEmails: []string{emailOf(recs[2])}, JobDelay: time.Second},
		klaviyo.Params{Mode: klaviyo.ModeBulk})
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Second)
	back := make([]destination.Record, len(recs))
	for i, r := range recs {
		back[i] = destination.Record{Key: r.Key, Data: map[string]any{"email": emailOf(r),
			"attributes": map[string]any{"first_name": "Original"}}}
	}
	got, done, err := b.dest.Outcomes(t.Context(), res[0].Ref, back)
	if err != nil || !done {
		t.Fatalf("Outcomes: %v %v", done, err)
	}
	wantOutcomes(t, recs, byKey(t, back, got), func(i int) destination.Outcome {
		if i == 2 {
			return destination.Rejected
		}
		return destination.Delivered
	})
}

// TestOneProfileTwiceOnAPageEndsWithTheLast: on the single path two records
// of one profile (their addresses differ only in case) were sent side by
// side, and the profile kept whichever landed last, here the page's first.
// They now go in page order.
func TestOneProfileTwiceOnAPageEndsWithTheLast(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeSingle})
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), "FirstA") {
			time.Sleep(200 * time.Millisecond) // the first record's request is the slow one
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		b.fake.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)
	d, err := klaviyo.New(klaviyo.Params{BaseURL: front.URL, APIKey: apiKey, Mode: klaviyo.ModeSingle, Concurrency: 4,
		Clock: b.clk, Sleep: b.sleeps.sleep})
	if err != nil {
		t.Fatal(err)
	}
	recs := records(3)
	first, second := recs[0], recs[1]
	first.Data["attributes"].(map[string]any)["first_name"] = "FirstA"
	second.Data["attributes"].(map[string]any)["first_name"] = "SecondB"
	second.Data["email"] = strings.ToUpper(emailOf(first))
	res, err := d.Write(t.Context(), []destination.Record{first, second, recs[2]})
	if err != nil || len(res) != 3 {
		t.Fatalf("write: %+v, %v", res, err)
	}
	for _, r := range res {
		if r.Outcome != destination.Delivered {
			t.Fatalf("%+v: want delivered", r)
		}
	}
	p, ok := b.fake.Profile(strings.ToLower(emailOf(first)))
	if !ok || p.Attributes["first_name"] != "SecondB" {
		t.Fatalf("profile %+v (found %v), want first_name of the page's last record, SecondB", p.Attributes, ok)
	}
}
