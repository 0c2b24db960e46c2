// Package sqlite is oncesync's embedded store: store.Store on one SQLite file
// (modernc.org/sqlite, no cgo).
//
// The file is opened in WAL mode with a 10 s busy timeout, foreign keys on and
// synchronous=FULL, so several oncesync processes on one machine can share it:
// every write runs in a BEGIN IMMEDIATE transaction (taken with the busy
// timeout, never upgraded from a read lock), and every fenced write checks the
// sync's registered fence inside that same transaction.
//
// Within a process, writes go through a pool of one connection (they are
// serialised by SQLite anyway; queueing them in Go avoids busy-wait sleeps),
// reads through a separate pool of read-only connections.
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	sqlitedrv "modernc.org/sqlite"
	sqlitelib "modernc.org/sqlite/lib"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

// BusyTimeout is how long a statement waits for another connection's (or
// process's) write lock before failing with store.ErrUnavailable.
const BusyTimeout = 10 * time.Second

// The page cache and checkpoints (docs/PERFORMANCE.md). Ledger keys are
// hashes, so a page of records touches about one B-tree leaf per record, and
// each touched leaf is written whole to the WAL and again by the checkpoint.
//
// The page size stays SQLite's default (4 KiB): 1 KiB pages measured no
// clear gain once claims moved to their own table, and a fresh file opened
// by several processes at once then sometimes failed with SQLITE_BUSY.
const (
	// CacheKiB is the write connection's page cache (SQLite's default is 2
	// MiB): the hot part of the ledger stays in memory and a claim or finish
	// never spills pages to the WAL before its commit. 16 MiB measured a
	// peak RSS of 152.7 MiB for a 1,000,000-row source once merges yield
	// to the runner (ledgermerge.go foreground); 8 MiB, 139.6.
	CacheKiB = 8 << 10
	// WALAutoCheckpoint is the WAL size in pages that triggers a checkpoint
	// (SQLite's default is 1000): a leaf dirtied by several pages of records
	// between checkpoints is copied back once.
	WALAutoCheckpoint = 16000
	// ReadCacheKiB is each read-pool connection's page cache: reads are a
	// page or two (the log tail, a run, a cursor) or one pass over a sync's
	// keys (a key filter rebuild), which a cache does not help; a read
	// connection rereads its pages after any write anyway. Four of them at
	// CacheKiB would hold up to 64 MiB of copies.
	ReadCacheKiB = 2 << 10
)

// readConns is the size of the read pool.
const readConns = 4

// OpenParams configures Open.
type OpenParams struct {
	// Path is the database file, created if missing. The config form
	// "sqlite://./oncesync.db" is accepted too (see ParseURL).
	Path string
	// Clock stamps every stored time and judges lease expiry. Nil means the
	// wall clock.
	Clock clock.Clock
}

// Store is store.Store on a SQLite file. It is safe for concurrent use.
type Store struct {
	w     *sql.DB // one connection; transactions BEGIN IMMEDIATE
	r     *sql.DB // read-only connections
	clock clock.Clock
	stmts *stmts

	pruneWindow  int // rows per LedgerPrune transaction
	mem          *memLedger
	mergeEntries int // log entries that trigger a merge
	merger       *merger
	syncMerge    bool // merge inline at mergeEntries (tests), not in the background
	fg           foreground
	entryPool    sync.Pool // *[]memEntry, zero up to cap (getEntries)

	path string      // the file opened
	file os.FileInfo // its identity when opened (checkFile)
}

var _ store.Store = (*Store)(nil)

// ParseURL returns the file path of a store URL: "sqlite://./oncesync.db" and
// "sqlite:oncesync.db" are relative paths, "sqlite:///var/lib/oncesync.db" is
// absolute. In-memory databases and query parameters are refused: several
// connections and processes must see the same file.
func ParseURL(raw string) (string, error) {
	var path string
	switch {
	case strings.HasPrefix(raw, "sqlite://"):
		path = strings.TrimPrefix(raw, "sqlite://")
	case strings.HasPrefix(raw, "sqlite:"):
		path = strings.TrimPrefix(raw, "sqlite:")
	default:
		return "", fmt.Errorf("sqlite: store URL %q does not start with sqlite://", raw)
	}
	if strings.ContainsAny(path, "?#") {
		return "", fmt.Errorf("sqlite: store URL %q: query parameters are not supported", raw)
	}
	if p, err := url.PathUnescape(path); err == nil {
		path = p
	}
	if err := checkPath(path); err != nil {
		return "", fmt.Errorf("sqlite: store URL %q: %w", raw, err)
	}
	return path, nil
}

