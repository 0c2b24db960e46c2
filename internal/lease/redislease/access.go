package redislease

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/rediserr"
	"github.com/oncesync/oncesync/internal/rediskey"
)

// ErrAccessRefused: Redis does not let oncesync's user run a command it
// needs (an ACL user without it, a command renamed away).
var ErrAccessRefused = errors.New("redis refuses commands oncesync needs")

// AccessError names the commands Redis refused to oncesync's user.
type AccessError struct {
	Addr string
	// Commands are lower case, as ACL SETUSER takes them; "~PREFIX*" is
	// the key pattern of oncesync's keys, when they are refused.
	Commands []string
}

func (e *AccessError) Error() string {
	return fmt.Sprintf("redis at %s: %v: %s", e.Addr, ErrAccessRefused, strings.Join(e.Commands, ", "))
}

func (e *AccessError) Unwrap() error { return ErrAccessRefused }

// Advice names the commands and how to allow them (failure.Adviser).
func (e *AccessError) Advice() string {
	plus := make([]string, len(e.Commands))
	for i, c := range e.Commands {
		plus[i] = c
		if !strings.HasPrefix(c, "~") {
			plus[i] = "+" + c
		}
	}
	return fmt.Sprintf("Redis at %s refuses to oncesync's user the command(s) %s, which its leases, barriers and dead-man "+
		"markers need (INFO inside scripts tells a Redis restart or failover): allow them, e.g. ACL SETUSER USER %s "+
		"(docs/guide.md#redis-in-production)", e.Addr, strings.Join(e.Commands, ", "), strings.Join(plus, " "))
}

// accessCommands are the commands oncesync's scripts call, each tried once by
// accessScript on the probe key (INFO is called with pcall by the lease
// scripts, which without it never see a server switch: a silent loss of a
// guarantee, so it is required too).
//
// KEYS: the probe key. ARGV: the key prefix. Returns the lower-case names of the commands refused
// by an ACL or unknown to the server; other errors (OOM) are not the probe's
// business.
const accessLua = `
local refused = {}
local function try(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r.err then
    local e = string.lower(r.err)
    local name = string.lower(select(1, ...))
    if string.find(e, "can't access", 1, true) then
      name = '~' .. ARGV[1] .. '*'
    elseif not (string.find(e, "can't run this command", 1, true) or string.find(e, 'unknown', 1, true) or
      string.find(e, 'noperm', 1, true)) then
      return
    end
    for _, n in ipairs(refused) do
      if n == name then
        return
      end
    end
    table.insert(refused, name)
  end
end
local k = KEYS[1]
try('SET', k, '1', 'PX', '10000')
try('GET', k)
try('INCR', k)
try('PEXPIRE', k, '10000')
try('PTTL', k)
try('EXISTS', k)
try('DEL', k)
try('HSET', k, 'a', '1')
try('HGET', k, 'a')
try('HMGET', k, 'a')
try('DEL', k)
try('SADD', k, 'a')
try('SREM', k, 'a')
redis.pcall('DEL', k)
try('TIME')
try('INFO', 'server')
return refused
`

var accessScript = redis.NewScript(accessLua)

// CheckAccess checks that Redis lets client's user run every command
// oncesync needs: EVAL and EVALSHA (a script is loaded with EVAL after a
// SCRIPT FLUSH or restart, then run with EVALSHA), the commands inside the
// scripts, SMEMBERS (the dead-man's index). It returns an *AccessError
// naming those refused, so a deployment fails at start, saying what to
// allow, instead of failing every run's lease ("take the sync's lease").
// Redis unavailable gives rediserr's error.
func CheckAccess(ctx context.Context, client *redis.Client, keys rediskey.Space) error {
	addr := client.Options().Addr
	key := keys.AccessProbe()
	var refused []string
	note := func(cmd string, err error) (ok bool, fatal error) {
		switch {
		case err == nil || errors.Is(err, redis.Nil):
			return true, nil
		case refusedReply(err):
			if strings.Contains(strings.ToLower(err.Error()), "key") {
				cmd = "~" + keys.Prefix() + "*" // the keys, not the command
			}
			if !slices.Contains(refused, cmd) {
				refused = append(refused, cmd)
			}
			return false, nil
		}
		return false, rediserr.Wrap(ctx, "check the commands allowed at redis at "+addr, err)
	}
	res, err := client.Eval(ctx, accessLua, []string{key}, keys.Prefix()).StringSlice()
	evalOK, fatal := note("eval", err)
	if fatal != nil {
		return fatal
	}
	if evalOK {
		for _, c := range res {
			if !slices.Contains(refused, c) {
				refused = append(refused, c)
			}
		}
	}
	err = client.EvalSha(ctx, accessScript.Hash(), []string{key}, keys.Prefix()).Err()
	if redis.HasErrorPrefix(err, "NOSCRIPT") {
		err = nil // EVAL was refused and loaded nothing: EVALSHA itself is allowed
	}
	if _, fatal := note("evalsha", err); fatal != nil {
		return fatal
	}
	if _, fatal := note("smembers", client.SMembers(ctx, key).Err()); fatal != nil {
		return fatal
	}
	if len(refused) == 0 {
		return nil
	}
	return &AccessError{Addr: addr, Commands: refused}
}

// refusedReply: Redis answered that the user may not run the command (ACL
// NOPERM), or does not know it (renamed away).
func refusedReply(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	return redis.HasErrorPrefix(err, "NOPERM") || strings.HasPrefix(err.Error(), "ERR unknown command")
}
