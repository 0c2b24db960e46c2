package e2e

import (
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// TestAnotherAccountGetsEveryContact: a sync pointed at another Brevo
// account (another base_url here; another api_key alike) sends every
// contact there once, with its values, though the ledger says each was
// delivered (to the first account); the run after sends nothing; on both
// paths (docs/guide.md#changing-a-sync).
func TestAnotherAccountGetsEveryContact(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"bulk", "single"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			tb := setup(t, setupParams{records: 120, pageSize: 50, mode: mode})
			tb.runOK(t)
			tb.checkDelivered(t)

			other := fakebrevo.New(fakebrevo.Options{APIKey: apiKey, Validate: true})
			srv := httptest.NewServer(other)
			t.Cleanup(srv.Close)
			cfg, err := os.ReadFile(tb.config)
			if err != nil {
				t.Fatal(err)
			}
			changed := strings.Replace(string(cfg), tb.srv.URL+"/v3", srv.URL+"/v3", 1)
			if changed == string(cfg) {
				t.Fatal("the test config has no base_url")
			}
			if err := os.WriteFile(tb.config, []byte(changed), 0o600); err != nil {
				t.Fatal(err)
			}
			if out := tb.runOK(t); !strings.Contains(out, "written 120,") {
				t.Fatalf("run against the other account: want every contact written there:\n%s", out)
			}
			for i, e := range tb.emails {
				c, ok := other.Contact(e)
				if want := fmt.Sprintf("First%d", i+1); !ok || fmt.Sprint(c.Attributes["FIRSTNAME"]) != want {
					t.Fatalf("contact %d at the other account: found %v, FIRSTNAME %v; want %s", i+1, ok, c.Attributes["FIRSTNAME"], want)
				}
			}
			if out := tb.runOK(t); !strings.Contains(out, "written 0,") {
				t.Fatalf("the run after: want nothing written:\n%s", out)
			}
			if st := other.Stats(); st.ContactsWritten != 120 || st.DuplicateWrites != 0 || st.Invalid != 0 {
				t.Fatalf("other account: %d contact writes (want 120), %d duplicates, %d invalid requests", st.ContactsWritten, st.DuplicateWrites, st.Invalid)
			}
		})
	}
}
