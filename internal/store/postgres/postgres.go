// Package postgres is oncesync's PostgreSQL store: store.Store on a pgx v5
// connection pool, with the same semantics as store/sqlite (the reference) and
// passing the same suite (store/storetest).
//
// Everything lives in one dedicated schema (default "oncesync"): every pooled
// connection runs with search_path set to it, so several stores (and tests)
// can share a database without seeing each other's rows.
//
// Transactions run at READ COMMITTED. Each sync's row in the fences table is
// its lock: every fenced write (cursor, ledger claim and finish) share-locks
// that row in the same single statement that does the write (registering its
// fence when it is above the registered one), and every lease grant locks it
// exclusively first, so a write under a stale fence is refused atomically, no
// fence is raised between a write's check and its commit, and two acquirers
// of one lease are serialised. The hot path (the
// ledger) is one statement and one round trip per call whatever the page size:
// keys travel as one text[] parameter (= ANY, unnest), never one parameter per
// key.
//
// All times come from the injected clock and are stored as unix nanoseconds,
// like SQLite, so a fake clock drives lease expiry in tests exactly as it does
// there.
package postgres

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/puddle/v2"

	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/store"
)

// DefaultSchema is the schema the store's tables live in when
// OpenParams.Schema is empty.
const DefaultSchema = "oncesync"

// DefaultConnectTimeout bounds each connection attempt when the URL sets no
// connect_timeout, so an unreachable (blackholed) server is reported as
// store.ErrUnavailable in seconds rather than after the OS's TCP timeout.
const DefaultConnectTimeout = 10 * time.Second

// IdleInTransactionTimeout is the store connections'
// idle_in_transaction_session_timeout unless the URL sets one.
const IdleInTransactionTimeout = 10 * time.Second

// IsURL reports whether raw is a store URL for this driver: it starts with
// postgres:// or postgresql://.
func IsURL(raw string) bool {
	return strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://")
}

// OpenParams configures Open.
type OpenParams struct {
	// URL is the PostgreSQL connection string, e.g.
	// "postgres://oncesync@db:5432/app?sslmode=verify-full". pgxpool settings
	// (pool_max_conns, ...) are accepted in the query.
	URL string
	// Clock stamps every stored time and judges lease expiry. Nil means the
	// wall clock.
	Clock clock.Clock
	// Schema holds the store's tables; created if missing. Empty means
	// DefaultSchema. It must be a plain lower-case identifier.
	Schema string
	// ServerTime judges lease expiry on the server's clock instead of
	// Clock, so that machines whose clocks disagree never see a live lease
	// as expired (docs/guide.md#the-store-and-the-leases), and writes the
	// ledger's and the runs' times on it (serverclock.go); the leases,
	// entries and runs it returns are on Clock's time, translated. Off, Clock judges and stamps
	// them, which lets a fake clock drive leases in tests.
	ServerTime bool
}

// Store is store.Store on a PostgreSQL schema. It is safe for concurrent use,
// and several processes may share one schema.
type Store struct {
	pool       *pgxpool.Pool
	clock      clock.Clock
	schema     string
	serverTime bool        // OpenParams.ServerTime
	sclock     serverClock // with serverTime (serverclock.go)

	pruneWindow int // rows per LedgerPrune statement
}

var _ store.Store = (*Store)(nil)

