package hubspot_test

import (
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/fakehubspot"
)

// merged seeds ann@example.com and ann.old@example.com and merges the
// second into the first (a person did, in HubSpot): ann.old@ is now a
// secondary address of ann's contact. It returns that contact's id.
func merged(t *testing.T, fake *fakehubspot.Server) string {
	t.Helper()
	keep := fake.Put(map[string]string{"email": "ann@example.com", "firstname": "Ann", "age": "40"})
	gone := fake.Put(map[string]string{"email": "ann.old@example.com", "firstname": "Ann", "age": "40"})
	if _, err := fake.Merge(keep, gone); err != nil {
		t.Fatal(err)
	}
	return keep
}

// TestWriteInDoubtToAMergedAddressIsFound: a row whose e-mail address was
// merged into another contact is written to that contact (HubSpot finds a
// contact by a secondary address). When the answer is lost, Verify must find
// the write landed: reading back by the address answers the contact under
// its primary address, and taking that for "not landed" sends the record
// again, a duplicate write.
func TestWriteInDoubtToAMergedAddressIsFound(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{DropFirst: 1}, nil)
	merged(t, b.fake)
	rec := contactRec("k-old", "Ann.Old@example.com", map[string]any{"firstname": "Annie", "age": float64(41)})
	if res, err := b.dest.Write(t.Context(), []destination.Record{rec}); err == nil || len(res) != 0 {
		t.Fatalf("Write = %v, %v; want the record in doubt (answer dropped)", res, err)
	}
	landed, err := b.dest.Verify(t.Context(), []destination.Record{rec}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := landed[rec.Key]; !ok {
		// What the runner then does: send it again.
		_, _ = b.dest.Write(t.Context(), []destination.Record{rec})
		t.Fatalf("a write that landed counted as not landed: sent again, %d duplicate writes", b.fake.Stats().DuplicateWrites)
	}
	if st := b.fake.Stats(); st.DuplicateWrites != 0 || st.Contacts != 1 {
		t.Errorf("fake: %d duplicate writes, %d contacts; want 0 and 1", st.DuplicateWrites, st.Contacts)
	}
}

// TestMultiStatusWithAMergedAddress: HubSpot answers a write by a secondary
// address with the contact under its primary address. In a 207 whose
// errors name the refused inputs, the one result left is the merged
// address's: the batch is settled, not left in doubt (which failed the page
// and left every later batch of it unsent).
func TestMultiStatusWithAMergedAddress(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{RefuseEmails: []string{"refused@example.com"}}, nil)
	id := merged(t, b.fake)
	recs := []destination.Record{
		contactRec("k-old", "ann.old@example.com", map[string]any{"firstname": "Annie", "age": float64(41)}),
		contactRec("k-bad", "refused@example.com", map[string]any{"firstname": "Bad", "age": float64(1)}),
	}
	res, err := b.dest.Write(t.Context(), recs)
	if err != nil {
		t.Fatalf("Write: %v (results %+v)", err, res)
	}
	got := map[string]destination.Result{}
	for _, r := range res {
		got[r.Key] = r
	}
	if r := got["k-old"]; r.Outcome != destination.Delivered || r.Ref != id {
		t.Errorf("merged address: %+v, want delivered to contact %s", r, id)
	}
	if r := got["k-bad"]; r.Outcome != destination.Rejected {
		t.Errorf("refused address: %+v, want rejected", r)
	}
}

// TestMirrorDoesNotArchiveAMergedContact: a mirror removal of a row whose
// contact a person merged into another must not archive that other contact
// (another row's, or no row's of the sync: a lost record); nor a contact
// that holds other addresses besides the handle.
func TestMirrorDoesNotArchiveAMergedContact(t *testing.T) {
	t.Parallel()
	b := setup(t, fakehubspot.Options{}, nil)
	merged(t, b.fake)
	plain := b.fake.Put(map[string]string{"email": "bob@example.com"})
	res, err := b.dest.Remove(t.Context(), []destination.Removal{
		{Key: "rm-old", Handle: "ann.old@example.com"},
		{Key: "rm-bob", Handle: "bob@example.com"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.fake.Contact("ann@example.com"); !ok {
		t.Fatal("removing the merged-away address archived the contact it was merged into")
	}
	if _, ok := b.fake.Contact("bob@example.com"); ok {
		t.Errorf("contact %s (no other address) was not archived", plain)
	}
	for _, r := range res {
		if r.Outcome != destination.Delivered {
			t.Errorf("removal %s: %+v, want delivered", r.Key, r)
		}
	}
	res, err = b.dest.Remove(t.Context(), []destination.Removal{{Key: "rm-ann", Handle: "ann@example.com"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := b.fake.Contact("ann.old@example.com"); !ok {
		t.Fatal("removing the primary address archived a contact that holds another address too")
	}
	if len(res) != 1 || res[0].Outcome != destination.Rejected || strings.Contains(res[0].Message, "@") {
		t.Errorf("removal of a contact holding other addresses: %+v, want rejected, no address in the message", res)
	}
}
