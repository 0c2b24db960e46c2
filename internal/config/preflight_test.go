package config_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/config"
)

// TestValidateChecksFiles: Validate (oncesync validate) names a file
// source's missing file with its line, relative to the config file; Load
// (run, serve) leaves it to the run.
func TestValidateChecksFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfgPath := filepath.Join(dir, "oncesync.yaml")
	yaml := `store: sqlite://s.db
syncs:
  - id: a
    workspace: acme
    source: {type: csv, path: contacts.csv}
    destination: {type: webhook, url: "http://127.0.0.1:1/hook"}
`
	if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) (string, bool) { return "", false }
	if _, err := config.Load(cfgPath, noEnv, kinds); err != nil {
		t.Fatalf("load: %v", err)
	}
	_, err := config.Validate(cfgPath, noEnv, kinds)
	var probs *config.Problems
	if !errors.As(err, &probs) || len(probs.List) != 1 {
		t.Fatalf("validate: %v", err)
	}
	p := probs.List[0]
	if p.Line != 5 || p.Field != "syncs[0].source.path" || !strings.Contains(p.Msg, filepath.Join(dir, "contacts.csv")+" does not exist") {
		t.Fatalf("problem %+v", p)
	}
	if err := os.WriteFile(filepath.Join(dir, "contacts.csv"), []byte("id,email\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Validate(cfgPath, noEnv, kinds); err != nil {
		t.Fatalf("validate with the file there: %v", err)
	}
}
