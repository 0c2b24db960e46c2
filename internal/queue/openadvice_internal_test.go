package queue

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestOpenQueueSaysWhyPostgresCancelled: a statement of the job queue's
// that PostgreSQL cancels (statement_timeout, set for oncesync's role, here
// on its connection) is named when serve or worker opens the queue, as the
// store names it; `open the job queue` alone sent an operator to
// --log-level debug (an independent check, 2026-12-06). The queue's
// migration lock, held by another session, makes the wait certain.
func TestOpenQueueSaysWhyPostgresCancelled(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	dbURL := testenv.DatabaseURL()
	admin, schema := testenv.PostgresSchema(t, "oncesync_qadv_") // closing it ends its advisory lock
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock($1)`, queueMigrationLockKey(schema)); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-c statement_timeout=50")
	u.RawQuery = strings.ReplaceAll(q.Encode(), "+", "%20") // libpq's form of a space
	b, err := openBackend(ctx, &config.Config{}, u.String(), &river.Config{Schema: schema})
	if err == nil {
		_ = b.close()
		t.Fatal("the queue opened while its migration lock was held and statements time out after 50 ms")
	}
	fe := failure.Wrap(failure.StoreUnavailable, err, "open the job queue")
	if !strings.Contains(fe.Detail, "statement_timeout") {
		t.Fatalf("detail %q; want it to name statement_timeout", fe.Detail)
	}
}
