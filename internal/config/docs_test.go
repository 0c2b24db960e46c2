package config_test

import (
	"github.com/oncesync/oncesync/internal/config"
	"os"
	"regexp"
	"strings"
	"testing"
)

// schemaKeys asks the loader itself for the keys each block accepts, by
// writing an unknown key in every block and reading the "valid keys" list.
func schemaKeys(t *testing.T) map[string][]string {
	t.Helper()
	yaml := `zzzzzzzzzz: 1
settings: {zzzzzzzzzz: 1}
alerts: {zzzzzzzzzz: 1, webhook: {zzzzzzzzzz: 1}, email: {zzzzzzzzzz: 1}, sentry: {zzzzzzzzzz: 1}}
web: {zzzzzzzzzz: 1, oidc: {zzzzzzzzzz: 1}}
syncs:
  - zzzzzzzzzz: 1
    source: {zzzzzzzzzz: 1}
    destination: {zzzzzzzzzz: 1}
    mapping: {zzzzzzzzzz: 1}
`
	_, err := config.Parse("k.yaml", []byte(yaml), envMap(nil), kinds)
	re := regexp.MustCompile(`^k\.yaml:\d+: (.*)zzzzzzzzzz: unknown key "zzzzzzzzzz" \(valid keys: (.*)\)$`)
	out := map[string][]string{}
	for _, line := range problemsOf(t, err) {
		if m := re.FindStringSubmatch(line); m != nil {
			out[strings.TrimSuffix(m[1], ".")] = strings.Split(m[2], ", ")
		}
	}
	if len(out) != 12 {
		t.Fatalf("want the keys of 12 blocks, got %d: %v", len(out), out)
	}
	return out
}

func TestDocsCoverEveryKey(t *testing.T) {
	t.Parallel()
	docs, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	full, err := os.ReadFile("testdata/full.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for block, keys := range schemaKeys(t) {
		for _, k := range keys {
			if !regexp.MustCompile("`([a-z_]+\\.)*" + regexp.QuoteMeta(k) + "[`.]").Match(docs) {
				t.Errorf("docs/config.md does not document %s.%s", block, k)
			}
			if !regexp.MustCompile(`(?m)[\s{,]` + regexp.QuoteMeta(k) + `:`).Match(full) {
				t.Errorf("testdata/full.yaml does not use %s.%s", block, k)
			}
		}
	}
}

func TestDocsExampleLoads(t *testing.T) {
	t.Parallel()
	docs, err := os.ReadFile("../../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(docs), "## Complete example\n\n```yaml\n")
	if !ok {
		t.Fatal("docs/config.md has no complete example")
	}
	example, _, _ := strings.Cut(rest, "```")
	cfg, err := config.Parse("docs/config.md", []byte(example), envMap(specEnv), kinds)
	if err != nil {
		t.Fatalf("the documented example must be valid:\n%v", err)
	}
	if len(cfg.Syncs) != 3 || webhookOf(cfg.Syncs[2]).Headers["Authorization"] != "Bearer evtok-s3cret" {
		t.Errorf("example decoded to %+v", cfg.Syncs)
	}
}

// TestDocsFragmentsLoad: every YAML example of README.md and docs/guide.md
// is valid as written, completed into a config where it is a fragment (a
// sync, a source, the web block). A new user pastes them.
func TestDocsFragmentsLoad(t *testing.T) {
	t.Parallel()
	anyEnv := func(k string) (string, bool) {
		if v, ok := specEnv[k]; ok {
			return v, true
		}
		if k == "CRM_DSN" {
			return "postgres://reader@crm.internal:5432/crm?sslmode=verify-full", true
		}
		return "value-of-" + k, true
	}
	const sync = "syncs:\n  - id: s\n    workspace: acme\n"
	const rest = "    destination: {type: brevo, api_key: k, list_ids: [2]}\n    mapping: {email: email}\n"
	n := 0
	for _, doc := range []string{"../../README.md", "../../docs/guide.md", "../../docs/config.md"} {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := regexp.MustCompile("(?s)\n```yaml\n(.*?)```").FindAllStringSubmatch(string(b), -1)
		for _, m := range blocks {
			y := m[1]
			switch first := strings.TrimLeft(y, "# \n"); {
			case strings.Contains(y, "\nsyncs:\n") || strings.HasPrefix(first, "store:"):
				// a whole config
			case strings.HasPrefix(first, "- id:"):
				y = "syncs:\n" + y
			case strings.HasPrefix(first, "source:"):
				y = sync + "    " + strings.TrimSpace(y) + "\n" + rest
			case strings.HasPrefix(first, "web:"):
				y += "\n" + sync + "    source: {type: csv, path: c.csv, identity: id}\n" + rest
			default:
				t.Errorf("%s: a YAML example this test cannot complete:\n%s", doc, y)
				continue
			}
			n++
			if _, err := config.Parse(doc, []byte(y), anyEnv, kinds); err != nil {
				t.Errorf("%s: the example\n%s\ndoes not load:\n%v", doc, m[1], err)
			}
		}
	}
	if n < 9 {
		t.Errorf("checked only %d examples", n)
	}
}

// TestMissingConfigSaysWhatToDo: a command run where there is no config
// (the default --config oncesync.yaml) names the next step, not only the
// operating system's error.
func TestMissingConfigSaysWhatToDo(t *testing.T) {
	t.Parallel()
	_, err := config.Load(t.TempDir()+"/oncesync.yaml", envMap(nil), kinds)
	if err == nil || !strings.Contains(err.Error(), "no such file or directory; write one (docs/config.md) or name yours with --config FILE") {
		t.Errorf("Load of a missing file: %v", err)
	}
}
