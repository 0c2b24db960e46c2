package queue

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/riverdriver/riversqlite"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	sqlitedrv "modernc.org/sqlite" // and database/sql driver "sqlite"
	sqlitelib "modernc.org/sqlite/lib"
	"riverqueue.com/riverui"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/store"
)

// backend is the part of a River client the service uses, whatever its
// driver's transaction type.
type backend interface {
	start(ctx context.Context) error
	// stop stops fetching, waits for running jobs (cancelling them after the
	// client's SoftStopTimeout) and returns when they returned or ctx ends.
	stop(ctx context.Context) error
	insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error)
	// insertMany inserts every job of args in one transaction: all or none.
	insertMany(ctx context.Context, args []river.JobArgs) ([]*rivertype.JobInsertResult, error)
	// running lists running jobs of kind.
	running(ctx context.Context, kind string, limit int) ([]*rivertype.JobRow, error)
	// jobsOf lists the jobs of kind whose args name syncID (sync_id), only
	// those of run runID (run_id, partition jobs) when it is not 0, in
	// states, newest first, at most limit.
	jobsOf(ctx context.Context, kind, syncID string, runID int64, states []rivertype.JobState, limit int) ([]*rivertype.JobRow, error)
	// rescue makes running jobs available again at once if they were
	// attempted before horizon (their worker is known dead).
	rescue(ctx context.Context, ids []int64, horizon time.Time, why string) error
	// attempt is job id's attempt as the queue has it now (River counts
	// one up each time a worker takes the job).
	attempt(ctx context.Context, id int64) (int, error)
	// countByState counts the queue's jobs by state (one query).
	countByState(ctx context.Context) (map[rivertype.JobState]int, error)
	// where names the queue's database for the start line (no secrets).
	where() string
	// reschedule replaces the client's periodic jobs with jobs: their next
	// ticks are computed again from now.
	reschedule(jobs []*river.PeriodicJob) error
	// retryNow makes job id (retryable or scheduled) available at once.
	retryNow(ctx context.Context, id int64) error
	// releaseAfter makes every waiting job (available, scheduled or
	// retryable) due after after available at once, and counts them.
	releaseAfter(ctx context.Context, after time.Time) (int, error)
	// ui returns River's web UI over this queue, served under prefix.
	ui(ctx context.Context, logger *slog.Logger, prefix string) (http.Handler, error)
	close() error
}

type riverBackend[TTx any] struct {
	client  *river.Client[TTx]
	driver  riverdriver.Driver[TTx]
	schema  string
	desc    string
	closeFn func() error
}

// migrateFunc applies River's pending migrations with m, serialised across
// every process opening the same queue: River's migrator takes no lock, so
// processes starting together on a fresh queue (or after an upgrade that
// brings a River migration) would each find the migrations pending and all
// but one fail on the tables the first created.
type migrateFunc[TTx any] func(ctx context.Context, m *rivermigrate.Migrator[TTx]) error

func newRiverBackend[TTx any](ctx context.Context, driver riverdriver.Driver[TTx], cfg *river.Config, desc string, closeFn func() error, migrate migrateFunc[TTx]) (*riverBackend[TTx], error) {
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: cfg.Schema, Logger: cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("queue migrations: %w", err)
	}
	if err := migrate(ctx, migrator); err != nil {
		return nil, fmt.Errorf("queue migrations: %w", migrationAdvice(err))
	}
	client, err := river.NewClient(driver, cfg)
	if err != nil {
		return nil, fmt.Errorf("queue client: %w", err)
	}
	return &riverBackend[TTx]{client: client, driver: driver, schema: cfg.Schema, desc: desc, closeFn: closeFn}, nil
}

func (b *riverBackend[TTx]) start(ctx context.Context) error { return b.client.Start(ctx) }

