package klaviyo_test

import (
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/klaviyo"
	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

// A bulk import job's outcome names profiles (the ones it created or
// updated) and, in its import errors, positions and payloads. A record is
// delivered only when that outcome names it, or when nothing the job left
// unaccounted could be it: a profile two records of the job share proves
// neither (docs/guide.md#klaviyo-bulk-import-jobs-accepted-then-delivered-or-rejected).

// twins is records(n) with record b's e-mail that of record a in other
// letter case (Klaviyo keeps e-mails lower-cased: one profile), and other
// values.
func twins(n, a, b int) []destination.Record {
	recs := records(n)
	recs[b].Data["email"] = strings.ToUpper(emailOf(recs[a])[:1]) + emailOf(recs[a])[1:]
	return recs
}

// outcomes writes recs as one job, lets it run and returns its outcome by
// key.
func outcomes(t *testing.T, b *bundle, recs []destination.Record) map[string]destination.Result {
	t.Helper()
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil || len(res) != len(recs) || res[0].Outcome != destination.Accepted {
		t.Fatalf("Write = %v, %v", res, err)
	}
	b.clk.Advance(time.Second)
	got, done, err := b.dest.Outcomes(t.Context(), res[0].Ref, recs)
	if err != nil || !done {
		t.Fatalf("Outcomes: done %v, %v", done, err)
	}
	return byKey(t, recs, got)
}

// TestCancelledJobTwinNotProvenByItsProfile (F1): a job of two records of
// one profile (e-mails that differ in case) is cancelled after the first.
// The job names the profile, which proves the first (its values are
// there) and not the second: it is not sent, to be sent again, never
// counted delivered without reaching Klaviyo.
func TestCancelledJobTwinNotProvenByItsProfile(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{JobFailFirst: 1, JobFailApplies: 0.5, JobDelay: time.Second}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	recs := twins(6, 1, 4) // the job applies 0, 1, 2
	out := outcomes(t, b, recs)
	wantOutcomes(t, recs, out, func(i int) destination.Outcome {
		if i < 3 {
			return destination.Delivered
		}
		return destination.NotSent
	})
	if p, _ := b.fake.Profile(emailOf(recs[1])); p.Attributes["first_name"] != "First1" {
		t.Errorf("the profile holds %v, want record 1's value", p.Attributes["first_name"])
	}
}

// TestCancelledJobTwinWithTheSameValues: the twin the cancelled job did
// not apply carries the values Klaviyo holds (only its e-mail's case
// differs): it is delivered, as sending it again would write a landed
// value a second time.
func TestCancelledJobTwinWithTheSameValues(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{JobFailFirst: 1, JobFailApplies: 0.5, JobDelay: time.Second}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	recs := twins(6, 1, 4)
	recs[4].Data["attributes"] = recs[1].Data["attributes"]
	out := outcomes(t, b, recs)
	if x := out[recs[4].Key]; x.Outcome != destination.Delivered {
		t.Errorf("the twin holding the landed values: %s, want delivered", x.Outcome)
	}
}

// TestUnnamedImportErrorTwinIsRejected (F2): a complete job refused one of
// two records of one profile (an invalid phone number) and its import error
// leaves out original_payload. The job names the profile (the other record
// updated it), which proves neither: the one whose values Klaviyo holds is
// delivered, the refused one rejected.
func TestUnnamedImportErrorTwinIsRejected(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{OmitErrorPayload: true, JobDelay: time.Second}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	recs := twins(6, 1, 4)
	recs[4].Data["attributes"].(map[string]any)["phone_number"] = "06 12 34 56 78"
	out := outcomes(t, b, recs)
	wantOutcomes(t, recs, out, func(i int) destination.Outcome {
		if i == 4 {
			return destination.Rejected
		}
		return destination.Delivered
	})
}

// TestFailedCountWithoutItsImportErrors (F3): the job says it refused a
// profile (failed_count 1) and lists no import error. Listed late, the
// outcome waits for it (not done) and then names the record; never listed,
// the job is settled once ErrorsWait passed and the record it cannot prove
// delivered (its profile is not among the job's) is rejected, not counted
// written.
func TestFailedCountWithoutItsImportErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts fakeklaviyo.Options
		why  string
	}{
		{"late", fakeklaviyo.Options{ErrorsListedAfter: 30 * time.Second}, "phone number"},
		{"never", fakeklaviyo.Options{ErrorsNeverListed: true}, "without naming them"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.opts.JobDelay = time.Second
			b := setup(t, tc.opts, klaviyo.Params{Mode: klaviyo.ModeBulk, ErrorsWait: time.Minute})
			recs := records(6)
			recs[2].Data["attributes"].(map[string]any)["phone_number"] = "06 12 34 56 78"
			res, err := b.dest.Write(t.Context(), recs)
			if err != nil {
				t.Fatal(err)
			}
			b.clk.Advance(time.Second)
			if got, done, err := b.dest.Outcomes(t.Context(), res[0].Ref, recs); err != nil || done {
				t.Fatalf("Outcomes with the refusal unlisted = %v, done %v, %v; want not done", got, done, err)
			}
			b.clk.Advance(time.Minute)
			got, done, err := b.dest.Outcomes(t.Context(), res[0].Ref, recs)
			if err != nil || !done {
				t.Fatalf("Outcomes after the wait: done %v, %v", done, err)
			}
			out := byKey(t, recs, got)
			for i, r := range recs {
				x := out[r.Key]
				switch {
				case i == 2 && (x.Outcome != destination.Rejected || !strings.Contains(x.Message, tc.why)):
					t.Errorf("the refused record: %s %q, want rejected (%s)", x.Outcome, x.Message, tc.why)
				case i != 2 && x.Outcome != destination.Delivered:
					t.Errorf("record %d: %s %q, want delivered", i, x.Outcome, x.Message)
				}
			}
		})
	}
}
