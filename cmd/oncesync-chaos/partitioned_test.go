package main

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/oncesync/oncesync/internal/fakebrevo"
)

// Acceptance 3 and 5 of the partitioned sync (docs/guide.md#the-checkpoint-barrier), on real processes:
// `oncesync serve` and two `oncesync worker` processes on a PostgreSQL store,
// a PostgreSQL source table, leases and the checkpoint barrier in Redis, the
// fake Brevo in this process.

// partitionRows is the source size of TestPartitionedDelivery: 100,000 (the
// acceptance figure), or ONCESYNC_TEST_PARTITION_ROWS.
func partitionRows(t *testing.T) int {
	t.Helper()
	v := os.Getenv("ONCESYNC_TEST_PARTITION_ROWS")
	if v == "" {
		return 100000
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1000 {
		t.Fatalf("ONCESYNC_TEST_PARTITION_ROWS=%q: want a number >= 1000", v)
	}
	return n
}

// TestPartitionedDelivery: a 4-partition sync of 100,000 PostgreSQL rows
// across two worker processes delivers every row exactly once (acceptance 5).
func TestPartitionedDelivery(t *testing.T) {
	t.Parallel()
	e := setup(t, "partitioned")
	ctx := context.Background()
	row := &Row{Scenario: "partitioned"}
	err := needPG(ctx, e)
	if err == nil {
		_, err = partitionedDelivery(ctx, e, row, partitionedParams{
			Rows: partitionRows(t), Partitions: 4, PageSize: 2000,
		})
	}
	row = finish(t, row, err)
	if row.Records != row.Delivered || row.DuplicateWrites != 0 {
		t.Fatalf("row %+v", row)
	}
}

// TestPartitionedSourceChanged: the source table is updated and grown right
// after the third write of a run, while every partition still has pages to
// write. The run ends source_changed_during_run, every partition is
// dead-lettered, and nothing from the changed view reaches the fake
// (acceptance 5).
func TestPartitionedSourceChanged(t *testing.T) {
	t.Parallel()
	e := setup(t, "partitioned-source-changed")
	ctx := context.Background()
	row := &Row{Scenario: "partitioned-source-changed"}
	err := needPG(ctx, e)
	if err == nil {
		_, err = partitionedSourceChanged(ctx, e, row, partitionedParams{
			// Pages of 250: each partition has the 20 pages (imports of
			// about 250) it had when it read the whole table in pages of
			// 1,000; it now reads only its rows (source.Slicer).
			Rows: 20000, Partitions: 4, PageSize: 250, Fake: fakebrevo.Options{Latency: 10 * time.Millisecond},
		}, 3)
	}
	finish(t, row, err)
}

// TestRedisKilledMidPartitionedRun: the Redis of a partitioned run is
// SIGKILLed a third of the way in, kept down 12 s (past the 5 s lease), and
// started again empty on the same port. Nothing is written while it is down
// beyond the pages already checked; the same run then converges: every row
// once, no dead letter (acceptance 3).
// The Redis kills below need every partition mid-run at the kill: a
// partition reads only its rows from PostgreSQL (source.Slicer), so pages
// of 250 give each partition the 20 or 30 pages it had when it read the
// whole table in pages of 1,000.
func TestRedisKilledMidPartitionedRun(t *testing.T) {
	t.Parallel()
	e := setup(t, "redis-partitioned")
	ctx := context.Background()
	row := &Row{Scenario: "redis-partitioned"}
	err := needPG(ctx, e)
	if err == nil {
		// A 2 s first retry: a partition's five attempts span about 30 s
		// (2+4+8+16 plus the attempts), past the outage with room to spare.
		_, err = redisPartitionedRun(ctx, e, row, partitionedParams{
			Rows: 30000, Partitions: 4, PageSize: 250, RetryBackoff: 2 * time.Second,
			Fake: fakebrevo.Options{Latency: 20 * time.Millisecond},
		}, redisKill{Fraction: 0.3, Outage: 12 * time.Second})
	}
	row = finish(t, row, err)
	if row.Kills != 1 {
		t.Fatalf("want one Redis kill, got %d", row.Kills)
	}
}

// TestRedisOutageOutlastsPartitionRetries: the same kill, with a 200 ms
// --retry-backoff, and Redis kept down until every partition has failed its
// fifth and last attempt (with the default 60 s backoff that takes about 15
// minutes). Once Redis is back, the recovery sweep closes the run, whose
// partition jobs are all gone, as partitions_unfinished instead of leaving
// it running, and a run started then converges from the partitions'
// cursors: every row once.
func TestRedisOutageOutlastsPartitionRetries(t *testing.T) {
	t.Parallel()
	e := setup(t, "redis-partitioned-outlast")
	ctx := context.Background()
	row := &Row{Scenario: "redis-partitioned-outlast"}
	err := needPG(ctx, e)
	if err == nil {
		_, err = redisPartitionedRun(ctx, e, row, partitionedParams{
			Rows: 20000, Partitions: 4, PageSize: 250, RetryBackoff: 200 * time.Millisecond,
			Fake: fakebrevo.Options{Latency: 20 * time.Millisecond},
		}, redisKill{Fraction: 0.3, Outage: 8 * time.Second, Outlast: true})
	}
	finish(t, row, err)
}

// TestRedisKilledSourceChangedMeanwhile: Redis is SIGKILLed mid-run and the
// source table changes while it is down. When it is back (empty), the
// partitions restore the run's barrier from the coordinator's pin and find
// their view does not match it: they do not proceed. The run ends
// source_changed_during_run, every partition is dead-lettered, and the fake
// gets nothing after the pages that were in flight at the kill.
func TestRedisKilledSourceChangedMeanwhile(t *testing.T) {
	t.Parallel()
	e := setup(t, "redis-partitioned-changed")
	ctx := context.Background()
	row := &Row{Scenario: "redis-partitioned-changed"}
	err := needPG(ctx, e)
	if err == nil {
		_, err = redisPartitionedRun(ctx, e, row, partitionedParams{
			Rows: 20000, Partitions: 4, PageSize: 250, RetryBackoff: 2 * time.Second,
			Fake: fakebrevo.Options{Latency: 20 * time.Millisecond},
		}, redisKill{Fraction: 0.3, Outage: 8 * time.Second, MutateWhileDown: true})
	}
	finish(t, row, err)
}
