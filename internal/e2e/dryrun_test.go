package e2e

import (
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestDryRun: after a run, three rows change and two are added, one of them
// with an address Brevo cannot take; `run --dry-run` says 1 create, 1
// rejected (with the reason), 3 updates, 497 unchanged, names them, and the
// fake receives no request.
func TestDryRun(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 500, pageSize: 100, mode: "bulk"})
	if p := tb.startRun(); p.Wait(t, time.Minute) != 0 {
		t.Fatalf("first run:\n%s", p.Out)
	}
	f, err := os.Create(filepath.Join(tb.dir, "contacts.csv"))
	if err != nil {
		t.Fatal(err)
	}
	w := csv.NewWriter(f)
	_ = w.Write([]string{"id", "email", "first_name", "last_name"})
	for i := 1; i <= 502; i++ {
		first := "First" + strconv.Itoa(i)
		if i <= 3 {
			first = "Changed" + strconv.Itoa(i)
		}
		email := fmt.Sprintf("person%06d@example.com", i)
		if i == 502 {
			email = "person502.example.com"
		}
		_ = w.Write([]string{strconv.Itoa(i), email, first, "Last"})
	}
	w.Flush()
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	before := tb.stats()

	cmd := exec.Command(binary, "run", "--config", tb.config, "contacts", "--dry-run")
	cmd.Dir = tb.dir
	cmd.Env = append(os.Environ(), "BREVO_API_KEY="+apiKey)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("dry run: %v\n%s", err, out)
	}
	text := string(out)
	for _, want := range []string{"nothing was claimed or written", "read       502", "create     1", "(501)",
		"update     3", "(1, 2, 3)", "unchanged  497", "rejected   1", "502: invalid email address"} {
		if !strings.Contains(text, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, text)
		}
	}
	if got := tb.stats().Requests; got != before.Requests {
		t.Fatalf("the dry run sent %d requests to the destination", got-before.Requests)
	}
	// The run that follows does what the dry run said.
	p := tb.startRun()
	if p.Wait(t, time.Minute) != 0 || !strings.Contains(p.Out.String(), "written 4, replayed from ledger 497") || !strings.Contains(p.Out.String(), "rejected 1") {
		t.Fatalf("the run after the dry run:\n%s", p.Out)
	}
}
