package queue

import (
	"context"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestQueueMigrationsByTheOwner: a DBA runs oncesync as a role that may use
// the tables but not create them. Opening the queue applied River's
// migrations with that role and failed with "permission denied for schema"
// and no word of what to do; nothing could apply the queue's migrations
// without also running workers. Migrate applies them (as the schema's
// owner), after which the role opens the queue, and a role that may not
// apply them is told to run oncesync migrate.
func TestQueueMigrationsByTheOwner(t *testing.T) {
	dbURL := testenv.DatabaseURL()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, dbURL)
	if err != nil {
		testenv.Unavailable(t, "PostgreSQL unreachable: %v", err)
	}
	suffix := testenv.RandHex(4)
	schema, role := "oncesync_qo_"+suffix, "oncesync_qo_app_"+suffix
	for _, q := range []string{
		`CREATE SCHEMA ` + schema,
		`CREATE ROLE ` + role + ` LOGIN`,
		`GRANT USAGE ON SCHEMA ` + schema + ` TO ` + role,
		`ALTER DEFAULT PRIVILEGES IN SCHEMA ` + schema + ` GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO ` + role,
		`ALTER DEFAULT PRIVILEGES IN SCHEMA ` + schema + ` GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO ` + role,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		for _, q := range []string{`DROP SCHEMA IF EXISTS ` + schema + ` CASCADE`, `DROP OWNED BY ` + role, `DROP ROLE ` + role} {
			if _, err := admin.Exec(ctx, q); err != nil {
				t.Logf("%s: %v", q, err)
			}
		}
		_ = admin.Close(ctx)
	})
	withUser := func(user string) *config.Config {
		u, err := url.Parse(dbURL)
		if err != nil {
			t.Fatal(err)
		}
		if user != "" {
			u.User = url.User(user)
		}
		q := u.Query()
		q.Set("search_path", schema)
		q.Set("pool_max_conns", "2")
		u.RawQuery = q.Encode()
		return &config.Config{Store: u.String()}
	}
	open := func(cfg *config.Config) error {
		b, err := openBackend(ctx, cfg, cfg.Store, &river.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			return err
		}
		return b.close()
	}

	err = open(withUser(role))
	if d := failure.Wrap(failure.StoreUnavailable, err, "open the job queue").Detail; err == nil ||
		!strings.Contains(d, "permission denied for schema") || !strings.Contains(d, "oncesync migrate") {
		t.Errorf("queue opened by a role that may not create, before the migrations: %v (detail %q)", err, d)
	}
	if err := Migrate(ctx, withUser(""), schema); err != nil {
		t.Fatalf("Migrate as the owner: %v", err)
	}
	if err := open(withUser(role)); err != nil {
		t.Errorf("queue opened by a role that may use the tables, after Migrate: %v", err)
	}
}
