package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/cobra"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/clock"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/store"
)

func newCheckpointCmd(env Env, rf *rootFlags) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "checkpoint",
		Short: "Use the checkpoint barrier from the shell",
		Long: `The checkpoint barrier lets parallel workers agree on one reference point, a
snapshot hash of their inputs, before they act (docs/guide.md, "The checkpoint
barrier"). See "oncesync checkpoint check --help".`,
		Example: `  oncesync checkpoint check --redis redis://127.0.0.1:6379/0 --key nightly --token w1 --inputs inputs.json`,
	}
	cmd.AddCommand(newCheckpointCheckCmd(env, rf))
	return asGroup(cmd)
}

type checkpointFlags struct {
	redisURL      string
	config        string
	key           string
	token         string
	snapshot      string
	inputs        string
	ttl           time.Duration
	wait          bool
	allowEvicting bool

	// sleep replaces --wait's timer in tests; nil means real time.
	sleep func(ctx context.Context, d time.Duration) error
}

func newCheckpointCheckCmd(env Env, rf *rootFlags) *cobra.Command {
	var f checkpointFlags
	cmd := &cobra.Command{
		Use:   "check --redis URL --key K --token T (--snapshot HASH | --inputs FILE) [--ttl 60s] [--wait]",
		Short: "Check a checkpoint barrier: created, aligned, or mismatch",
		Long: `Check the checkpoint barrier named K with this worker's token T and snapshot.

One atomic Lua script on Redis key oncesync:v1:{checkpoint:K}:barrier:
  - no barrier yet: it is created with T and the snapshot (and the TTL); prints "created"
  - the barrier holds exactly this snapshot (any token): prints "aligned"
  - it holds another snapshot: prints "mismatch holder=<token> snapshot=<hash>"
The snapshot is compared exactly, never by prefix or substring, and a barrier
left by an earlier run with another snapshot is a mismatch, not an alignment.

--snapshot gives the hash directly; --inputs FILE hashes a JSON object
canonically instead (SHA-256 over sorted keys and typed values: 1 and "1"
differ, key order and the machine's clock or time zone do not matter).

--wait retries a mismatch with full-jitter exponential backoff (1 s, x2, capped
at 30 s); after 3 retries the work is dead-lettered: with --config the entry is
stored in the config's store (see "oncesync deadletter list"), without it the
entry is only printed.

Redis must not evict keys (maxmemory-policy noeviction): an evicted barrier
reads as a fresh start. An evicting Redis is refused unless
--allow-evicting-redis (or allow_evicting_redis: true in --config).

Exit codes: 0 created or aligned; 4 mismatch; 5 dead-lettered (--wait);
1 Redis or the store failed; 2 bad flags.`,
		Example: `  # two workers with the same inputs agree
  oncesync checkpoint check --redis redis://127.0.0.1:6379/0 --key nightly --token w1 --inputs inputs.json
  oncesync checkpoint check --redis redis://127.0.0.1:6379/0 --key nightly --token w2 --inputs inputs.json

  # a known snapshot hash, a 5-minute barrier, waiting out a mismatch
  oncesync checkpoint check --redis redis://127.0.0.1:6379/0 --key nightly --token w3 \
      --snapshot 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08 --ttl 5m --wait --config oncesync.yaml`,
		Args: argsNamed("", 0, 0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return checkpointCheck(cmd.Context(), env, rf, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.redisURL, "redis", "", "Redis URL (redis:// or rediss://); default: the config's redis")
	fl.StringVarP(&f.config, "config", "c", "", "config file: its store keeps dead letters, its redis is the default --redis")
	fl.StringVar(&f.key, "key", "", "barrier name (required)")
	fl.StringVar(&f.token, "token", "", "this worker's token, without ':' (required)")
	fl.StringVar(&f.snapshot, "snapshot", "", "snapshot hash of this worker's inputs")
	fl.StringVar(&f.inputs, "inputs", "", "JSON object file to hash canonically into the snapshot")
	fl.DurationVar(&f.ttl, "ttl", barrier.DefaultTTL, "barrier TTL, applied when this call creates it")
	fl.BoolVar(&f.wait, "wait", false, "retry a mismatch with backoff; dead-letter after 3 retries (exit 5)")
	fl.BoolVar(&f.allowEvicting, "allow-evicting-redis", false, "accept a Redis whose maxmemory-policy may evict keys")
	// Not cmd.MarkFlagsMutuallyExclusive: cobra's sentence for it names no
	// way out; checkpointCheck says "give exactly one of ...".
	return cmd
}

func checkpointCheck(ctx context.Context, env Env, rf *rootFlags, f checkpointFlags) error {
	if f.key == "" || f.token == "" {
		return exit(ExitUsage, errors.New("checkpoint check: --key and --token are required"))
	}
	if (f.snapshot == "") == (f.inputs == "") {
		return exit(ExitUsage, errors.New("checkpoint check: give exactly one of --snapshot HASH or --inputs FILE"))
	}
	if f.ttl <= 0 {
		return exit(ExitUsage, fmt.Errorf("checkpoint check: --ttl %s must be positive", f.ttl))
	}
	snapshot := f.snapshot
	if f.inputs != "" {
		h, err := snapshotFile(f.inputs)
		if err != nil {
			return exit(ExitUsage, err)
		}
		snapshot = h
	}

	var deadLetters barrier.DeadLetters
	allowEvicting := f.allowEvicting
	if f.config != "" {
		cfg, err := loadConfig(env, f.config)
		if err != nil {
			return err
		}
		if f.redisURL == "" {
			f.redisURL = cfg.Redis
		}
		allowEvicting = allowEvicting || cfg.AllowEvictingRedis
		if f.wait {
			st, err := app.OpenStore(ctx, cfg, clock.Real{})
			if err != nil {
				return failed(env, err)
			}
			defer st.Close()
			dl, ok := st.(barrier.DeadLetters)
			if !ok {
				return exit(ExitFailed, fmt.Errorf("checkpoint check: the store %T keeps no dead letters", st))
			}
			deadLetters = dl
		}
	}
	if f.redisURL == "" {
		return exit(ExitUsage, errors.New("checkpoint check: --redis URL is required (or a --config with redis)"))
	}
	opts, err := redis.ParseURL(f.redisURL)
	if err != nil {
		return exit(ExitUsage, errors.New("checkpoint check: --redis is not a valid redis:// URL"))
	}
	client := redis.NewClient(opts)
	defer client.Close()

	if err := barrier.CheckEvictionPolicy(ctx, client, allowEvicting); err != nil {
		if errors.Is(err, store.ErrUnavailable) {
			return failed(env, failure.Wrap(failure.StoreUnavailable, err, "reach Redis at %s", opts.Addr))
		}
		return exit(ExitFailed, err)
	}

	b := barrier.New(barrier.Params{Client: client, Logger: rf.logger(env.Stderr)})
	key := rediskey.Default().Checkpoint(f.key)
	var res barrier.Result
	if f.wait {
		res, err = b.Wait(ctx, barrier.WaitParams{
			Key: key, Token: f.token, Snapshot: snapshot, TTL: f.ttl, DeadLetters: deadLetters, Sleep: f.sleep,
		})
	} else {
		res, err = b.Check(ctx, key, f.token, snapshot, f.ttl)
	}
	var dead *barrier.DeadLetteredError
	switch {
	case errors.As(err, &dead):
		printOutcome(env.Stdout, res)
		// Standard output keeps its one line (scripts read it); the
		// catalog's words go with the dead letter on standard error.
		return exit(ExitDead, fmt.Errorf("%w\n%s", err, failure.LastLine(failure.Wrap(failure.CheckpointMismatch, err, ""))))
	case errors.Is(err, barrier.ErrInvalid):
		return exit(ExitUsage, err)
	case errors.Is(err, store.ErrUnavailable):
		return failed(env, failure.Wrap(failure.StoreUnavailable, err, "reach Redis at %s", opts.Addr))
	case err != nil:
		return exit(ExitFailed, err)
	}
	printOutcome(env.Stdout, res)
	if res.Outcome == barrier.Mismatch {
		return exit(ExitMismatch, nil)
	}
	return nil
}

func printOutcome(w io.Writer, res barrier.Result) {
	if res.Outcome == barrier.Mismatch {
		fmt.Fprintf(w, "mismatch holder=%s snapshot=%s\n", res.HolderToken, res.HolderSnapshot)
		return
	}
	fmt.Fprintln(w, res.Outcome)
}

func snapshotFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("checkpoint check: --inputs: %w", err)
	}
	defer f.Close()
	h, err := barrier.SnapshotJSON(f)
	if err != nil {
		return "", fmt.Errorf("checkpoint check: --inputs %s: %w", path, err)
	}
	return h, nil
}
