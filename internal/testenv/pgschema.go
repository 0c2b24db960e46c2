package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// PostgresSchema connects to the test PostgreSQL (DatabaseURL) and creates
// a schema of its own, named prefix and random hex; the schema is dropped
// and the connection closed when t ends. A server that does not answer is
// Unavailable.
func PostgresSchema(t testing.TB, prefix string) (admin *pgx.Conn, schema string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, DatabaseURL())
	if err != nil {
		Unavailable(t, "PostgreSQL unreachable: %v", err)
	}
	schema = prefix + RandHex(4)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if _, err := admin.Exec(ctx, `DROP SCHEMA IF EXISTS `+schema+` CASCADE`); err != nil {
			t.Logf("drop schema %s: %v", schema, err)
		}
		_ = admin.Close(ctx)
	})
	if _, err := admin.Exec(ctx, `CREATE SCHEMA `+schema); err != nil {
		t.Fatal(err)
	}
	return admin, schema
}
