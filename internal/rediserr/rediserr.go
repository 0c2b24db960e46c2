// Package rediserr tells a Redis that cannot be used right now (a reason to
// retry, pause or fail over: store.ErrUnavailable) from a bug (a script
// error, a key of another type), for every package that talks to Redis.
package rediserr

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/store"
)

// Wrap wraps err from a Redis call as "<what>: err", marked
// store.ErrUnavailable when Redis cannot be used right now; an error of a
// context that ended, or a reply that is a bug, is wrapped plain.
func Wrap(ctx context.Context, what string, err error) error {
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return fmt.Errorf("%s: %w", what, err)
	}
	if Unavailable(err) {
		return fmt.Errorf("%s: %w: %w", what, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// unavailablePrefixes are the replies of a Redis that is loading, read-only,
// failing over, busy, out of memory, moved, or refusing our credentials.
var unavailablePrefixes = []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
	"BUSY", "NOREPLICAS", "OOM", "MOVED", "ASK", "NOAUTH", "WRONGPASS"}

// Unavailable reports whether err means Redis cannot be used right now:
// every error that is not a Redis reply (dial, I/O, timeouts, a closed
// client, an exhausted pool), and the replies in unavailablePrefixes.
func Unavailable(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return true
	}
	for _, prefix := range unavailablePrefixes {
		if redis.HasErrorPrefix(err, prefix) {
			return true
		}
	}
	return strings.Contains(err.Error(), "max number of clients reached")
}
