package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os/user"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/checkpoint"
	"github.com/oncesync/oncesync/internal/store"
)

func newDeadLetterCmd(env Env) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "deadletter",
		Short: "List and re-queue work parked after checkpoint mismatches",
		Long: `Work that kept meeting another snapshot at the checkpoint barrier (SPEC §11) is parked
in the store's dead-letter list after 3 retries, with the reason, both tokens and both
snapshots. A person decides: fix the cause, then re-queue it.`,
	}
	cmd.AddCommand(newDeadLetterListCmd(env), newDeadLetterRequeueCmd(env))
	return cmd
}

func deadLetterStore(st store.Store) (checkpoint.DeadLetters, error) {
	dl, ok := st.(checkpoint.DeadLetters)
	if !ok {
		return nil, exit(ExitFailed, fmt.Errorf("the store %T keeps no dead letters", st))
	}
	return dl, nil
}

func newDeadLetterListCmd(env Env) *cobra.Command {
	var (
		path string
		p    checkpoint.ListDeadLettersParams
	)
	cmd := &cobra.Command{
		Use:   "list --config FILE [--sync SYNC] [--all]",
		Short: "List parked dead letters, newest first",
		Example: `  oncesync deadletter list --config oncesync.yaml
  oncesync deadletter list --config oncesync.yaml --sync contacts-to-brevo --all`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return withStore(cmd.Context(), env, path, func(st store.Store) error {
				dl, err := deadLetterStore(st)
				if err != nil {
					return err
				}
				ds, err := dl.ListDeadLetters(cmd.Context(), p)
				if err != nil {
					return exit(ExitFailed, err)
				}
				printDeadLetters(env.Stdout, ds)
				return nil
			})
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "oncesync.yaml", "config file")
	cmd.Flags().StringVar(&p.SyncID, "sync", "", "only this sync's entries")
	cmd.Flags().BoolVar(&p.IncludeRequeued, "all", false, "include entries already re-queued")
	cmd.Flags().IntVar(&p.Limit, "limit", 100, "at most this many entries (0: all)")
	return cmd
}

func printDeadLetters(w io.Writer, ds []checkpoint.DeadLetter) {
	if len(ds) == 0 {
		fmt.Fprintln(w, "no dead letters")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tPARKED\tSYNC\tRUN\tPART\tREASON\tATTEMPTS\tTOKEN\tSNAPSHOT\tHOLDER\tHOLDER SNAPSHOT\tKEY\tREQUEUED")
	for _, d := range ds {
		requeued := "-"
		if d.Requeued() {
			requeued = d.RequeuedAt.UTC().Format(time.RFC3339) + " by " + orDash(d.RequeuedBy)
		}
		run, part := "-", "-"
		if d.RunID != 0 {
			run = strconv.FormatInt(d.RunID, 10)
		}
		if d.Partition != 0 {
			part = strconv.Itoa(d.Partition)
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\n",
			d.ID, d.CreatedAt.UTC().Format(time.RFC3339), orDash(d.SyncID), run, part, d.Reason, d.Attempts,
			d.Token, d.Snapshot, orDash(d.HolderToken), orDash(d.HolderSnapshot), d.Key, requeued)
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func newDeadLetterRequeueCmd(env Env) *cobra.Command {
	var (
		path string
		by   string
	)
	cmd := &cobra.Command{
		Use:   "requeue --config FILE ID...",
		Short: "Mark dead letters re-queued and schedule their work again",
		Long: `Re-queue dead letters by ID (from "oncesync deadletter list"). Each entry is marked
re-queued with who did it and when, and stays in the list (--all) as the record.

Partitioned syncs are not wired to the queue yet: for now re-queueing prints what was
re-queued; run the sync again to redo the work.`,
		Example: `  oncesync deadletter requeue --config oncesync.yaml 12
  oncesync deadletter requeue --config oncesync.yaml --by alice 12 13`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ids := make([]int64, len(args))
			for i, a := range args {
				id, err := strconv.ParseInt(a, 10, 64)
				if err != nil || id <= 0 {
					return exit(ExitUsage, fmt.Errorf("dead letter id %q is not a positive number", a))
				}
				ids[i] = id
			}
			if by == "" {
				by = currentUser()
			}
			return withStore(cmd.Context(), env, path, func(st store.Store) error {
				dl, err := deadLetterStore(st)
				if err != nil {
					return err
				}
				return requeueDeadLetters(cmd.Context(), env.Stdout, dl, ids, by)
			})
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "oncesync.yaml", "config file")
	cmd.Flags().StringVar(&by, "by", "", "who re-queues (recorded); default: the OS user")
	return cmd
}

func requeueDeadLetters(ctx context.Context, w io.Writer, dl checkpoint.DeadLetters, ids []int64, by string) error {
	var errs []error
	for _, id := range ids {
		d, err := checkpoint.Requeue(ctx, checkpoint.RequeueParams{Store: dl, ID: id, By: by})
		if err != nil {
			errs = append(errs, err)
			continue
		}
		fmt.Fprintf(w, "requeued %d: key=%s sync=%s run=%d partition=%d reason=%s token=%s snapshot=%s\n",
			d.ID, d.Key, orDash(d.SyncID), d.RunID, d.Partition, d.Reason, d.Token, d.Snapshot)
	}
	if len(errs) > 0 {
		return exit(ExitFailed, errors.Join(errs...))
	}
	return nil
}

func currentUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "unknown"
}
