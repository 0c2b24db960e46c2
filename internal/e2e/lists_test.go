package e2e

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestListChangeReachesEveryContact: list_ids shapes every contact beyond
// its mapped values (docs/guide.md#changing-a-sync). Adding a list sends
// every contact again, once, so that each is in the new list; the next run
// sends nothing; on both paths.
func TestListChangeReachesEveryContact(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"bulk", "single"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, setupParams{records: 120, pageSize: 50, mode: mode})
			tb.runOK(t)
			tb.checkDelivered(t)

			cfg, err := os.ReadFile(tb.config)
			if err != nil {
				t.Fatal(err)
			}
			changed := strings.Replace(string(cfg), "list_ids: [2]", "list_ids: [2, 7]", 1)
			if changed == string(cfg) {
				t.Fatal("the test config has no list_ids: [2]")
			}
			if err := os.WriteFile(tb.config, []byte(changed), 0o600); err != nil {
				t.Fatal(err)
			}
			if out := tb.runOK(t); !strings.Contains(out, "written 120,") {
				t.Fatalf("run after adding list 7: want every contact written again:\n%s", out)
			}
			for _, e := range tb.emails {
				c, ok := tb.fake.Contact(e)
				if !ok || !slices.Contains(c.ListIDs, 2) || !slices.Contains(c.ListIDs, 7) {
					t.Fatalf("a contact after adding list 7: found %v, lists %v; want lists 2 and 7", ok, c.ListIDs)
				}
			}
			if out := tb.runOK(t); !strings.Contains(out, "written 0,") {
				t.Fatalf("run under unchanged lists: want nothing written:\n%s", out)
			}
			st := tb.stats()
			if st.DuplicateWrites != 0 || st.Invalid != 0 || st.ContactsWritten != 240 {
				t.Fatalf("fake: %d contact writes (want 240), %d duplicates, %d invalid requests", st.ContactsWritten, st.DuplicateWrites, st.Invalid)
			}
		})
	}
}
