package klaviyo_test

import (
	"errors"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/connector"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/klaviyo"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

type bundle struct {
	fake   *fakeklaviyo.Server
	clk    *clock.Fake
	sleeps *sleepLog
	url    string
	dest   *klaviyo.Destination
}

// setup starts the spec-checking fake on a fake clock that only the
// destination's sleeps (and the test) advance.
func setup(t *testing.T, opts fakeklaviyo.Options, p klaviyo.Params) *bundle {
	t.Helper()
	b := &bundle{clk: clock.NewFake(t0)}
	b.sleeps = &sleepLog{clk: b.clk}
	opts.APIKey, opts.Validate, opts.ValidateResponses, opts.Clock = apiKey, true, true, b.clk
	if opts.Seed == 0 {
		opts.Seed = 5
	}
	b.fake = fakeklaviyo.New(opts)
	checkSpec(t, b.fake)
	srv := httptest.NewServer(b.fake)
	t.Cleanup(srv.Close)
	b.url = srv.URL
	if p.APIKey == "" {
		p.APIKey = apiKey
	}
	p.BaseURL, p.Clock, p.Sleep = b.url, b.clk, b.sleeps.sleep
	if p.ListID == "" && p.Mode != klaviyo.ModeSingle {
		p.ListID = listID
	}
	if p.MaxRetries == 0 {
		p.MaxRetries = 3
	}
	d, err := klaviyo.New(p)
	if err != nil {
		t.Fatalf("klaviyo.New: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	b.dest = d
	return b
}

func records(n int) []destination.Record {
	out := make([]destination.Record, n)
	for i := range out {
		out[i] = record(i)
	}
	return out
}

func byKey(t *testing.T, recs []destination.Record, res []destination.Result) map[string]destination.Result {
	t.Helper()
	out := map[string]destination.Result{}
	for _, r := range res {
		out[r.Key] = r
	}
	if len(out) != len(recs) || len(res) != len(recs) {
		t.Fatalf("%d results for %d records", len(res), len(recs))
	}
	return out
}

// wantOutcomes asserts that out (byKey) holds outcome want(i) for record i
// of recs.
func wantOutcomes(t *testing.T, recs []destination.Record, out map[string]destination.Result, want func(i int) destination.Outcome) {
	t.Helper()
	for i, r := range recs {
		if x := out[r.Key]; x.Outcome != want(i) {
			t.Errorf("record %d: %v %q, want %v", i, x.Outcome, x.Message, want(i))
		}
	}
}

// checkValues asserts that the fake holds every record's mapped values.
func checkValues(t *testing.T, fake *fakeklaviyo.Server, recs []destination.Record) {
	t.Helper()
	for _, r := range recs {
		p, ok := fake.Profile(emailOf(r))
		if !ok {
			t.Errorf("profile %s missing", emailOf(r))
			continue
		}
		attrs := r.Data["attributes"].(map[string]any)
		for name, want := range attrs {
			var got any
			switch {
			case strings.HasPrefix(name, "properties."):
				got = p.Properties[strings.TrimPrefix(name, "properties.")]
			case strings.HasPrefix(name, "location."):
				got = p.Location[strings.TrimPrefix(name, "location.")]
			default:
				got = p.Attributes[name]
			}
			if !klaviyo.ValuesEqual(want, got) {
				t.Errorf("profile %s: %s = %v, want %v", emailOf(r), name, got, want)
			}
		}
	}
}

func TestBulkJobIsPolledUntilComplete(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{JobDelay: 30 * time.Second}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	recs := records(30)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	ref := ""
	for _, r := range res {
		if r.Outcome != destination.Accepted || r.Ref == "" || (ref != "" && r.Ref != ref) {
			t.Fatalf("result %+v: want every record accepted under one job", r)
		}
		ref = r.Ref
	}
	for _, step := range []time.Duration{0, 16 * time.Second} {
		b.clk.Advance(step)
		got, done, err := b.dest.Outcomes(t.Context(), ref, recs)
		if err != nil || done || len(got) != 0 {
			t.Fatalf("after %v: %v, %v, %v; want not done", step, got, done, err)
		}
	}
	if n := b.fake.Stats().Profiles; n != 0 {
		t.Fatalf("%d profiles before the job ran", n)
	}
	b.clk.Advance(15 * time.Second)
	got, done, err := b.dest.Outcomes(t.Context(), ref, recs)
	if err != nil || !done {
		t.Fatalf("Outcomes = %v, %v", done, err)
	}
	for _, r := range byKey(t, recs, got) {
		if r.Outcome != destination.Delivered || r.Ref != ref {
			t.Errorf("result %+v, want delivered", r)
		}
	}
	checkValues(t, b.fake, recs)
	for _, r := range recs {
		if p, _ := b.fake.Profile(emailOf(r)); len(p.Lists) != 1 || p.Lists[0] != listID {
			t.Errorf("profile %s lists %v, want [%s]", emailOf(r), p.Lists, listID)
		}
	}
	if st := b.fake.Stats(); st.ByRoute["GET /api/profile-bulk-import-jobs"] != 0 || st.DuplicateWrites != 0 {
		t.Errorf("stats %+v: Outcomes must ask its own job only; no duplicate", st)
	}
	if len(b.sleeps.waits) != 0 && b.clk.Now().Sub(t0) > 31*time.Second+time.Minute {
		t.Errorf("waits %v", b.sleeps.waits)
	}
}

func TestImportErrorsAreRejectedWithoutEmails(t *testing.T) {
	t.Parallel()
	recs := records(250)
	bad := map[string]bool{}
	var refuse []string
	for i := 0; i < len(recs); i += 40 {
		bad[recs[i].Key] = true
		refuse = append(refuse, strings.ToUpper(emailOf(recs[i]))) // matched case-insensitively
	}
	b := setup(t, fakeklaviyo.Options{RefuseEmails: refuse, JobDelay: time.Second}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(2 * time.Second)
	got, done, err := b.dest.Outcomes(t.Context(), res[0].Ref, recs)
	if err != nil || !done {
		t.Fatalf("Outcomes: %v %v", done, err)
	}
	for _, r := range recs {
		g := byKey(t, recs, got)[r.Key]
		switch {
		case bad[r.Key] && g.Outcome != destination.Rejected:
			t.Errorf("refused %s: %v", emailOf(r), g.Outcome)
		case bad[r.Key] && (strings.Contains(strings.ToLower(g.Message), emailOf(r)) || !strings.Contains(g.Message, "Invalid email")):
			t.Errorf("message %q: want Klaviyo's reason without the e-mail", g.Message)
		case !bad[r.Key] && g.Outcome != destination.Delivered:
			t.Errorf("%s: %v %q", emailOf(r), g.Outcome, g.Message)
		}
	}
	// More errors than one page of 100 would show: 7 here, paged by 100,
	// but the fake was asked with page[size]=100 (one page).
	if n := b.fake.Stats().ImportErrors; n != int64(len(bad)) {
		t.Errorf("import errors %d, want %d", n, len(bad))
	}
}

func TestFailedJobIsNotSent(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{JobFailRate: 1, JobDelay: time.Second}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	recs := records(5)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	b.clk.Advance(time.Second)
	got, done, err := b.dest.Outcomes(t.Context(), res[0].Ref, recs)
	if err != nil || !done {
		t.Fatalf("Outcomes: %v %v", done, err)
	}
	for _, r := range got {
		if r.Outcome != destination.NotSent {
			t.Errorf("%+v, want not sent", r)
		}
	}
	if n := b.fake.Stats().Profiles; n != 0 {
		t.Errorf("%d profiles from a failed job", n)
	}
}

// TestEveryMappedFieldReachesKlaviyoOnEveryPath writes scalar, location and
// custom property attributes (a number among them) on each path and reads
// them at the fake.
func TestEveryMappedFieldReachesKlaviyoOnEveryPath(t *testing.T) {
	t.Parallel()
	rec := func(i int) destination.Record {
		r := record(i)
		a := r.Data["attributes"].(map[string]any)
		a["last_name"] = "Last"
		a["phone_number"] = "+1500555000" + string(rune('0'+i))
		a["external_id"] = float64(1000 + i) // a number: sent as the spec's string
		a["location.latitude"] = 40.5
		a["location.country"] = "FR"
		a["properties.vip"] = true
		a["properties.tags"] = []any{"a", "b"}
		return r
	}
	for _, tc := range []struct {
		name string
		p    klaviyo.Params
	}{
		{"single", klaviyo.Params{Mode: klaviyo.ModeSingle}},
		{"bulk", klaviyo.Params{Mode: klaviyo.ModeBulk}},
		{"create", klaviyo.Params{Mode: klaviyo.ModeBulk, WriteMode: destination.Create}},
		{"update", klaviyo.Params{Mode: klaviyo.ModeBulk, WriteMode: destination.Update}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeklaviyo.Options{}, tc.p)
			recs := []destination.Record{rec(1), rec(2)}
			if tc.p.WriteMode == destination.Update {
				for _, r := range recs {
					b.fake.AddProfile(emailOf(r), map[string]any{"first_name": "Old"})
				}
			}
			res, err := b.dest.Write(t.Context(), recs)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Outcome == destination.Accepted {
					got, done, err := b.dest.Outcomes(t.Context(), r.Ref, recs)
					if err != nil || !done {
						t.Fatalf("Outcomes: %v %v", done, err)
					}
					res = got
					break
				}
			}
			for _, r := range res {
				if r.Outcome != destination.Delivered || r.Skipped != "" {
					t.Errorf("%+v, want delivered", r)
				}
			}
			checkValues(t, b.fake, recs)
			landed, err := b.dest.Verify(t.Context(), recs, t0)
			if err != nil || len(landed) != len(recs) {
				t.Errorf("Verify = %v, %v; want both landed", landed, err)
			}
		})
	}
}

func TestWriteModeUpdateSkipsMissingProfiles(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeBulk, WriteMode: destination.Update})
	recs := records(4)
	id := b.fake.AddProfile(emailOf(recs[1]), map[string]any{"first_name": "Old", "last_name": "Kept"})
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	got := byKey(t, recs, res)
	for i, r := range recs {
		g := got[r.Key]
		if i == 1 {
			if g.Outcome != destination.Delivered || g.Skipped != "" || g.Ref != id {
				t.Errorf("existing profile: %+v", g)
			}
			continue
		}
		if g.Outcome != destination.Delivered || g.Skipped != destination.SkipNotFound {
			t.Errorf("missing profile: %+v, want delivered, skipped not found", g)
		}
	}
	if n := b.fake.Stats().Profiles; n != 1 {
		t.Errorf("%d profiles, want 1: update never creates", n)
	}
	p, _ := b.fake.Profile(emailOf(recs[1]))
	if p.Attributes["first_name"] != "First1" || p.Attributes["last_name"] != "Kept" {
		t.Errorf("profile %+v: want first_name updated, last_name kept", p.Attributes)
	}
	if b.fake.Stats().ByRoute["POST /api/profile-bulk-import-jobs"] != 0 {
		t.Error("update used a bulk job, which always upserts")
	}
}

