package postgres_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/source"
	"github.com/oncesync/oncesync/internal/source/postgres"
	"github.com/oncesync/oncesync/internal/source/sourcetest"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestSetupOnALockedTable: a table another session holds an ACCESS
// EXCLUSIVE lock on (an ALTER TABLE, a LOCK TABLE in a transaction left
// open) made the source's setup run out of time with "check: context
// deadline exceeded", which the run reported as invalid_sync_definition
// (owner: you, fix the config). It is source.ErrUnavailable (retried),
// and says what may hold it and how to see it.
func TestSetupOnALockedTable(t *testing.T) {
	t.Parallel()
	b := setup(t)
	name := b.table("locked")
	b.exec(t, "CREATE TABLE "+name+" (id bigint PRIMARY KEY, email text)", "INSERT INTO "+name+" VALUES (1, 'a@example.com')")
	holder, err := pgx.Connect(t.Context(), b.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(context.Background())
	tx, err := holder.Begin(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tx.Rollback(context.Background()) }()
	if _, err := tx.Exec(t.Context(), "LOCK TABLE "+name+" IN ACCESS EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}

	kind := postgres.Kind{SetupTimeout: time.Second}
	src, err := kind.New(t.Context(), config.Source{Identity: "id", Spec: &postgres.Config{DSN: b.dsn, Table: name}}, "")
	if err == nil {
		src.Close()
		t.Fatal("New on a locked table succeeded")
	}
	sourcetest.WantNoAnswer(t, "New on a locked table", err, "check: no answer within 1s", "lock on the table", "pg_stat_activity")
	if strings.Contains(err.Error(), "deadline exceeded") {
		t.Errorf("New on a locked table: %q still reads as a bare timeout", err)
	}

	// The caller's own cancellation stays the caller's.
	ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	defer cancel()
	_, err = postgres.Kind{SetupTimeout: time.Minute}.New(ctx, config.Source{Identity: "id", Spec: &postgres.Config{DSN: b.dsn, Table: name}}, "")
	var na2 *source.NoAnswerError
	if err == nil || errors.As(err, &na2) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("New under the caller's deadline = %v, want the caller's deadline, not the source's", err)
	}
}

// TestConnectErrorIsOneLine: pgx lists every address it tried on a line of
// its own, twice with sslmode=prefer; a run's detail showed that as a
// broken paragraph. It is one line, each attempt once.
func TestConnectErrorIsOneLine(t *testing.T) {
	t.Parallel()
	addr := testenv.RefusedAddr(t)
	_, err := postgres.New(t.Context(), postgres.Params{DSN: "postgres://postgres@" + addr + "/db?sslmode=prefer", Table: "t", Identity: "id"})
	if err == nil || !errors.Is(err, source.ErrUnavailable) {
		t.Fatalf("New against a refused port = %v, want source unavailable", err)
	}
	if msg := err.Error(); strings.Contains(msg, "\n") || strings.Count(msg, "connection refused") != 1 || !strings.Contains(msg, "failed to connect to") {
		t.Fatalf("New against a refused port: %q, want one line naming the refusal once", msg)
	}
}
