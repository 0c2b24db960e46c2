package e2e

import (
	"bytes"
	"io"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/oncesync/oncesync/internal/testenv"
)

// ansi matches the terminal control sequences a progress bar draws with.
var ansi = regexp.MustCompile(`\x1b\[[0-9;?]*[A-Za-z]`)

// noTotal is a progress bar's count without a total: 0/0 standing alone.
var noTotal = regexp.MustCompile(`(^|[^\w/])0/0([^\w/]|$)`)

// TestRunProgressBarOnTerminal: `oncesync run` on a terminal draws a bar
// with the source's real total (a CSV file's size) that reaches 100 %, and
// the run's summary starts on a line of its own after it.
func TestRunProgressBarOnTerminal(t *testing.T) {
	t.Parallel()
	tb := setup(t, setupParams{records: 3000, pageSize: 250, mode: "single"})
	cmd := exec.Command(binary, "run", "--config", tb.config, "contacts")
	cmd.Dir = tb.dir
	cmd.Env = append(cmd.Environ(), "BREVO_API_KEY="+apiKey)
	tty, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Fatal(err)
	}
	defer tty.Close()
	var out bytes.Buffer
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		_, _ = io.Copy(&out, tty) // ends with EIO once the process exits
	}()
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, out.String())
		}
	case <-time.After(time.Duration(testenv.WaitScale()) * 2 * time.Minute):
		_ = cmd.Process.Kill()
		t.Fatalf("run did not end\n%s", out.String())
	}
	<-copied
	text := ansi.ReplaceAllString(out.String(), "")
	full := strings.Index(text, "100%")
	loc := regexp.MustCompile(`run \d+ succeeded`).FindStringIndex(text)
	summary := -1
	if loc != nil {
		summary = loc[0]
	}
	if full < 0 || summary < 0 || summary < full {
		t.Fatalf("want the bar at 100%% before the summary:\n%q", text)
	}
	// A bar without a total shows "0/0"; the store's temporary path may
	// hold those characters too (".../TestRun...930/001/oncesync.db").
	if noTotal.MatchString(text) {
		t.Fatalf("the bar has no total:\n%q", text)
	}
	// The summary begins a line: the bar's last frame is ended first.
	if before := strings.LastIndexAny(text[:summary], "\r\n"); before < 0 || strings.TrimSpace(text[before+1:summary]) != "" {
		t.Fatalf("the summary shares the bar's line:\n%q", text)
	}
	if st := tb.stats(); st.Contacts != 3000 || st.DuplicateWrites != 0 {
		t.Fatalf("fake: %+v", st)
	}
}