func checkPath(path string) error {
	switch {
	case path == "":
		return errors.New("empty database path")
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return errors.New("the store must be a file path (no in-memory or file: URI databases)")
	case strings.ContainsAny(path, "?#"):
		return errors.New("the database path must not contain '?' or '#'")
	}
	return nil
}

// Open opens (creating if needed) the store at p.Path and applies pending
// schema migrations. Several processes may open the same fresh file at once.
func Open(ctx context.Context, p OpenParams) (*Store, error) {
	path := p.Path
	if strings.HasPrefix(path, "sqlite:") {
		var err error
		if path, err = ParseURL(path); err != nil {
			return nil, err
		}
	}
	if err := checkPath(path); err != nil {
		return nil, fmt.Errorf("sqlite: %w", err)
	}
	clk := p.Clock
	if clk == nil {
		clk = clock.Real{}
	}

	common := url.Values{}
	common.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", BusyTimeout.Milliseconds()))
	common.Add("_pragma", "journal_mode(WAL)")
	common.Add("_pragma", fmt.Sprintf("wal_autocheckpoint(%d)", WALAutoCheckpoint))
	// Statement journals (a multi-row upsert may have to undo itself) and
	// temporary b-trees stay in memory instead of temp files written with
	// one pwrite per page.
	common.Add("_pragma", "temp_store(MEMORY)")
	common.Add("_pragma", "synchronous(FULL)")
	common.Add("_pragma", "foreign_keys(1)")

	wq := url.Values{}
	for k, v := range common {
		wq[k] = append([]string(nil), v...)
	}
	wq.Set("_txlock", "immediate")
	wq.Add("_pragma", fmt.Sprintf("cache_size(%d)", -CacheKiB))
	// A new store is its owner's only (it holds identities and messages);
	// a path it cannot create is reported by SQLite's own open, below.
	_ = store.CreatePrivateFile(path)
	w, err := sql.Open("sqlite", path+"?"+wq.Encode())
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)

	s := &Store{w: w, clock: clk, pruneWindow: defaultPruneWindow, mem: newMemLedger(), mergeEntries: DefaultLedgerMergeEntries, merger: newMerger()}
	if err := migrateFresh(ctx, w, clk); err != nil {
		// Asked before the pool's files are closed: a process at its
		// open-files limit is one still (whyNotOpen's probe).
		err = whyNotOpen(path, s.mapErr("migrate", err))
		_ = w.Close()
		return nil, err
	}
	// migrate opened (or created) the file: the identity every write
	// checks (checkFile).
	if s.path, err = filepath.Abs(path); err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if s.file, err = os.Stat(s.path); err != nil {
		_ = w.Close()
		return nil, s.mapErr("open", err)
	}

	rq := url.Values{}
	for k, v := range common {
		rq[k] = append([]string(nil), v...)
	}
	rq.Add("_pragma", "query_only(1)")
	rq.Add("_pragma", fmt.Sprintf("cache_size(%d)", -ReadCacheKiB))
	r, err := sql.Open("sqlite", path+"?"+rq.Encode())
	if err != nil {
		_ = w.Close()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	r.SetMaxOpenConns(readConns)
	r.SetMaxIdleConns(readConns)
	s.r = r
	if s.stmts, err = prepare(ctx, r, w); err != nil {
		err = whyNotOpen(path, s.mapErr("open", err))
		_ = s.Close()
		return nil, err
	}
	return s, nil
}

// Close closes both connection pools.
func (s *Store) Close() error {
	s.merger.stop()
	var errs []error
	if s.stmts != nil {
		s.stmts.close()
	}
	if s.r != nil {
		errs = append(errs, s.r.Close())
	}
	errs = append(errs, s.w.Close())
	return errors.Join(errs...)
}

