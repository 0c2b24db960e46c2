//go:build unix

package sqlite

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

const crashEnv = "ONCESYNC_SQLITE_CRASH_HELPER"

// crashPage is the keys of page p of the crash test: 40 keys, half of them
// shared with page p-1, so merges rewrite keys the log still holds.
func crashPage(p int) []string {
	a := storetest.HashedKeys(1_000_000+p, 20)
	b := storetest.HashedKeys(1_000_000+p-1, 20)
	if p == 0 {
		b = storetest.HashedKeys(999_999, 20)
	}
	return append(a, b...)
}

// crashDeliveries is the delivery keys of page p: claimed with results
// beside the page's keys and released by the finish that completes them,
// as the runner does with a page's slots and deliveries.
func crashDeliveries(p int) []string { return storetest.HashedKeys(3_000_000+p, 20) }

// TestLedgerCrashHelper is not a test: TestLedgerSurvivesKill9 runs it as a
// child process that claims and finishes pages from HELPER_FROM on, with a
// merge every 60 entries (in the background, as in production), printing
// "done N" once page N's finish returned.
func TestLedgerCrashHelper(t *testing.T) {
	if os.Getenv(crashEnv) == "" {
		t.Skip("helper process only")
	}
	ctx := context.Background()
	s, err := Open(ctx, OpenParams{Path: os.Getenv("HELPER_DB")})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	s.mergeEntries = 60
	from, _ := strconv.Atoi(os.Getenv("HELPER_FROM"))
	l, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s", Token: fmt.Sprint("t", os.Getpid()), TTL: time.Millisecond})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	for p := from; ; p++ {
		ks, ds := crashPage(p), crashDeliveries(p)
		claimed := append(append([]string(nil), ks...), ds...)
		results := make([]string, len(claimed))
		for i := range results {
			results[i] = fmt.Sprint("slot-", p, "-", i)
		}
		if err := s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s", Fence: l.Fence, RunID: 1, Keys: claimed, Results: results}); err != nil {
			fmt.Println("error:", err)
			return
		}
		fin := make([]store.LedgerFinish, 0, len(claimed))
		for _, k := range ks {
			fin = append(fin, store.LedgerFinish{Key: k, State: store.LedgerComplete, Result: fmt.Sprint("p", p)})
		}
		for _, k := range ds {
			fin = append(fin, store.LedgerFinish{Key: k, State: store.LedgerReleased})
		}
		if err := s.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s", Fence: l.Fence, RunID: 1, Entries: fin}); err != nil {
			fmt.Println("error:", err)
			return
		}
		fmt.Println("done", p)
	}
}

// TestLedgerSurvivesKill9: a process writing the ledger (log appends,
// background merge rounds, inline merges under backpressure) is SIGKILLed at
// varying moments, five times; after each kill the file holds, for every
// page whose finish had returned, each key complete with the newest page's
// result and each of its delivery keys released (absent), whatever the log
// and the tables each hold, and the persisted key filters hold every key of
// the tables.
func TestLedgerSurvivesKill9(t *testing.T) {
	t.Parallel()
	if os.Getenv(crashEnv) != "" {
		t.Skip("inside a helper process")
	}
	path := filepath.Join(t.TempDir(), "crash.db")
	next := 0 // first page of the next child
	for round := range 5 {
		cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestLedgerCrashHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"=1", "HELPER_DB="+path, fmt.Sprint("HELPER_FROM=", next))
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		last := -1
		sc := bufio.NewScanner(out)
		killAt := next + 15 + 7*round // pages; merges every 1.5 pages
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "error") {
				t.Fatalf("round %d: child: %s", round, line)
			}
			if n, ok := strings.CutPrefix(line, "done "); ok {
				last, _ = strconv.Atoi(n)
				if last >= killAt {
					_ = cmd.Process.Signal(syscall.SIGKILL)
					break
				}
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		if last < next {
			t.Fatalf("round %d: the child finished no page", round)
		}

		// Every finished page reads back complete with its newest result.
		s, err := Open(t.Context(), OpenParams{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		for p := 0; p <= last; p++ {
			got, err := s.LedgerGet(t.Context(), "s", crashPage(p)[:20])
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range crashPage(p)[:20] {
				e := got[k]
				// Page p+1 rewrote page p's own keys: for p < last that finish
				// had returned; for the last page it may have (the kill lands
				// after "done last" was read).
				want := fmt.Sprint("p", p+1)
				ok := e.Result == want
				if p == last {
					ok = ok || e.Result == fmt.Sprint("p", p)
				}
				if e.State != store.LedgerComplete || !ok {
					t.Fatalf("round %d (killed after page %d): page %d key: %+v, want complete %s", round, last, p, e, want)
				}
			}
			got, err = s.LedgerGet(t.Context(), "s", crashDeliveries(p))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range got {
				t.Fatalf("round %d (killed after page %d): page %d delivery key not released: %+v", round, last, p, e)
			}
		}
		// The key filters hold every key the tables hold, whichever of a
		// merge's transactions the kill interrupted.
		checkFilterRows(t, s)
		var logRows, tableRows int
		_ = s.r.QueryRow(`SELECT count(*) FROM ledger_log`).Scan(&logRows)
		_ = s.r.QueryRow(`SELECT (SELECT count(*) FROM ledger) + (SELECT count(*) FROM ledger_done)`).Scan(&tableRows)
		t.Logf("round %d: killed after page %d; ledger_log %d rows, ledger %d rows", round, last, logRows, tableRows)
		_ = s.Close()
		next = last + 1
	}
}
