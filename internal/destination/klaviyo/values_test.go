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

// TestNumbersReadBackInKlaviyosForm: Klaviyo keeps a custom property's
// float as a double (its documented property types: "strings, integers,
// floats, dates, booleans, arrays/lists, or JSON"), inside an array or an
// object too (a jsonb column: PostgreSQL keeps "12.50" and "1e2" as
// written), and a decimal with more digits than a double holds comes back
// rounded. A profile that holds those values holds the record's: a
// read-back after a lost answer finds it landed rather than write it again.
func TestNumbersReadBackInKlaviyosForm(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{klaviyo.ModeSingle, klaviyo.ModeBulk} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakeklaviyo.Options{}, klaviyo.Params{Mode: mode})
			r := record(0)
			r.Data["attributes"] = map[string]any{
				"properties.cart": []any{
					map[string]any{"sku": "A1", "price": json.Number("12.50"), "qty": json.Number("2")},
					map[string]any{"sku": "B2", "price": json.Number("1e2"), "qty": json.Number("1")},
				},
				"properties.weights": map[string]any{"a": json.Number("0.10"), "b": json.Number("3.0")},
				"properties.ratio":   json.Number("0.12345678901234567890"),
				// A job sets no field to null (the bulk import guide):
				// the member is left out, which is the same value.
				"properties.meta": map[string]any{"a": json.Number("1"), "b": nil},
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
			meta := `{"a":1,"b":null}`
			if mode == klaviyo.ModeBulk {
				meta = `{"a":1}`
			}
			if got, _ := json.Marshal(p.Properties); string(got) !=
				`{"cart":[{"price":12.5,"qty":2,"sku":"A1"},{"price":100,"qty":1,"sku":"B2"}],"meta":`+meta+
					`,"ratio":0.12345678901234568,"weights":{"a":0.1,"b":3}}` {
				t.Errorf("Klaviyo holds %s", got)
			}
			landed, err := b.dest.Verify(t.Context(), []destination.Record{r}, t0)
			if err != nil || len(landed) != 1 {
				t.Errorf("verify: %v, %d of 1 landed: a landed write would be sent again", err, len(landed))
			}
		})
	}
}

// TestValuesEqualKeepsIntegersWhole: a float is compared as the double
// Klaviyo keeps, never an integer: Klaviyo keeps every digit of one, so
// two integers past 2^53 that one double holds are two values.
func TestValuesEqualKeepsIntegersWhole(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		want, got any
		equal     bool
	}{
		{json.Number("12.50"), json.Number("12.5"), true},
		{[]any{json.Number("12.50")}, []any{json.Number("12.5")}, true},
		{map[string]any{"p": json.Number("1e2")}, map[string]any{"p": json.Number("100")}, true},
		{map[string]any{"p": json.Number("1"), "q": nil}, map[string]any{"p": json.Number("1")}, true},
		{json.Number("0.12345678901234567890"), json.Number("0.12345678901234568"), true},
		{json.Number("9007199254740993"), json.Number("9007199254740992"), false},
		{[]any{json.Number("9007199254740993")}, []any{json.Number("9007199254740992")}, false},
		{[]any{json.Number("1.5")}, []any{"1.5"}, false},
		{map[string]any{"p": json.Number("1")}, map[string]any{"p": json.Number("1"), "q": "x"}, false},
		{[]any{json.Number("1"), json.Number("2")}, []any{json.Number("2"), json.Number("1")}, false},
		{json.Number("0.1"), json.Number("0.2"), false},
	} {
		if got := klaviyo.ValuesEqual(c.want, c.got); got != c.equal {
			t.Errorf("ValuesEqual(%v, %v) = %v, want %v", c.want, c.got, got, c.equal)
		}
	}
}