func TestWriteModeCreateSkipsExistingProfiles(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeSingle, WriteMode: destination.Create})
	recs := records(3)
	id := b.fake.AddProfile(emailOf(recs[0]), map[string]any{"first_name": "Theirs"})
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	got := byKey(t, recs, res)
	if g := got[recs[0].Key]; g.Outcome != destination.Delivered || g.Skipped != destination.SkipExists || g.Ref != id {
		t.Errorf("existing: %+v, want skipped exists with its id", g)
	}
	if p, _ := b.fake.Profile(emailOf(recs[0])); p.Attributes["first_name"] != "Theirs" {
		t.Errorf("create changed an existing profile: %v", p.Attributes)
	}
	checkValues(t, b.fake, recs[1:])
}

func TestMirrorRemovesFromTheListOnly(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeBulk, WriteMode: destination.Mirror})
	b.fake.AddProfile("member@example.com", nil, listID)
	b.fake.AddProfile("elsewhere@example.com", nil, "OtherList")
	rms := []destination.Removal{
		{Key: strings.Repeat("a", 64), Handle: "Member@Example.com"},
		{Key: strings.Repeat("b", 64), Handle: "elsewhere@example.com"},
		{Key: strings.Repeat("c", 64), Handle: "gone@example.com"},
	}
	for round := 0; round < 2; round++ { // a removal sent again is harmless
		res, err := b.dest.Remove(t.Context(), rms)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range res {
			if r.Outcome != destination.Delivered {
				t.Errorf("round %d: %+v, want delivered", round, r)
			}
		}
	}
	st := b.fake.Stats()
	if st.ListRemovals != 1 || st.GlobalUnsubs != 0 || st.Unsubscribed != 0 || st.Profiles != 2 {
		t.Errorf("stats %+v: want one removal from the list, nobody unsubscribed, no profile created", st)
	}
	// Out of the list, its consent as it was: the bulk unsubscribe job
	// used before unsubscribed it from e-mail marketing, which outlived a
	// row back in the source (an independent check, 2026-12-06).
	if p, _ := b.fake.Profile("member@example.com"); len(p.Lists) != 0 || p.Unsubscribed {
		t.Errorf("member %+v: want out of the list, still subscribed", p)
	}
	if p, _ := b.fake.Profile("elsewhere@example.com"); p.Unsubscribed || len(p.Lists) != 1 {
		t.Errorf("a profile outside the list was changed: %+v", p)
	}
	if got := st.ByRoute["DELETE /api/lists/{id}/relationships/profiles"]; got != 2 {
		t.Errorf("%d removal calls, want one a round: %+v", got, st.ByRoute)
	}
	h, err := b.dest.Handle(record(3))
	if err != nil || h != "user3@example.com" {
		t.Errorf("Handle = %q, %v", h, err)
	}
	// The removal is applied before its answer: nothing queued for the
	// runner to wait out before a row comes back.
	if _, ok := any(b.dest).(destination.QueuedRemover); ok {
		t.Error("klaviyo is a QueuedRemover: its removals are applied at once")
	}
}