var schemaRE = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Open connects to p.URL, creates the schema if needed and applies pending
// migrations (once, however many processes open the store at the same time).
// An unreachable server is reported as store.ErrUnavailable.
func Open(ctx context.Context, p OpenParams) (*Store, error) {
	schema := p.Schema
	if schema == "" {
		schema = DefaultSchema
	}
	if !schemaRE.MatchString(schema) || strings.HasPrefix(schema, "pg_") {
		return nil, invalidf("schema %q (want a lower-case identifier of at most 63 characters, not pg_*)", schema)
	}
	if strings.TrimSpace(p.URL) == "" {
		return nil, invalidf("empty store URL")
	}
	cfg, err := pgxpool.ParseConfig(p.URL)
	if err != nil {
		if reason := tlsFilesReason(err); reason != "" {
			return nil, invalidf("%s", reason)
		}
		// The parse error quotes the URL, which may hold a password: say
		// what is wrong without it.
		return nil, invalidf("the store URL is not a valid PostgreSQL connection string")
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	params := cfg.ConnConfig.RuntimeParams
	params["search_path"] = pgx.Identifier{schema}.Sanitize()
	if params["application_name"] == "" {
		params["application_name"] = "oncesync"
	}
	// A worker paused inside a transaction (SIGSTOP, a frozen VM) would hold
	// its row locks (a sync's fence, its run) until it wakes, and stall the
	// worker that took its lease over. The server ends such a transaction
	// after IdleInTransactionTimeout; the paused worker's commit then fails
	// and nothing of it is written. oncesync never waits on anything else
	// inside a store transaction.
	if params["idle_in_transaction_session_timeout"] == "" {
		params["idle_in_transaction_session_timeout"] = strconv.Itoa(int(IdleInTransactionTimeout / time.Millisecond))
	}
	SetAfterConnect(cfg)
	clk := p.Clock
	if clk == nil {
		clk = clock.Real{}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, mapErr("open", err)
	}
	s := &Store{pool: pool, clock: clk, schema: schema, serverTime: p.ServerTime, pruneWindow: defaultPruneWindow}
	fail := func(op string, err error) (*Store, error) {
		defer pool.Close()
		if adv := readOnlyCause(ctx, pool, err); adv != "" {
			return nil, store.WithAdvice(mapErr(op, err), adv)
		}
		return nil, withOpenAdvice(mapErr(op, err), &cfg.ConnConfig.Config, schema)
	}
	if err := FirstAnswer(ctx, pool, cfg.ConnConfig.ConnectTimeout); err != nil {
		return fail("open", err)
	}
	if err := s.checkSessionsWithin(ctx, cfg.ConnConfig); err != nil {
		return fail("open", err)
	}
	if err := s.migrate(ctx); err != nil {
		return fail("migrate", err)
	}
	return s, nil
}

// tlsFilesReason says what is wrong when err, pgx's parse error, is about
// the TLS files the URL names (sslrootcert, sslcert, sslkey: read when the
// URL is parsed), or "" for another error. A CA file at a wrong path was
// reported as "not a valid PostgreSQL connection string", which sends a
// person looking for a typo in the URL. The words are pgx's about the file
// (its path, the system's reason), never the URL.
func tlsFilesReason(err error) string {
	var pce *pgconn.ParseConfigError
	if !errors.As(err, &pce) || !strings.Contains(pce.Error(), "failed to configure TLS") {
		return ""
	}
	inner := errors.Unwrap(pce)
	if inner == nil {
		return ""
	}
	return "the TLS files named in the store URL (sslrootcert, sslcert, sslkey) cannot be used: " + inner.Error() +
		": correct the path, give a PEM file, or let the user oncesync runs as read it (docs/config.md#top-level)"
}

// withOpenAdvice is err, the first use of the store failing, with advice
// that says where the store is and what was wrong there: store_unavailable
// alone reads the same for a stopped server, a wrong password and a
// missing database, and its cause (pgx's message) is kept out of what a
// person is shown. The advice names the host, port, database and schema,
// never the user or password.
// It says more than pgAdvice (where), so it stands in for pgAdvice's words
// when both have some.
func withOpenAdvice(err error, cc *pgconn.Config, schema string) error {
	if adv := openAdvice(err, cc, schema); adv != "" {
		return store.WithAdvice(err, adv)
	}
	return err
}

func openAdvice(err error, cc *pgconn.Config, schema string) string {
	var na *noAnswerError
	if errors.As(err, &na) {
		return "" // its own advice says more
	}
	where := "PostgreSQL at " + net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))
	if strings.HasPrefix(cc.Host, "/") {
		where = "PostgreSQL at the socket in " + cc.Host
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case pe.Code == "28P01" || pe.Code == "28000":
			return fmt.Sprintf("%s refused the store URL's user or password (SQLSTATE %s): correct them in store (or the environment variables they come from), or let that user in (pg_hba.conf)", where, pe.Code)
		case pe.Code == "3D000":
			return fmt.Sprintf("the database named in store does not exist: %s has no database %q; create it (createdb %s), or point store at a database that exists", where, cc.Database, cc.Database)
		case pe.Code == "42501":
			// PostgreSQL's message names the privilege's object ("permission
			// denied for table syncs"), never a value.
			return fmt.Sprintf("the store URL's user may not create or use oncesync's schema %q in database %q of %s (SQLSTATE 42501: %s): grant it CREATE on the database, which PostgreSQL asks for while migrations are pending even when the schema exists and this user owns it, or apply the migrations as a user that has it (oncesync migrate) and grant this one the use of the schema's tables (docs/guide.md#least-privilege-and-migrations)", schema, cc.Database, where, pe.Message)
		case strings.HasPrefix(pe.Code, "28") || strings.HasPrefix(pe.Code, "08"):
			return fmt.Sprintf("%s refused the connection (SQLSTATE %s): check store's URL and the server's settings for it", where, pe.Code)
		}
		return ""
	}
	var (
		ce  *pgconn.ConnectError
		dns *net.DNSError
	)
	switch {
	case errors.As(err, &dns):
		return fmt.Sprintf("the host %q of store cannot be resolved: correct store's host", cc.Host)
	case errors.Is(err, syscall.ECONNREFUSED):
		return where + " refused the connection (nothing listens there): start PostgreSQL, or correct store's host and port"
	case errors.Is(err, context.DeadlineExceeded) || isTimeout(err):
		return fmt.Sprintf("%s did not answer within %s: check that it runs and that the network lets this machine reach it", where, cc.ConnectTimeout)
	case pgAdvice(err) != "":
		return "" // a TLS refusal or certificate: pgAdvice's words say more
	case errors.As(err, &ce):
		return "could not connect to " + where + ": check that it runs and accepts connections from this machine"
	}
	return ""
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// Schema returns the schema the store's tables live in.
func (s *Store) Schema() string { return s.schema }

