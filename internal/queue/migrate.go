package queue

import (
	"context"
	"errors"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/riverqueue/river"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/store"
)

// Migrate applies the job queue's pending migrations (River's tables) for
// cfg's store, in schema (the store's schema on PostgreSQL, "" for SQLite),
// and runs nothing: `oncesync migrate` does it with the schema owner's URL
// so that serve and worker may run as a role that only uses the tables
// (docs/guide.md#least-privilege-and-migrations).
func Migrate(ctx context.Context, cfg *config.Config, schema string) error {
	rc := &river.Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if isPostgresURL(cfg.Store) {
		rc.Schema = schema
	}
	b, err := openBackend(ctx, cfg, cfg.Store, rc)
	if err != nil {
		return err
	}
	return b.close()
}

// migrationAdvice is err, River's migrations refused a privilege, with what
// to do: a role that may only use the tables cannot apply the migrations an
// upgrade brings.
func migrationAdvice(err error) error {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "42501" {
		// PostgreSQL's message names the object, never a value.
		return store.WithAdvice(err, "the store URL's user may not apply the job queue's migrations ("+pe.Message+
			"): run oncesync migrate with a store URL whose user owns the schema, then grant this one the use of the new tables "+
			"(docs/guide.md#least-privilege-and-migrations)")
	}
	return err
}
