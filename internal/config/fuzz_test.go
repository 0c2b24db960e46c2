package config_test

import (
	"bytes"
	"errors"
	"github.com/oncesync/oncesync/internal/config"
	"os"
	"strings"
	"testing"
)

// FuzzLoad feeds arbitrary bytes to the loader (Load minus the file read):
// it must never panic, must return either a config or *Problems, must be
// deterministic, and must never print the value of a variable it
// interpolated. Seeds: testdata/fuzz/FuzzLoad and the testdata configs.
//
// Run it with a cap on minimization, as scripts/fuzz-ci.sh does:
//
//	go test -run '^$' -fuzz '^FuzzLoad$' -fuzztime 60s -fuzzminimizetime 1000x ./internal/config
//
// With Go's default (60s per input) this target stalls: mutants of the
// kilobyte seeds soon find new coverage, Go then tries to shrink each while
// keeping every new coverage bit, and here some of those bits follow the exact
// input length (protect's regexp scans the whole file, and hit counts are
// rounded to powers of two) or whether a GC ran during the call
// (sync.poolCleanup is instrumented too). Almost no single byte can be
// removed, so the minimizer goes through its O(n^2) candidates until its 60 s
// are gone, uncounted: a 60 s run with a fresh fuzz cache reported 22 execs
// (430,965-590,832 with the cap). Parse is not what is slow.
func FuzzLoad(f *testing.F) {
	for _, name := range []string{"testdata/spec.yaml", "testdata/full.yaml"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	const secret = "FUZZ-SECRET-VALUE-7f3a"
	env := map[string]string{
		"S": secret, "BREVO_API_KEY": secret, "WEBHOOK_SECRET": secret, "ONCESYNC_API_TOKEN": secret,
		"PAGE_SIZE": "500", "EMPTY": "",
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := config.Parse("fuzz.yaml", data, envMap(env), kinds)
		if err == nil {
			if cfg == nil {
				t.Fatal("nil config without error")
			}
			for _, s := range cfg.Syncs {
				def, err := s.DefinitionJSON()
				if err != nil {
					t.Fatalf("DefinitionJSON: %v", err)
				}
				for _, v := range cfg.SecretValues() {
					if strings.Contains(def, v) && len(v) > 3 && !strings.Contains(s.ID+s.Workspace+s.Schedule, v) {
						t.Fatalf("definition holds secret %q: %s", v, def)
					}
				}
			}
			return
		}
		var ps *config.Problems
		if !errors.As(err, &ps) || len(ps.List) == 0 {
			t.Fatalf("want *Problems, got %T %v", err, err)
		}
		for _, p := range ps.List {
			if p.File != "fuzz.yaml" || p.Msg == "" || p.Line < 0 {
				t.Fatalf("malformed problem %+v", p)
			}
		}
		if !bytes.Contains(data, []byte(secret)) && strings.Contains(err.Error(), secret) {
			t.Fatalf("error leaks an interpolated value:\n%s", err)
		}
		_, err2 := config.Parse("fuzz.yaml", data, envMap(env), kinds)
		if err2 == nil || err2.Error() != err.Error() {
			t.Fatalf("not deterministic:\n%v\n---\n%v", err, err2)
		}
	})
}
