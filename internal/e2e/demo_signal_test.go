package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/testenv"
)

// TestDemoStoppedBySignal: SIGTERM (or Ctrl-C) during `oncesync demo` stops
// its workers and removes its temporary directory, and says so. The
// signal's default killed the demo alone: a worker went on retrying the
// vanished fake Brevo for half a minute and the directory stayed (an
// independent check, 2026-12-06).
func TestDemoStoppedBySignal(t *testing.T) {
	t.Parallel()
	tmp := t.TempDir()
	p := testenv.Start(t, testenv.StartParams{Binary: binary, Args: []string{"demo"}, Dir: tmp,
		Env: []string{"TMPDIR=" + tmp}, Name: "oncesync demo"})
	waitFor(t, time.Minute, "the demo's first worker", func() bool { return strings.Contains(p.Out.String(), "worker 1") })
	if err := p.Cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := p.Wait(t, 30*time.Second); code == 0 || !strings.Contains(p.Out.String(), "demo stopped: its workers were stopped") {
		t.Fatalf("demo stopped by SIGTERM exited %d:\n%s", code, p.Out)
	}
	left, err := filepath.Glob(filepath.Join(tmp, "oncesync-demo-*"))
	if err != nil || len(left) != 0 {
		t.Fatalf("the demo left %v (%v)", left, err)
	}
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Logf("left in TMPDIR: %v", entries)
	}
}
