package klaviyo_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/klaviyo"
	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

// TestBulkVerifyNeedsTheList: a bulk sync's job was in doubt and never
// reached Klaviyo, where the profile already held these values (another
// tool wrote them) outside list_id. Verify must not settle it as
// delivered: only a job of ours adds the profile to the list. Once it is
// in the list, it has landed.
func TestBulkVerifyNeedsTheList(t *testing.T) {
	t.Parallel()
	for _, wm := range []destination.WriteMode{destination.Upsert, destination.Mirror} {
		t.Run(string(wm), func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeBulk, WriteMode: wm})
			r := record(1)
			a := r.Data["attributes"].(map[string]any)
			b.fake.AddProfile(emailOf(r), map[string]any{"first_name": a["first_name"],
				"location": map[string]any{"city": a["location.city"]}, "properties": map[string]any{"age": a["properties.age"]}})
			b.clk.Advance(time.Minute) // the write in doubt was claimed after that
			since := b.clk.Now()
			landed, err := b.dest.Verify(t.Context(), []destination.Record{r}, since)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := landed[r.Key]; ok {
				p, _ := b.fake.Profile(emailOf(r))
				t.Fatalf("Verify says landed, but the profile is not in list_id (lists %v)", p.Lists)
			}
			written, err := b.dest.Write(t.Context(), []destination.Record{r})
			if err != nil {
				t.Fatal(err)
			}
			if len(written) != 1 || written[0].Outcome != destination.Accepted {
				t.Fatalf("write: %+v", written)
			}
			if got, done, err := b.dest.Outcomes(t.Context(), written[0].Ref, []destination.Record{r}); err != nil || !done || got[0].Outcome != destination.Delivered {
				t.Fatalf("outcomes: %+v, %v, %v", got, done, err)
			}
			if p, _ := b.fake.Profile(emailOf(r)); !slices.Contains(p.Lists, listID) {
				t.Fatalf("the job did not add the profile to the list: %v", p.Lists)
			}
			if landed, err := b.dest.Verify(t.Context(), []destination.Record{r}, since); err != nil || len(landed) != 1 {
				t.Errorf("after the job: %v, %d of 1 landed", err, len(landed))
			}
		})
	}
}

// TestCreateConflictOnAnotherIdentifier: in write_mode create, Klaviyo
// answers 409 when any identifier is another profile's. A record whose
// phone number belongs to someone else is rejected (no profile of its
// e-mail exists), not counted delivered; one whose e-mail exists is
// skipped as existing.
func TestCreateConflictOnAnotherIdentifier(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeSingle, WriteMode: destination.Create})
	b.fake.AddProfile("someone-else@example.com", map[string]any{"phone_number": "+15005550006"})
	taken := record(2)
	taken.Data["attributes"].(map[string]any)["phone_number"] = "+15005550006"
	existing := record(3)
	b.fake.AddProfile(emailOf(existing), nil)
	res, err := b.dest.Write(t.Context(), []destination.Record{taken, existing})
	if err != nil {
		t.Fatal(err)
	}
	byKey := map[string]destination.Result{}
	for _, x := range res {
		byKey[x.Key] = x
	}
	if x := byKey[taken.Key]; x.Outcome != destination.Rejected || !strings.Contains(x.Message, "identifiers") {
		t.Errorf("phone taken: %+v, want rejected", x)
	}
	if _, ok := b.fake.Profile(emailOf(taken)); ok {
		t.Error("a profile was created for the record whose phone is taken")
	}
	if x := byKey[existing.Key]; x.Outcome != destination.Delivered || x.Skipped != destination.SkipExists || x.Ref == "" {
		t.Errorf("e-mail exists: %+v, want delivered, skipped as existing", x)
	}
}

// TestImportErrorNamesItsOwnRecord: two records of one job share an e-mail
// (a data conflict in the source); Klaviyo refuses one (its phone number is
// another profile's) and applies the other. Only the refused one is
// rejected: the import error's original payload names it.
func TestImportErrorNamesItsOwnRecord(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	b.fake.AddProfile("x@example.com", map[string]any{"phone_number": "+15005550006"})
	a, c := record(4), record(5)
	c.Data["email"] = a.Data["email"]
	b.fake.AddProfile(emailOf(a), nil)
	a.Data["attributes"].(map[string]any)["phone_number"] = "+15005550006" // x's number
	res, err := b.dest.Write(t.Context(), []destination.Record{a, c})
	if err != nil {
		t.Fatal(err)
	}
	out, done, err := b.dest.Outcomes(t.Context(), res[0].Ref, []destination.Record{a, c})
	if err != nil || !done {
		t.Fatal(done, err)
	}
	p, _ := b.fake.Profile(emailOf(c))
	if p.Attributes["first_name"] != c.Data["attributes"].(map[string]any)["first_name"] {
		t.Fatalf("the fake did not apply record c: %v", p.Attributes)
	}
	if out[0].Outcome != destination.Rejected || out[1].Outcome != destination.Delivered {
		t.Errorf("a: %s, c: %s; want a rejected and c (applied) delivered", out[0].Outcome, out[1].Outcome)
	}
}

// TestImportErrorEchoedInKlaviyosForm: as TestImportErrorNamesItsOwnRecord,
// with a float in the refused record's properties, which the import error
// echoes as Klaviyo parsed it (12.50 as 12.5). Matched by its text, the echo
// named neither record, so both were taken for refused and the one Klaviyo
// applied was sent again on the next run.
func TestImportErrorEchoedInKlaviyosForm(t *testing.T) {
	t.Parallel()
	b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: klaviyo.ModeBulk})
	b.fake.AddProfile("x@example.com", map[string]any{"phone_number": "+15005550006"})
	a, c := record(4), record(5)
	c.Data["email"] = a.Data["email"]
	b.fake.AddProfile(emailOf(a), nil)
	a.Data["attributes"].(map[string]any)["phone_number"] = "+15005550006" // x's number
	a.Data["attributes"].(map[string]any)["properties.price"] = json.Number("12.50")
	c.Data["attributes"].(map[string]any)["properties.price"] = json.Number("3.25")
	res, err := b.dest.Write(t.Context(), []destination.Record{a, c})
	if err != nil {
		t.Fatal(err)
	}
	out, done, err := b.dest.Outcomes(t.Context(), res[0].Ref, []destination.Record{a, c})
	if err != nil || !done {
		t.Fatal(done, err)
	}
	if p, _ := b.fake.Profile(emailOf(c)); p.Properties["price"] != 3.25 {
		t.Fatalf("the fake did not apply record c: %v", p.Properties)
	}
	if out[0].Outcome != destination.Rejected || out[1].Outcome != destination.Delivered {
		t.Errorf("a: %s, c: %s; want a rejected and c (applied) delivered", out[0].Outcome, out[1].Outcome)
	}
}