func TestRateLimitIsWaitedOut(t *testing.T) {
	t.Parallel()
	// No client-side pacing: Klaviyo's burst of 75/s is hit and its 429's
	// Retry-After waited out.
	b := setup(t, fakeklaviyo.Options{EnforceRateLimits: true}, klaviyo.Params{Mode: klaviyo.ModeSingle, RateLimit: 1e9, Concurrency: 1, MaxRetries: 3})
	recs := records(100)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range byKey(t, recs, res) {
		if r.Outcome != destination.Delivered {
			t.Errorf("%+v", r)
		}
	}
	st := b.fake.Stats()
	if st.RateLimited == 0 || st.Profiles != 100 || st.DuplicateWrites != 0 {
		t.Errorf("stats %+v: want 429s waited out, 100 profiles, no duplicate", st)
	}
	waited := false
	for _, w := range b.sleeps.waits {
		if w >= time.Second-time.Millisecond && w <= time.Second {
			waited = true
		}
	}
	if !waited {
		t.Errorf("waits %v: want Retry-After's 1 s", b.sleeps.waits)
	}
}

func TestPacingKeepsUnderTheSteadyLimit(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{EnforceRateLimits: true}, klaviyo.Params{Mode: klaviyo.ModeSingle})
	recs := records(200)
	if _, err := b.dest.Write(t.Context(), recs); err != nil {
		t.Fatal(err)
	}
	if st := b.fake.Stats(); st.RateLimited != 0 || st.Profiles != 200 {
		t.Errorf("stats %+v: the default pace must stay under 750/min", st)
	}
}

