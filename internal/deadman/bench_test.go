package deadman_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/deadman"
	"github.com/oncesync/oncesync/internal/store/postgres"
	"github.com/oncesync/oncesync/internal/store/sqlite"
)

// The fleet of the scan benchmark: 100,000 active syncs in 10,000
// workspaces, 10 runs each over the last 2.5 days (900,000 runs), checked 30
// days after they were published. Per 100 syncs: 97 healthy (last success
// 5 h ago), 1 failing for 29 h (runs_without_success), 1 whose runs stopped
// 5 days ago (no_runs) and 1 that never ran (no_runs). SPEC budget: the
// whole check in <= 1 s.
const (
	fleetSyncs      = 100_000
	fleetPerWS      = 10
	fleetRunsPer    = 10
	fleetSilentPer  = 3 // per 100 syncs
	fleetPublishAge = 30 * day
)

// fleetNow is when the fleet is checked.
var fleetNow = t0.Add(fleetPublishAge)

// runsSQL computes, for sync n.i and run k.j, the run's state and start:
// run j of a healthy sync starts (10-j)*6h-1h before fleetNow; the failing
// syncs' last five runs failed; the stopped syncs' runs are 5 days older.
const (
	fleetRunState = `CASE WHEN n.i % 100 = 97 AND k.j >= 5 THEN 'failed' ELSE 'succeeded' END`
	fleetRunCode  = `CASE WHEN n.i % 100 = 97 AND k.j >= 5 THEN 'destination_unavailable' ELSE '' END`
	fleetRunStart = `$1 - (10 - k.j) * 21600000000000 + 3600000000000 + n.i
		- CASE WHEN n.i % 100 = 98 THEN 432000000000000 ELSE 0 END`
)

func loadFleetSQLite(b *testing.B, path string) {
	b.Helper()
	db, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = tx.Rollback() }()
	nums := `WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < $2 - 1),
		k(j) AS (SELECT 0 UNION ALL SELECT j + 1 FROM k WHERE j < $3 - 1) `
	if _, err := tx.ExecContext(ctx, nums+`INSERT INTO syncs (id, workspace, definition, state, changed_at, created_at)
		SELECT printf('sync-%06d', i), printf('ws-%05d', i / $4), '{}', 'active', $1, $1 FROM n`,
		t0.UnixNano(), fleetSyncs, fleetRunsPer, fleetPerWS); err != nil {
		b.Fatal(err)
	}
	if _, err := tx.ExecContext(ctx, nums+`INSERT INTO runs (sync_id, state, started_at, finished_at, failure_code)
		SELECT printf('sync-%06d', n.i), `+fleetRunState+`, `+fleetRunStart+`, `+fleetRunStart+` + 60000000000, `+fleetRunCode+`
		FROM k, n WHERE n.i % 100 <> 99 ORDER BY k.j, n.i`,
		fleetNow.UnixNano(), fleetSyncs, fleetRunsPer); err != nil {
		b.Fatal(err)
	}
	if err := tx.Commit(); err != nil {
		b.Fatal(err)
	}
	if _, err := db.ExecContext(ctx, `ANALYZE`); err != nil {
		b.Fatal(err)
	}
}

func loadFleetPostgres(b *testing.B, clk clock.Clock) *postgres.Store {
	b.Helper()
	st, admin := openPostgres(b, clk)
	ctx := context.Background()
	nums := `WITH n(i) AS (SELECT generate_series(0, $2::bigint - 1)), k(j) AS (SELECT generate_series(0, $3::bigint - 1)) `
	if _, err := admin.Exec(ctx, nums+`INSERT INTO syncs (id, workspace, definition, state, changed_at, created_at)
		SELECT format('sync-%s', lpad(i::text, 6, '0')), format('ws-%s', lpad((i / $4)::text, 5, '0')), '{}', 'active', $1::bigint, $1::bigint FROM n`,
		t0.UnixNano(), fleetSyncs, fleetRunsPer, fleetPerWS); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.Exec(ctx, nums+`INSERT INTO runs (sync_id, state, started_at, finished_at, failure_code)
		SELECT format('sync-%s', lpad(n.i::text, 6, '0')), `+fleetRunState+`, `+fleetRunStart+`, `+fleetRunStart+` + 60000000000, `+fleetRunCode+`
		FROM k, n WHERE n.i % 100 <> 99 ORDER BY k.j, n.i`,
		fleetNow.UnixNano(), fleetSyncs, fleetRunsPer); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `VACUUM ANALYZE syncs`); err != nil {
		b.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `VACUUM ANALYZE runs`); err != nil {
		b.Fatal(err)
	}
	return st
}

