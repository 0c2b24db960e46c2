// Package deploy holds the systemd units shipped with oncesync; this test
// keeps them valid and faithful to docs/guide.md#running-on-a-schedule-serve-and-worker's shutdown timings.
package deploy

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

var units = map[string]string{
	"oncesync.service":        "serve",
	"oncesync-worker.service": "worker",
}

// directives returns the unit's Key=Value lines (last one wins).
func directives(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "[") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not a directive: %q", path, line)
		}
		out[k] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestUnitDirectives(t *testing.T) {
	t.Parallel()
	for name, cmd := range units {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			d := directives(t, name)
			for k, want := range map[string]string{
				"ExecStart":       "/usr/local/bin/oncesync " + cmd + " --config /etc/oncesync/oncesync.yaml",
				"KillSignal":      "SIGTERM",
				"TimeoutStopSec":  "45", // > the 25 s exit deadline (docs/guide.md#running-on-a-schedule-serve-and-worker)
				"Restart":         "on-failure",
				"NoNewPrivileges": "yes",
				"ProtectSystem":   "strict",
				"StateDirectory":  "oncesync",
			} {
				if got := d[k]; got != want {
					t.Errorf("%s=%q, want %q", k, got, want)
				}
			}
			if d["DynamicUser"] != "yes" && d["User"] != "oncesync" {
				t.Errorf("want DynamicUser=yes or User=oncesync, got DynamicUser=%q User=%q", d["DynamicUser"], d["User"])
			}
		})
	}
}

// TestUnitsVerify runs systemd-analyze verify, with ExecStart pointed at an
// executable that exists here (verify checks it).
func TestUnitsVerify(t *testing.T) {
	t.Parallel()
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed")
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	var paths []string
	for name := range units {
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(strings.ReplaceAll(string(b), "/usr/local/bin/oncesync", self)), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	out, err := exec.Command(sa, append([]string{"verify"}, paths...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
	}
}
