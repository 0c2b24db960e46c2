package sqlite

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
)

// TestNewStoreIsPrivate: a store oncesync creates (and the -wal and -shm
// files beside it) holds identities, destinations' messages and sessions,
// so other users of the machine cannot read it, whatever the umask; a file
// that exists keeps the mode its owner gave it.
func TestNewStoreIsPrivate(t *testing.T) {
	old := syscall.Umask(0o022) // the usual umask, which leaves new files world-readable
	t.Cleanup(func() { syscall.Umask(old) })
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "new.db")
	s, err := Open(ctx, OpenParams{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s", Token: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{path, path + "-wal", path + "-shm"} {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		if m := fi.Mode().Perm(); m != 0o600 {
			t.Errorf("%s: mode %o, want 600", filepath.Base(f), m)
		}
	}

	shared := filepath.Join(t.TempDir(), "shared.db")
	if err := os.WriteFile(shared, nil, 0o640); err != nil {
		t.Fatal(err)
	}
	s2, err := Open(ctx, OpenParams{Path: shared})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if fi, _ := os.Stat(shared); fi.Mode().Perm() != 0o640 {
		t.Errorf("an existing store's mode changed to %o", fi.Mode().Perm())
	}
}
