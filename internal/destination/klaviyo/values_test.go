package klaviyo_test

import (
	"encoding/json"
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
