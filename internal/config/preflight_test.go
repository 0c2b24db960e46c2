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

// TestValidateChecksStoreTLSFiles: a postgres store URL's sslrootcert (or
// sslcert, sslkey) that this machine lacks was "valid", and every command
// then failed to open the store; Validate names it, without the URL's
// password. sslrootcert=system names no file.
func TestValidateChecksStoreTLSFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca.pem")
	cfgPath := filepath.Join(dir, "oncesync.yaml")
	write := func(store string) {
		t.Helper()
		yaml := "store: \"" + store + "\"\nsyncs:\n  - id: a\n    source: {type: csv, path: c.csv}\n    destination: {type: webhook, url: \"http://127.0.0.1:1/hook\"}\n"
		if err := os.WriteFile(cfgPath, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "c.csv"), []byte("id,email\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	noEnv := func(string) (string, bool) { return "", false }
	write("postgres://u:pw-secret@db/app?sslmode=verify-full&sslrootcert=" + ca)
	_, err := config.Validate(cfgPath, noEnv, kinds)
	var probs *config.Problems
	if !errors.As(err, &probs) || len(probs.List) != 1 {
		t.Fatalf("validate: %v", err)
	}
	if p := probs.List[0]; p.Line != 1 || p.Field != "store" || !strings.Contains(p.Msg, "sslrootcert "+ca+" does not exist") ||
		strings.Contains(p.Msg, "pw-secret") {
		t.Fatalf("problem %+v", p)
	}
	if err := os.WriteFile(ca, []byte("-----BEGIN CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.Validate(cfgPath, noEnv, kinds); err != nil {
		t.Fatalf("validate with the file there: %v", err)
	}
	write("postgres://u:pw-secret@db/app?sslmode=verify-full&sslrootcert=system")
	if _, err := config.Validate(cfgPath, noEnv, kinds); err != nil {
		t.Fatalf("validate with sslrootcert=system: %v", err)
	}
}
