package postgres

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// startupParams stay in the startup packet: those PgBouncer passes on to
// the server (its own list, lower-cased; it refuses a connection that sends
// any other, "unsupported startup parameter", in every pool mode), and
// options, which only a startup packet can carry.
var startupParams = map[string]bool{
	"options":                     true,
	"application_name":            true,
	"client_encoding":             true,
	"datestyle":                   true,
	"timezone":                    true,
	"standard_conforming_strings": true,
}

// SetAfterConnect moves cfg's session settings that are not among the
// startup parameters a pooler passes on (search_path,
// idle_in_transaction_session_timeout, statement_timeout, ...) out of the
// startup packet into one set_config statement run on every new connection,
// so a store or queue behind PgBouncer in session mode gets them as a direct
// connection does (docs/guide.md#postgresql-behind-a-connection-pooler).
//
// Unless cfg sets it, the same statement turns idle_session_timeout off:
// the pools keep connections idle on purpose, and River's LISTEN connection
// is idle between notifications, so a role's idle_session_timeout had the
// server end it over and over (an ERROR logged each time, notifications
// lost while River backed off). Set through pg_settings, a server older than
// PostgreSQL 14, which has no such setting, is left alone
// (docs/guide.md#a-dbas-settings-for-oncesyncs-role).
//
// default_transaction_isolation is always read committed: the store's
// fences and leases are locked rows re-read by each statement (see the
// package comment), and River's queries assume it too. Under a role's or
// database's serializable (or repeatable read), a claim or a lease grant
// racing another failed with "could not serialize access" (40001).
func SetAfterConnect(cfg *pgxpool.Config) {
	params := cfg.ConnConfig.RuntimeParams
	params["default_transaction_isolation"] = "read committed"
	var names []string
	for k := range params {
		if !startupParams[strings.ToLower(k)] {
			names = append(names, k)
		}
	}
	_, ownIdle := params["idle_session_timeout"]
	sort.Strings(names)
	var (
		sql  strings.Builder
		args = []any{pgx.QueryExecModeSimpleProtocol}
	)
	sql.WriteString("SELECT ")
	for i, k := range names {
		if i > 0 {
			sql.WriteString(", ")
		}
		fmt.Fprintf(&sql, "set_config($%d, $%d, false)", 2*i+1, 2*i+2)
		args = append(args, k, params[k])
		delete(params, k)
	}
	if !ownIdle {
		if len(names) > 0 {
			sql.WriteString(", ")
		}
		sql.WriteString(`(SELECT set_config(name, '0', false) FROM pg_settings WHERE name = 'idle_session_timeout')`)
	}
	stmt := sql.String()
	next := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
		if _, err := conn.Exec(ctx, stmt, args...); err != nil {
			return fmt.Errorf("set the session's settings: %w", err)
		}
		if next != nil {
			return next(ctx, conn)
		}
		return nil
	}
}

// FirstAnswer runs a first statement on pool within timeout (the connect
// timeout). Behind PgBouncer in session mode, each client connection holds
// a server connection for its life; when the pool for the database and user
// (default_pool_size) is smaller than the connections of every oncesync
// process, the client connects at once but its first statement waits for a
// server connection that no process gives back, until PgBouncer's
// query_wait_timeout (120 s), and then fails with words naming nothing: a
// process started last hung for two minutes, then exited with "open the job
// queue" alone. The error names the likely cause
// (docs/guide.md#postgresql-behind-a-connection-pooler).
func FirstAnswer(ctx context.Context, pool *pgxpool.Pool, timeout time.Duration) error {
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	qctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := pool.Exec(qctx, `SELECT 1`, pgx.QueryExecModeSimpleProtocol)
	if err != nil && ctx.Err() == nil && (qctx.Err() != nil || poolerWaitTimeout(err)) {
		return &noAnswerError{err: err, timeout: timeout}
	}
	return err
}

