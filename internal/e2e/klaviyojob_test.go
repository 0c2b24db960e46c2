package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakeklaviyo"
)

// TestKlaviyoCancelledJobTwinIsSentAgain (F1 of the twenty-ninth session):
// rows 5 and 20 carry one e-mail in two letter cases (one Klaviyo
// profile). The page's job is cancelled after its first 15 profiles: row
// 5's applied, row 20's not. The job's profiles name user5's profile, which
// proves row 5 and not row 20: row 20 is sent again and its values reach
// Klaviyo, where before it was counted written without ever arriving.
func TestKlaviyoCancelledJobTwinIsSentAgain(t *testing.T) {
	t.Parallel()
	kb := setupKlaviyo(t, klaviyoParams{records: 30, pageSize: 30, mode: "bulk", listID: "LiSt01",
		opts: fakeklaviyo.Options{JobFailFirst: 1, JobFailApplies: 0.5}})
	ids := make([]int, 30)
	for i := range ids {
		ids[i] = i + 1
	}
	writeRows(t, filepath.Join(kb.dir, "people.csv"), ids, func(id int) string {
		switch id {
		case 5:
			return "user5@example.com"
		case 20:
			return "User5@Example.com"
		}
		return kb.emails[id-1]
	})
	p := kb.run()
	if code := p.Wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("exit %d:\n%s", code, p.Out)
	}
	st := kb.fake.Stats()
	if st.JobsFailed != 1 || st.DuplicateWrites != 0 || st.Invalid != 0 {
		t.Fatalf("stats %+v: want one cancelled job, no duplicate write", st)
	}
	pr, ok := kb.fake.Profile("user5@example.com")
	if !ok || pr.Properties["customer_id"] != "20" || pr.Attributes["first_name"] != "First20" {
		t.Fatalf("user5's profile holds %v %v: row 20 never reached Klaviyo", pr.Attributes, pr.Properties)
	}
	if !strings.Contains(p.Out.String(), "written 30") {
		t.Errorf("want written 30 in the run's output:\n%s", p.Out)
	}
}