func TestKeyNeverInErrors(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeSingle, APIKey: "pk_WRONG_secret_value_123"})
	_, err := b.dest.Write(t.Context(), records(1))
	if failure.CodeOf(err) != failure.DestinationAuth || strings.Contains(err.Error(), "pk_WRONG_secret_value_123") || strings.Contains(err.Error(), "@") {
		t.Errorf("error %v: want destination_auth without the key or an e-mail", err)
	}
	_, err = b.dest.Check(t.Context())
	if failure.CodeOf(err) != failure.DestinationAuth || strings.Contains(err.Error(), "pk_WRONG") {
		t.Errorf("check error %v", err)
	}
	b2 := setup(t, fakeklaviyo.Options{ErrorRate: 1}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	_, err = b2.dest.Write(t.Context(), records(2))
	if err == nil || strings.Contains(err.Error(), apiKey) || strings.Contains(err.Error(), "@example.com") {
		t.Errorf("error %v", err)
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	lines, err := b.dest.Check(t.Context())
	if err != nil || len(lines) != 2 || !strings.Contains(lines[0], klaviyo.DefaultRevision) || !strings.Contains(lines[1], listID) {
		t.Errorf("Check = %q, %v; want the key and the list", lines, err)
	}
	if n := b.fake.Stats().ProfilesWritten; n != 0 {
		t.Errorf("check wrote %d profiles", n)
	}
	// A list_id the account does not have is found before a run (the
	// sync's first job would fail on it).
	noList := setup(t, fakeklaviyo.Options{Lists: []string{"Real"}}, klaviyo.Params{Mode: klaviyo.ModeBulk, ListID: "Nope"})
	if _, err := noList.dest.Check(t.Context()); failure.CodeOf(err) != failure.InvalidSyncDefinition || !strings.Contains(err.Error(), "list_id") {
		t.Errorf("a list_id Klaviyo does not have: %v, want invalid_sync_definition naming list_id", err)
	}
	single := setup(t, fakeklaviyo.Options{Lists: []string{"Real"}}, klaviyo.Params{Mode: klaviyo.ModeSingle})
	if lines, err := single.dest.Check(t.Context()); err != nil || len(lines) != 1 {
		t.Errorf("without list_id: %q, %v; want the key only", lines, err)
	}
	bad := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeBulk, Revision: "2099-01-01"})
	if _, err := bad.dest.Check(t.Context()); failure.CodeOf(err) != failure.InvalidSyncDefinition {
		t.Errorf("a revision Klaviyo refuses: %v, want invalid_sync_definition", err)
	}
	if _, err := bad.dest.Write(t.Context(), records(2)); failure.CodeOf(err) != failure.InvalidSyncDefinition {
		t.Errorf("writing with a revision Klaviyo refuses: %v", err)
	}
}

