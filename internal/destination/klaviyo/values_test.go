package klaviyo_test

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/klaviyo"
	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

// TestIntegerPropertiesKeepTheirDigits: Klaviyo documents integers among
// its custom property types, so a bigint above 2^53 (a customer id) is
// held with every digit, on both paths, and a read-back finds it landed;
// a float is a double (0.10 is 0.1).
func TestIntegerPropertiesKeepTheirDigits(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{klaviyo.ModeSingle, klaviyo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: mode})
			r := record(0)
			r.Data["attributes"] = map[string]any{
				"properties.customer_id": int64(9007199254740993),
				"properties.ids":         []any{json.Number("12345678901234567891")},
				"properties.score":       json.Number("0.10"),
			}
			res, err := b.dest.Write(t.Context(), []destination.Record{r})
			if err != nil {
				t.Fatal(err)
			}
			if mode == klaviyo.ModeBulk {
				b.clk.Advance(time.Minute)
				if res, _, err = b.dest.Outcomes(t.Context(), res[0].Ref, []destination.Record{r}); err != nil {
					t.Fatal(err)
				}
			}
			if res[0].Outcome != destination.Delivered {
				t.Fatalf("write: %+v", res[0])
			}
			p, _ := b.fake.Profile(r.Data["email"].(string))
			if got, _ := json.Marshal(p.Properties); string(got) != `{"customer_id":9007199254740993,"ids":[12345678901234567891],"score":0.1}` {
				t.Errorf("Klaviyo holds %s", got)
			}
			landed, err := b.dest.Verify(t.Context(), []destination.Record{r}, t0)
			if err != nil || len(landed) != 1 {
				t.Errorf("verify: %v, %d of 1 landed", err, len(landed))
			}
		})
	}
}

// TestEmptiedFieldsAreCleared: a value emptied in the source ("") is sent
// as null, Klaviyo's way to clear a field, on both paths: the profile ends
// with no value for it. "" is a value there: an external_id of "" is an
// identifier, and a phone_number of "" is no E.164 number (Klaviyo refuses
// it, and the record was rejected with the old value kept).
func TestEmptiedFieldsAreCleared(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{klaviyo.ModeSingle, klaviyo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: mode})
			write := func(recs []destination.Record) {
				t.Helper()
				res, err := b.dest.Write(t.Context(), recs)
				if err != nil {
					t.Fatal(err)
				}
				if mode == klaviyo.ModeBulk {
					b.clk.Advance(time.Minute)
					if res, _, err = b.dest.Outcomes(t.Context(), res[0].Ref, recs); err != nil {
						t.Fatal(err)
					}
				}
				for _, r := range res {
					if r.Outcome != destination.Delivered {
						t.Fatalf("write: %+v", r)
					}
				}
			}
			full := []destination.Record{record(0), record(1)}
			for i, r := range full {
				attrs := r.Data["attributes"].(map[string]any)
				attrs["external_id"] = "X" + strconv.Itoa(i)
				attrs["phone_number"] = "+3361234567" + strconv.Itoa(i)
				attrs["properties.plan"] = "gold"
			}
			write(full)
			emptied := []destination.Record{record(0), record(1)}
			for _, r := range emptied {
				r.Key += "-emptied"
				attrs := r.Data["attributes"].(map[string]any)
				for _, f := range []string{"first_name", "external_id", "phone_number", "properties.plan", "location.city"} {
					attrs[f] = ""
				}
			}
			write(emptied)
			for _, r := range emptied {
				p, ok := b.fake.Profile(r.Data["email"].(string))
				if !ok {
					t.Fatalf("no profile for %v", r.Data["email"])
				}
				for _, f := range []string{"first_name", "external_id", "phone_number"} {
					if v, has := p.Attributes[f]; has && v != nil {
						t.Errorf("%s: Klaviyo holds %s %#v after it was emptied", p.Email, f, v)
					}
				}
				if v, has := p.Properties["plan"]; has && v != nil {
					t.Errorf("%s: Klaviyo holds properties.plan %#v", p.Email, v)
				}
				if v, has := p.Location["city"]; has && v != nil {
					t.Errorf("%s: Klaviyo holds location.city %#v", p.Email, v)
				}
			}
			landed, err := b.dest.Verify(t.Context(), emptied, t0)
			if err != nil || len(landed) != 2 {
				t.Errorf("verify: %v, %d of 2 landed", err, len(landed))
			}
		})
	}
}
