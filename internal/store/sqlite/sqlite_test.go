package sqlite

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/store"
	"github.com/oncesync/oncesync/internal/store/storetest"
)

func openTemp(t testing.TB, clk clock.Clock) (*Store, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "oncesync.db")
	s, err := Open(context.Background(), OpenParams{Path: path, Clock: clk})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s, path
}

func TestStoreSuite(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, clk *clock.Fake) store.Store {
		s, _ := openTemp(t, clk)
		return s
	})
}

// TestStoreSuiteMergeEveryFinish runs the suite with the ledger log merged
// into the tables after every finish, so every lookup path (memory, tables,
// both) is exercised by the same assertions.
func TestStoreSuiteMergeEveryFinish(t *testing.T) {
	t.Parallel()
	storetest.Run(t, func(t *testing.T, clk *clock.Fake) store.Store {
		s, _ := openTemp(t, clk)
		s.mergeEntries, s.syncMerge = 1, true
		return s
	})
}

func TestParseURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{in: "sqlite://./oncesync.db", want: "./oncesync.db"},
		{in: "sqlite://oncesync.db", want: "oncesync.db"},
		{in: "sqlite:///var/lib/oncesync/oncesync.db", want: "/var/lib/oncesync/oncesync.db"},
		{in: "sqlite:data/o.db", want: "data/o.db"},
		{in: "sqlite://./my%20dir/o.db", want: "./my dir/o.db"},
		{in: "sqlite://", wantErr: true},
		{in: "sqlite://:memory:", wantErr: true},
		{in: "sqlite://./o.db?_txlock=deferred", wantErr: true},
		{in: "postgres://localhost/db", wantErr: true},
		{in: "./oncesync.db", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseURL(tt.in)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("ParseURL(%q) = %q, want an error", tt.in, got)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("ParseURL(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
			}
		})
	}
}

