package sqlite

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// TestDiskFailedSaysSo: the store's file system goes read-only after an
// error (ext4 errors=remount-ro, on a loop device) under an open store. The
// next write fails store_unavailable, and since 2026-12-05 its detail says the
// file could not be written and where to look; before, it was only the step
// ("could not claim the page's records"). Needs root, mkfs.ext4 and a free
// loop device; skipped otherwise.
func TestDiskFailedSaysSo(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to mount a file system")
	}
	for _, tool := range []string{"mkfs.ext4", "losetup", "mount", "umount"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip(tool, "not found")
		}
	}
	run := func(name string, args ...string) string {
		t.Helper()
		out, err := exec.Command(name, args...).CombinedOutput()
		if err != nil {
			t.Skipf("%s %v: %v: %s", name, args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "fs.img"), filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 16<<20); err != nil {
		t.Fatal(err)
	}
	run("mkfs.ext4", "-q", img)
	loop := run("losetup", "-f", "--show", img)
	t.Cleanup(func() { _ = exec.Command("losetup", "-d", loop).Run() })
	run("mount", "-o", "errors=remount-ro", loop, mnt)
	t.Cleanup(func() { _ = exec.Command("umount", "-l", mnt).Run() })
	trigger := filepath.Join("/sys/fs/ext4", filepath.Base(loop), "trigger_fs_error")
	if _, err := os.Stat(trigger); err != nil {
		t.Skip("no ext4 trigger_fs_error:", err)
	}

	ctx := context.Background()
	st, err := Open(ctx, OpenParams{Path: filepath.Join(mnt, "o.db")})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.PutSync(ctx, store.PutSyncParams{ID: "s1", Workspace: "w", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(trigger, []byte("oncesync test"), 0o200); err != nil {
		t.Skip("trigger_fs_error:", err)
	}
	_, err = st.PutSync(ctx, store.PutSyncParams{ID: "s2", Workspace: "w", Definition: "{}"})
	if err == nil {
		t.Fatal("a write on a file system gone read-only succeeded")
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("%v: not store unavailable", err)
	}
	fe := failure.Wrap(failure.StoreUnavailable, err, "publish the sync")
	if !strings.Contains(fe.Detail, "could not be written") || !strings.Contains(fe.Detail, "read-only") {
		t.Fatalf("detail %q; want it to say the file could not be written", fe.Detail)
	}
}