// RemoteReads reports that each read is a round trip to the server
// (store.RemoteReads).
func (s *Store) RemoteReads() bool { return true }

// Close closes the connection pool, waiting for borrowed connections.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

func (s *Store) now() time.Time { return s.clock.Now() }

// tx runs fn in one READ COMMITTED transaction, committing if fn returns nil.
// Errors are mapped by mapErr.
func (s *Store) tx(ctx context.Context, op string, fn func(tx pgx.Tx) error) error {
	return mapErr(op, pgx.BeginFunc(ctx, s.pool, fn))
}

// mapErr returns err unchanged when it already carries a store sentinel or is
// a caller mistake, and otherwise prefixes the operation and wraps
// store.ErrUnavailable around connection failures and transient server
// conditions.
func mapErr(op string, err error) error {
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
		return fmt.Errorf("postgres %s: %w: %w: %w", op, store.ErrUnavailable, store.ErrDiskFull, err)
	}
	if adv := pgAdvice(err); adv != "" {
		err = store.WithAdvice(err, adv)
	}
	if unavailable(err) {
		return fmt.Errorf("postgres %s: %w: %w", op, store.ErrUnavailable, err)
	}
	return fmt.Errorf("postgres %s: %w", op, err)
}

// Advised is err with the store's advice for it (what is wrong with the
// server or its settings, and what to do), for errors of another pool on
// the store's database (the job queue's); err itself when there is none.
func Advised(err error) error {
	if err == nil {
		return nil
	}
	var a interface{ Advice() string }
	if errors.As(err, &a) && a.Advice() != "" {
		return err // advised already, closer to the cause (a migration's)
	}
	if adv := pgAdvice(err); adv != "" {
		return store.WithAdvice(err, adv)
	}
	return err
}

