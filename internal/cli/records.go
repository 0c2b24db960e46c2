package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/config"
	"github.com/oncesync/oncesync/internal/ledger"
	"github.com/oncesync/oncesync/internal/partition"
	"github.com/oncesync/oncesync/internal/store"
)

type recordsFlags struct {
	config            string
	rejected, inDoubt bool
	removed, settled  bool
	format            string
	limit             int
	search            string
}

func newRecordsCmd(env Env) *cobra.Command {
	var f recordsFlags
	cmd := &cobra.Command{
		Use:   "records --config FILE SYNC [--rejected|--in-doubt|--removed|--settled] [--format table|csv|json]",
		Short: "List the records a person must look at: rejected by the destination, in doubt, or removed",
		Long: `List a sync's records that need a person, by the sync's identity, with the reason:
  rejected   the destination refused the record (its message); the next run sends it again once
             the row changes or the destination accepts it
  in doubt   a write whose outcome is unknown; the next run reads the destination back where the
             destination allows it, otherwise settle it on the run page
  removed    (write_mode mirror) the record's source row is gone and a run removed it from the
             destination; the row, should it come back, is sent again

Without --rejected, --in-doubt or --removed, all three are listed. --settled lists instead the
writes in doubt that were settled, by a run or by a person, and how: read back and found landed
(not sent again), not found and sent again, or sent again under the same idempotency key; they
are kept as long as the ledger's retention (settings.ledger_retention). --search narrows them as the
sync's records page does. --format csv or json for a spreadsheet or a script.`,
		Example: `  oncesync records --config oncesync.yaml contacts-to-brevo
  oncesync records --config oncesync.yaml contacts-to-brevo --rejected --format csv > rejected.csv
  oncesync records --config oncesync.yaml contacts-to-brevo --search 4711
  oncesync records --config oncesync.yaml contacts-to-brevo --settled`,
		Args: argsNamed("SYNC", 1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch f.format {
			case "table", "csv", "json":
			default:
				return exit(ExitUsage, fmt.Errorf("--format %q: want table, csv or json", f.format))
			}
			if f.limit < 1 {
				return exit(ExitUsage, fmt.Errorf("--limit %d: want 1 or more", f.limit))
			}
			// CSV and JSON on stdout are data for a program: a failure is
			// told on stderr (and by the exit code), never mixed into them.
			fenv := env
			if f.format != "table" {
				fenv.Stdout = env.Stderr
			}
			return withConfigStore(cmd.Context(), fenv, f.config, func(cfg *config.Config, st store.Store) error {
				if _, err := getSync(cmd.Context(), cfg, st, args[0]); err != nil {
					return err
				}
				recs, err := listRecords(cmd.Context(), cfg, st, args[0], f)
				if err != nil {
					return err
				}
				return printRecords(env.Stdout, recs, f.format, f.noneText())
			})
		},
	}
	cmd.Flags().StringVarP(&f.config, "config", "c", "oncesync.yaml", "config file")
	cmd.Flags().BoolVar(&f.rejected, "rejected", false, "only records the destination rejected")
	cmd.Flags().BoolVar(&f.inDoubt, "in-doubt", false, "only records in doubt")
	cmd.Flags().BoolVar(&f.removed, "removed", false, "only records a mirror run removed from the destination")
	cmd.Flags().BoolVar(&f.settled, "settled", false, "only writes in doubt that were settled, and how (not listed otherwise)")
	cmd.Flags().StringVar(&f.format, "format", "table", "table, csv or json")
	cmd.Flags().IntVar(&f.limit, "limit", 10000, "at most this many records of each state")
	cmd.Flags().StringVar(&f.search, "search", "", "only records whose identity contains TEXT (any case), or whose delivery key starts with it")
	return cmd
}

// listRecords reads the sync's entries in the states f asks for (a
// partitioned sync's are its partitions'), newest first per state: settled
// ones first when asked.
func listRecords(ctx context.Context, cfg *config.Config, st store.Store, syncID string, f recordsFlags) ([]ledger.Record, error) {
	all := !f.rejected && !f.inDoubt && !f.removed && !f.settled
	var states []store.LedgerState
	if f.rejected || all {
		states = append(states, store.LedgerRejected)
	}
	if f.inDoubt || all {
		states = append(states, store.LedgerInDoubt)
	}
	n, mirror := 1, false
	if sc, ok := cfg.Sync(syncID); ok {
		n, mirror = sc.Partitions, sc.Destination.EffectiveWriteMode() == config.WriteMirror
	}
	if f.removed || (all && mirror) {
		// A removed record is a slot's complete entry (docs/guide.md#write-modes).
		states = append(states, store.LedgerComplete)
	}
	ids := partition.IDs(syncID, n)
	out := []ledger.Record{}
	if f.settled {
		for _, id := range ids {
			rs, err := ledger.Settled(ctx, st, id, f.limit)
			if err != nil {
				return nil, err
			}
			for _, r := range rs {
				if r.Matches(f.search) {
					out = append(out, r)
				}
			}
		}
	}
	for _, state := range states {
		for _, id := range ids {
			es, err := ledger.List(ctx, st, id, state, f.limit)
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				r, ok := ledger.RecordOf(e), true
				if state == store.LedgerComplete {
					r, ok = ledger.RemovedRecord(e)
				}
				if ok && r.Matches(f.search) {
					out = append(out, r)
				}
			}
		}
	}
	return out, nil
}

// noneText is what the table says when no record is listed: the states
// asked for, so that "--in-doubt" finding none does not read as if there
// were no rejected records either.
func (f recordsFlags) noneText() string {
	var asked []string
	if f.rejected {
		asked = append(asked, "rejected")
	}
	if f.inDoubt {
		asked = append(asked, "in-doubt")
	}
	if f.removed {
		asked = append(asked, "removed")
	}
	if f.settled {
		asked = append(asked, "settled")
	}
	if len(asked) == 0 || (len(asked) == 3 && !f.settled) {
		return "no rejected, in-doubt or removed records"
	}
	return "no " + strings.Join(asked, " or ") + " records"
}

func printRecords(w io.Writer, recs []ledger.Record, format, none string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(recs)
	case "csv":
		cw := csv.NewWriter(w)
		_ = cw.Write(ledger.RecordCSVHeader)
		for _, r := range recs {
			_ = cw.Write(r.CSVRow())
		}
		cw.Flush()
		return cw.Error()
	}
	if len(recs) == 0 {
		fmt.Fprintln(w, none)
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IDENTITY\tSTATE\tRUN\tAT\tREASON")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Shown(), r.State, r.RunID, r.At.Format(time.RFC3339), r.Reason)
	}
	return tw.Flush()
}
