package cli

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
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
	format            string
	limit             int
}

func newRecordsCmd(env Env) *cobra.Command {
	var f recordsFlags
	cmd := &cobra.Command{
		Use:   "records --config FILE SYNC [--rejected|--in-doubt] [--format table|csv|json]",
		Short: "List the records a person must look at: rejected by the destination, or in doubt",
		Long: `List a sync's records that need a person, by the sync's identity, with the reason:
  rejected   the destination refused the record (its message); the next run sends it again once
             the row changes or the destination accepts it
  in doubt   a write whose outcome is unknown; the next run reads the destination back where the
             destination allows it, otherwise settle it on the run page

Without --rejected or --in-doubt both are listed. --format csv or json for a spreadsheet or a script.`,
		Example: `  oncesync records --config oncesync.yaml contacts-to-brevo
  oncesync records --config oncesync.yaml contacts-to-brevo --rejected --format csv > rejected.csv`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch f.format {
			case "table", "csv", "json":
			default:
				return exit(ExitUsage, fmt.Errorf("--format %q: want table, csv or json", f.format))
			}
			if f.limit < 1 {
				return exit(ExitUsage, fmt.Errorf("--limit %d: want 1 or more", f.limit))
			}
			return withConfigStore(cmd.Context(), env, f.config, func(cfg *config.Config, st store.Store) error {
				if _, err := getSync(cmd.Context(), cfg, st, args[0]); err != nil {
					return err
				}
				recs, err := listRecords(cmd.Context(), cfg, st, args[0], f)
				if err != nil {
					return err
				}
				return printRecords(env.Stdout, recs, f.format)
			})
		},
	}
	cmd.Flags().StringVarP(&f.config, "config", "c", "oncesync.yaml", "config file")
	cmd.Flags().BoolVar(&f.rejected, "rejected", false, "only records the destination rejected")
	cmd.Flags().BoolVar(&f.inDoubt, "in-doubt", false, "only records in doubt")
	cmd.Flags().StringVar(&f.format, "format", "table", "table, csv or json")
	cmd.Flags().IntVar(&f.limit, "limit", 10000, "at most this many records of each state")
	return cmd
}

// listRecords reads the sync's rejected and in-doubt entries (a
// partitioned sync's are its partitions'), newest first per state.
func listRecords(ctx context.Context, cfg *config.Config, st store.Store, syncID string, f recordsFlags) ([]ledger.Record, error) {
	var states []store.LedgerState
	if f.rejected || !f.inDoubt {
		states = append(states, store.LedgerRejected)
	}
	if f.inDoubt || !f.rejected {
		states = append(states, store.LedgerInDoubt)
	}
	n := 1
	if sc, ok := cfg.Sync(syncID); ok {
		n = sc.Partitions
	}
	ids := partition.IDs(syncID, n)
	out := []ledger.Record{}
	for _, state := range states {
		for _, id := range ids {
			es, err := st.LedgerList(ctx, id, state, f.limit)
			if err != nil {
				return nil, err
			}
			for _, e := range es {
				out = append(out, ledger.RecordOf(e))
			}
		}
	}
	return out, nil
}

func printRecords(w io.Writer, recs []ledger.Record, format string) error {
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
		fmt.Fprintln(w, "no rejected or in-doubt records")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "IDENTITY\tSTATE\tRUN\tAT\tREASON")
	for _, r := range recs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", r.Shown(), r.State, r.RunID, r.At.Format(time.RFC3339), r.Reason)
	}
	return tw.Flush()
}
