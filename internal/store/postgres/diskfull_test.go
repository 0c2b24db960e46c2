package postgres

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/oncesync/oncesync/internal/store"
)

// TestDiskFullIsTold: the server's disk_full (53100) is an outage that
// says what to free (ErrDiskFull beside ErrUnavailable); the other
// insufficient-resources codes are outages only. PostgreSQL's disk cannot
// be filled here, so the server's error is built as pgx returns it.
func TestDiskFullIsTold(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		code string
		full bool
	}{
		{"53100", true},  // disk_full
		{"53300", false}, // too_many_connections
		{"53200", false}, // out_of_memory
	} {
		err := mapErr("ledger claim", &pgconn.PgError{Code: tc.code, Message: "x"})
		if !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%s: %v is not ErrUnavailable", tc.code, err)
		}
		if got := errors.Is(err, store.ErrDiskFull); got != tc.full {
			t.Errorf("%s: ErrDiskFull %v, want %v", tc.code, got, tc.full)
		}
	}
}