// checkSessionsWithin is checkSessions within the connect timeout: its
// second connection is one more server connection a full pool does not
// have (FirstAnswer).
func (s *Store) checkSessionsWithin(ctx context.Context, cc *pgx.ConnConfig) error {
	timeout := cc.ConnectTimeout
	if timeout <= 0 {
		timeout = DefaultConnectTimeout
	}
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err := s.checkSessions(cctx, cc)
	if err != nil && ctx.Err() == nil && (cctx.Err() != nil || poolerWaitTimeout(err)) {
		return &noAnswerError{err: err, timeout: timeout}
	}
	return err
}

// noAnswerError is FirstAnswer's error when nothing answered in time.
type noAnswerError struct {
	err     error
	timeout time.Duration
}

func (e *noAnswerError) Error() string { return e.err.Error() }
func (e *noAnswerError) Unwrap() error { return e.err }

// Advice names the likely cause; it stands in for openAdvice's "did not
// answer", which sends a person to the network.
func (e *noAnswerError) Advice() string {
	return fmt.Sprintf("PostgreSQL, or a connection pooler in front of it, accepted the connection but did not answer a first statement within %s: ", e.timeout) + poolFullAdvice
}

// poolFullAdvice is what to do when a pooler gives no server connection.
const poolFullAdvice = "when PgBouncer (or another pooler) stands in front of PostgreSQL, its pool for this database and user is full: " +
	"give it at least as many server connections (default_pool_size, max_db_connections, max_user_connections) as every oncesync process holds " +
	"(pool_max_conns of the store and of the queue, each process), or lower pool_max_conns in store (docs/guide.md#postgresql-behind-a-connection-pooler)"

// poolerWaitTimeout reports whether err is PgBouncer's query_wait_timeout
// (or its query_timeout): no server connection came free in time.
func poolerWaitTimeout(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "08P01" && strings.Contains(pe.Message, "query_wait_timeout")
}

// ErrSessionsNotKept: the store's client connections do not each keep one
// server session (a pooler in transaction or statement mode between
// oncesync and PostgreSQL), so its session settings and prepared statements
// would land on other clients' sessions, or be missing from its own.
var ErrSessionsNotKept = errors.New("the store's connections do not keep their PostgreSQL session")

// sessionsError is ErrSessionsNotKept with what was seen.
type sessionsError struct{ seen string }

func (e *sessionsError) Error() string { return ErrSessionsNotKept.Error() + ": " + e.seen }
func (e *sessionsError) Unwrap() error { return ErrSessionsNotKept }

// Advice names the likely cause and the supported setups.
func (e *sessionsError) Advice() string {
	return "a connection pooler in transaction or statement mode (PgBouncer's pool_mode) stands between oncesync and PostgreSQL: " +
		"point store at PostgreSQL itself or at a pool in session mode (docs/guide.md#postgresql-behind-a-connection-pooler)"
}

// checkSessions refuses a store whose connections do not keep a session of
// their own: a pooler in transaction mode hands one server session to many
// clients in turn, so a setting made on connecting (search_path) may be
// missing from the next statement's session and pgx's named prepared
// statements clash ("prepared statement ... already exists"), failing runs
// part-way with errors that name neither cause. Two connections are compared
// (the pool's and one of its own, whatever the pool's size): while one holds
// a transaction, the other must keep its own server process.
func (s *Store) checkSessions(ctx context.Context, cc *pgx.ConnConfig) error {
	const probe = `SELECT pg_backend_pid()`
	simple := pgx.QueryExecModeSimpleProtocol
	a, err := s.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer a.Release()
	var pidA, pidB, pidA2 int32
	if err := a.QueryRow(ctx, probe, simple).Scan(&pidA); err != nil {
		return err
	}
	b, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer func() { _ = b.Close(context.WithoutCancel(ctx)) }()
	tx, err := b.Begin(ctx)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := tx.QueryRow(ctx, probe, simple).Scan(&pidB); err != nil {
		return err
	}
	if pidB == pidA {
		return &sessionsError{seen: fmt.Sprintf("two connections were served by one server process (pid %d)", pidA)}
	}
	if err := a.QueryRow(ctx, probe, simple).Scan(&pidA2); err != nil {
		return err
	}
	if pidA2 != pidA {
		return &sessionsError{seen: fmt.Sprintf("one connection was served by server processes %d, then %d", pidA, pidA2)}
	}
	return nil
}
