package cli

import (
	"bytes"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersion: `oncesync --version` exits 0 with one line naming the
// version and, when known, the commit (stamped by the toolchain, else the
// one `make build` links in).
func TestVersion(t *testing.T) {
	t.Parallel()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"--version"}, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
	if code != ExitOK || !strings.HasPrefix(out.String(), "oncesync ") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out.String(), errOut.String())
	}

	stamped := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v1.2.3"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-12-01T10:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	for _, tc := range []struct {
		info   *debug.BuildInfo
		linked string
		want   string
	}{
		{stamped, "", "v1.2.3 (commit abc123 of 2026-12-01T10:00:00Z, with uncommitted changes, go1.26.8)"},
		{&debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}}, "def456", "(devel) (commit def456, go1.26.8)"},
		{&debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "", "(devel) (commit unknown: built without version control information)"},
	} {
		if got := versionLine(tc.info, true, tc.linked); got != tc.want {
			t.Errorf("versionLine = %q, want %q", got, tc.want)
		}
	}
}