// pgAdvice says, for a PostgreSQL that answers but cannot be used now or
// refuses oncesync, what is wrong and what to do (the catalog's
// store_unavailable speaks of a store that "could not be reached", which
// would send a person to look at the network); "" for the rest.
func pgAdvice(err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		var (
			unknownCA *x509.UnknownAuthorityError
			hostname  x509.HostnameError
			verify    *tls.CertificateVerificationError
		)
		switch {
		case strings.Contains(err.Error(), "server refused TLS connection"):
			return "the store URL asks for TLS (its sslmode) but the PostgreSQL server does not offer it: enable ssl on the server, or change sslmode in store"
		case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &verify):
			return "oncesync did not accept the PostgreSQL server's TLS certificate: give the certificate of its authority in sslrootcert, or check the host name in store"
		}
		return ""
	}
	if poolerWaitTimeout(err) {
		return "a connection pooler in front of PostgreSQL gave no server connection within its query_wait_timeout: " + poolFullAdvice
	}
	switch pe.Code {
	case "28P01", "28000":
		return "PostgreSQL refused the user or password in store (or its pg_hba.conf has no entry for this host, user and TLS setting)"
	case "3D000":
		return "the database named in store does not exist on that PostgreSQL server"
	case "42P05", "26000":
		return "a prepared statement of oncesync's was found on another session or missing from its own: " + (&sessionsError{}).Advice()
	case "57014":
		return "PostgreSQL cancelled a store statement (statement_timeout, set for oncesync's role or database, is shorter than it took, or an administrator cancelled it): set statement_timeout=0 in store, or raise it (docs/guide.md#a-dbas-settings-for-oncesyncs-role)"
	case "57P01":
		return "PostgreSQL ended oncesync's connection (a shutdown or restart, or an administrator's pg_terminate_backend)"
	case "25P03":
		return "PostgreSQL ended a store transaction idle longer than its idle_in_transaction_session_timeout: the worker was paused (a frozen VM, SIGSTOP), or the timeout is shorter than a store call takes"
	case "53300":
		return "PostgreSQL has no connection slot left (max_connections, or the role's or database's connection limit): raise it, or give fewer processes or workers to this store"
	case "57P03":
		return "PostgreSQL is starting up, shutting down or recovering: wait until it accepts connections"
	case "25006":
		return readOnlyAdvice
	case "55P03":
		return "a lock another session holds on a store table outlasted lock_timeout (set for oncesync's role or database): the run is retried; to let oncesync wait instead, set lock_timeout=0 in store (docs/guide.md#a-dbas-settings-for-oncesyncs-role)"
	case "42501":
		// The message names the object ("permission denied for table
		// ledger"), never a value.
		return "PostgreSQL refused the store URL's user a privilege on oncesync's schema (" + pe.Message + "): grant it USAGE on the schema, SELECT, INSERT, UPDATE, DELETE on its tables and USAGE, SELECT, UPDATE on its sequences, again after each upgrade's migrations (docs/guide.md#least-privilege-and-migrations)"
	}
	return ""
}

// readOnlyAdvice, standbyAdvice and readOnlyPrimaryAdvice say why
// PostgreSQL refused a write as read-only (25006): a standby, or a primary
// whose default_transaction_read_only is on. Managed services (Azure,
// Aiven, Neon, ...) turn that on when the disk is nearly full, and a DBA may
// for maintenance; telling that server's operator to look for a primary
// sends them the wrong way. Open asks the server which it is
// (readOnlyCause); a refusal mid-run names both.
const (
	readOnlyAdvice = "PostgreSQL refused a write as read-only: it is a standby (point store at the primary; after a failover, the promoted one), " +
		"or default_transaction_read_only is on (for the store's database or user, or in its URL's options; some managed services turn it on when the disk is nearly full)"
	standbyAdvice         = "PostgreSQL answered as a read-only standby: point store at the primary (after a failover, the promoted one)"
	readOnlyPrimaryAdvice = "PostgreSQL is not a standby but its transactions are read-only (default_transaction_read_only is on, for the store's database or user or in its URL's options; " +
		"some managed services turn it on when the disk is nearly full): free space if that is why, or turn it off " +
		"(ALTER DATABASE ... SET default_transaction_read_only = off, or the same for the role), then run again"
)

