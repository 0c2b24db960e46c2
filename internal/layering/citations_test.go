package layering

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	docRefRE  = regexp.MustCompile(`docs/([A-Za-z]+\.md)(#[a-z0-9_-]+)?`)
	headingRE = regexp.MustCompile(`(?m)^#{1,6} (.+)$`)
	slugDrop  = regexp.MustCompile(`[^a-z0-9_ -]`)
)

// slug is GitHub's anchor of a heading: lower case, punctuation dropped,
// spaces as dashes.
func slug(h string) string {
	return strings.ReplaceAll(slugDrop.ReplaceAllString(strings.ToLower(strings.TrimSpace(h)), ""), " ", "-")
}

// anchors are the heading anchors of a Markdown file.
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(string(b), -1) {
		out["#"+slug(m[1])] = true
	}
	return out
}

// TestCodeCitesTheRepoDocs: code and help texts cite the repository's own
// docs (a newcomer has no SPEC), and every docs/FILE.md#anchor they cite
// names a heading that exists.
func TestCodeCitesTheRepoDocs(t *testing.T) {
	root := filepath.Join("..", "..")
	docs := map[string]map[string]bool{}
	checked := 0
	for _, top := range []string{"internal", "cmd", "barrier"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") {
				return err
			}
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			text := string(b)
			if strings.HasSuffix(path, "citations_test.go") {
				return nil
			}
			if i := strings.Index(text, "SPEC §"); i >= 0 {
				t.Errorf("%s cites %q: cite docs/ instead", path, text[i:min(len(text), i+12)])
			}
			for _, m := range docRefRE.FindAllStringSubmatch(text, -1) {
				file, anchor := m[1], m[2]
				a, ok := docs[file]
				if !ok {
					p := filepath.Join(root, "docs", file)
					if _, err := os.Stat(p); err != nil {
						t.Errorf("%s cites docs/%s, which does not exist", path, file)
						docs[file] = nil
						continue
					}
					a = anchors(t, p)
					docs[file] = a
				}
				if a != nil && anchor != "" && !a[anchor] {
					t.Errorf("%s cites docs/%s%s: no such heading in docs/%s", path, file, anchor, file)
				}
				checked++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d citations of docs/: does the walk read the tree?", checked)
	}
}

func TestSlug(t *testing.T) {
	for h, want := range map[string]string{
		"Running on a schedule: `serve` and `worker`": "running-on-a-schedule-serve-and-worker",
		"The ledger and its retention":                "the-ledger-and-its-retention",
		"lease_lost":                                  "lease_lost",
	} {
		if got := slug(h); got != want {
			t.Errorf("slug(%q) = %q, want %q", h, got, want)
		}
	}
}
