package app_test

import (
	"context"
	"net"
	"net/url"
	"strings"
	"testing"

	"github.com/oncesync/oncesync/internal/app"
	"github.com/oncesync/oncesync/internal/failure"
	"github.com/oncesync/oncesync/internal/testenv"
)

// TestOpenSaysNothingListensAtRedis: a redis URL whose port nothing listens
// on failed with the detail "reach Redis at HOST:PORT" alone, and with
// rediss:// with the advice to turn TLS off; the detail now says that
// nothing listens there and names the guide's section.
func TestOpenSaysNothingListensAtRedis(t *testing.T) {
	addr := testenv.RefusedAddr(t)
	for _, scheme := range []string{"redis", "rediss"} {
		cfg := embeddedConfig(t)
		cfg.Redis = scheme + "://" + addr + "/0?max_retries=-1"
		a, err := app.Open(context.Background(), app.OpenParams{Config: cfg})
		if err == nil {
			a.Close(context.Background())
			t.Fatalf("Open with %s://%s succeeded", scheme, addr)
		}
		d := failure.Detail(err)
		if failure.CodeOf(err) != failure.StoreUnavailable || !strings.Contains(d, "nothing listens at "+addr) ||
			!strings.Contains(d, "docs/guide.md#redis-in-production") || strings.Contains(d, "use redis://") {
			t.Errorf("%s: Open = %v; want store_unavailable whose detail says nothing listens at %s", scheme, err, addr)
		}
	}
}

// TestOpenSaysRedisHasNoSuchDatabase: a redis URL naming a database the
// server does not have (/16 on a default Redis) failed "reach Redis at
// HOST:PORT", which sent a person to the network; the detail now names the
// database and the setting.
func TestOpenSaysRedisHasNoSuchDatabase(t *testing.T) {
	testenv.RedisOptions(t) // skips (fails under CI) without the test Redis
	u, err := url.Parse(testenv.RedisURL())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/1000000"
	cfg := embeddedConfig(t)
	cfg.Redis = u.String()
	a, err := app.Open(context.Background(), app.OpenParams{Config: cfg})
	if err == nil {
		a.Close(context.Background())
		t.Fatalf("Open with database 1000000 succeeded")
	}
	d := failure.Detail(err)
	if failure.CodeOf(err) != failure.StoreUnavailable || !strings.Contains(d, "has no database 1000000") ||
		!strings.Contains(d, "databases") || !strings.Contains(d, "docs/guide.md#redis-in-production") {
		t.Errorf("Open = %v; want store_unavailable whose detail says Redis has no database 1000000", err)
	}
}

// TestOpenSaysItIsNotRedis: a redis URL with another server's port
// (PostgreSQL's 5432 hangs up on a Redis command, MySQL's 3306 greets
// first) failed with the detail "reach Redis at HOST:PORT" alone; the
// detail now says something answers there that is not Redis.
func TestOpenSaysItIsNotRedis(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		serve func(net.Conn)
		want  string
	}{
		{"greets first", func(c net.Conn) { _, _ = c.Write([]byte("J\x00\x00\x00\n5.5.5-10.11.6-MariaDB\x00")); c.Close() }, "does not speak Redis's protocol"},
		{"hangs up", func(c net.Conn) { c.Close() }, "closed it without an answer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			addr := testenv.ServeTCP(t, tc.serve)
			cfg := embeddedConfig(t)
			cfg.Redis = "redis://" + addr + "/0?max_retries=-1"
			a, err := app.Open(context.Background(), app.OpenParams{Config: cfg})
			if err == nil {
				a.Close(context.Background())
				t.Fatal("Open succeeded")
			}
			d := failure.Detail(err)
			if failure.CodeOf(err) != failure.StoreUnavailable || !strings.Contains(d, tc.want) || !strings.Contains(d, addr) {
				t.Errorf("Open = %v; detail %q, want it to say %q", err, d, tc.want)
			}
		})
	}
}