// readOnlyCause is standbyAdvice or readOnlyPrimaryAdvice for the server
// behind pool when err is its read-only refusal (25006), "" otherwise or
// when the server cannot say.
func readOnlyCause(ctx context.Context, pool *pgxpool.Pool, err error) string {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != "25006" {
		return ""
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	var inRecovery bool
	if pool.QueryRow(ctx, "SELECT pg_is_in_recovery()").Scan(&inRecovery) != nil {
		return ""
	}
	if inRecovery {
		return standbyAdvice
	}
	return readOnlyPrimaryAdvice
}

// diskFull reports whether err is the server's disk_full (53100).
func diskFull(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "53100"
}

// isUniqueViolation reports whether err is the server's unique_violation
// (23505).
func isUniqueViolation(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "23505"
}

// unavailable reports whether err means the store cannot be used right now
// (unreachable, restarting, overloaded, a lost connection, a lock or
// statement timeout, a transient conflict) as opposed to a bug, a bad
// argument or the caller's own context ending.
func unavailable(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch {
		case strings.HasPrefix(pe.Code, "08"), // connection exception
			strings.HasPrefix(pe.Code, "53"), // insufficient resources (too many connections, disk full)
			strings.HasPrefix(pe.Code, "58"), // system error (I/O)
			pe.Code == "57P01",               // admin_shutdown
			pe.Code == "57P02",               // crash_shutdown
			pe.Code == "57P03",               // cannot_connect_now (starting up, recovering)
			pe.Code == "57014",               // query_canceled (statement_timeout)
			pe.Code == "55P03",               // lock_not_available (lock_timeout)
			pe.Code == "40001",               // serialization_failure
			pe.Code == "40P01",               // deadlock_detected
			pe.Code == "25006":               // read_only_sql_transaction (a standby after failover)
			return true
		}
		return false
	}
	var (
		ce *pgconn.ConnectError
		ne net.Error
	)
	switch {
	case errors.As(err, &ce), errors.As(err, &ne),
		errors.Is(err, pgconn.ErrConnClosed), errors.Is(err, puddle.ErrClosedPool),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		pgconn.SafeToRetry(err):
		return true
	}
	return false
}

// invalidError is a caller mistake (bad argument); it is never retryable.
type invalidError struct{ msg string }

func (e *invalidError) Error() string { return "postgres: invalid argument: " + e.msg }

// InvalidReason is what is wrong when err is a caller mistake (a store URL
// or schema oncesync cannot use), in words safe to show (never the URL);
// false for every other error (a store that cannot be reached).
func InvalidReason(err error) (string, bool) {
	var ie *invalidError
	if errors.As(err, &ie) {
		return ie.msg, true
	}
	return "", false
}

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

// Times are stored as unix nanoseconds; NULL is the zero time.

func nanos(t time.Time) int64 { return t.UnixNano() }

func fromNanos(n int64) time.Time { return time.Unix(0, n).UTC() }

func fromNullNanos(n *int64) time.Time {
	if n == nil {
		return time.Time{}
	}
	return fromNanos(*n)
}

// limitArg turns a caller's limit into a LIMIT argument: <= 0 is NULL, "all".
func limitArg(limit int) *int64 {
	if limit <= 0 {
		return nil
	}
	l := int64(limit)
	return &l
}
