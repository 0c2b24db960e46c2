package testenv

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrNoRedisServer: redis-server is not installed (a reason to skip, or to
// fail under CI).
var ErrNoRedisServer = errors.New("redis-server not installed")

// RedisServers starts throwaway redis-server processes (no persistence, on
// free loopback ports) for tests that must stop, restart or shard Redis
// without touching the shared server. A package keeps one and calls Stop
// from its TestMain.
type RedisServers struct {
	mu      sync.Mutex
	started []*exec.Cmd
	dirs    []string
}

// Start starts a redis-server with dir as its working directory and extra
// arguments appended, and returns its address once it answers PING. The
// server is stopped by Stop, or earlier by the returned stop.
func (s *RedisServers) Start(dir string, extra ...string) (addr string, stop func(), err error) {
	addr, err = FreeAddr()
	if err != nil {
		return "", nil, err
	}
	stop, err = s.StartAt(addr, dir, extra...)
	return addr, stop, err
}

// StartAt is Start on a given loopback address: a test that stops a server
// starts a new one where its clients expect it (a restart that lost the
// data, as one without persistence does).
func (s *RedisServers) StartAt(addr, dir string, extra ...string) (stop func(), err error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoRedisServer, err)
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	args := append([]string{"--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--loglevel", "warning"}, extra...)
	cmd := exec.Command(bin, args...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	go func() { // drain its output so it never blocks on a full pipe
		sc := bufio.NewScanner(out)
		for sc.Scan() {
		}
	}()
	s.mu.Lock()
	s.started = append(s.started, cmd)
	s.mu.Unlock()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		})
	}
	c := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			stop()
			return nil, fmt.Errorf("redis-server on %s did not answer within 10s", addr)
		}
		time.Sleep(10 * time.Millisecond)
	}
	return stop, nil
}

// Dir is a directory for servers shared by a package's tests: it outlives
// the test that happened to start them and is removed by Stop.
func (s *RedisServers) Dir(pattern string) (string, error) {
	d, err := os.MkdirTemp("", pattern)
	if err == nil {
		s.mu.Lock()
		s.dirs = append(s.dirs, d)
		s.mu.Unlock()
	}
	return d, err
}

// Stop stops every server started and removes the shared directories.
func (s *RedisServers) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cmd := range s.started {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	s.started = nil
	for _, d := range s.dirs {
		_ = os.RemoveAll(d)
	}
	s.dirs = nil
}

// FreeAddr is a loopback address with a port nothing listens on right now.
func FreeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	addr := l.Addr().String()
	_ = l.Close()
	return addr, nil
}

// RedisOptions are the options of the test Redis (RedisURL) once it answered
// PING; a Redis that does not answer stops t (Unavailable).
func RedisOptions(t testing.TB) *redis.Options {
	t.Helper()
	opt, err := redis.ParseURL(RedisURL())
	if err != nil {
		t.Fatalf("ONCESYNC_TEST_REDIS_URL: %v", err)
	}
	c := redis.NewClient(opt)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		Unavailable(t, "redis at %s unreachable (set ONCESYNC_TEST_REDIS_URL): %v", opt.Addr, err)
	}
	return opt
}

// ForEachServer calls fn with every server behind c: a Ring's shards, a
// Cluster's masters, or c itself.
func ForEachServer(ctx context.Context, c redis.UniversalClient, fn func(ctx context.Context, c *redis.Client) error) error {
	switch c := c.(type) {
	case *redis.Ring:
		return c.ForEachShard(ctx, fn)
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, fn)
	case *redis.Client:
		return fn(ctx, c)
	}
	return fmt.Errorf("unknown client %T", c)
}

// DeletePrefix deletes every key starting with prefix on every server
// behind c (a test's own namespace, at its end). A failure is logged: the
// namespace is random and never reused.
func DeletePrefix(t testing.TB, c redis.UniversalClient, prefix string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := ForEachServer(ctx, c, func(ctx context.Context, c *redis.Client) error {
		iter := c.Scan(ctx, 0, prefix+"*", 100).Iterator()
		for iter.Next(ctx) {
			if err := c.Del(ctx, iter.Val()).Err(); err != nil {
				return err
			}
		}
		return iter.Err()
	})
	if err != nil {
		t.Logf("clean up keys %s*: %v", prefix, err)
	}
}

// RandHex is n random bytes in hex: a test's own namespace or id.
func RandHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
