package hubspot_test

import (
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/hubspot"
	"github.com/oncesync/oncesync/internal/fakehubspot"
)

// TestLifecycleStageMovesBack: HubSpot ignores a lifecyclestage that
// moves a contact back (a customer's row now says lead) and answers
// success. Counted delivered, the contact kept the old stage: a stale
// record. The stage must reach HubSpot, on both paths, and a record whose
// stage moves forward or stays costs no extra write.
func TestLifecycleStageMovesBack(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{hubspot.ModeBulk, hubspot.ModeSingle} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakehubspot.Options{}, func(p *hubspot.Params) {
				p.Mode = mode
				p.Properties = []string{"firstname", "lifecyclestage"}
			})
			b.fake.Put(map[string]string{"email": "ann@example.com", "lifecyclestage": "customer"})
			b.fake.Put(map[string]string{"email": "bob@example.com", "lifecyclestage": "lead"})
			recs := []destination.Record{
				contactRec("k-ann", "ann@example.com", map[string]any{"firstname": "Ann", "lifecyclestage": "lead"}),
				contactRec("k-bob", "bob@example.com", map[string]any{"firstname": "Bob", "lifecyclestage": "customer"}),
				contactRec("k-cy", "cy@example.com", map[string]any{"firstname": "Cy", "lifecyclestage": "subscriber"}),
			}
			res, err := b.dest.Write(t.Context(), recs)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range res {
				if r.Outcome != destination.Delivered {
					t.Errorf("%s: %+v", r.Key, r)
				}
			}
			for email, want := range map[string]string{"ann@example.com": "lead", "bob@example.com": "customer", "cy@example.com": "subscriber"} {
				if c, _ := b.fake.Contact(email); c.Properties["lifecyclestage"] != want {
					t.Errorf("%s holds stage %q, want %q (counted delivered)", email, c.Properties["lifecyclestage"], want)
				}
			}
			if st := b.fake.Stats(); st.StagesKept != 0 || st.ContactsWritten > 4 {
				t.Errorf("fake: %d stages kept, %d writes; want 0 and at most 4 (one clear)", st.StagesKept, st.ContactsWritten)
			}
			landed, err := b.dest.Verify(t.Context(), recs, time.Now())
			if err != nil || len(landed) != 3 {
				t.Errorf("Verify: %v, %d of 3 landed", err, len(landed))
			}
		})
	}
}

// TestLifecycleStageClearInDoubt: the clear applied and its answer lost
// leaves the record in doubt; a read-back finds it not landed, and sending
// it again sets the stage.
func TestLifecycleStageClearInDoubt(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{DropFirst: 1}, func(p *hubspot.Params) { p.Properties = []string{"lifecyclestage"} })
	b.fake.Put(map[string]string{"email": "ann@example.com", "lifecyclestage": "customer"})
	rec := contactRec("k-ann", "ann@example.com", map[string]any{"lifecyclestage": "lead"})
	if res, err := b.dest.Write(t.Context(), []destination.Record{rec}); err == nil || len(res) != 0 {
		t.Fatalf("Write = %v, %v; want the record in doubt", res, err)
	}
	if landed, err := b.dest.Verify(t.Context(), []destination.Record{rec}, time.Now()); err != nil || len(landed) != 0 {
		t.Fatalf("Verify = %v, %v; want not landed", landed, err)
	}
	if res, err := b.dest.Write(t.Context(), []destination.Record{rec}); err != nil || len(res) != 1 || res[0].Outcome != destination.Delivered {
		t.Fatalf("resend = %v, %v", res, err)
	}
	if c, _ := b.fake.Contact("ann@example.com"); c.Properties["lifecyclestage"] != "lead" {
		t.Errorf("stage %q, want lead", c.Properties["lifecyclestage"])
	}
}
