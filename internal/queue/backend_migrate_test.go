package queue

import (
	"context"
	"fmt"
	"log/slog"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestQueueMigrationsAtOnce opens a fresh queue from several processes at
// once, as the workers of a new deployment (or of an upgrade that brings a
// River migration) do when they start together. River's migrator has no
// lock of its own: each opener read "nothing applied" and created River's
// tables, and all but one failed with store_unavailable ("open the job
// queue") although the database was there.
func TestQueueMigrationsAtOnce(t *testing.T) {
	const openers = 4
	openAll := func(t *testing.T, storeURL, schema string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		var wg sync.WaitGroup
		errs := make([]error, openers)
		start := make(chan struct{})
		for i := range openers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				b, err := openBackend(ctx, &config.Config{}, storeURL, &river.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
				if err != nil {
					errs[i] = err
					return
				}
				errs[i] = b.close()
			}()
		}
		close(start)
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("opener %d of %d: %v", i+1, openers, err)
			}
		}
	}

	t.Run("sqlite", func(t *testing.T) {
		for range 3 { // the race is narrow on a small file: give it a few chances
			openAll(t, "sqlite://"+filepath.Join(t.TempDir(), "store.db"), "")
		}
	})

	t.Run("postgres", func(t *testing.T) {
		dbURL := testenv.DatabaseURL()
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			testenv.Unavailable(t, "PostgreSQL unreachable: %v", err)
		}
		defer conn.Close(context.Background())
		for i := range 3 {
			schema := fmt.Sprintf("oncesync_qm_%s_%d", testenv.RandHex(4), i)
			if _, err := conn.Exec(ctx, `CREATE SCHEMA `+pgx.Identifier{schema}.Sanitize()); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				c, err := pgx.Connect(ctx, dbURL)
				if err != nil {
					t.Logf("drop schema %s: %v", schema, err)
					return
				}
				defer c.Close(ctx)
				if _, err := c.Exec(ctx, `DROP SCHEMA IF EXISTS `+pgx.Identifier{schema}.Sanitize()+` CASCADE`); err != nil {
					t.Logf("drop schema %s: %v", schema, err)
				}
			})
			u, err := url.Parse(dbURL)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("search_path", schema)
			u.RawQuery = q.Encode()
			openAll(t, u.String(), schema)
		}
	})
}
