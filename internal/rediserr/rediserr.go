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
		if adv := advice(err); adv != "" {
			err = store.WithAdvice(err, adv)
		}
		return fmt.Errorf("%s: %w: %w", what, store.ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// advices say, for the replies of a Redis that answers but cannot be used,
// what is wrong and what to do: a run fails store_unavailable, whose
// catalog entry speaks of a Redis that "could not be reached", which would
// send a person to look at the network.
var advices = []struct{ prefix, advice string }{
	{"OOM", "Redis is out of memory (used memory above maxmemory, which its maxmemory-policy does not free): raise maxmemory or free memory on that Redis"},
	{"READONLY", "Redis answered as a read-only replica: point redis at the primary (after a failover, the promoted one)"},
	{"MASTERDOWN", "the Redis replica lost its primary: point redis at the primary"},
	{"NOREPLICAS", "Redis refused the write: fewer replicas answer than its min-replicas-to-write"},
	{"LOADING", "Redis is still loading its data after a restart: wait until it has"},
	{"BUSY", "Redis is busy running a long script"},
	{"NOAUTH", "Redis asks for credentials: give the user and password in redis"},
	{"WRONGPASS", "Redis refused the user or password in redis"},
	{"CLUSTERDOWN", "the Redis Cluster is down"},
}

// advice is what to do about err, a reply of a Redis that cannot be used
// now, or "" (a network error, which the catalog's words describe).
func advice(err error) string {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return ""
	}
	for _, a := range advices {
		if redis.HasErrorPrefix(err, a.prefix) {
			return a.advice + " (docs/guide.md#redis-in-production)"
		}
	}
	if strings.Contains(err.Error(), "max number of clients reached") {
		return "Redis has as many clients as its maxclients allows: raise maxclients or close other clients (docs/guide.md#redis-in-production)"
	}
	if ACLRefused(err) {
		// Redis's words name the command ("... to run the 'evalsha'
		// command"), never a key or a secret.
		return "Redis's ACL refuses oncesync's user a command it needs (" + strings.TrimSpace(err.Error()) +
			"): allow the commands docs/guide.md#redis-in-production lists to that user"
	}
	return ""
}

// ACLRefused: the reply of an ACL refusal, to a command (NOPERM) or to a
// command a script called, whose reply names no command. Scripts do not
// tell it apart from a bug otherwise.
func ACLRefused(err error) bool {
	return redis.HasErrorPrefix(err, "NOPERM") ||
		strings.Contains(err.Error(), "The user executing the script can't")
}

// unavailablePrefixes are the replies of a Redis that is loading, read-only,
// failing over, busy, out of memory, moved, or refusing our credentials.
var unavailablePrefixes = []string{"LOADING", "READONLY", "MASTERDOWN", "CLUSTERDOWN", "TRYAGAIN",
	"BUSY", "NOREPLICAS", "OOM", "MOVED", "ASK", "NOAUTH", "WRONGPASS"}

// Unavailable reports whether err means Redis cannot be used right now:
// every error that is not a Redis reply (dial, I/O, timeouts, a closed
// client, an exhausted pool), the replies in unavailablePrefixes, and an
// ACL's refusal (like WRONGPASS: the operator's to fix, not a bug).
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
	return strings.Contains(err.Error(), "max number of clients reached") || ACLRefused(err)
}
