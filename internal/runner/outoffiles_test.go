package runner

import (
	"context"
	"os"
	"strconv"
	"syscall"
	"testing"

	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
)

// TestOutOfFilesIsTheOperators: a run whose process has every file it may
// open in use (ulimit -n reached) fails too_many_open_files, retried and
// owned by the operator, so the breaker never pauses a sync for it; until
// 2026-12-05 the CSV it could not open made it source_unavailable, owned by
// the sync's owner, and five scheduled runs paused every sync of a serve for a
// person to resume one by one. Once files can be opened again, the next run
// delivers every record once.
//
// Not parallel: it lowers the whole test process's open-files limit, and
// parallel tests run only after the sequential ones.
func TestOutOfFilesIsTheOperators(t *testing.T) {
	tb := setup(t, 1000, destination.CapVerify)
	p := tb.params(t, "id")
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
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
	// The limit bounds descriptor numbers: at the lowest free one, the next
	// open (the run's source file) meets it.
	free := 0
	for inUse[strconv.Itoa(free)] {
		free++
	}
	low := lim
	low.Cur = uint64(free)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	r, err := Run(context.Background(), p)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if got := failure.CodeOf(err); got != failure.TooManyOpenFiles {
		t.Fatalf("run at the open-files limit: code %s (%v), want %s", got, err, failure.TooManyOpenFiles)
	}
	if r.State != store.RunFailed || r.FailureCode != string(failure.TooManyOpenFiles) || r.Written != 0 {
		t.Fatalf("run at the open-files limit: %+v", r)
	}
	if e := failure.Lookup(failure.CodeOf(err)); e.Owner != failure.OwnerOperator || !e.Retryable {
		t.Fatalf("%s: owner %s, retryable %v; want the operator's, retried", e.Code, e.Owner, e.Retryable)
	}
	r, err = Run(context.Background(), tb.params(t, "id"))
	if err != nil || r.State != store.RunSucceeded || r.Written != 1000 {
		t.Fatalf("run after the limit was raised: %+v, %v", r, err)
	}
	if _, recs, dups := tb.dest.stats(); recs != 1000 || dups != 0 {
		t.Fatalf("destination holds %d records with %d duplicate writes, want 1000 and 0", recs, dups)
	}
}
