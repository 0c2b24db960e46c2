package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/destination"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/runner"
	"github.com/oncesync/oncesync/internal/source"
)

func newCheckCmd(env Env) *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "check --config FILE SYNC",
		Short: "Test a sync's connections: read one record, check the destination's credentials; nothing is written",
		Long: `Test what a run of SYNC needs, writing nothing anywhere:
  source       it can be opened and its first record read (a PostgreSQL source: the server,
               the table or query, the key columns), and that record has every column the
               mapping and the identity name
  destination  Brevo: the api key is accepted (GET /account) and every list in list_ids exists;
               HubSpot: the token is accepted, id_property and every mapped property exist, and
               (a private app's token) it has the crm.objects.contacts.write scope;
               Klaviyo: the private key and revision are accepted and list_id exists;
               webhook: its host accepts connections (and its TLS certificate is valid); no request
               is sent, since any request to a webhook is a delivery

A request to the destination that gets no answer within its timeout (destination.timeout, 30s
by default) is not tried again: a destination that never answers fails the check then. The
first record's read has the source's (source.timeout, 10m by default).
Nothing is claimed in the ledger and the store is not opened. Exit codes: 0 every check passed;
1 one failed (the last line says which, what to do and who owns it); 2 bad flags or config.`,
		Example: `  oncesync check --config oncesync.yaml contacts-to-brevo`,
		Args:    argsNamed("SYNC", 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := loadSyncConfig(env, path, args[0])
			if err != nil {
				return err
			}
			sc, err := syncOf(cfg, args[0])
			if err != nil {
				return err
			}
			lines, err := checkSync(cmd.Context(), cfg, sc)
			for _, l := range lines {
				fmt.Fprintf(env.Stdout, "%s\n", l)
			}
			if err != nil {
				env.hintConfig, env.hintSync = cfg.Path, sc.ID
				return failed(env, err)
			}
			fmt.Fprintf(env.Stdout, "sync %s: every check passed; nothing was written\n", sc.ID)
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "oncesync.yaml", "config file")
	return cmd
}

// checkSync runs the checks of `oncesync check` and of the sync page's
// "Test connection": one line per check ("ok  ..." or "--  ..."), and the
// first failure.
func checkSync(ctx context.Context, cfg *config.Config, sc *config.Sync) ([]string, error) {
	built, err := app.Build(cfg, sc, app.Options{Clock: clock.Real{}})
	if err != nil {
		return nil, err
	}
	defer built.Close()
	line, first, err := checkSource(ctx, built.Source, sc.Source.Timeout)
	if err != nil {
		return nil, err
	}
	lines := []string{"ok  " + line}
	if first != nil {
		// The run refuses a record that lacks the identity or a mapped
		// column as invalid_sync_definition; the check says so first.
		if err := runner.CheckColumns(built.Sync, *first, "the source's first record"); err != nil {
			return lines, err
		}
		lines = append(lines, fmt.Sprintf("ok  source %s: its first record has every column the mapping and the identity name", built.Source.ID()))
	} else if checked, err := runner.HeaderProblem(built.Sync, built.Source); err != nil {
		// No record: a run checks the header instead (an export written
		// wrong must not succeed with nothing), and so does the check.
		return lines, err
	} else if checked {
		lines = append(lines, fmt.Sprintf("ok  source %s: its header has every column the mapping and the identity name", built.Source.ID()))
	}
	if nk, ok := built.Source.(source.NullKeyer); ok {
		var cols string
		var found bool
		err := source.ReadWithin(ctx, clock.Real{}, sc.Source.Timeout, built.Source.ID(), "look for rows without a key", func(ctx context.Context) (err error) {
			cols, found, err = nk.NullKeys(ctx)
			return err
		})
		switch {
		case err != nil:
			return lines, sourceError(err)
		case found:
			// A run reads up to it and fails at the end of its pass,
			// holding back the pass's last page and every later change.
			return lines, failure.New(failure.SourceQueryInvalid, fmt.Sprintf(
				"some rows have a NULL %s, which keyset pagination cannot read: each run would fail at the end of its pass and hold back its last page; make the column NOT NULL or COALESCE it in the query", cols))
		}
		lines = append(lines, fmt.Sprintf("ok  source %s: no row has a NULL %s", built.Source.ID(), cols))
	}
	if ck, ok := built.Source.(source.CursorKind); ok {
		if col, typ, lb := ck.CursorKind(); typ != "" {
			lines = append(lines, cursorLine(built.Source.ID(), col, typ, lb))
			if l := localTimeLine(built.Source.ID(), col, typ); l != "" {
				lines = append(lines, l)
			}
		}
	}
	c, ok := built.Destination.(destination.Checker)
	if !ok {
		return append(lines, "--  "+sc.Destination.Type+" destinations have no connection check"), nil
	}
	// Each request of the check gets one attempt of the destination's
	// timeout: a destination that never answers ends the check
	// (docs/guide.md#commands).
	checked, err := c.Check(destination.WithCheck(ctx))
	for _, l := range checked {
		if rest, notice := strings.CutPrefix(l, destination.NotChecked); notice {
			lines = append(lines, "--  "+rest)
			continue
		}
		lines = append(lines, "ok  "+l)
	}
	return lines, err
}

