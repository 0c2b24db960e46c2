package cli

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingArgumentNamed: a command run without its argument (`oncesync
// run --config F`, a new user's first mistake) names what is missing and
// shows the command's usage, exit 2, instead of cobra's "accepts 1 arg(s),
// received 0" (an independent check, 2026-12-04).
func TestMissingArgumentNamed(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--config", "x.yaml"}, "oncesync run needs SYNC, the id of a sync in the config (usage: oncesync run --config FILE SYNC"},
		{[]string{"check", "--config", "x.yaml"}, "oncesync check needs SYNC"},
		{[]string{"records", "--config", "x.yaml"}, "oncesync records needs SYNC"},
		{[]string{"runs", "--config", "x.yaml"}, "oncesync runs needs SYNC"},
		{[]string{"pause", "--config", "x.yaml"}, "oncesync pause needs SYNC"},
		{[]string{"resume", "--config", "x.yaml"}, "oncesync resume needs SYNC"},
		{[]string{"signout", "--config", "x.yaml"}, "oncesync signout needs USER"},
		{[]string{"deadletter", "requeue", "--config", "x.yaml"}, "oncesync deadletter requeue needs ID"},
		{[]string{"run", "--config", "x.yaml", "a", "b"}, `oncesync run takes one SYNC, not 2 ("a" "b")`},
		{[]string{"status", "--config", "x.yaml", "a", "b"}, `oncesync status takes at most one SYNC, not 2`},
		{[]string{"validate", "--config", "x.yaml", "a"}, `oncesync validate takes no argument, not 1 ("a")`},
	} {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), tc.args, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		if code != ExitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errOut.String(), ExitUsage, tc.want)
		}
	}
}

// TestGroupCommands: a command group (checkpoint, deadletter, deadman) run
// with a subcommand it does not have is an error, exit 2, not its help with
// exit 0 (a script's typo must not pass for a check that ran); its help
// shows examples like every other command's.
func TestGroupCommands(t *testing.T) {
	t.Parallel()
	for _, group := range []string{"checkpoint", "deadletter", "deadman"} {
		var out, errOut bytes.Buffer
		env := Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }}
		code := Main(t.Context(), []string{group, "chek"}, env)
		if want := `unknown command "chek" for "oncesync ` + group + `"`; code != ExitUsage || !strings.Contains(errOut.String(), want) {
			t.Errorf("%s chek: exit %d, stderr %q; want exit %d and %q", group, code, errOut.String(), ExitUsage, want)
		}
		out.Reset()
		if code := Main(t.Context(), []string{group, "--help"}, env); code != ExitOK || !strings.Contains(out.String(), "Examples:\n  oncesync "+group+" ") {
			t.Errorf("%s --help: exit %d, no examples:\n%s", group, code, out.String())
		}
		out.Reset()
		if code := Main(t.Context(), []string{group}, env); code != ExitOK || !strings.Contains(out.String(), "Available Commands:") {
			t.Errorf("%s alone: exit %d, want its help:\n%s", group, code, out.String())
		}
	}
}

// TestLogLevelRefusesAnUnknownLevel: `--log-level verbose` is a bad flag
// (exit 2, named), not a run with warn-level logs that the person asking for
// more never sees (an independent check, 2026-12-04); the levels it names
// are accepted in any case.
func TestLogLevelRefusesAnUnknownLevel(t *testing.T) {
	t.Parallel()
	env := func(out, errOut *bytes.Buffer) Env {
		return Env{Stdout: out, Stderr: errOut, LookupEnv: func(string) (string, bool) { return "", false }}
	}
	for _, args := range [][]string{
		{"validate", "--config", "x.yaml", "--log-level", "verbose"},
		{"--log-level=trace", "run", "--config", "x.yaml", "s"},
		{"deadman", "check", "--config", "x.yaml", "--log-level", ""},
	} {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), args, env(&out, &errOut))
		if code != ExitUsage || !strings.Contains(errOut.String(), "--log-level") || !strings.Contains(errOut.String(), "want debug, info, warn or error") {
			t.Errorf("%v: exit %d, stderr %q; want exit %d naming --log-level", args, code, errOut.String(), ExitUsage)
		}
		if strings.Contains(errOut.String(), "x.yaml") {
			t.Errorf("%v: the config was read before the flags were checked: %q", args, errOut.String())
		}
	}
	for _, lvl := range []string{"debug", "INFO", "warn", "Error"} {
		var out, errOut bytes.Buffer
		// validate of a missing file: exit 2 from the config, never from the level.
		Main(t.Context(), []string{"validate", "--config", "missing.yaml", "--log-level", lvl}, env(&out, &errOut))
		if strings.Contains(errOut.String(), "--log-level") {
			t.Errorf("--log-level %s refused: %q", lvl, errOut.String())
		}
	}
}

// TestDeadLetterListRefusesAnUnknownSync: `deadletter list --sync` of an id
// neither the config nor the store knows is a typo (exit 2, naming the
// config's syncs), not "no dead letters" (an independent check,
// 2026-12-04); a sync of the config lists its entries, none here.
func TestDeadLetterListRefusesAnUnknownSync(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "oncesync.yaml")
	writeFile(t, cfg, `store: sqlite://./oncesync.db
syncs:
  - id: contacts
    source: {type: csv, path: contacts.csv, identity: id}
    destination: {type: webhook, url: "http://127.0.0.1:1/hook"}
    mapping: {fields: {email: email}}
`)
	writeFile(t, filepath.Join(dir, "contacts.csv"), "id,email\n1,a@example.com\n")
	run := func(args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), args, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		return out.String(), errOut.String(), code
	}
	out, errOut, code := run("deadletter", "list", "--config", cfg, "--sync", "contacs")
	if code != ExitUsage || !strings.Contains(errOut, `no sync with id "contacs" (syncs: contacts)`) || strings.Contains(out, "no dead letters") {
		t.Errorf("--sync contacs: exit %d, stdout %q, stderr %q; want exit %d naming the config's syncs", code, out, errOut, ExitUsage)
	}
	if out, errOut, code := run("deadletter", "list", "--config", cfg, "--sync", "contacts"); code != ExitOK || out != "no dead letters\n" {
		t.Errorf("--sync contacts: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestRunUsageErrorEndsWithFailedLine: `oncesync run` ends every way it can
// fail with the contract's failed: line, a mistake in its own command line
// too (invalid_invocation); other commands keep their usage error alone.
func TestRunUsageErrorEndsWithFailedLine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want bool
	}{
		{[]string{"run", "--config", "x.yaml"}, true},
		{[]string{"run", "--config", "x.yaml", "a", "b"}, true},
		{[]string{"run", "--config", "x.yaml", "a", "--dryrun"}, true},
		{[]string{"run", "--config", "x.yaml", "a", "--log-level", "loud"}, true},
		{[]string{"status", "--config", "x.yaml", "a", "b"}, false},
	} {
		var out, errOut bytes.Buffer
		code := Main(t.Context(), tc.args, Env{Stdout: &out, Stderr: &errOut, LookupEnv: func(string) (string, bool) { return "", false }})
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		got := strings.HasPrefix(lines[len(lines)-1], "failed: invalid_invocation: ")
		if code != ExitUsage || got != tc.want {
			t.Errorf("%q: exit %d, stdout %q; want exit 2 and a failed: invalid_invocation line %v", tc.args, code, out.String(), tc.want)
		}
	}
}
