package postgres

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncesync/oncesync/internal/store"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migration is one numbered schema change, e.g. migrations/0001_init.sql.
type migration struct {
	Version int
	Name    string
	SQL     string
}

// migrations returns the embedded migrations in version order. Versions
// must be positive and unique; gaps are allowed (numbers are handed out to
// changes developed in parallel, and one may land before another).
func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, err
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.sql", name)
		}
		v, err := strconv.Atoi(num)
		if err != nil {
			return nil, fmt.Errorf("migration file %q: bad version: %w", name, err)
		}
		body, err := migrationFS.ReadFile(path.Join("migrations", name))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i, m := range out {
		if m.Version < 1 {
			return nil, fmt.Errorf("migration %s: versions start at 1", m.Name)
		}
		if i > 0 && m.Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s have the same version", out[i-1].Name, m.Name)
		}
	}
	return out, nil
}

// migrationLockKey is the advisory lock that serialises migrations of one
// schema across every process sharing the database.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("oncesync migrate " + schema))
	return int64(h.Sum64())
}

// migrate creates the schema if needed and applies every pending migration in
// one transaction holding a transaction-scoped advisory lock, taken before the
// applied versions are read: processes opening a fresh database at the same
// moment apply the schema exactly once (the others wait for the lock, then
// find nothing to do). A failed migration leaves nothing behind.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	schema := pgx.Identifier{s.schema}.Sanitize()
	// A store already at this binary's version is opened without DDL, so a
	// role that may only use the tables (the migrations applied by their
	// owner) opens it: CREATE SCHEMA and CREATE TABLE IF NOT EXISTS check
	// the CREATE privilege before they look whether there is anything to
	// create (docs/guide.md#least-privilege-and-migrations).
	if current, err := s.upToDate(ctx, ms); err != nil || current {
		return err
	}
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock($1)`, migrationLockKey(s.schema)); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE SCHEMA IF NOT EXISTS `+schema); err != nil {
			return err
		}
		// The connection's search_path named the schema before it existed:
		// pin it for the migrations' unqualified names.
		if _, err := tx.Exec(ctx, `SET LOCAL search_path TO `+schema); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `CREATE TABLE IF NOT EXISTS `+schema+`.schema_migrations (
			version    integer NOT NULL PRIMARY KEY,
			name       text    NOT NULL,
			applied_at bigint  NOT NULL
		)`); err != nil {
			return err
		}
		// A migration is pending when its version is not recorded, so one
		// that lands below an applied version (0002 after 0003) still runs.
		rows, err := tx.Query(ctx, `SELECT version FROM `+schema+`.schema_migrations`)
		if err != nil {
			return err
		}
		applied, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			return err
		}
		todo, err := pendingMigrations(applied, ms)
		if err != nil {
			return err
		}
		for _, m := range todo {
			if _, err := tx.Exec(ctx, m.SQL); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
			if _, err := tx.Exec(ctx, `INSERT INTO `+schema+`.schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)`,
				m.Version, m.Name, nanos(s.now())); err != nil {
				return fmt.Errorf("migration %s: %w", m.Name, err)
			}
		}
		return nil
	})
}

// upToDate reports whether every migration of ms is applied in the store's
// schema, reading schema_migrations only; a schema or table not there yet is
// false, a schema newer than ms a *store.SchemaNewerError.
func (s *Store) upToDate(ctx context.Context, ms []migration) (bool, error) {
	rows, err := s.pool.Query(ctx, `SELECT version FROM `+pgx.Identifier{s.schema, "schema_migrations"}.Sanitize())
	if err != nil {
		return false, nil // not there yet, or not readable: migrate says which
	}
	applied, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		var pe *pgconn.PgError
		if errors.As(err, &pe) && (pe.Code == "42P01" || pe.Code == "3F000") {
			return false, nil // undefined table or schema: a new store
		}
		return false, err
	}
	todo, err := pendingMigrations(applied, ms)
	return len(todo) == 0 && err == nil, err
}

// pendingMigrations are the migrations of ms (in version order) not among
// the applied versions: a migration that lands below an applied version
// (0002 after 0003) is still pending. A version applied beyond ms's newest
// is a *store.SchemaNewerError: a newer oncesync migrated the store.
func pendingMigrations(applied []int32, ms []migration) ([]migration, error) {
	done := make(map[int]bool, len(applied))
	newest := 0
	for _, v := range applied {
		done[int(v)] = true
		newest = max(newest, int(v))
	}
	known := 0
	if len(ms) > 0 {
		known = ms[len(ms)-1].Version
	}
	if newest > known {
		return nil, &store.SchemaNewerError{Version: newest, Known: known}
	}
	var todo []migration
	for _, m := range ms {
		if !done[m.Version] {
			todo = append(todo, m)
		}
	}
	return todo, nil
}

// SchemaVersion returns the highest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.pool.QueryRow(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, mapErr("schema version", err)
	}
	return v, nil
}