// localTimeLine is a notice for a cursor column that holds a time without
// a zone (MySQL DATETIME, PostgreSQL timestamp): a writer stamping it with
// its local clock (ON UPDATE CURRENT_TIMESTAMP, now()) in a zone that
// leaves summer time stamps the next hour's rows below rows already read,
// and a lookback shorter than that hour does not read them again
// (docs/guide.md#rows-committed-late). "" for other types.
func localTimeLine(id, column, typ string) string {
	if typ != "DATETIME" && typ != "timestamp" {
		return ""
	}
	return fmt.Sprintf("--  source %s: cursor_column %s is a %s, a time without a zone: if it is stamped in a zone with summer time, "+
		"rows written in the hour after the clocks go back sort below rows already read and are not read again; "+
		"store UTC (TIMESTAMP in MySQL, timestamptz in PostgreSQL) or set cursor_lookback to 65m", id, column, typ)
}

// cursorLine says whether a keyset source reads rows committed late again
// (docs/guide.md#rows-committed-late): "ok" when a lookback applies to its
// cursor column (window, in words), "--" (a notice, not a failure) when none
// does.
func cursorLine(id, column, typ, window string) string {
	if window != "" {
		return fmt.Sprintf("ok  source %s: cursor_column %s is a %s: rows committed late are read again within %s", id, column, typ, window)
	}
	return fmt.Sprintf("--  source %s: cursor_column %s is a %s: no lookback applies (cursor_lookback or cursor_lookback_values off, or not a time or integer column), so a row committed after a later one was read is not read again", id, column, typ)
}

// checkSource reads the source's first record: one page of one. first is
// nil when the source is empty.
// sourceError is a source's error as the check's failure.
func sourceError(err error) error {
	switch {
	case errors.Is(err, source.ErrAuth):
		return failure.Wrap(failure.SourceAuth, err, "the source could not be read: %v", err)
	case errors.Is(err, source.ErrInvalid):
		return failure.Wrap(failure.SourceQueryInvalid, err, "the source could not be read: %v", err)
	default:
		return failure.Wrap(failure.SourceUnavailable, err, "the source could not be read: %v", err)
	}
}

func checkSource(ctx context.Context, src source.Source, limit time.Duration) (line string, first *source.Record, err error) {
	var page source.Page
	err = source.ReadWithin(ctx, clock.Real{}, limit, src.ID(), "read a page", func(ctx context.Context) (err error) {
		page, err = src.ReadPage(ctx, "", 1)
		return err
	})
	if err != nil {
		return "", nil, sourceError(err)
	}
	if len(page.Records) == 0 {
		return fmt.Sprintf("source %s: readable, and empty", src.ID()), nil, nil
	}
	return fmt.Sprintf("source %s: its first record was read", src.ID()), &page.Records[0], nil
}
