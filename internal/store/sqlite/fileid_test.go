package sqlite

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// TestFileGoneUnderAProcess: a process (serve) holds a lease when its store
// file is deleted, or another file moved over it, and a process started
// later (cron's run) opens the path and is granted the lease of the same
// sync in the file now there. The first process must not go on: its renewal,
// its claims and its readiness read fail as store unavailable, saying what
// happened, so that only one of the two stores grants and writes.
func TestFileGoneUnderAProcess(t *testing.T) {
	for _, how := range []string{"deleted", "replaced"} {
		t.Run(how, func(t *testing.T) {
			ctx := t.Context()
			a, path := openTemp(t, clock.Real{})
			held, err := a.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s", Token: "a", TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			switch how {
			case "deleted":
				for _, f := range []string{path, path + "-wal", path + "-shm"} {
					if err := os.Remove(f); err != nil && !os.IsNotExist(err) {
						t.Fatal(err)
					}
				}
			case "replaced":
				other := filepath.Join(t.TempDir(), "backup.db")
				o, err := Open(ctx, OpenParams{Path: other})
				if err != nil {
					t.Fatal(err)
				}
				if err := o.Close(); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(other, path); err != nil {
					t.Fatal(err)
				}
				_ = os.Remove(path + "-wal")
				_ = os.Remove(path + "-shm")
			}
			b, err := Open(ctx, OpenParams{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = b.Close() })
			if _, err := b.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s", Token: "b", TTL: time.Minute}); err != nil {
				t.Fatalf("the process that opened the file now at the path: %v", err)
			}

			_, err = a.LeaseRenew(ctx, "s", "a", time.Minute)
			if err == nil {
				t.Fatalf("the process whose file is %s renewed its lease: two runs hold the sync", how)
			}
			wantGone(t, err, how)
			err = a.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s", Fence: held.Fence, RunID: 1, Keys: []string{strings.Repeat("a", 64)}})
			wantGone(t, err, how)
			_, err = a.ListSyncs(ctx)
			wantGone(t, err, how)
			if _, err := b.ListSyncs(ctx); err != nil {
				t.Fatalf("the store at the path: %v", err)
			}
		})
	}
}

func wantGone(t *testing.T, err error, how string) {
	t.Helper()
	var gone *fileGone
	if !errors.Is(err, store.ErrUnavailable) || !errors.As(err, &gone) {
		t.Fatalf("got %v; want store unavailable, file %s", err, how)
	}
	detail := failure.Wrap(failure.StoreUnavailable, err, "could not renew the lease").Detail
	if !strings.Contains(detail, how) || !strings.Contains(detail, "stop every oncesync process") {
		t.Fatalf("detail %q does not say the file was %s and what to do", detail, how)
	}
}

// TestWALGoneUnderAProcess: the -wal file is deleted while a process has the
// store open. Its writes since the last checkpoint (here all of them) live
// only in the deleted file it still has open: it must refuse to write more,
// a process started later must not open the store and must say why, and a
// clean close of the first process keeps its writes (SQLite's last close
// copies the WAL into the database).
func TestWALGoneUnderAProcess(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "oncesync.db")
	a, err := Open(ctx, OpenParams{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s", Token: "a", TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path + "-wal"); err != nil {
		t.Fatal(err)
	}
	_, err = a.LeaseRenew(ctx, "s", "a", time.Hour)
	wantGone(t, err, "lost its -wal file")
	if _, err := a.ListSyncs(ctx); err == nil {
		t.Fatal("readiness read of a store without its -wal file succeeded")
	}

	_, err = Open(ctx, OpenParams{Path: path})
	if err == nil {
		t.Fatal("a second process opened the store whose -wal file is gone")
	}
	if d := failure.Wrap(failure.StoreUnavailable, err, "open the SQLite store").Detail; !strings.Contains(d, "-wal file was deleted") {
		t.Fatalf("detail %q does not say the -wal file was deleted", d)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := Open(ctx, OpenParams{Path: path})
	if err != nil {
		t.Fatalf("after the clean close: %v", err)
	}
	defer b.Close()
	if l, err := b.LeaseGet(ctx, "s"); err != nil || l.Token != "a" {
		t.Fatalf("lease after the clean close: %+v, %v; want the write kept", l, err)
	}
}
