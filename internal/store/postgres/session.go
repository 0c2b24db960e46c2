package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/oncesync/oncesync/internal/store"
)

// Web sessions (migration 0018): Store implements store.Sessions with the
// semantics of store/sqlite.
var _ store.Sessions = (*Store)(nil)

// CreateSession stores a session.
func (s *Store) CreateSession(ctx context.Context, se store.Session) error {
	if se.ID == "" || se.User == "" || se.ExpiresAt.IsZero() {
		return invalidf("session without id, user or expiry")
	}
	if se.CreatedAt.IsZero() {
		se.CreatedAt = s.now()
	}
	if se.LastSeenAt.IsZero() {
		se.LastSeenAt = se.CreatedAt
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO sessions (id, user_name, provider, access, created_at, expires_at, last_seen_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7)`, se.ID, se.User, se.Provider, se.Access, nanos(se.CreatedAt), nanos(se.ExpiresAt), nanos(se.LastSeenAt))
	return mapErr("create session", err)
}

// GetSession returns a live session, or an error wrapping ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (store.Session, error) {
	var (
		se                     store.Session
		created, expires, seen int64
	)
	err := s.pool.QueryRow(ctx, `SELECT id, user_name, provider, access, created_at, expires_at, last_seen_at
		FROM sessions WHERE id = $1 AND expires_at > $2`, id, nanos(s.now())).
		Scan(&se.ID, &se.User, &se.Provider, &se.Access, &created, &expires, &seen)
	if errors.Is(err, pgx.ErrNoRows) {
		return store.Session{}, fmt.Errorf("session: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Session{}, mapErr("get session", err)
	}
	se.CreatedAt, se.ExpiresAt, se.LastSeenAt = fromNanos(created), fromNanos(expires), fromNanos(seen)
	return se, nil
}

// TouchSession records a request of the session now.
func (s *Store) TouchSession(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `UPDATE sessions SET last_seen_at = $1 WHERE id = $2`, nanos(s.now()), id)
	return mapErr("touch session", err)
}

// DeleteSession ends one session.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE id = $1`, id)
	return mapErr("delete session", err)
}

// DeleteUserSessions ends every session of user.
func (s *Store) DeleteUserSessions(ctx context.Context, user string) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE user_name = $1`, user)
	if err != nil {
		return 0, mapErr("delete user sessions", err)
	}
	return tag.RowsAffected(), nil
}

// PruneSessions deletes expired sessions.
func (s *Store) PruneSessions(ctx context.Context) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM sessions WHERE expires_at <= $1`, nanos(s.now()))
	if err != nil {
		return 0, mapErr("prune sessions", err)
	}
	return tag.RowsAffected(), nil
}
