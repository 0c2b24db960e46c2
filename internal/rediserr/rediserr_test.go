package rediserr_test

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/failure"
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

// TestWrapAdvises: a Redis that answers but cannot be used (out of memory,
// a read-only replica, wrong credentials) is store_unavailable like one that
// does not answer, whose catalog words speak of Redis not being reached; the
// detail a person reads says what Redis answered and what to do. Before, a
// run against a Redis at maxmemory failed "could not be reached" with the
// detail "take the sync's lease" and nothing else, anywhere.
func TestWrapAdvises(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		err  error
		want string
	}{
		{replyError("OOM command not allowed when used memory > 'maxmemory'."), "out of memory"},
		{replyError("READONLY You can't write against a read only replica."), "read-only replica"},
		{replyError("WRONGPASS invalid username-password pair or user is disabled."), "refused the user or password"},
		{replyError("ERR max number of clients reached"), "maxclients"},
		// An ACL user without EVALSHA, or whose script may not SET: the
		// detail was "take the sync's lease" alone.
		{replyError("NOPERM this user has no permissions to run the 'evalsha' command"), "refuses oncesync's user a command it needs (NOPERM this user has no permissions to run the 'evalsha' command)"},
		{replyError("ERR The user executing the script can't run this command or subcommand script: 58ac34, on @user_script:96."), "docs/guide.md#redis-in-production"},
		{&net.OpError{Op: "dial", Err: errors.New("connection refused")}, ""},
	} {
		err := failure.Wrap(failure.StoreUnavailable, rediserr.Wrap(ctx, "lease acquire", tt.err), "take the sync's lease")
		if tt.want == "" {
			if err.Detail != "take the sync's lease" {
				t.Errorf("%v: detail %q, want no advice", tt.err, err.Detail)
			}
			continue
		}
		if !strings.HasPrefix(err.Detail, "take the sync's lease: ") || !strings.Contains(err.Detail, tt.want) {
			t.Errorf("%v: detail %q, want the advice naming %q", tt.err, err.Detail, tt.want)
		}
		// Each advice names the guide's section on a production Redis:
		// the failure line's own words are store_unavailable's, generic.
		if !strings.Contains(err.Detail, "docs/guide.md#redis-in-production") {
			t.Errorf("%v: detail %q names no doc anchor", tt.err, err.Detail)
		}
		if !errors.Is(err, tt.err) || !errors.Is(err, store.ErrUnavailable) {
			t.Errorf("%v: the advice hides the reply or ErrUnavailable: %v", tt.err, err)
		}
	}
}
