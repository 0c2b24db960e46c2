package app_test

import (
	"context"
	"strings"
	"syscall"
	"testing"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
)

// TestOpenStoreAtTheOpenFilesLimit: `oncesync run` under `ulimit -n 8` with
// a PostgreSQL store failed with "could not connect to PostgreSQL at
// HOST:PORT: check that it runs and accepts connections from this machine",
// a server that ran fine; the socket was the process's limit to refuse.
// The detail now says so, as the SQLite store's does. Not parallel: it
// lowers this test process's open-files limit for the length of one open.
func TestOpenStoreAtTheOpenFilesLimit(t *testing.T) {
	base := reachableDatabaseURL(t)
	// Nothing is opened there: the limit refuses the first connection.
	// Were it not, the open would migrate the shared database's schema.
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	low := old
	// No new descriptor at all (those open stay usable): the store's
	// first socket is refused with EMFILE.
	low.Cur = 0
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	st, err := app.OpenStore(context.Background(), &config.Config{Store: base.String()}, nil)
	if rerr := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old); rerr != nil {
		t.Fatal(rerr)
	}
	if err == nil {
		st.Close()
		t.Fatal("OpenStore succeeded at the open-files limit")
	}
	d := failure.Detail(err)
	if failure.CodeOf(err) != failure.StoreUnavailable || !strings.Contains(d, "open-files limit") ||
		!strings.Contains(d, "docs/recovery.md#too_many_open_files") || strings.Contains(d, "check that it runs") {
		t.Errorf("OpenStore = %v; want store_unavailable whose detail names the open-files limit", err)
	}
}
