package redislease_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/lease/redislease"
	"github.com/oncesync/oncesync/internal/rediskey"
)

// TestCheckAccess: an ACL user missing a command the leases need made every
// run fail "take the sync's lease" (NOPERM ... 'evalsha', or "The user
// executing the script can't run this command", which names none), and a
// user refused INFO inside scripts silently lost the server-switch
// quarantine. CheckAccess names the refused commands at start.
func TestCheckAccess(t *testing.T) {
	t.Parallel()
	addr, stop := startServer(t)
	defer stop()
	ctx := t.Context()
	admin := redis.NewClient(&redis.Options{Addr: addr})
	defer admin.Close()
	keys, err := rediskey.New("acl-test")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		rules []string
		want  []string
	}{
		{"everything", []string{"+@all", "~*"}, nil},
		{"no evalsha", []string{"+@all", "-evalsha", "~*"}, []string{"evalsha"}},
		{"no eval", []string{"+@all", "-eval", "~*"}, []string{"eval"}},
		{"no scripts", []string{"+@all", "-eval", "-evalsha", "~*"}, []string{"eval", "evalsha"}},
		{"no info", []string{"+@all", "-info", "~*"}, []string{"info"}},
		{"no smembers", []string{"+@all", "-smembers", "~*"}, []string{"smembers"}},
		{"read only", []string{"+@read", "+eval", "+evalsha", "+info", "+time", "~*"},
			[]string{"set", "incr", "pexpire", "del", "hset", "sadd", "srem"}},
		{"other keys only", []string{"+@all", "~other:*"}, []string{"~acl-test:v1:*"}},
	}
	for i, tt := range tests {
		user := "u" + string(rune('a'+i))
		args := append([]any{"ACL", "SETUSER", user, "reset", "on", ">pw"}, toAny(tt.rules)...)
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
		c := redis.NewClient(&redis.Options{Addr: addr, Username: user, Password: "pw"})
		err := redislease.CheckAccess(ctx, c, keys)
		c.Close()
		if tt.want == nil {
			if err != nil {
				t.Errorf("%s: CheckAccess = %v, want nil", tt.name, err)
			}
			continue
		}
		var ae *redislease.AccessError
		if !errors.As(err, &ae) || !errors.Is(err, redislease.ErrAccessRefused) {
			t.Errorf("%s: CheckAccess = %v, want an *AccessError", tt.name, err)
			continue
		}
		if !slices.Equal(ae.Commands, tt.want) {
			t.Errorf("%s: refused %v, want %v", tt.name, ae.Commands, tt.want)
		}
		if adv := ae.Advice(); !strings.Contains(adv, "ACL SETUSER USER +"+strings.TrimPrefix(tt.want[0], "~")) && !strings.Contains(adv, tt.want[0]) {
			t.Errorf("%s: advice %q does not say what to allow", tt.name, adv)
		}
	}
	if n, err := admin.Exists(ctx, keys.AccessProbe()).Result(); err != nil || n != 0 {
		t.Errorf("probe key left behind: %d, %v", n, err)
	}
}

func toAny(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}
