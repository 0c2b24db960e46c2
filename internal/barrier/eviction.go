package barrier

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/rediserr"
)

// ErrEvictingRedis: a Redis server's maxmemory-policy may evict keys (see
// *EvictionPolicyError).
var ErrEvictingRedis = errors.New("redis may evict coordination keys")

// EvictionPolicyError names a server whose maxmemory-policy is not
// noeviction. It wraps ErrEvictingRedis.
type EvictionPolicyError struct {
	Addr   string
	Policy string
}

func (e *EvictionPolicyError) Error() string {
	return fmt.Sprintf("redis at %s has maxmemory-policy %s: %v. Under memory pressure Redis would drop "+
		"checkpoint barriers and leases, and a dropped key reads as a fresh start: the next worker creates a new "+
		"barrier from its own view and proceeds unaligned, or takes a lease that is still in use (the eviction "+
		"incident of docs/guide.md#the-checkpoint-barrier). Set `maxmemory-policy noeviction` on every server (redis.conf, or CONFIG SET "+
		"maxmemory-policy noeviction) and size it for its keys, or set `allow_evicting_redis: true` in the "+
		"config to accept the risk", e.Addr, e.Policy, ErrEvictingRedis)
}

// Unwrap returns ErrEvictingRedis.
func (e *EvictionPolicyError) Unwrap() error { return ErrEvictingRedis }

// Advice is what a command's failure line says of it (failure.Adviser).
func (e *EvictionPolicyError) Advice() string {
	return fmt.Sprintf("Redis at %s has maxmemory-policy %s, which may evict leases and barriers: set maxmemory-policy "+
		"noeviction, or allow_evicting_redis: true in the config to accept the risk (docs/guide.md#redis-in-production)", e.Addr, e.Policy)
}

// PolicyUnreadableError names a server that refused to tell its
// maxmemory-policy to oncesync's user: it cannot be shown not to evict, and
// is refused.
type PolicyUnreadableError struct {
	Addr string
	Err  error // the replies to INFO memory and CONFIG GET
}

func (e *PolicyUnreadableError) Error() string {
	return fmt.Sprintf("redis at %s refused to tell its maxmemory-policy: %v", e.Addr, e.Err)
}

func (e *PolicyUnreadableError) Unwrap() error { return e.Err }

// Advice is what a command's failure line says of it (failure.Adviser).
func (e *PolicyUnreadableError) Advice() string {
	return fmt.Sprintf("Redis at %s refused INFO and CONFIG GET to oncesync's user, so oncesync cannot check that it never "+
		"evicts leases and barriers: allow that user INFO (ACL SETUSER USER +info), which its lease scripts need too "+
		"(they tell a Redis restart or failover by it) (docs/guide.md#redis-in-production)", e.Addr)
}

// CheckEvictionPolicy refuses a Redis that may evict keys: it reads the
// maxmemory-policy of every server behind client (each Ring shard, every
// Cluster master and replica) and returns an *EvictionPolicyError unless all
// say noeviction. allowEvicting (the config's allow_evicting_redis) skips the
// check. The policy is read from INFO memory (which managed services keep)
// and, failing that, CONFIG GET; a server whose policy cannot be read is
// refused too, since it cannot be shown safe.
func CheckEvictionPolicy(ctx context.Context, client redis.UniversalClient, allowEvicting bool) error {
	if allowEvicting {
		return nil
	}
	if client == nil {
		return fmt.Errorf("%w: no redis client", ErrInvalid)
	}
	var (
		mu   sync.Mutex
		errs []error
	)
	check := func(ctx context.Context, c *redis.Client) error {
		policy, err := maxmemoryPolicy(ctx, c)
		mu.Lock()
		defer mu.Unlock()
		switch {
		case err != nil && (!rediserr.Unavailable(err) || rediserr.ACLRefused(err)):
			// The server refused both reads (an ACL user without INFO and
			// CONFIG, "+@all -@dangerous"; CONFIG renamed): say so, and how
			// to let the check pass.
			errs = append(errs, &PolicyUnreadableError{Addr: c.Options().Addr, Err: err})
		case err != nil:
			errs = append(errs, mapErr(ctx, "read maxmemory-policy of", c.Options().Addr, err))
		case policy != "noeviction":
			errs = append(errs, &EvictionPolicyError{Addr: c.Options().Addr, Policy: policy})
		}
		return nil
	}
	var err error
	switch c := client.(type) {
	case *redis.Client:
		err = check(ctx, c)
	case *redis.Ring:
		err = c.ForEachShard(ctx, check)
	case *redis.ClusterClient:
		err = c.ForEachShard(ctx, check)
	default:
		return fmt.Errorf("%w: cannot list the servers of a %T", ErrInvalid, client)
	}
	if err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// maxmemoryPolicy reads one server's policy.
func maxmemoryPolicy(ctx context.Context, c *redis.Client) (string, error) {
	info, infoErr := c.Info(ctx, "memory").Result()
	if infoErr == nil {
		sc := bufio.NewScanner(strings.NewReader(info))
		for sc.Scan() {
			if v, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "maxmemory_policy:"); ok {
				return v, nil
			}
		}
	}
	cfg, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", errors.Join(infoErr, err)
	}
	if v, ok := cfg["maxmemory-policy"]; ok {
		return v, nil
	}
	return "", errors.New("neither INFO memory nor CONFIG GET reports maxmemory-policy")
}
