package failure_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestSourceDocAnchorsExist: the messages and comments of the code send a
// person to a guide anchor (docs/ + a file + #anchor); a heading renamed, or an anchor mistyped,
// sends them nowhere. Every such reference in a non-test Go file must name
// a heading of that file (GitHub's anchors, duplicates numbered -1, -2).
func TestSourceDocAnchorsExist(t *testing.T) {
	t.Parallel()
	root := "../.."
	heads := map[string]map[string]bool{}
	anchorsOf := func(doc string) map[string]bool {
		if a, ok := heads[doc]; ok {
			return a
		}
		a := map[string]bool{}
		heads[doc] = a
		b, err := os.ReadFile(filepath.Join(root, "docs", doc))
		if err != nil {
			return a
		}
		seen := map[string]int{}
		inCode := false
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "```") {
				inCode = !inCode
			}
			if inCode || !strings.HasPrefix(line, "#") {
				continue
			}
			s := slug(strings.TrimSpace(strings.TrimLeft(line, "#")))
			if n := seen[s]; n > 0 {
				a[s+"-"+itoa(n)] = true
			} else {
				a[s] = true
			}
			seen[s]++
		}
		return a
	}
	ref := regexp.MustCompile(`docs/([A-Za-z]+\.md)#([a-z0-9_-]+)`)
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "vendor" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range ref.FindAllStringSubmatch(string(b), -1) {
			checked++
			if !anchorsOf(m[1])[m[2]] {
				t.Errorf("%s: docs/%s#%s: no such heading", path, m[1], m[2])
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("no anchor into docs/ found in the code")
	}
}

func itoa(n int) string {
	const digits = "0123456789"
	if n < 10 {
		return digits[n : n+1]
	}
	return itoa(n/10) + digits[n%10:n%10+1]
}
