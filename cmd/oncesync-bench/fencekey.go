package main

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/rediskey"
)

// forgetStoredFences deletes the Redis keys in which the leases remember the
// highest fence each sync's store registered (rediskey.Space.FenceStored):
// every timed run starts on a fresh store, or a fresh copy of a filled one,
// under sync ids an earlier run used, which oncesync refuses as a store that
// went back in time (docs/guide.md#a-store-that-went-back-in-time). Runs
// without redis need nothing.
func forgetStoredFences(ctx context.Context, redisURL string, syncIDs ...string) error {
	if redisURL == "" || len(syncIDs) == 0 {
		return nil
	}
	opt, err := redis.ParseURL(redisURL)
	if err != nil {
		return fmt.Errorf("redis url: %w", err)
	}
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	keys := make([]string, len(syncIDs))
	for i, id := range syncIDs {
		keys[i] = rediskey.Default().FenceStored(id)
	}
	// One key per call: a Redis Cluster refuses a DEL across slots.
	for _, k := range keys {
		if err := rdb.Del(ctx, k).Err(); err != nil {
			return fmt.Errorf("forget the stored fence %s: %w", k, err)
		}
	}
	return nil
}
