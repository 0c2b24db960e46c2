package config_test

import (
	"encoding/json"
	"flag"
	"github.com/oncesync/oncesync/internal/config"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// TestGoldenSyncs pins, for every sync of testdata/full.yaml and
// testdata/spec.yaml, the canonical definition (the store compares it to
// tell a changed sync: a byte of difference reads as a new definition),
// and the secret values found. A refactor of how the
// configuration is decoded must leave these bytes as they are.
func TestGoldenSyncs(t *testing.T) {
	for _, name := range []string{"full", "spec"} {
		cfg, err := config.Load(filepath.Join("testdata", name+".yaml"), envMap(specEnv), kinds)
		if err != nil {
			t.Fatal(err)
		}
		var b strings.Builder
		for _, s := range cfg.Syncs {
			def, err := s.DefinitionJSON()
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(s.ID + " " + def + "\n")
		}
		sec, _ := json.Marshal(cfg.SecretValues())
		b.WriteString("secrets " + string(sec) + "\n")
		path := filepath.Join("testdata", "golden", name+".txt")
		if *update {
			if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test -run TestGoldenSyncs -update writes it)", err)
		}
		if got := b.String(); got != string(want) {
			t.Errorf("%s.yaml: got\n%s\nwant\n%s", name, got, want)
		}
	}
}
