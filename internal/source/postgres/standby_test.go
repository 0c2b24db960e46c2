package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/postgres"
)

// pair is a throwaway primary and its streaming hot standby.
type pair struct {
	primary, standby string // DSNs
}

// startPair starts a primary (initdb) and a hot standby of it
// (pg_basebackup -R) on free ports in a temporary directory, stopped and
// removed at cleanup. It skips the test when the PostgreSQL server binaries
// are not on PATH. As root (initdb refuses it) the servers run as the user
// postgres, through runuser. standbyConf are more lines of the standby's
// postgresql.conf.
func startPair(t *testing.T, standbyConf ...string) pair {
	t.Helper()
	for _, bin := range []string{"initdb", "pg_ctl", "pg_basebackup"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("%s not on PATH: a primary and standby cannot be started", bin)
		}
	}
	var wrap []string
	var uid, gid = -1, -1
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Skip("running as root without a postgres user: initdb cannot run")
		}
		if _, err := exec.LookPath("runuser"); err != nil {
			t.Skip("running as root without runuser: initdb cannot run")
		}
		fmt.Sscan(u.Uid, &uid)
		fmt.Sscan(u.Gid, &gid)
		wrap = []string{"runuser", "-u", "postgres", "--"}
	}
	// Not t.TempDir: its parent is private to the test's user.
	dir, err := os.MkdirTemp("", "oncesync-standby-")
	if err != nil {
		t.Fatal(err)
	}
	if uid >= 0 {
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	run := func(args ...string) {
		t.Helper()
		full := append(wrap[:len(wrap):len(wrap)], args...)
		cmd := exec.Command(full[0], full[1:]...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	ports := [2]int{freePort(t), freePort(t)}
	primary, standby := filepath.Join(dir, "primary"), filepath.Join(dir, "standby")
	t.Cleanup(func() {
		for _, d := range []string{standby, primary} {
			if _, err := os.Stat(filepath.Join(d, "postmaster.pid")); err == nil {
				args := append(wrap[:len(wrap):len(wrap)], "pg_ctl", "-D", d, "-m", "immediate", "-w", "stop")
				_ = exec.Command(args[0], args[1:]...).Run()
			}
		}
		_ = os.RemoveAll(dir)
	})
	run("initdb", "-D", primary, "-U", "postgres", "--auth=trust", "--no-sync")
	conf := func(d string, lines ...string) {
		f, err := os.OpenFile(filepath.Join(d, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString("\n" + strings.Join(lines, "\n") + "\n"); err != nil {
			t.Fatal(err)
		}
	}
	conf(primary, fmt.Sprintf("port = %d", ports[0]), "listen_addresses = '127.0.0.1'",
		"unix_socket_directories = '"+dir+"'", "wal_level = replica", "max_wal_senders = 4",
		"shared_buffers = 16MB", "max_connections = 20", "fsync = off",
		"autovacuum = off") // the tests decide when the primary cleans up
	run("pg_ctl", "-D", primary, "-l", filepath.Join(dir, "primary.log"), "-w", "start")
	run("pg_basebackup", "-h", "127.0.0.1", "-p", fmt.Sprint(ports[0]), "-U", "postgres", "-D", standby, "-R", "-X", "stream")
	conf(standby, append([]string{fmt.Sprintf("port = %d", ports[1]), "hot_standby = on"}, standbyConf...)...)
	run("pg_ctl", "-D", standby, "-l", filepath.Join(dir, "standby.log"), "-w", "start")
	dsn := func(port int) string {
		return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
	}
	return pair{primary: dsn(ports[0]), standby: dsn(ports[1])}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// execOn runs sql on a new connection to dsn.
func execOn(t *testing.T, dsn string, sqls ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	for _, sql := range sqls {
		if _, err := conn.Exec(ctx, sql); err != nil {
			t.Fatalf("%s: %v", sql, err)
		}
	}
}

// waitReplayed waits until the standby has replayed the primary's WAL.
func waitReplayed(t *testing.T, p pair) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pc, err := pgx.Connect(ctx, p.primary)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close(ctx)
	var lsn string
	if err := pc.QueryRow(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		t.Fatal(err)
	}
	for {
		done, err := replayedOn(ctx, p.standby, lsn)
		var pgErr *pgconn.PgError
		// A standby replaying a VACUUM cancels even a new session's reads
		// of the catalogs (SQLSTATE 40001, at connect): ask again.
		if err != nil && !(errors.As(err, &pgErr) && pgErr.Code == "40001") {
			t.Fatal(err)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatal("the standby did not replay the primary's WAL in 30 s")
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// replayedOn reports whether the standby at dsn has replayed up to lsn.
func replayedOn(ctx context.Context, dsn, lsn string) (bool, error) {
	sc, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return false, err
	}
	defer sc.Close(ctx)
	var done bool
	err = sc.QueryRow(ctx, "SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done)
	return done, err
}

// TestStandbyReplayPaused: a source DSN that names a hot standby whose WAL
// replay is paused (pg_wal_replay_pause()) reads the rows as they were at
// the pause, however long ago. Such a pass ended as if the source were
// fresh: a run succeeded with nothing new while the primary changed, and
// the sync looked healthy (docs/RELIABILITY.md). Opening the source and
// ending a pass on such a standby now fail with source.ErrUnavailable,
// saying so; a standby that replays reads as before.
func TestStandbyReplayPaused(t *testing.T) {
	p := startPair(t)
	ctx := context.Background()
	execOn(t, p.primary, "CREATE TABLE contacts (id bigint PRIMARY KEY, name text NOT NULL, updated_at timestamptz NOT NULL)",
		"INSERT INTO contacts SELECT i, 'n' || i, '2024-05-01 10:00:00Z'::timestamptz + i * interval '1 second' FROM generate_series(1, 10) i")
	waitReplayed(t, p)
	params := postgres.Params{DSN: p.standby, Table: "contacts", CursorColumn: "updated_at", Identity: "id", Lookback: 5 * time.Minute}
	src, err := postgres.New(ctx, params)
	if err != nil {
		t.Fatalf("New on a replaying standby: %v", err)
	}
	defer src.Close()
	page, err := src.ReadPage(ctx, "", 4)
	if err != nil || page.End {
		t.Fatalf("first page: End %v, %v", page.End, err)
	}
	// Re-reading by identity (a savepoint in a read-only transaction) and
	// a partition's slice work on a standby too.
	if recs, err := src.ReadIdentities(ctx, "id", []string{"2", "7", "x"}); err != nil || len(recs) != 2 {
		t.Fatalf("ReadIdentities on a standby: %d records, %v", len(recs), err)
	}
	if _, err := src.ReadSlice(ctx, source.Slice{Identity: "id", K: 0, N: 2}, "", 4); err != nil {
		t.Fatalf("ReadSlice on a standby: %v", err)
	}

	execOn(t, p.standby, "SELECT pg_wal_replay_pause()")
	execOn(t, p.primary, "UPDATE contacts SET name = 'changed', updated_at = '2024-05-02 10:00:00Z' WHERE id = 3")
	next := page.Next
	var last error
	for range 10 {
		page, err := src.ReadPage(ctx, next, 4)
		if err != nil {
			last = err
			break
		}
		if page.End {
			break
		}
		next = page.Next
	}
	if !errors.Is(last, source.ErrUnavailable) || !strings.Contains(last.Error(), "replay is paused") {
		t.Fatalf("a pass on a paused standby ended with %v; want source.ErrUnavailable saying replay is paused", last)
	}
	if _, err := postgres.New(ctx, params); !errors.Is(err, source.ErrUnavailable) || !strings.Contains(err.Error(), "replay is paused") {
		t.Fatalf("New on a paused standby: %v; want source.ErrUnavailable saying replay is paused", err)
	}

	execOn(t, p.standby, "SELECT pg_wal_replay_resume()")
	waitReplayed(t, p)
	got, _ := readAll(t, src, "", 4)
	found := false
	for _, r := range got {
		if fmt.Sprint(r.Fields["id"]) == "3" {
			found = r.Fields["name"] == "changed"
		}
	}
	if len(got) != 10 || !found {
		t.Fatalf("after the resume: %d rows, row 3 changed %v; want 10 and true", len(got), found)
	}
}

// TestStandbyRecoveryConflict: a hot standby cancels a read that holds back
// the replay of the primary's VACUUM longer than max_standby_streaming_delay
// ("canceling statement due to conflict with recovery", SQLSTATE 40001).
// It was source_unavailable with PostgreSQL's message alone, under a
// sentence about unreachable databases: nothing told the user that the
// standby's settings, not the network, fail the run. The detail now says
// so and what to change; the failure stays retryable, and the next read
// succeeds once the churn stops.
func TestStandbyRecoveryConflict(t *testing.T) {
	p := startPair(t, "max_standby_streaming_delay = 300ms", "hot_standby_feedback = off")
	ctx := context.Background()
	execOn(t, p.primary, "CREATE TABLE contacts (id bigint PRIMARY KEY, name text NOT NULL)",
		"INSERT INTO contacts SELECT i, 'n' || i FROM generate_series(1, 20) i")
	waitReplayed(t, p)
	// 0.2 s a row, for every row before the LIMIT: seconds a page.
	src, err := postgres.New(ctx, postgres.Params{DSN: p.standby, Query: "SELECT c.*, pg_sleep(0.2) AS z FROM contacts c", Identity: "id"})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	done := make(chan error, 1)
	go func() {
		_, err := src.ReadPage(ctx, "", 5)
		done <- err
	}()
	var got error
churn:
	for {
		select {
		case got = <-done:
			break churn
		case <-time.After(100 * time.Millisecond):
			execOn(t, p.primary, "UPDATE contacts SET name = name || 'x'", "VACUUM contacts")
		}
	}
	if got == nil {
		t.Skip("no recovery conflict happened (the standby replayed around the read)")
	}
	if !errors.Is(got, source.ErrUnavailable) || !strings.Contains(got.Error(), "max_standby_streaming_delay") ||
		!strings.Contains(got.Error(), "hot_standby_feedback") {
		t.Fatalf("a read cancelled by a recovery conflict: %v; want source.ErrUnavailable naming max_standby_streaming_delay and hot_standby_feedback", got)
	}
	// The standby may still hold cleanup records of the last VACUUM that
	// cancel the first read after the churn: a retry, as a run's, succeeds.
	waitReplayed(t, p)
	for try := 1; ; try++ {
		page, err := src.ReadPage(ctx, "", 5)
		if err == nil && len(page.Records) == 5 {
			break
		}
		if try == 5 {
			t.Fatalf("the reads after the churn: %d rows, %v", len(page.Records), err)
		}
	}
}
