package hubspot_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/hubspot"
	"github.com/oncesync/oncesync/internal/fakehubspot"
)

// TestOverlongValueRefusedBeforeSending: HubSpot takes property values of at
// most 65,536 characters. Until 2026-12-05 a source row with a 1 MB text
// value was sent as it was (and the fake stored it, kinder than HubSpot); now
// that record alone is refused before any request, with the property and the
// length, never the value, and the others of its page are delivered. A value
// of exactly the limit, in two-byte characters, is delivered.
func TestOverlongValueRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	recs := records(5)
	recs[2].Data["attributes"].(map[string]any)["firstname"] = strings.Repeat("é", hubspot.MaxValueChars+1)
	recs[3].Data["attributes"].(map[string]any)["firstname"] = strings.Repeat("é", hubspot.MaxValueChars)
	b := setup(t, fakehubspot.Options{}, nil)
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v", err)
	}
	byKey := map[string]destination.Result{}
	for _, r := range res {
		byKey[r.Key] = r
	}
	for i, r := range recs {
		got := byKey[r.Key]
		if i == 2 {
			if got.Outcome != destination.Rejected || !strings.Contains(got.Message, "property firstname") ||
				!strings.Contains(got.Message, "65537 characters") || !strings.Contains(got.Message, "before sending") || strings.Contains(got.Message, "éé") {
				t.Errorf("record 2: %v %q, want refused before sending, naming the property and the length only", got.Outcome, got.Message)
			}
			continue
		}
		if got.Outcome != destination.Delivered {
			t.Errorf("record %d: %v %q, want delivered", i, got.Outcome, got.Message)
		}
	}
	sent := 0
	for _, body := range b.requests(upsertPath) {
		var in struct {
			Inputs []json.RawMessage `json:"inputs"`
		}
		if err := json.Unmarshal(body, &in); err != nil {
			t.Fatal(err)
		}
		sent += len(in.Inputs)
	}
	if sent != 4 {
		t.Errorf("%d inputs sent, want 4 (the overlong record never)", sent)
	}
	if c, _ := b.fake.Contact("user3@example.com"); utf8.RuneCountInString(c.Properties["firstname"]) != hubspot.MaxValueChars {
		t.Errorf("contact 3's firstname has %d characters, want %d", utf8.RuneCountInString(c.Properties["firstname"]), hubspot.MaxValueChars)
	}
	if st := b.fake.Stats(); st.Contacts != 4 {
		t.Errorf("fake stores %d contacts, want 4", st.Contacts)
	}
}
