package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/testenv"
)

// TestDemo runs the README's first command as a new user would, with a
// directory of their choosing that does not exist yet (absolute, and
// relative to where it runs): the demo kills a
// worker mid-batch and measures at its fake Brevo that every contact
// arrived once, on both paths.
func TestDemo(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"bulk", "single"} {
		t.Run(mode, func(t *testing.T) {
			t.Parallel()
			base := t.TempDir()
			dir := filepath.Join(base, "my", "demo")
			arg := dir
			if mode == "single" {
				// Relative to where the command runs: the demo's config once
				// named its files relative to itself, doubling the directory.
				arg = filepath.Join("my", "demo")
			}
			p := testenv.Start(t, testenv.StartParams{Binary: binary, Name: "oncesync demo", Dir: base,
				Args: []string{"demo", "--records", "1200", "--mode", mode, "--dir", arg}})
			if code := p.Wait(t, 3*time.Minute); code != 0 {
				t.Fatalf("demo exit %d:\n%s", code, p.Out)
			}
			out := p.Out.String()
			for _, want := range []*regexp.Regexp{
				regexp.MustCompile(`records in source: +1200\n`),
				regexp.MustCompile(`contacts at destination: +1200\n`),
				regexp.MustCompile(`duplicates: +0\n`),
				regexp.MustCompile(`every contact arrived exactly once`),
			} {
				if !want.MatchString(out) {
					t.Fatalf("demo output lacks %q:\n%s", want, out)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, "contacts.csv")); err != nil {
				t.Fatalf("the demo's directory was not kept: %v", err)
			}
			if strings.Contains(out, "@example") {
				t.Fatal("an e-mail address appears in the demo's output")
			}
		})
	}
}