func (s *Store) now() time.Time { return s.clock.Now() }

// write runs fn in one BEGIN IMMEDIATE transaction, committing if fn returns
// nil. Errors from fn and from the driver are mapped by mapErr.
func (s *Store) write(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	s.fg.enter()
	tx, err := s.w.BeginTx(ctx, nil)
	s.fg.leave()
	return s.commit(op, tx, err, fn)
}

// commit runs fn in tx (begun with err) and commits, or rolls back on error.
func (s *Store) commit(op string, tx *sql.Tx, err error, fn func(tx *sql.Tx) error) error {
	if err != nil {
		return s.mapErr(op, err)
	}
	if err := s.checkFile(op); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return s.mapErr(op, err)
	}
	if err := tx.Commit(); err != nil {
		return s.mapErr(op, err)
	}
	return nil
}

// Durability of a write transaction. Every commit is synchronous=FULL
// (fsynced before it returns) unless it is a lazy one: a commit whose loss
// in a power cut the ledger already answers for. Those are the ledger's
// finishes (a lost finish leaves its keys pending: in doubt, settled by the
// next run), checkpoints and lease renewals (a lost cursor is an older one:
// the pages after it are replayed from the ledger) and merge rounds (a lost
// round leaves the log rows it would have deleted). A lazy commit is made
// with synchronous=NORMAL on the write connection and is on disk once the
// next FULL commit returns (the WAL is written in order and that commit's
// fsync covers every frame before it), so a claim, which always is FULL,
// makes everything before it durable before its destination call. Lease
// grants (fences) stay FULL: a fence that a power cut took back could be
// granted twice.
type durability int

const (
	durable durability = iota
	lazy
)

// writeLazy is write for a transaction of the lazy kind (see durability).
func (s *Store) writeLazy(ctx context.Context, op string, fn func(tx *sql.Tx) error) error {
	return s.writeLazyAs(ctx, false, op, fn)
}

// writeLazyAs is writeLazy; a background transaction (a merge round's) is
// not counted in s.fg while it waits for the write connection.
func (s *Store) writeLazyAs(ctx context.Context, background bool, op string, fn func(tx *sql.Tx) error) error {
	if !background {
		s.fg.enter()
	}
	conn, err := s.w.Conn(ctx)
	if !background {
		s.fg.leave()
	}
	if err != nil {
		return s.mapErr(op, err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = NORMAL"); err != nil {
		return s.mapErr(op, err)
	}
	defer func() {
		// Back to FULL before the connection serves anything else; a
		// connection that cannot be set back is thrown away (a new one
		// opens with the DSN's FULL).
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), BusyTimeout)
		defer cancel()
		if _, err := conn.ExecContext(rctx, "PRAGMA synchronous = FULL"); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	tx, err := conn.BeginTx(ctx, nil)
	return s.commit(op, tx, err, fn)
}

// writeWith is write or writeLazy.
func (s *Store) writeWith(ctx context.Context, d durability, op string, fn func(tx *sql.Tx) error) error {
	if d == lazy {
		return s.writeLazy(ctx, op, fn)
	}
	return s.write(ctx, op, fn)
}

