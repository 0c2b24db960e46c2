package brevo_test

import (
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/destination/brevo"
	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// TestIdentifierConflictInEveryForm: Brevo has answered a write that names
// another contact's identifier in three forms (duplicate_parameter with
// metadata.duplicate_identifiers; the same with invalid_parameter; and
// "Contact already exist" without metadata: fakebrevo/conflict.go). In
// each, an upsert whose row's address changed moves the contact found by
// its ext_id, and a create of an address that is taken is skipped as
// existing, never rejected (a rejected row is sent again on every run).
func TestIdentifierConflictInEveryForm(t *testing.T) {
	t.Parallel()
	for _, form := range fakebrevo.ConflictAnswers {
		t.Run("form="+form, func(t *testing.T) {
			t.Parallel()
			b := setup(t, fakebrevo.Options{ConflictAnswer: form}, func(p *brevo.Params) { p.Mode = brevo.ModeSingle })
			ctx := t.Context()
			first := rec(0, map[string]any{"FIRSTNAME": "Ann"})
			first.Data["ext_id"] = "crm-7"
			if res, err := b.dest.Write(ctx, []destination.Record{first}); err != nil || res[0].Outcome != destination.Delivered {
				t.Fatalf("first write: %+v, %v", res, err)
			}
			moved := rec(1, map[string]any{"FIRSTNAME": "Anne"})
			moved.Data["ext_id"] = "crm-7"
			moved.Redelivery = true // the sync delivered this row before, at its old address
			res, err := b.dest.Write(ctx, []destination.Record{moved})
			if err != nil || len(res) != 1 || res[0].Outcome != destination.Delivered {
				t.Fatalf("the moved row: %+v, %v; want delivered", res, err)
			}
			if c, ok := b.fake.Contact(emailOf(moved)); !ok || c.ExtID != "crm-7" || c.Attributes["FIRSTNAME"] != "Anne" {
				t.Fatalf("contact at the new address: %v %+v", ok, c)
			}

			p := b.params
			p.WriteMode = destination.Create
			create := b.newDest(t, p)
			again := rec(1, map[string]any{"FIRSTNAME": "Someone else"})
			res, err = create.Write(ctx, []destination.Record{again})
			if err != nil || len(res) != 1 || res[0].Outcome != destination.Delivered || res[0].Skipped != destination.SkipExists {
				t.Fatalf("create of a taken address: %+v, %v; want delivered, skipped as existing", res, err)
			}
			if c, _ := b.fake.Contact(emailOf(again)); c.Attributes["FIRSTNAME"] != "Anne" {
				t.Fatalf("create changed the existing contact: %+v", c)
			}
		})
	}
}
