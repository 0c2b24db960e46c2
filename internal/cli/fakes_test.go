package cli

import (
	"bytes"
	"regexp"
	"testing"
)

// TestFakesListenApart: each vendor fake listens by default on an address of
// its own, the one README.md gives it, so a new user starts them side by side
// without --listen. fake-hubspot and fake-klaviyo both took 127.0.0.1:8028,
// and the second one started failed with "address already in use".
func TestFakesListenApart(t *testing.T) {
	t.Parallel()
	want := map[string]string{ // README.md's addresses
		"fake-brevo":   "127.0.0.1:8026",
		"fake-shopify": "127.0.0.1:8027",
		"fake-klaviyo": "127.0.0.1:8028",
		"fake-hubspot": "127.0.0.1:8029",
	}
	re := regexp.MustCompile(`--listen string\s+address to listen on .*\(default "([^"]+)"\)`)
	for cmd, addr := range want {
		var out bytes.Buffer
		if code := Main(t.Context(), []string{cmd, "--help"}, Env{Stdout: &out, Stderr: &out, LookupEnv: func(string) (string, bool) { return "", false }}); code != ExitOK {
			t.Fatalf("%s --help: exit %d", cmd, code)
		}
		m := re.FindStringSubmatch(out.String())
		if m == nil || m[1] != addr {
			t.Errorf("oncesync %s listens on %v by default, want %s", cmd, m, addr)
		}
	}
}