// mapErr returns err unchanged when it already carries a store sentinel, and
// otherwise prefixes the operation and wraps store.ErrUnavailable around lock
// timeouts, I/O failures and closed databases.
func (s *Store) mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	for _, sentinel := range []error{store.ErrNotFound, store.ErrFenced, store.ErrLeaseHeld, store.ErrLeaseLost, store.ErrUnavailable} {
		if errors.Is(err, sentinel) {
			return err
		}
	}
	var ie *invalidError
	if errors.As(err, &ie) {
		return err
	}
	if diskFull(err) {
		return fmt.Errorf("sqlite %s: %w: %w: %w", op, store.ErrUnavailable, store.ErrDiskFull, err)
	}
	if writeFailed(err) {
		// SQLite says only "disk I/O error" or "attempt to write a readonly
		// database" (docs/recovery.md#store_unavailable).
		err = store.WithAdvice(err, "the store's file could not be written: its disk failed or its file system went read-only "+
			"(see dmesg and mount), or its permissions changed; once it is writable again, run the sync again")
	}
	if busy(err) {
		// SQLite says only "database is locked" (docs/recovery.md#store_unavailable).
		err = store.WithAdvice(err, busyAdvice)
	}
	if unavailable(err) {
		return fmt.Errorf("sqlite %s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("sqlite %s: %w", op, err)
}

// busyAdvice says what holds the store's file when a statement waited
// BusyTimeout for its lock: oncesync's own writes are short, so it is
// most likely another program.
var busyAdvice = "another process held the store's file locked for more than " + BusyTimeout.String() +
	": a program with a transaction open on it (an sqlite3 shell, a database browser, a backup copying it " +
	"without SQLite's backup API), or an oncesync process stopped in a write (SIGSTOP, a frozen VM); " +
	"fuser or lsof on the file names the processes that have it open"

// diskFull reports whether err is SQLITE_FULL: the file's disk has no room
// for the write (or the WAL).
func diskFull(err error) bool {
	var se *sqlitedrv.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlitelib.SQLITE_FULL
}

// writeFailed reports whether err is SQLITE_IOERR or SQLITE_READONLY: the
// operating system refused a read or write of the file (an I/O error, a file
// system remounted read-only after an error).
func writeFailed(err error) bool {
	var se *sqlitedrv.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code() & 0xff
	return c == sqlitelib.SQLITE_IOERR || c == sqlitelib.SQLITE_READONLY
}

// migrateFresh applies the migrations, retrying SQLITE_BUSY for up to
// BusyTimeout: while another process turns a fresh file into WAL mode,
// SQLite answers SQLITE_BUSY at once instead of calling the busy handler, so
// busy_timeout alone does not make concurrent first opens wait.
func migrateFresh(ctx context.Context, w *sql.DB, clk clock.Clock) error {
	return store.RetryFor(ctx, BusyTimeout, busy, func() error { return migrate(ctx, w, clk.Now()) })
}

// busy reports whether err is SQLITE_BUSY or SQLITE_LOCKED.
func busy(err error) bool {
	var se *sqlitedrv.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code() & 0xff
	return c == sqlitelib.SQLITE_BUSY || c == sqlitelib.SQLITE_LOCKED
}

// unavailable reports whether err means the store cannot be used right now
// (as opposed to a bug or a bad argument).
func unavailable(err error) bool {
	if errors.Is(err, sql.ErrConnDone) {
		return true
	}
	if err != nil && strings.Contains(err.Error(), "sql: database is closed") {
		return true
	}
	var se *sqlitedrv.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code() & 0xff { // primary result code
	case sqlitelib.SQLITE_BUSY, sqlitelib.SQLITE_LOCKED, sqlitelib.SQLITE_IOERR,
		sqlitelib.SQLITE_CANTOPEN, sqlitelib.SQLITE_FULL, sqlitelib.SQLITE_READONLY,
		sqlitelib.SQLITE_PROTOCOL, sqlitelib.SQLITE_NOTADB, sqlitelib.SQLITE_CORRUPT:
		return true
	}
	return false
}

// invalidError is a caller mistake (bad argument); it is never retryable.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return "sqlite: invalid argument: " + e.msg }

func invalidf(format string, args ...any) error {
	return &invalidError{msg: fmt.Sprintf(format, args...)}
}

// invalid is err (from one of the store package's argument rules) as an
// invalid-argument error; nil stays nil.
func invalid(err error) error {
	if err == nil {
		return nil
	}
	return &invalidError{msg: err.Error()}
}

// Times are stored as unix nanoseconds; NULL (or a NullInt64 that is not
// valid) is the zero time.

func nanos(t time.Time) int64 { return t.UnixNano() }

func nullNanos(t time.Time) sql.NullInt64 {
	if t.IsZero() {
		return sql.NullInt64{}
	}
	return sql.NullInt64{Int64: t.UnixNano(), Valid: true}
}

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func fromNullNanos(n sql.NullInt64) time.Time {
	if !n.Valid {
		return time.Time{}
	}
	return fromNanos(n.Int64)
}

// limitArg turns a caller's limit into SQLite's LIMIT argument: <= 0 is "all".
func limitArg(limit int) int {
	if limit <= 0 {
		return -1
	}
	return limit
}
