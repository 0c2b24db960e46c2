package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/oncesync/oncesync/"

// imports returns, for every package directory under internal/ and cmd/
// (relative to the repository root), the oncesync packages its non-test
// files import.
func imports(t *testing.T) map[string][]string {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]string{}
	fset := token.NewFileSet()
	for _, top := range []string{"internal", "cmd", "barrier"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, filepath.Dir(path))
			rel = filepath.ToSlash(rel)
			for _, spec := range f.Imports {
				p, _ := strconv.Unquote(spec.Path.Value)
				if dep, ok := strings.CutPrefix(p, module); ok && !slices.Contains(out[rel], dep) {
					out[rel] = append(out[rel], dep)
				}
			}
			if _, ok := out[rel]; !ok {
				out[rel] = nil
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(out) < 20 {
		t.Fatalf("found %d packages under internal/ and cmd/: is the test run from its own directory?", len(out))
	}
	return out
}

// foundation are the packages everything builds on: types, interfaces and
// small helpers. They import no other oncesync package but each other.
var foundation = []string{
	"internal/clock", "internal/failure", "internal/jsonenc", "internal/rediskey", "internal/progress",
	"internal/store", "internal/source", "internal/destination",
}

// wiring assembles the product from the rest; only it opens a store driver.
var wiring = []string{"internal/app", "internal/cli", "internal/demo"}

// A rule returns the imports of g it forbids, as messages.
type rule func(g map[string][]string) []string

var rules = map[string]rule{
	"foundation imports nothing above":     foundationRule,
	"store drivers import only the store":  driversRule,
	"only the wiring opens a store driver": wiringRule,
	"connectors import no engine":          connectorsRule,
	"only tests import internal/testenv":   testenvRule,
}

func foundationRule(g map[string][]string) (bad []string) {
	for pkg, deps := range g {
		if !slices.Contains(foundation, pkg) {
			continue
		}
		for _, d := range deps {
			if !slices.Contains(foundation, d) {
				bad = append(bad, pkg+" imports "+d+": a foundation package imports only other foundation packages ("+strings.Join(foundation, ", ")+")")
			}
		}
	}
	return bad
}

func driversRule(g map[string][]string) (bad []string) {
	allowed := []string{"internal/store", "internal/clock", "internal/failure"}
	for pkg, deps := range g {
		if !strings.HasPrefix(pkg, "internal/store/") {
			continue
		}
		for _, d := range deps {
			if !slices.Contains(allowed, d) {
				bad = append(bad, pkg+" imports "+d+": the store's drivers and suite import only "+strings.Join(allowed, ", ")+"; a type they need belongs in internal/store")
			}
		}
	}
	return bad
}

func wiringRule(g map[string][]string) (bad []string) {
	for pkg, deps := range g {
		if slices.Contains(wiring, pkg) || strings.HasPrefix(pkg, "internal/store/") || strings.HasPrefix(pkg, "cmd/") {
			continue
		}
		for _, d := range deps {
			if d == "internal/store/sqlite" || d == "internal/store/postgres" {
				bad = append(bad, pkg+" imports "+d+": only the wiring ("+strings.Join(wiring, ", ")+") opens a store driver; take a store.Store or a smaller interface of internal/store")
			}
		}
	}
	return bad
}

func connectorsRule(g map[string][]string) (bad []string) {
	// config for the plug-in API of their keys, mapping for the shape a
	// destination's records take.
	allowed := append(slices.Clone(foundation), "internal/apiclient", "internal/config", "internal/mapping")
	for pkg, deps := range g {
		if !strings.HasPrefix(pkg, "internal/source/") && !strings.HasPrefix(pkg, "internal/destination/") {
			continue
		}
		for _, d := range deps {
			if !slices.Contains(allowed, d) && !strings.HasPrefix(d, "internal/source/") && !strings.HasPrefix(d, "internal/destination/") {
				bad = append(bad, pkg+" imports "+d+": a connector builds on the foundation, internal/apiclient, internal/config and internal/mapping only")
			}
		}
	}
	return bad
}

// testenvRule: internal/testenv (the test servers, the built binary) is
// for tests; imports only reads non-test files, so any import is a product
// file's.
func testenvRule(g map[string][]string) (bad []string) {
	for pkg, deps := range g {
		if slices.Contains(deps, "internal/testenv") {
			bad = append(bad, pkg+" imports internal/testenv: only tests may")
		}
	}
	return bad
}

func TestLayers(t *testing.T) {
	g := imports(t)
	for name, r := range rules {
		bad := r(g)
		sort.Strings(bad)
		for _, b := range bad {
			t.Errorf("%s: %s", name, b)
		}
	}
}

// TestTheRulesCanFail gives every rule a graph that breaks it.
func TestTheRulesCanFail(t *testing.T) {
	broken := map[string][]string{
		"internal/store":             {"internal/runner"},
		"internal/store/sqlite":      {"internal/store", "internal/deadman"},
		"internal/web":               {"internal/store/sqlite"},
		"internal/destination/brevo": {"internal/apiclient", "internal/runner"},
		"internal/queue":             {"internal/testenv"},
	}
	for name, r := range rules {
		if len(r(broken)) == 0 {
			t.Errorf("rule %q finds nothing wrong in %v", name, broken)
		}
	}
	// And the walk reads the tree's imports.
	g := imports(t)
	if !slices.Contains(g["internal/store/sqlite"], "internal/store") {
		t.Fatalf("internal/store/sqlite's imports %v do not include internal/store: the walk reads no imports", g["internal/store/sqlite"])
	}
}
