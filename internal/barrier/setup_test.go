package barrier_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/barrier"
	"github.com/oncesync/oncesync/internal/rediskey"
	"github.com/oncesync/oncesync/internal/testenv"
)

// The test servers and the rule for one that does not answer (internal/testenv).
var (
	unavailable = testenv.Unavailable
	randHex     = testenv.RandHex
)

// Tests run against the Redis at ONCESYNC_TEST_REDIS_URL (default
// redis://127.0.0.1:6379/0) as a plain client; through a 3-shard go-redis
// Ring (that Redis plus two redis-servers this package starts on free
// loopback ports); and through a 3-master Redis Cluster this package starts
// (redis-server --cluster-enabled yes ×3, then redis-cli --cluster create).
// Every test uses its own key namespace and deletes its keys afterwards.
// Without Redis (or redis-server/redis-cli) the tests skip, except under
// CI=true where they fail.

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		snapshotChild()
		return
	}
	code := m.Run()
	stopServers()
	os.Exit(code)
}

// mainOptions returns the options of the test Redis, skipping (failing in
// CI) when it does not answer.
func mainOptions(t testing.TB) *redis.Options {
	t.Helper()
	return testenv.RedisOptions(t)
}

// Throwaway redis-servers started by this package, stopped by TestMain.
var servers testenv.RedisServers

// The package's shared Ring shards and Cluster, each started once.
var (
	ringOnce struct {
		mu    sync.Mutex
		addrs []string
		err   error
	}
	clusterOnce struct {
		mu    sync.Mutex
		addrs []string
		err   error
	}
)

func stopServers() { servers.Stop() }

// startServer starts a throwaway redis-server (testenv.RedisServers.Start).
func startServer(dir string, extra ...string) (string, func(), error) {
	return servers.Start(dir, extra...)
}

// serverDir is a directory for the package's shared servers, removed by
// stopServers.
func serverDir() (string, error) { return servers.Dir("oncesync-checkpoint-redis-") }

// ringShards returns the two extra Ring shards, started once.
func ringShards(t testing.TB) []string {
	t.Helper()
	ringOnce.mu.Lock()
	defer ringOnce.mu.Unlock()
	if ringOnce.addrs == nil && ringOnce.err == nil {
		dir, err := serverDir()
		var addrs []string
		for range 2 {
			if err != nil {
				break
			}
			var addr string
			addr, _, err = startServer(dir)
			addrs = append(addrs, addr)
		}
		ringOnce.addrs, ringOnce.err = addrs, err
	}
	if ringOnce.err != nil {
		unavailable(t, "ring shards: %v", ringOnce.err)
	}
	return ringOnce.addrs
}

// clusterAddrs returns the three masters of a Redis Cluster, started once:
// three cluster-enabled redis-servers joined by `redis-cli --cluster create`,
// ready when every node reports cluster_state:ok.
func clusterAddrs(t testing.TB) []string {
	t.Helper()
	clusterOnce.mu.Lock()
	defer clusterOnce.mu.Unlock()
	if clusterOnce.addrs == nil && clusterOnce.err == nil {
		clusterOnce.addrs, clusterOnce.err = startCluster()
	}
	if clusterOnce.err != nil {
		unavailable(t, "redis cluster: %v", clusterOnce.err)
	}
	return clusterOnce.addrs
}

func startCluster() ([]string, error) {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return nil, fmt.Errorf("redis-cli not installed: %w", err)
	}
	var addrs []string
	for range 3 {
		dir, err := serverDir() // one per node: each writes its own nodes.conf
		if err != nil {
			return nil, err
		}
		addr, _, err := startServer(dir, "--cluster-enabled", "yes",
			"--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "5000")
		if err != nil {
			return nil, err
		}
		addrs = append(addrs, addr)
	}
	args := append([]string{"--cluster", "create"}, addrs...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	var out bytes.Buffer
	cmd := exec.Command(cli, args...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("redis-cli --cluster create: %v\n%s", err, out.String())
	}
	deadline := time.Now().Add(15 * time.Second)
	for _, addr := range addrs {
		c := redis.NewClient(&redis.Options{Addr: addr})
		for {
			info, err := c.ClusterInfo(context.Background()).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = c.Close()
				return nil, fmt.Errorf("node %s not cluster_state:ok within 15s: %v %s", addr, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
		_ = c.Close()
	}
	return addrs, nil
}

// backend builds the Redis client of one test flavour.
type backend struct {
	name string
	new  func(t testing.TB) redis.UniversalClient
}

func backends() []backend {
	return []backend{
		{"client", func(t testing.TB) redis.UniversalClient { return redis.NewClient(mainOptions(t)) }},
		{"ring3", newRing},
		{"cluster3", func(t testing.TB) redis.UniversalClient {
			return redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterAddrs(t)})
		}},
	}
}

// newRing returns a 3-shard Ring: the test Redis and two started shards.
func newRing(t testing.TB) redis.UniversalClient {
	opt := mainOptions(t)
	extra := ringShards(t)
	return redis.NewRing(&redis.RingOptions{
		Addrs: map[string]string{"main": opt.Addr, "second": extra[0], "third": extra[1]},
		DB:    opt.DB,
		NewClient: func(o *redis.Options) *redis.Client {
			if o.Addr == opt.Addr {
				o.Username, o.Password = opt.Username, opt.Password
			} else {
				o.DB = 0
			}
			return redis.NewClient(o)
		},
	})
}

// forEachBackend runs fn as a parallel subtest per backend.
func forEachBackend(t *testing.T, fn func(t *testing.T, tb *bundle)) {
	t.Helper()
	for _, be := range backends() {
		t.Run(be.name, func(t *testing.T) {
			t.Parallel()
			fn(t, setup(t, be.new(t)))
		})
	}
}

type bundle struct {
	ctx     context.Context
	client  redis.UniversalClient
	keys    rediskey.Space
	barrier *barrier.Barrier
}

func setup(t testing.TB, client redis.UniversalClient) *bundle {
	t.Helper()
	keys, err := rediskey.New("test-" + randHex(6))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cleanKeys(t, client, keys)
		_ = client.Close()
	})
	return &bundle{
		ctx:     context.Background(),
		client:  client,
		keys:    keys,
		barrier: barrier.New(barrier.Params{Client: client}),
	}
}

// key returns a fresh barrier key in tb's namespace.
func (tb *bundle) key() string { return tb.keys.Checkpoint("cp-" + randHex(4)) }

// cleanKeys deletes keys's namespace on every server behind c.
func cleanKeys(t testing.TB, c redis.UniversalClient, keys rediskey.Space) {
	t.Helper()
	testenv.DeletePrefix(t, c, keys.Prefix())
}
