package rediserr_test

import (
	"context"
	"errors"
	"io"
	"net"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/rediserr"
	"github.com/oncesync/oncesync/internal/store"
)

// replyError is a Redis error reply, as go-redis returns one.
type replyError string

func (e replyError) Error() string { return string(e) }
func (replyError) RedisError()     {}

var _ redis.Error = replyError("")

func TestWrap(t *testing.T) {
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, tt := range []struct {
		name        string
		ctx         context.Context
		err         error
		unavailable bool
	}{
		{"connection refused", live, &net.OpError{Op: "dial", Err: errors.New("connection refused")}, true},
		{"eof", live, io.EOF, true},
		{"pool closed", live, redis.ErrClosed, true},
		{"loading", live, replyError("LOADING Redis is loading the dataset in memory"), true},
		{"readonly replica", live, replyError("READONLY You can't write against a read only replica."), true},
		{"out of memory", live, replyError("OOM command not allowed when used memory > 'maxmemory'."), true},
		{"wrong password", live, replyError("WRONGPASS invalid username-password pair"), true},
		{"too many clients", live, replyError("ERR max number of clients reached"), true},
		{"script bug", live, replyError("ERR Error running script (call to f_x): attempt to compare nil"), false},
		{"wrong type", live, replyError("WRONGTYPE Operation against a key holding the wrong kind of value"), false},
		{"our context ended", ended, context.Canceled, false},
	} {
		got := rediserr.Wrap(tt.ctx, "lease renew", tt.err)
		if errors.Is(got, store.ErrUnavailable) != tt.unavailable {
			t.Errorf("%s: Wrap = %v; unavailable %v, want %v", tt.name, got, errors.Is(got, store.ErrUnavailable), tt.unavailable)
		}
		if !errors.Is(got, tt.err) || got.Error()[:len("lease renew: ")] != "lease renew: " {
			t.Errorf("%s: Wrap = %v, want %q wrapped under \"lease renew: \"", tt.name, got, tt.err)
		}
	}
}
