package e2e

import (
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
	"github.com/oncesync/oncesync/internal/testenv"
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

// TestKeyRotationSendsNothing: the same Brevo account reached with a new
// API key (the old one revoked) is the same account, as GET /v3/account
// says, without destination.account: nothing is written again, and a row
// changed meanwhile is the only write.
func TestKeyRotationSendsNothing(t *testing.T) {
	t.Parallel()
	const rotated = "xkeysib-e2e-rotated-9876543210"
	tb := setup(t, setupParams{records: 120, pageSize: 50, mode: "single", opts: fakebrevo.Options{OtherAPIKeys: []string{rotated}}})
	tb.runOK(t)
	tb.checkDelivered(t)
	tb.rewriteCSV(t, map[int]string{7: "Changed7"})
	p := testenv.Start(t, testenv.StartParams{
		Binary: binary, Args: []string{"run", "--config", tb.config, "contacts"}, Dir: tb.dir,
		Env: []string{"BREVO_API_KEY=" + rotated}, Name: "oncesync run (rotated key)",
	})
	if code := p.Wait(t, 2*time.Minute); code != 0 || !strings.Contains(p.Out.String(), "written 1,") {
		t.Fatalf("run with the rotated key exited %d; want the one changed contact written:\n%s", code, p.Out)
	}
	if c, ok := tb.fake.Contact(tb.emails[6]); !ok || fmt.Sprint(c.Attributes["FIRSTNAME"]) != "Changed7" {
		t.Fatalf("the changed contact: found %v, FIRSTNAME %v; want Changed7", ok, c.Attributes["FIRSTNAME"])
	}
	if st := tb.fake.Stats(); st.ContactsWritten != 121 || st.DuplicateWrites != 0 {
		t.Fatalf("after the rotation: %d contact writes (want 121), %d duplicates", st.ContactsWritten, st.DuplicateWrites)
	}
}
