package sqlite

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/oncesync/oncesync/internal/failure"
)

// TestOpenAtTheOpenFilesLimit: a process with too few file descriptors left
// for the database, its -wal and -shm files gets SQLite's bare "unable to open
// database file"; until 2026-12-05 the detail was only "open the SQLite store".
// It now says the open-files limit is in the way, with as few descriptors left
// as none and as two (SQLite opens the database, then fails on its -wal and
// closes it again).
//
// Not parallel: it lowers the whole test process's open-files limit.
func TestOpenAtTheOpenFilesLimit(t *testing.T) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	for _, spare := range []uint64{0, 2} {
		t.Run("spare="+strconv.FormatUint(spare, 10), func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "o.db")
			low := lim
			low.Cur = lowestFreeFD(t) + spare
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
				t.Fatal(err)
			}
			st, err := Open(t.Context(), OpenParams{Path: path})
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
				t.Fatal(err)
			}
			if err == nil {
				st.Close()
				t.Fatal("opened")
			}
			fe := failure.Wrap(failure.StoreUnavailable, err, "open the SQLite store")
			if !strings.Contains(fe.Detail, "open-files limit") {
				t.Fatalf("detail %q; want it to name the open-files limit", fe.Detail)
			}
		})
	}
	st, err := Open(t.Context(), OpenParams{Path: filepath.Join(t.TempDir(), "o.db")})
	if err != nil {
		t.Fatalf("open with the limit restored: %v", err)
	}
	st.Close()
}

// lowestFreeFD is the lowest descriptor number not in use: the limit bounds
// numbers, so at that limit the next open fails with EMFILE.
func lowestFreeFD(t *testing.T) uint64 {
	t.Helper()
	dir, err := os.Open("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd:", err)
	}
	names, err := dir.Readdirnames(-1)
	own := strconv.Itoa(int(dir.Fd()))
	_ = dir.Close()
	if err != nil {
		t.Fatal(err)
	}
	inUse := map[string]bool{}
	for _, n := range names {
		inUse[n] = n != own
	}
	var free uint64
	for inUse[strconv.FormatUint(free, 10)] {
		free++
	}
	return free
}