func TestOpenURLAndReopen(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	dir := t.TempDir()
	url := "sqlite://" + filepath.Join(dir, "o.db")
	clk := clock.NewFake(storetest.Start)

	s, err := Open(ctx, OpenParams{Path: url, Clock: clk})
	if err != nil {
		t.Fatalf("Open(%s): %v", url, err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.SchemaVersion(ctx)
	if newest := ms[len(ms)-1].Version; err != nil || v != newest {
		t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, newest)
	}
	if _, err := s.PutSync(ctx, store.PutSyncParams{ID: "s1", Definition: "{}"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "a", TTL: time.Minute}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	// Reopening applies nothing twice and keeps the data (and the fence).
	for range 2 {
		s, err = Open(ctx, OpenParams{Path: filepath.Join(dir, "o.db"), Clock: clk})
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		var applied int
		if err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM schema_migrations`).Scan(&applied); err != nil {
			t.Fatal(err)
		}
		if applied != len(ms) {
			t.Fatalf("schema_migrations has %d rows, want %d", applied, len(ms))
		}
		if _, err := s.GetSync(ctx, "s1"); err != nil {
			t.Fatalf("GetSync after reopen: %v", err)
		}
		var mode string
		if err := s.r.QueryRowContext(ctx, `PRAGMA journal_mode`).Scan(&mode); err != nil || mode != "wal" {
			t.Fatalf("journal_mode = %q, %v; want wal", mode, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	s, err = Open(ctx, OpenParams{Path: filepath.Join(dir, "o.db"), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	clk.Advance(2 * time.Minute)
	l, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s1", Token: "b", TTL: time.Minute})
	if err != nil || l.Fence != 2 {
		t.Fatalf("LeaseAcquire after reopen = %+v, %v; want fence 2", l, err)
	}
}

func TestOpenRefusesNewerSchema(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t, clock.Real{})
	if _, err := s.w.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	_, err := Open(t.Context(), OpenParams{Path: path})
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Open of a newer schema: %v, want a 'newer' error", err)
	}
}

// TestTwoStoresOneFile: two *Store on one file (two connection pools, as two
// processes would have) contend for one lease; exactly one wins each round.
func TestTwoStoresOneFile(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := clock.NewFake(storetest.Start)
	a, path := openTemp(t, clk)
	b, err := Open(ctx, OpenParams{Path: path, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	stores := []*Store{a, b}

	for round := range 5 {
		syncID := fmt.Sprintf("s%d", round)
		var (
			wg   sync.WaitGroup
			mu   sync.Mutex
			wins []string
		)
		start := make(chan struct{})
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				_, err := stores[i%2].LeaseAcquire(ctx, store.LeaseAcquireParams{
					SyncID: syncID, Token: fmt.Sprint("tok-", i), Holder: fmt.Sprint("g", i), TTL: time.Minute,
				})
				switch {
				case err == nil:
					mu.Lock()
					wins = append(wins, fmt.Sprint("tok-", i))
					mu.Unlock()
				case !errors.Is(err, store.ErrLeaseHeld):
					t.Errorf("LeaseAcquire: %v", err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if len(wins) != 1 {
			t.Fatalf("round %d: winners %v, want exactly one", round, wins)
		}
		// The other store sees the winner at once.
		l, err := stores[1].LeaseGet(ctx, syncID)
		if err != nil || l.Token != wins[0] || l.Fence != 1 {
			t.Fatalf("round %d: LeaseGet = %+v, %v; want %s fence 1", round, l, err, wins[0])
		}
	}

	// A fence granted through one store fences writes through the other.
	clk.Advance(2 * time.Minute)
	l, err := b.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s0", Token: "late", TTL: time.Minute})
	if err != nil || l.Fence != 2 {
		t.Fatalf("LeaseAcquire = %+v, %v", l, err)
	}
	err = a.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s0", Value: "x", Fence: 1, RunID: 1})
	if !errors.Is(err, store.ErrFenced) {
		t.Fatalf("SaveCursor with the old fence through the other store: %v, want ErrFenced", err)
	}
}

const (
	helperEnv   = "ONCESYNC_SQLITE_TEST_HELPER"
	helperSyncs = 20 // leases each helper process contends for
)

// TestHelperProcess is not a test: TestProcessesContendForLease re-executes the
// test binary to run it as a separate process.
func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper process only")
	}
	path, token := os.Getenv("HELPER_DB"), os.Getenv("HELPER_TOKEN")
	// Wait for the go signal so every process opens the fresh file at once.
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		fmt.Println("error: stdin:", err)
		return
	}
	ctx := context.Background()
	s, err := Open(ctx, OpenParams{Path: path})
	if err != nil {
		fmt.Println("error: open:", err)
		return
	}
	defer s.Close()
	for i := range helperSyncs {
		syncID := fmt.Sprint("shared-", i)
		l, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: syncID, Token: token, Holder: "pid-" + fmt.Sprint(os.Getpid()), TTL: time.Hour})
		switch {
		case err == nil:
			// The winner writes under its fence through the same file.
			if err := s.SaveCursor(ctx, store.SaveCursorParams{SyncID: syncID, Value: token, Fence: l.Fence, RunID: 1}); err != nil {
				fmt.Println("error: save cursor:", err)
				continue
			}
			fmt.Printf("%s won fence=%d\n", syncID, l.Fence)
		case errors.Is(err, store.ErrLeaseHeld):
			fmt.Printf("%s held\n", syncID)
		default:
			fmt.Printf("%s error: %v\n", syncID, err)
		}
	}
}

// TestProcessesContendForLease: several oncesync processes open one fresh file
// at the same moment (racing the migrations) and contend for the same leases:
// each lease has exactly one winner, with fence 1, whose fenced write lands,
// and the schema is applied once.
func TestProcessesContendForLease(t *testing.T) {
	t.Parallel()
	if os.Getenv(helperEnv) != "" {
		t.Skip("inside a helper process")
	}
	const procs = 4
	path := filepath.Join(t.TempDir(), "shared.db")

	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   strings.Builder
	}
	ps := make([]*proc, procs)
	for i := range ps {
		p := &proc{cmd: exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")}
		p.cmd.Env = append(os.Environ(), helperEnv+"=1", "HELPER_DB="+path, fmt.Sprint("HELPER_TOKEN=tok-", i))
		p.cmd.Stdout = &p.out
		p.cmd.Stderr = &p.out
		w, err := p.cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		p.stdin = w
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		ps[i] = p
	}
	for _, p := range ps { // go
		if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
			t.Fatal(err)
		}
		_ = p.stdin.Close()
	}
	winners := map[string]string{} // sync -> helper
	held := 0
	for i, p := range ps {
		err := p.cmd.Wait()
		out := p.out.String()
		if err != nil {
			t.Fatalf("helper %d: %v\n%s", i, err, out)
		}
		for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[1] == "won" && f[2] == "fence=1":
				if prev, dup := winners[f[0]]; dup {
					t.Fatalf("%s won by helpers %s and %d", f[0], prev, i)
				}
				winners[f[0]] = fmt.Sprint(i)
			case len(f) == 2 && f[1] == "held":
				held++
			case strings.HasPrefix(line, "PASS") || strings.HasPrefix(line, "ok"):
			default:
				t.Fatalf("helper %d: unexpected line %q\n%s", i, line, out)
			}
		}
	}
	if len(winners) != helperSyncs || held != helperSyncs*(procs-1) {
		t.Fatalf("%d syncs won (want %d), %d refusals (want %d)", len(winners), helperSyncs, held, helperSyncs*(procs-1))
	}

	s, err := Open(t.Context(), OpenParams{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var applied int
	if err := s.r.QueryRow(`SELECT count(*) FROM schema_migrations`).Scan(&applied); err != nil {
		t.Fatal(err)
	}
	ms, _ := migrations()
	if applied != len(ms) {
		t.Fatalf("schema_migrations rows = %d, want %d", applied, len(ms))
	}
	for syncID, helper := range winners {
		l, err := s.LeaseGet(t.Context(), syncID)
		if err != nil || l.Fence != 1 || l.Token != "tok-"+helper {
			t.Fatalf("%s: LeaseGet = %+v, %v; want tok-%s fence 1", syncID, l, err, helper)
		}
		c, err := s.GetCursor(t.Context(), syncID)
		if err != nil || c.Value != "tok-"+helper {
			t.Fatalf("%s: cursor %+v, %v; want the winner's write", syncID, c, err)
		}
	}
}

// TestLockedIsUnavailable: a write blocked beyond the busy timeout by another
// connection's write lock surfaces as store.ErrUnavailable.
func TestLockedIsUnavailable(t *testing.T) {
	t.Parallel()
	s, path := openTemp(t, clock.Real{})
	// A second store holding the write lock.
	other, err := Open(t.Context(), OpenParams{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.w.BeginTx(t.Context(), nil) // BEGIN IMMEDIATE: holds the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()

	// Shorten s's busy timeout (its one write connection) to keep the test fast.
	if _, err := s.w.Exec("PRAGMA busy_timeout = 20"); err != nil {
		t.Fatal(err)
	}
	err = s.RaiseFence(context.Background(), "s1", 1)
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write under another's lock: %v, want ErrUnavailable", err)
	}
	// SQLite says only "database is locked"; the detail says what holds it.
	if d := failure.Wrap(failure.StoreUnavailable, err, "save").Detail; !strings.Contains(d, "another process held the store's file locked") || !strings.Contains(d, "fuser") {
		t.Errorf("write under another's lock: detail %q does not say what holds the file", d)
	}
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec(fmt.Sprintf("PRAGMA busy_timeout = %d", BusyTimeout.Milliseconds())); err != nil {
		t.Fatal(err)
	}
	if err := s.RaiseFence(context.Background(), "s1", 1); err != nil {
		t.Fatalf("write after the lock was released: %v", err)
	}
	_ = s.Close()
	if err := s.RaiseFence(context.Background(), "s1", 2); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("write on a closed store: %v, want ErrUnavailable", err)
	}
}

func TestInvalidArguments(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t, clock.NewFake(storetest.Start))
	ctx := t.Context()
	tests := []struct {
		name string
		err  error
	}{
		{"fence 0", s.SaveCursor(ctx, store.SaveCursorParams{SyncID: "s", Fence: 0})},
		{"empty sync", s.RaiseFence(ctx, "", 1)},
		{"lease ttl", func() error {
			_, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s", Token: "t"})
			return err
		}()},
		{"empty key", s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s", Fence: 1, Keys: []string{""}})},
		{"finish pending", s.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s", Fence: 1, Entries: []store.LedgerFinish{{Key: "k", State: store.LedgerPending}}})},
		{"finish unknown state", s.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s", Fence: 1, Entries: []store.LedgerFinish{{Key: "k", State: "gone"}}})},
		{"claim results", s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s", Fence: 1, Keys: []string{"a", "b"}, Results: []string{"r"}})},
		{"pause reason", func() error {
			_, err := s.SetSyncState(ctx, store.SetSyncStateParams{ID: "s", State: store.SyncPaused, Reason: "cosmic rays"})
			return err
		}()},
	}
	for _, tt := range tests {
		var ie *invalidError
		if !errors.As(tt.err, &ie) {
			t.Errorf("%s: error %v, want an invalid-argument error", tt.name, tt.err)
		}
		if errors.Is(tt.err, store.ErrUnavailable) {
			t.Errorf("%s: an invalid argument must not look retryable", tt.name)
		}
	}
	// Nothing was registered by the refused calls.
	var n int
	if err := s.r.QueryRow(`SELECT count(*) FROM fences`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("fences rows = %d, %v; want 0", n, err)
	}
}

// TestLedgerPruneWindows: a prune walks the ledger in windows (here of 7 rows)
// across syncs and still deletes exactly the old rejected/in_doubt entries.
func TestLedgerPruneWindows(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	clk := clock.NewFake(storetest.Start)
	s, _ := openTemp(t, clk)
	s.pruneWindow = 7

	wantLeft := map[string]int{}
	for _, syncID := range []string{"a", "b", "c"} {
		l, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: syncID, Token: "t", TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ks := make([]string, 40)
		var fin []store.LedgerFinish
		for i := range ks {
			ks[i] = fmt.Sprintf("%s-%02d", syncID, i)
			switch i % 4 {
			case 0:
				fin = append(fin, store.LedgerFinish{Key: ks[i], State: store.LedgerComplete})
			case 1:
				fin = append(fin, store.LedgerFinish{Key: ks[i], State: store.LedgerRejected})
			case 2:
				fin = append(fin, store.LedgerFinish{Key: ks[i], State: store.LedgerInDoubt})
			}
		}
		if err := s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: syncID, Fence: l.Fence, Keys: ks}); err != nil {
			t.Fatal(err)
		}
		if err := s.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: syncID, Fence: l.Fence, Entries: fin}); err != nil {
			t.Fatal(err)
		}
		wantLeft[syncID] = 20 // complete and pending
	}
	clk.Advance(time.Hour)
	// Seen again recently: kept although rejected and in doubt.
	if err := s.LedgerTouch(ctx, "b", []string{"b-01", "b-02"}); err != nil {
		t.Fatal(err)
	}
	wantLeft["b"] += 2
	n, err := s.LedgerPrune(ctx, clk.Now().Add(-time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if n != 3*20-2 {
		t.Fatalf("pruned %d, want %d", n, 3*20-2)
	}
	for syncID, want := range wantLeft {
		var got int
		if err := s.r.QueryRow(`SELECT (SELECT count(*) FROM ledger WHERE sid = `+sqlSID+`)
			+ (SELECT count(*) FROM ledger_done WHERE sid = `+sqlSID+`)
			+ (SELECT count(*) FROM ledger_claims WHERE sid = `+sqlSID+`)`, syncID).Scan(&got); err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("sync %s: %d entries left, want %d", syncID, got, want)
		}
	}
}

// TestQueryPlans guards the hot path against a full scan sneaking in.
func TestQueryPlans(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t, clock.Real{})
	getArgs := make([]any, 1+tableGetKeys)
	getArgs[0], getArgs[1] = 1, []byte("k")
	pruneArgs := []any{int64(1), []byte{1}, int64(2), []byte{2}, int64(3)}
	pruneCond := "AND state IN ('rejected', 'in_doubt')"
	tests := []struct {
		name string
		q    string
		args []any
		want string
	}{
		{"ledger get", sqlTableGet, getArgs, "SEARCH ledger USING PRIMARY KEY (sid=? AND key=?)"},
		{"ledger get claims", sqlTableGet, getArgs, "SEARCH ledger_claims USING PRIMARY KEY (sid=? AND key=?)"},
		{"merge drops claims", sqlDropClaims, []any{1, `["k"]`}, "SEARCH ledger_claims USING PRIMARY KEY (sid=? AND key=?)"},
		{"merge drops final", sqlDropFinal, []any{1, `["k"]`}, "SEARCH ledger USING PRIMARY KEY (sid=? AND key=?)"},
		{"log tail", `SELECT seq, sid, kind, fence, run_id, at, n, body FROM ledger_log WHERE seq > ? ORDER BY seq`, []any{1}, "SEARCH ledger_log USING INTEGER PRIMARY KEY (rowid>?)"},
		{"ledger touch", sqlLedgerTouch, []any{"s", 1, `["k"]`}, "SEARCH ledger USING PRIMARY KEY (sid=? AND key=?)"},
		{"ledger get live", sqlTableGetLive, getArgs, "SEARCH ledger_claims USING PRIMARY KEY (sid=? AND key=?)"},
		{"ledger list rejected", sqlListListed, []any{"s", "rejected", 10}, "INDEX ledger_listed (sid=? AND state=?)"},
		{"ledger list accepted", sqlListListed, []any{"s", "accepted", 10}, "INDEX ledger_listed (sid=? AND state=?)"},
		{"runs of a sync", `SELECT id FROM runs WHERE sync_id = ? ORDER BY id DESC LIMIT ?`, []any{"s", 10}, "USING COVERING INDEX runs_sync_id_id"},
		// A prune's window is a seek, not a scan from the first row at
		// every window (a prune would cost the square of its rows:
		// BenchmarkLedgerPrune).
		{"prune window end", fmt.Sprintf(sqlPruneWindowEnd, "ledger"), pruneArgs, "SEARCH ledger USING PRIMARY KEY ((sid,key)>(?,?))"},
		{"prune window", fmt.Sprintf(sqlPruneWindow, "ledger", pruneCond), pruneArgs, "SEARCH ledger USING PRIMARY KEY ((sid,key)>(?,?) AND (sid,key)<(?,?))"},
		{"prune last window", fmt.Sprintf(sqlPruneLast, "ledger", pruneCond), pruneArgs, "SEARCH ledger USING PRIMARY KEY ((sid,key)>(?,?))"},
	}
	for _, tt := range tests {
		rows, err := s.r.Query("EXPLAIN QUERY PLAN "+tt.q, tt.args...)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, unused int
			var detail string
			if err := rows.Scan(&id, &parent, &unused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if !strings.Contains(strings.Join(plan, "\n"), tt.want) {
			t.Errorf("%s: plan\n%s\nlacks %q", tt.name, strings.Join(plan, "\n"), tt.want)
		}
	}
}

// TestPragmas: both pools run with the settings several processes rely on.
func TestPragmas(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t, clock.Real{})
	want := map[string]string{
		"journal_mode":       "wal",
		"busy_timeout":       fmt.Sprint(BusyTimeout.Milliseconds()),
		"foreign_keys":       "1",
		"synchronous":        "2", // FULL: a committed claim survives a power cut
		"temp_store":         "2", // MEMORY
		"cache_size":         fmt.Sprint(-CacheKiB),
		"wal_autocheckpoint": fmt.Sprint(WALAutoCheckpoint),
	}
	for name, db := range map[string]interface {
		QueryRow(string, ...any) *sql.Row
	}{"write": s.w, "read": s.r} {
		for pragma, w := range want {
			var got string
			if pragma == "cache_size" && name == "read" {
				w = fmt.Sprint(-ReadCacheKiB)
			}
			if err := db.QueryRow("PRAGMA " + pragma).Scan(&got); err != nil || got != w {
				t.Errorf("%s pool: PRAGMA %s = %q, %v; want %q", name, pragma, got, err, w)
			}
		}
	}
	var ro string
	if err := s.r.QueryRow("PRAGMA query_only").Scan(&ro); err != nil || ro != "1" {
		t.Errorf("read pool query_only = %q, %v", ro, err)
	}
}

// TestMigrationGap: versions may have gaps, and a migration that lands with
// a number below an applied one (0002 after 0003) is still applied, once.
func TestMigrationGap(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	db, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "gap.db")+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	one := migration{Version: 1, Name: "0001_a", SQL: `CREATE TABLE a (x INTEGER) STRICT`}
	two := migration{Version: 2, Name: "0002_b", SQL: `CREATE TABLE b (x INTEGER) STRICT`}
	three := migration{Version: 3, Name: "0003_c", SQL: `CREATE TABLE c (x INTEGER) STRICT`}
	now := storetest.Start
	if err := migrateList(ctx, db, now, []migration{one, three}); err != nil {
		t.Fatalf("migrate 1, 3: %v", err)
	}
	if err := migrateList(ctx, db, now, []migration{one, two, three}); err != nil {
		t.Fatalf("migrate 1, 2, 3 over 1, 3: %v", err)
	}
	if err := migrateList(ctx, db, now, []migration{one, two, three}); err != nil {
		t.Fatalf("migrate again: %v", err)
	}
	var versions string
	if err := db.QueryRow(`SELECT group_concat(version, ',') FROM (SELECT version FROM schema_migrations ORDER BY version)`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if versions != "1,2,3" {
		t.Fatalf("applied versions = %s, want 1,2,3", versions)
	}
	for _, table := range []string{"a", "b", "c"} {
		if _, err := db.Exec(`INSERT INTO ` + table + ` (x) VALUES (1)`); err != nil {
			t.Fatalf("table %s: %v", table, err)
		}
	}
	// A binary that knows only 1 and 2 refuses a file at version 3.
	err = migrateList(ctx, db, now, []migration{one, two})
	if err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("migrate with an older binary: %v, want a newer-schema error", err)
	}
}

// TestMigrateCompactLedger: a version-1 file's ledger (sync ids and hex keys
// as TEXT, pending rows in the ledger) is moved to the compact layout of
// migration 3 with every entry read back as it was.
func TestMigrateCompactLedger(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "v1.db")
	db, err := sql.Open("sqlite", path+"?_txlock=immediate&_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	if ms[0].Version != 1 {
		t.Fatalf("first migration is %s", ms[0].Name)
	}
	if err := migrateList(ctx, db, storetest.Start, ms[:1]); err != nil {
		t.Fatal(err)
	}
	hexKey := storetest.HashedKeys(0, 3)
	at := storetest.Start.UnixNano()
	rows := []struct {
		sync, key, state, result, message string
		fence, attempts                   int64
		completed                         any
	}{
		{"s1", hexKey[0], "complete", "contact:1", "", 1, 1, at + 5},
		{"s1", hexKey[1], "pending", "", "", 2, 3, nil},
		{"s1", "not-hex-key", "rejected", "", "bad email", 1, 2, nil},
		{"s2", hexKey[0], "in_doubt", "", "", 4, 1, nil},
		{"s2", strings.ToUpper(hexKey[2]), "complete", "contact:2", "", 4, 1, at + 6},
	}
	for _, r := range rows {
		if _, err := db.Exec(`INSERT INTO ledger (sync_id, key, state, fence, run_id, result, message, attempts, claimed_at, completed_at, seen_at)
			VALUES (?, ?, ?, ?, 7, ?, ?, ?, ?, ?, ?)`, r.sync, r.key, r.state, r.fence, r.result, r.message, r.attempts, at, r.completed, at+9); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(ctx, OpenParams{Path: path, Clock: clock.NewFake(storetest.Start)})
	if err != nil {
		t.Fatalf("Open (migrating): %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	var blobs int
	if err := s.r.QueryRow(`SELECT count(*) FROM ledger WHERE typeof(key) = 'blob' AND length(key) = 32`).Scan(&blobs); err != nil {
		t.Fatal(err)
	}
	if blobs != 2 { // s1's complete and s2's in_doubt; the pending one is a claim
		t.Fatalf("%d keys stored as 32-byte blobs, want 2", blobs)
	}
	for _, r := range rows {
		got, err := s.LedgerGet(ctx, r.sync, []string{r.key})
		if err != nil {
			t.Fatal(err)
		}
		e, ok := got[r.key]
		if !ok {
			t.Fatalf("%s %s: missing after the migration (got %+v)", r.sync, r.key, got)
		}
		want := store.LedgerEntry{
			Key: r.key, State: store.LedgerState(r.state), Fence: r.fence, RunID: 7, Result: r.result, Message: r.message,
			Attempts: int(r.attempts), ClaimedAt: fromNanos(at), SeenAt: fromNanos(at + 9),
		}
		if c, ok := r.completed.(int64); ok {
			want.CompletedAt = fromNanos(c)
		}
		if e != want {
			t.Fatalf("%s %s after the migration = %+v, want %+v", r.sync, r.key, e, want)
		}
	}
	pending, err := s.LedgerList(ctx, "s1", store.LedgerPending, 0)
	if err != nil || len(pending) != 1 || pending[0].Key != hexKey[1] {
		t.Fatalf("pending of s1 = %+v, %v; want %s", pending, err, hexKey[1])
	}
	rejected, err := s.LedgerList(ctx, "s1", store.LedgerRejected, 0)
	if err != nil || len(rejected) != 1 || rejected[0].Message != "bad email" {
		t.Fatalf("rejected of s1 = %+v, %v", rejected, err)
	}
	// The migrated claim finishes like a fresh one: attempts and claim time kept.
	if err := s.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s1", Fence: 2, RunID: 8, Entries: []store.LedgerFinish{
		{Key: hexKey[1], State: store.LedgerComplete, Result: "contact:3"},
	}}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LedgerGet(ctx, "s1", hexKey[1:2])
	if e := got[hexKey[1]]; err != nil || e.State != store.LedgerComplete || e.Attempts != 3 || !e.ClaimedAt.Equal(fromNanos(at)) {
		t.Fatalf("finished migrated claim = %+v, %v", e, err)
	}
}

// TestLedgerKeyForms: hex keys (stored as bytes) and other keys (stored as
// text) never collide, and each comes back exactly as given.
func TestLedgerKeyForms(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s, _ := openTemp(t, clock.NewFake(storetest.Start))
	l, err := s.LeaseAcquire(ctx, store.LeaseAcquireParams{SyncID: "s", Token: "t", TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	// A hex key whose 32 bytes are printable: the same bytes as a TEXT key.
	const raw = "abcdefghijklmnopqrstuvwxyz012345"
	h := hex.EncodeToString([]byte(raw))
	keys := []string{
		h,                  // stored as 32 bytes
		strings.ToUpper(h), // not canonical: stored as text
		string(raw[:32]),   // 32 raw bytes as a string: text, must not equal h's blob
		"~" + h,            // looks like an encoded argument
		"~",                // a lone prefix
		h[:63],             // one digit short
		`quote"and\\slash`, // needs JSON escaping
	}
	if err := s.LedgerClaim(ctx, store.LedgerClaimParams{SyncID: "s", Fence: l.Fence, RunID: 1, Keys: keys}); err != nil {
		t.Fatal(err)
	}
	fin := make([]store.LedgerFinish, len(keys))
	for i, k := range keys {
		fin[i] = store.LedgerFinish{Key: k, State: store.LedgerComplete, Result: fmt.Sprint("r", i)}
	}
	if err := s.LedgerFinish(ctx, store.LedgerFinishParams{SyncID: "s", Fence: l.Fence, RunID: 1, Entries: fin}); err != nil {
		t.Fatal(err)
	}
	got, err := s.LedgerGet(ctx, "s", keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keys) {
		t.Fatalf("LedgerGet returned %d entries, want %d: %+v", len(got), len(keys), got)
	}
	for i, k := range keys {
		if e := got[k]; e.Key != k || e.Result != fmt.Sprint("r", i) || e.State != store.LedgerComplete {
			t.Fatalf("key %d (%q) = %+v", i, k, e)
		}
	}
	var claims int
	if err := s.r.QueryRow(`SELECT count(*) FROM ledger_claims`).Scan(&claims); err != nil || claims != 0 {
		t.Fatalf("ledger_claims rows after finish = %d, %v; want 0", claims, err)
	}
}

// TestLazyCommits: a lazy write runs with synchronous=NORMAL and leaves the
// write connection at FULL for the next one (a claim must be on disk before
// its destination call); a durable write runs at FULL.
func TestLazyCommits(t *testing.T) {
	t.Parallel()
	s, _ := openTemp(t, clock.Real{})
	ctx := context.Background()
	level := func(d durability) string {
		var got string
		if err := s.writeWith(ctx, d, "test", func(tx *sql.Tx) error {
			return tx.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got)
		}); err != nil {
			t.Fatal(err)
		}
		return got
	}
	after := func() string {
		var got string
		if err := s.w.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	if got := level(lazy); got != "1" {
		t.Fatalf("lazy write ran at synchronous=%s, want 1 (NORMAL)", got)
	}
	if got := after(); got != "2" {
		t.Fatalf("after a lazy write the write connection is at synchronous=%s, want 2 (FULL)", got)
	}
	if got := level(durable); got != "2" {
		t.Fatalf("durable write ran at synchronous=%s, want 2 (FULL)", got)
	}
	// A failed lazy write restores FULL too.
	boom := errors.New("boom")
	if err := s.writeLazy(ctx, "test", func(*sql.Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("err = %v", err)
	}
	if got := after(); got != "2" {
		t.Fatalf("after a failed lazy write: synchronous=%s, want 2", got)
	}
}
