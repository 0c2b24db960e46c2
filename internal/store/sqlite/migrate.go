package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

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
		if v < 1 {
			return nil, fmt.Errorf("migration file %q: versions start at 1", name)
		}
		body, err := migrationFS.ReadFile(path.Join("migrations", name))
		if err != nil {
			return nil, err
		}
		out = append(out, migration{Version: v, Name: strings.TrimSuffix(name, ".sql"), SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("migrations %s and %s have the same version", out[i-1].Name, out[i].Name)
		}
	}
	return out, nil
}

// migrate applies every pending migration in one BEGIN IMMEDIATE transaction
// (db must be the write pool). The write lock is taken before the applied
// versions are read, so two processes opening a fresh file at once apply the
// schema exactly once: the second waits (busy timeout) and then finds nothing
// to do.
//
// A migration is pending when its version is not in schema_migrations, so
// one that lands with a number below an applied one (0002 after 0003) is
// still applied. A database carrying a version this binary does not know,
// above its newest, belongs to a newer oncesync and is refused.
func migrate(ctx context.Context, db *sql.DB, now time.Time) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	return migrateList(ctx, db, now, ms)
}

func migrateList(ctx context.Context, db *sql.DB, now time.Time, ms []migration) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }()

	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER NOT NULL PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL
	) STRICT`); err != nil {
		return err
	}
	applied := map[int]bool{}
	rows, err := tx.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return err
	}
	newest := 0
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			_ = rows.Close()
			return err
		}
		applied[v] = true
		newest = max(newest, v)
	}
	if err := rows.Close(); err != nil {
		return err
	}
	known := 0
	if len(ms) > 0 {
		known = ms[len(ms)-1].Version
	}
	if newest > known {
		return &store.SchemaNewerError{Version: newest, Known: known}
	}
	for _, m := range ms {
		if applied[m.Version] {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
			m.Version, m.Name, now.UnixNano()); err != nil {
			return fmt.Errorf("migration %s: %w", m.Name, err)
		}
	}
	return tx.Commit()
}

// SchemaVersion returns the highest applied migration.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	var v int
	if err := s.r.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&v); err != nil {
		return 0, s.mapErr("schema version", err)
	}
	return v, nil
}