// openFleet returns a store (with markers) holding the fleet.
func openFleet(b *testing.B, name string, clk clock.Clock) (deadman.Store, deadman.MarkerStore) {
	b.Helper()
	switch name {
	case "sqlite":
		path := filepath.Join(b.TempDir(), "fleet.db")
		migrated, err := sqlite.Open(context.Background(), sqlite.OpenParams{Path: path, Clock: clk})
		if err != nil {
			b.Fatal(err)
		}
		_ = migrated.Close()
		loadFleetSQLite(b, path)
		st := openSQLiteAt(b, path, clk)
		return st, st
	default:
		st := loadFleetPostgres(b, clk)
		return st, st
	}
}

func BenchmarkSyncActivity(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			st, _ := openFleet(b, name, clock.NewFake(fleetNow))
			ctx := context.Background()
			cpu := cpuTime(b)
			for b.Loop() {
				acts, err := st.SyncActivity(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if len(acts) != fleetSyncs {
					b.Fatalf("%d syncs, want %d", len(acts), fleetSyncs)
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// BenchmarkCheck is the hourly check of the fleet once its silences are
// marked (the steady state); the first check, which marks them, is logged.
func BenchmarkCheck(b *testing.B) {
	for _, name := range []string{"sqlite", "postgres"} {
		b.Run(name, func(b *testing.B) {
			clk := clock.NewFake(fleetNow)
			st, markers := openFleet(b, name, clk)
			c, err := deadman.New(deadman.Params{Store: st, Markers: markers, Notifier: &recorder{}, Clock: clk, DefaultWindow: day, MaxAlerts: -1})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			start := time.Now()
			rep, err := c.Check(ctx)
			if err != nil {
				b.Fatal(err)
			}
			wantSilent := fleetSyncs / 100 * fleetSilentPer
			if n := rep.Count(deadman.ScopeSync, deadman.StatusSilent); n != wantSilent || len(rep.Alerted()) != wantSilent {
				b.Fatalf("first check: %d silent syncs, %d alerted; want %d", n, len(rep.Alerted()), wantSilent)
			}
			if n := rep.Count(deadman.ScopeWorkspace, deadman.StatusOK); n != fleetSyncs/fleetPerWS {
				b.Fatalf("first check: %d healthy workspaces, want %d", n, fleetSyncs/fleetPerWS)
			}
			b.Logf("first check (marks %d silences): %s", wantSilent, time.Since(start).Round(time.Millisecond))
			cpu := cpuTime(b)
			for b.Loop() {
				rep, err := c.Check(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if len(rep.Verdicts) != fleetSyncs+fleetSyncs/fleetPerWS || len(rep.Alerted()) != 0 {
					b.Fatalf("%d verdicts, %d alerted", len(rep.Verdicts), len(rep.Alerted()))
				}
			}
			reportCPU(b, cpu)
		})
	}
}

// cpuTime is this process's CPU time (user + system). On a loaded machine
// it measures the check's own work better than the wall clock (for SQLite,
// in process, it is all of it; for PostgreSQL, the server's share is not in
// it).
func cpuTime(b *testing.B) time.Duration {
	b.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// reportCPU reports the CPU time per op since start as cpu-ms/op.
func reportCPU(b *testing.B, start time.Duration) {
	b.Helper()
	b.ReportMetric(float64(cpuTime(b)-start)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
