package deadman

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/oncesync/oncesync/internal/rediskey"
)

// RedisMarkers is a MarkerStore in Redis, used when the deployment has one
// (docs/guide.md#telling-silence-from-outside): each marker is a key (rediskey.Space.DeadmanMarker) created with
// SET NX, and a set (rediskey.Space.DeadmanMarkers) indexes them so the check
// lists the ongoing silences without SCAN. A script creates or deletes a
// marker together with its index entry; both keys share the {deadman} hash
// tag, so this works on a Redis Cluster and a go-redis Ring too.
type RedisMarkers struct {
	client redis.UniversalClient
	keys   rediskey.Space
}

var _ MarkerStore = (*RedisMarkers)(nil)

// NewRedisMarkers returns the markers kept in client under keys.
func NewRedisMarkers(client redis.UniversalClient, keys rediskey.Space) *RedisMarkers {
	return &RedisMarkers{client: client, keys: keys}
}

// ErrRedis wraps every failure to reach or use Redis.
var ErrRedis = errors.New("deadman: redis markers")

// putScript: KEYS[1] the marker, KEYS[2] the index; ARGV[1] the value.
// Returns 1 when it created the marker, 0 when one existed.
var putScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
	redis.call('SADD', KEYS[2], KEYS[1])
	return 1
end
return 0
`)

// deleteScript: KEYS[1] the marker, KEYS[2] the index. Returns the number
// of markers deleted.
var deleteScript = redis.NewScript(`
local n = redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[2], KEYS[1])
return n
`)

// redisMarker is a marker's stored value. Times are unix nanoseconds (0:
// unknown).
type redisMarker struct {
	Scope     Scope  `json:"scope"`
	ID        string `json:"id"`
	Workspace string `json:"workspace"`
	Kind      Kind   `json:"kind"`
	Since     int64  `json:"since"`
	RaisedAt  int64  `json:"raised_at"`
	AlertID   string `json:"alert_id"`
}

func unixNanos(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNanos(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// ListDeadmanMarkers returns every marker.
func (r *RedisMarkers) ListDeadmanMarkers(ctx context.Context) ([]Marker, error) {
	index := r.keys.DeadmanMarkers()
	keys, err := r.client.SMembers(ctx, index).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: list: %w", ErrRedis, err)
	}
	if len(keys) == 0 {
		return nil, nil
	}
	vals, err := r.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("%w: list: %w", ErrRedis, err)
	}
	out := make([]Marker, 0, len(vals))
	var stale []any
	for i, v := range vals {
		s, ok := v.(string)
		if !ok { // deleted outside the script (by hand): forget it
			stale = append(stale, keys[i])
			continue
		}
		var m redisMarker
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			return nil, fmt.Errorf("%w: marker %s: %w", ErrRedis, keys[i], err)
		}
		out = append(out, Marker{
			Scope: m.Scope, ID: m.ID, Workspace: m.Workspace, Kind: m.Kind,
			Since: fromUnixNanos(m.Since), RaisedAt: fromUnixNanos(m.RaisedAt), AlertID: m.AlertID,
		})
	}
	if len(stale) > 0 {
		if err := r.client.SRem(ctx, index, stale...).Err(); err != nil {
			return nil, fmt.Errorf("%w: list: %w", ErrRedis, err)
		}
	}
	return out, nil
}

// PutDeadmanMarker creates m unless a marker of (m.Scope, m.ID) exists (SET
// NX), and reports whether it did.
func (r *RedisMarkers) PutDeadmanMarker(ctx context.Context, m Marker) (bool, error) {
	if !m.Scope.Valid() || !m.Kind.Valid() {
		return false, fmt.Errorf("%w: invalid marker scope %q kind %q", ErrRedis, m.Scope, m.Kind)
	}
	val, err := json.Marshal(redisMarker{
		Scope: m.Scope, ID: m.ID, Workspace: m.Workspace, Kind: m.Kind,
		Since: unixNanos(m.Since), RaisedAt: unixNanos(m.RaisedAt), AlertID: m.AlertID,
	})
	if err != nil {
		return false, fmt.Errorf("%w: encode marker: %w", ErrRedis, err)
	}
	n, err := putScript.Run(ctx, r.client,
		[]string{r.keys.DeadmanMarker(string(m.Scope), m.ID), r.keys.DeadmanMarkers()}, val).Int()
	if err != nil {
		return false, fmt.Errorf("%w: put %s %s: %w", ErrRedis, m.Scope, m.ID, err)
	}
	return n == 1, nil
}

// DeleteDeadmanMarker removes the marker of scope/id and reports whether one
// existed.
func (r *RedisMarkers) DeleteDeadmanMarker(ctx context.Context, scope Scope, id string) (bool, error) {
	n, err := deleteScript.Run(ctx, r.client,
		[]string{r.keys.DeadmanMarker(string(scope), id), r.keys.DeadmanMarkers()}).Int()
	if err != nil {
		return false, fmt.Errorf("%w: delete %s %s: %w", ErrRedis, scope, id, err)
	}
	return n == 1, nil
}

var _ CheckLog = (*RedisMarkers)(nil)

// markCheckScript: KEYS[1] the record; ARGV[1] at, ARGV[2] notBefore (unix
// ms), ARGV[3] by. Returns 1 when it recorded the check, 0 when a check at
// or after notBefore was recorded. Milliseconds: Lua numbers are doubles.
var markCheckScript = redis.NewScript(`
local cur = tonumber(redis.call('HGET', KEYS[1], 'at_ms'))
if cur and cur >= tonumber(ARGV[2]) then
	return 0
end
redis.call('HSET', KEYS[1], 'at_ms', ARGV[1], 'by', ARGV[3])
return 1
`)

// MarkDeadmanCheck implements CheckLog.
func (r *RedisMarkers) MarkDeadmanCheck(ctx context.Context, at, notBefore time.Time, by string) (bool, error) {
	// notBefore is rounded up, so a record in the same millisecond as a
	// notBefore just after it does not pass as earlier.
	nb := notBefore.UnixMilli()
	if notBefore.Sub(time.UnixMilli(nb)) > 0 {
		nb++
	}
	n, err := markCheckScript.Run(ctx, r.client, []string{r.keys.DeadmanChecked()}, at.UnixMilli(), nb, by).Int()
	if err != nil {
		return false, fmt.Errorf("%w: record the check: %w", ErrRedis, err)
	}
	return n == 1, nil
}

// LastDeadmanCheck implements CheckLog.
func (r *RedisMarkers) LastDeadmanCheck(ctx context.Context) (LastCheck, error) {
	vals, err := r.client.HMGet(ctx, r.keys.DeadmanChecked(), "at_ms", "by").Result()
	if err != nil {
		return LastCheck{}, fmt.Errorf("%w: read the last check: %w", ErrRedis, err)
	}
	var lc LastCheck
	if s, ok := vals[0].(string); ok {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return LastCheck{}, fmt.Errorf("%w: last check: %w", ErrRedis, err)
		}
		lc.At = time.UnixMilli(ms).UTC()
	}
	if s, ok := vals[1].(string); ok {
		lc.By = s
	}
	return lc, nil
}