func (b *riverBackend[TTx]) ui(ctx context.Context, logger *slog.Logger, prefix string) (http.Handler, error) {
	h, err := riverui.NewHandler(&riverui.HandlerOpts{
		Endpoints: riverui.NewEndpoints(b.client, nil),
		Logger:    logger,
		Prefix:    prefix,
		// Job arguments name syncs only, but stay hidden until asked for.
		JobListHideArgsByDefault: true,
	})
	if err != nil {
		return nil, fmt.Errorf("river UI: %w", err)
	}
	if err := h.Start(ctx); err != nil {
		return nil, fmt.Errorf("river UI: %w", err)
	}
	return h, nil
}

func (b *riverBackend[TTx]) stop(ctx context.Context) error { return b.client.Stop(ctx) }

func (b *riverBackend[TTx]) releaseAfter(ctx context.Context, after time.Time) (int, error) {
	res, err := b.client.JobList(ctx, river.NewJobListParams().
		States(rivertype.JobStateAvailable, rivertype.JobStateScheduled, rivertype.JobStateRetryable).First(10000))
	if err != nil {
		return 0, err
	}
	n := 0
	for _, j := range res.Jobs {
		if !j.ScheduledAt.After(after) {
			continue
		}
		if _, err := b.client.JobRetry(ctx, j.ID); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

func (b *riverBackend[TTx]) retryNow(ctx context.Context, id int64) error {
	_, err := b.client.JobRetry(ctx, id)
	return err
}

func (b *riverBackend[TTx]) reschedule(jobs []*river.PeriodicJob) error {
	pj := b.client.PeriodicJobs()
	pj.Clear()
	_, err := pj.AddManySafely(jobs)
	return err
}

func (b *riverBackend[TTx]) insert(ctx context.Context, args river.JobArgs, opts *river.InsertOpts) (*rivertype.JobInsertResult, error) {
	return b.client.Insert(ctx, args, opts)
}

func (b *riverBackend[TTx]) insertMany(ctx context.Context, args []river.JobArgs) ([]*rivertype.JobInsertResult, error) {
	params := make([]river.InsertManyParams, len(args))
	for i, a := range args {
		params[i] = river.InsertManyParams{Args: a}
	}
	return b.client.InsertMany(ctx, params)
}

func (b *riverBackend[TTx]) running(ctx context.Context, kind string, limit int) ([]*rivertype.JobRow, error) {
	res, err := b.client.JobList(ctx, river.NewJobListParams().Kinds(kind).States(rivertype.JobStateRunning).First(limit))
	if err != nil {
		return nil, err
	}
	return res.Jobs, nil
}

// jobsOf filters on the job's arguments with the JSON operator ->>, which
// PostgreSQL (jsonb) and SQLite (3.38+, JSONB blobs) both have; the run id
// is compared as text, which is what PostgreSQL's ->> returns and what
// SQLite compares a number with once one side is CAST AS TEXT.
func (b *riverBackend[TTx]) jobsOf(ctx context.Context, kind, syncID string, runID int64, states []rivertype.JobState, limit int) ([]*rivertype.JobRow, error) {
	p := river.NewJobListParams().Kinds(kind).States(states...).
		Where("args ->> 'sync_id' = @sync_id", river.NamedArgs{"sync_id": syncID}).
		OrderBy(river.JobListOrderByID, river.SortOrderDesc).First(limit)
	if runID != 0 {
		p = p.Where("args ->> 'run_id' = CAST(@run_id AS TEXT)", river.NamedArgs{"run_id": strconv.FormatInt(runID, 10)})
	}
	res, err := b.client.JobList(ctx, p)
	if err != nil {
		return nil, err
	}
	return res.Jobs, nil
}

// rescue uses the driver's JobRescueMany, the statement River's own stuck-job
// rescuer runs: it only touches jobs still running and attempted before
// horizon, so a job that finished meanwhile is left alone.
func (b *riverBackend[TTx]) rescue(ctx context.Context, ids []int64, horizon time.Time, why string) error {
	if len(ids) == 0 {
		return nil
	}
	now := time.Now().UTC()
	p := &riverdriver.JobRescueManyParams{Schema: b.schema, StuckHorizon: horizon.UTC()}
	for _, id := range ids {
		msg, err := json.Marshal(rivertype.AttemptError{At: now, Error: why})
		if err != nil {
			return err
		}
		p.ID = append(p.ID, id)
		p.Error = append(p.Error, msg)
		p.FinalizedAt = append(p.FinalizedAt, nil)
		p.ScheduledAt = append(p.ScheduledAt, now)
		p.State = append(p.State, string(rivertype.JobStateAvailable))
	}
	_, err := b.driver.GetExecutor().JobRescueMany(ctx, p)
	return err
}

func (b *riverBackend[TTx]) attempt(ctx context.Context, id int64) (int, error) {
	j, err := b.client.JobGet(ctx, id)
	if err != nil {
		return 0, err
	}
	return j.Attempt, nil
}

func (b *riverBackend[TTx]) countByState(ctx context.Context) (map[rivertype.JobState]int, error) {
	return b.driver.GetExecutor().JobCountByAllStates(ctx, &riverdriver.JobCountByAllStatesParams{Schema: b.schema})
}

func (b *riverBackend[TTx]) where() string { return b.desc }

func (b *riverBackend[TTx]) close() error {
	if b.closeFn == nil {
		return nil
	}
	return b.closeFn()
}

// QueuePath returns the SQLite file of the queue of a sqlite:// store: the
// store's file with ".queue" appended, relative paths resolved against the
// config file's directory (as the store's are).
func QueuePath(cfg *config.Config) (string, error) {
	path, err := app.SQLitePath(cfg)
	if err != nil {
		return "", err
	}
	return path + ".queue", nil
}

// openBackend opens the queue for the store URL storeURL.
func openBackend(ctx context.Context, cfg *config.Config, storeURL string, rc *river.Config) (backend, error) {
	switch {
	case strings.HasPrefix(storeURL, "sqlite:"):
		path, err := QueuePath(&config.Config{Store: storeURL, Path: cfg.Path})
		if err != nil {
			return nil, err
		}
		q := url.Values{}
		q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", sqliteBusyTimeout.Milliseconds()))
		q.Add("_pragma", "journal_mode(WAL)")
		q.Add("_pragma", "synchronous(NORMAL)")
		q.Set("_txlock", "immediate")
		_ = store.CreatePrivateFile(path) // its jobs' errors name syncs and their failures; SQLite reports a path it cannot open
		db, err := sql.Open("sqlite", path+"?"+q.Encode())
		if err != nil {
			return nil, fmt.Errorf("open the queue %s: %w", path, err)
		}
		// River's advice for SQLite: one connection, so its concurrent
		// internal operations queue in Go instead of failing SQLITE_BUSY.
		db.SetMaxOpenConns(1)
		b, err := newRiverBackend(ctx, riversqlite.New(db), rc, "sqlite "+path, db.Close, migrateSQLite(db))
		if err != nil {
			_ = db.Close()
			return nil, err
		}
		return b, nil
	case isPostgresURL(storeURL):
		pcfg, err := pgxpool.ParseConfig(storeURL)
		if err != nil {
			// The parse error quotes the URL, which may hold a password.
			return nil, errors.New("the store URL is not a valid PostgreSQL connection string")
		}
		if pcfg.ConnConfig.ConnectTimeout == 0 {
			pcfg.ConnConfig.ConnectTimeout = connectTimeout
		}
		if pcfg.ConnConfig.RuntimeParams["application_name"] == "" {
			pcfg.ConnConfig.RuntimeParams["application_name"] = "oncesync-queue"
		}
		app.PostgresSessionSettings(pcfg)
		pool, err := pgxpool.NewWithConfig(ctx, pcfg)
		if err != nil {
			return nil, fmt.Errorf("open the queue database: %w", redactURLError(err, storeURL))
		}
		if err := app.PostgresFirstAnswer(ctx, pool, pcfg.ConnConfig.ConnectTimeout); err != nil {
			pool.Close()
			return nil, fmt.Errorf("open the queue database: %w", app.PostgresAdvised(err))
		}
		b, err := newRiverBackend(ctx, riverpgxv5.New(pool), rc, "postgres "+redactURL(storeURL), func() error { pool.Close(); return nil },
			migratePostgres(pool, rc.Schema))
		if err != nil {
			pool.Close()
			return nil, app.PostgresAdvised(redactURLError(err, storeURL))
		}
		return b, nil
	default:
		return nil, errors.New("the store URL must start with sqlite:// or postgres://")
	}
}

// migrateSQLite runs River's migrations in one BEGIN IMMEDIATE transaction
// (the queue's _txlock): the file's write lock is taken before the applied
// versions are read, so a second process waits (busy_timeout) and then
// finds nothing to do. SQLite's DDL is transactional: a failed migration
// leaves nothing behind. While another process turns a fresh file into WAL
// mode (the first connection's pragma), SQLite answers SQLITE_BUSY at once
// instead of calling the busy handler: that is retried for up to
// sqliteBusyTimeout, as the store's own first open does.
func migrateSQLite(db *sql.DB) migrateFunc[*sql.Tx] {
	once := func(ctx context.Context, m *rivermigrate.Migrator[*sql.Tx]) error {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		defer func() { _ = tx.Rollback() }()
		if _, err := m.MigrateTx(ctx, tx, rivermigrate.DirectionUp, nil); err != nil {
			return err
		}
		return tx.Commit()
	}
	return func(ctx context.Context, m *rivermigrate.Migrator[*sql.Tx]) error {
		return store.RetryFor(ctx, sqliteBusyTimeout, sqliteBusy, func() error { return once(ctx, m) })
	}
}

// sqliteBusyTimeout is the queue file's busy_timeout.
const sqliteBusyTimeout = 10 * time.Second

// sqliteBusy reports whether err is SQLITE_BUSY or SQLITE_LOCKED.
func sqliteBusy(err error) bool {
	var se *sqlitedrv.Error
	if !errors.As(err, &se) {
		return false
	}
	c := se.Code() & 0xff
	return c == sqlitelib.SQLITE_BUSY || c == sqlitelib.SQLITE_LOCKED
}

// migratePostgres runs River's migrations (each in its own transaction, as
// River wants: some need an earlier one committed) while holding a session
// advisory lock of the queue's schema on one connection of pool.
func migratePostgres(pool *pgxpool.Pool, schema string) migrateFunc[pgx.Tx] {
	return func(ctx context.Context, m *rivermigrate.Migrator[pgx.Tx]) error {
		conn, err := pool.Acquire(ctx)
		if err != nil {
			return err
		}
		key := queueMigrationLockKey(schema)
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1)`, key); err != nil {
			conn.Release()
			return err
		}
		_, err = m.Migrate(ctx, rivermigrate.DirectionUp, nil)
		// Unlock on a context of its own: a cancelled ctx must not leave the
		// lock held by a connection going back to the pool.
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, uerr := conn.Exec(uctx, `SELECT pg_advisory_unlock($1)`, key); uerr != nil {
			// The lock's fate is unknown: close the connection, which ends it.
			_ = conn.Conn().Close(uctx)
		}
		conn.Release()
		return err
	}
}

// queueMigrationLockKey is the advisory lock that serialises River's
// migrations of one schema ("" is the connection's search_path) across
// every process sharing the database; the store's migrations take another.
func queueMigrationLockKey(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("oncesync river migrate " + schema))
	return int64(h.Sum64())
}

// connectTimeout bounds each connection attempt of the queue's pool when the
// URL sets none, so an unreachable server fails in seconds.
const connectTimeout = 10 * time.Second

// isPostgresURL reports whether raw is a postgres:// (or postgresql://) URL.
func isPostgresURL(raw string) bool {
	return strings.HasPrefix(raw, "postgres://") || strings.HasPrefix(raw, "postgresql://")
}

// redactURL drops the password of a database URL.
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return "postgres://(unparsable URL)"
	}
	return u.Redacted()
}

// redactURLError keeps a database URL's password out of an error.
func redactURLError(err error, raw string) error {
	u, perr := url.Parse(raw)
	if perr != nil || u.User == nil {
		return err
	}
	if pw, ok := u.User.Password(); ok && pw != "" && strings.Contains(err.Error(), pw) {
		return errors.New(strings.ReplaceAll(err.Error(), pw, "xxxxx"))
	}
	return err
}
