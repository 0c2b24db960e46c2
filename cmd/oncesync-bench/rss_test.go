package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestRunMeasured(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bench binary")
	}
	t.Parallel()
	dir := t.TempDir()
	self := goBuild(t, dir, "oncesync-bench")
	t.Run("excludes the parent's memory", func(t *testing.T) { excludesParentsMemory(t, self) })
	t.Run("failures", func(t *testing.T) { measuredFailures(t, self) })
}

// A child's ru_maxrss, read by this process, includes this process's own
// peak (Go execs children from a CLONE_VM clone); the rusage wrapper must
// report the child's memory only.
func excludesParentsMemory(t *testing.T, self string) {
	if runtime.GOOS != "linux" {
		t.Skip("ru_maxrss semantics checked on Linux")
	}
	truePath, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no `true` command")
	}
	dir := t.TempDir()

	// Raise this process's peak RSS well above what `true` and the wrapper use.
	const ballastMiB = 192
	ballast := make([]byte, ballastMiB<<20)
	for i := 0; i < len(ballast); i += 4096 {
		ballast[i] = 1
	}
	ctx := context.Background()
	direct, err := runChild(ctx, filepath.Join(dir, "direct.log"), []string{truePath})
	if err != nil {
		t.Fatal(err)
	}
	measured, err := runMeasured(ctx, self, filepath.Join(dir, "measured.log"), []string{truePath})
	if err != nil {
		t.Fatal(err)
	}
	runtime.KeepAlive(ballast)
	t.Logf("`true`: ru_maxrss read directly %d KiB, under the wrapper %d KiB", direct.MaxRSSKiB, measured.MaxRSSKiB)
	if measured.MaxRSSKiB <= 0 || measured.MaxRSSKiB >= 64<<10 {
		t.Fatalf("under the wrapper `true` peaked at %d KiB; want above 0 and well below this process's %d MiB ballast",
			measured.MaxRSSKiB, ballastMiB)
	}
	if measured.Wall <= 0 {
		t.Fatalf("wall = %v", measured.Wall)
	}
}

func measuredFailures(t *testing.T, self string) {
	falsePath, err := exec.LookPath("false")
	if err != nil {
		t.Skip("no `false` command")
	}
	dir := t.TempDir()
	ctx := context.Background()

	// A failing command fails the measurement and still leaves its rusage.
	_, err = runMeasured(ctx, self, filepath.Join(dir, "false.log"), []string{falsePath})
	if err == nil || !strings.Contains(err.Error(), "false exited 1") {
		t.Fatalf("runMeasured(false) = %v, want an error saying false exited 1", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "false.rusage.json")); err != nil {
		t.Fatalf("no rusage file for the failed command: %v", err)
	}
	// No command is a usage error of the wrapper.
	if _, err := runChild(ctx, filepath.Join(dir, "usage.log"), []string{self, "rusage", "--out", filepath.Join(dir, "x.json")}); err == nil {
		t.Fatal("rusage without a command succeeded")
	}
}