func TestUnknownListFailsTheBulkWrite(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{Lists: []string{"Real"}}, klaviyo.Params{Mode: klaviyo.ModeBulk, ListID: "Nope"})
	res, err := b.dest.Write(t.Context(), records(3))
	if failure.CodeOf(err) != failure.InvalidSyncDefinition || len(res) != 3 {
		t.Fatalf("Write = %v, %v", res, err)
	}
}

// TestVerifyWaitsForARunningJob: a bulk page whose 202 was lost is in
// doubt; Verify waits for the job Klaviyo is still running, then finds the
// records landed, so they are not sent twice.
func TestVerifyWaitsForARunningJob(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{JobDelay: 10 * time.Second, DropResponseRate: 1}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	recs := records(20)
	res, err := b.dest.Write(t.Context(), recs)
	if !errors.Is(err, klaviyo.ErrOutcomeUnknown) || len(res) != 0 {
		t.Fatalf("Write = %v, %v; want the page in doubt", res, err)
	}
	landed, err := b.dest.Verify(t.Context(), recs, t0)
	if err != nil || len(landed) != len(recs) {
		t.Fatalf("Verify = %d landed, %v; want all", len(landed), err)
	}
	if st := b.fake.Stats(); st.DuplicateWrites != 0 || st.JobsCreated != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestConfigChecks(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, dest, attrs, want string
	}{
		{"valid", "list_id: L1", "first_name: fn\n        properties.plan: plan\n        location.city: city", ""},
		{"bulk needs a list", "mode: bulk", "first_name: fn", "list_id"},
		{"unknown attribute", "list_id: L1", "FIRSTNAME: fn", "is not a Klaviyo profile attribute"},
		{"unknown location field", "list_id: L1", "location.street: s", "location"},
		{"mirror needs bulk", "mode: single\n      write_mode: mirror\n      list_id: L1", "first_name: fn", "must be bulk"},
		{"bad revision", "list_id: L1\n      revision: latest", "first_name: fn", "revision"},
		{"update needs no list", "write_mode: update", "first_name: fn", ""},
		{"api root", "list_id: L1\n      base_url: https://a.klaviyo.com/api", "first_name: fn", "Klaviyo's API root is https://a.klaviyo.com (its paths are added to it)"},
		{"own root", "list_id: L1\n      base_url: https://a.klaviyo.com/", "first_name: fn", ""},
		{"public key", "list_id: L1\n      api_key: AbC123", "first_name: fn", "looks like Klaviyo's public API key"},
	} {
		key := "api_key: k\n      "
		if strings.Contains(tc.dest, "api_key") {
			key = ""
		}
		yaml := "syncs:\n  - id: k\n    source: {type: csv, path: x.csv, identity: id}\n    destination:\n      type: klaviyo\n      " + key +
			tc.dest + "\n    mapping:\n      email: email\n      attributes:\n        " + tc.attrs + "\n"
		_, err := config.Parse("sync.yaml", []byte(yaml), func(string) (string, bool) { return "", false }, connector.Default().Kinds())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: error %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// TestImportErrorsWithoutPayloadAreReadBack: an import error that names its
// profile only by pointer cannot be matched by e-mail; the records are read
// back, and the one Klaviyo does not have is rejected, not taken for
// delivered.
func TestImportErrorsWithoutPayloadAreReadBack(t *testing.T) {
	t.Parallel()
	recs := records(6)
	b := setup(t, fakeklaviyo.Options{OmitErrorPayload: true, RefuseEmails: []string{emailOf(recs[4])}}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatal(err)
	}
	got, done, err := b.dest.Outcomes(t.Context(), res[0].Ref, recs)
	if err != nil || !done {
		t.Fatalf("Outcomes: %v %v", done, err)
	}
	wantOutcomes(t, recs, byKey(t, recs, got), func(i int) destination.Outcome {
		if i == 4 {
			return destination.Rejected
		}
		return destination.Delivered
	})
}

// TestApplied500IsReadBackNotResent: Klaviyo applies a profile import and
// answers 500. The write is not resent blindly (it would be a second
// write); the record is in doubt and Verify finds it landed.
func TestApplied500IsReadBackNotResent(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{ErrorAfterWriteRate: 1}, klaviyo.Params{Mode: klaviyo.ModeSingle, Concurrency: 1})
	recs := records(1)
	res, err := b.dest.Write(t.Context(), recs)
	if !errors.Is(err, klaviyo.ErrOutcomeUnknown) || len(res) != 0 || failure.CodeOf(err) != failure.DestinationUnavailable {
		t.Fatalf("Write = %v, %v; want the record in doubt", res, err)
	}
	if st := b.fake.Stats(); st.ProfilesWritten != 1 || st.ByRoute["POST /api/profile-import"] != 1 {
		t.Fatalf("stats %+v: want one write, not retried", st)
	}
	landed, err := b.dest.Verify(t.Context(), recs, t0)
	if err != nil || len(landed) != 1 {
		t.Fatalf("Verify = %v, %v", landed, err)
	}
}

// TestRemoveFailureLeavesNothingInDoubt: when the removal call cannot be
// sent, no removal was: every removal is NotSent, none left in doubt.
func TestRemoveFailureLeavesNothingInDoubt(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeBulk, WriteMode: destination.Mirror, MaxRetries: -1})
	b.fake.AddProfile("one@example.com", nil, listID)
	b.fake.AddProfile("two@example.com", nil, listID)
	// An attempt deadline already past: the look-up or the removal call is
	// refused for lack of lease time before it leaves.
	ctx := destination.WithAttemptDeadline(t.Context(), func() time.Time { return b.clk.Now().Add(-time.Second) })
	rms := []destination.Removal{{Key: strings.Repeat("a", 64), Handle: "one@example.com"}, {Key: strings.Repeat("b", 64), Handle: "two@example.com"}}
	res, err := b.dest.Remove(ctx, rms)
	if !errors.Is(err, destination.ErrNoLeaseTime) {
		t.Fatalf("Remove error %v, want a call refused for lack of lease time", err)
	}
	if len(res) != 2 {
		t.Fatalf("Remove = %v, %v; want a result for each removal", res, err)
	}
	for _, r := range res {
		if r.Outcome != destination.NotSent {
			t.Errorf("%+v, want not sent", r)
		}
	}
	if st := b.fake.Stats(); st.ListRemovals != 0 || st.GlobalUnsubs != 0 {
		t.Errorf("stats %+v", st)
	}
}
