package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/oncesync/oncesync/internal/store"
)

// Web sessions (migration 0018): Store implements store.Sessions.
var _ store.Sessions = (*Store)(nil)

// CreateSession stores a session.
func (s *Store) CreateSession(ctx context.Context, se store.Session) error {
	if se.ID == "" || se.User == "" || se.ExpiresAt.IsZero() {
		return invalidf("session without id, user or expiry")
	}
	now := s.now()
	if se.CreatedAt.IsZero() {
		se.CreatedAt = now
	}
	if se.LastSeenAt.IsZero() {
		se.LastSeenAt = se.CreatedAt
	}
	return s.write(ctx, "create session", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO sessions (id, user_name, provider, access, created_at, expires_at, last_seen_at)
			VALUES (?, ?, ?, ?, ?, ?, ?)`, se.ID, se.User, se.Provider, se.Access, nanos(se.CreatedAt), nanos(se.ExpiresAt), nanos(se.LastSeenAt))
		return err
	})
}

// GetSession returns a live session, or an error wrapping ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (store.Session, error) {
	var (
		se                     store.Session
		created, expires, seen int64
	)
	err := s.r.QueryRowContext(ctx, `SELECT id, user_name, provider, access, created_at, expires_at, last_seen_at
		FROM sessions WHERE id = ? AND expires_at > ?`, id, nanos(s.now())).
		Scan(&se.ID, &se.User, &se.Provider, &se.Access, &created, &expires, &seen)
	if errors.Is(err, sql.ErrNoRows) {
		return store.Session{}, fmt.Errorf("session: %w", store.ErrNotFound)
	}
	if err != nil {
		return store.Session{}, s.mapErr("get session", err)
	}
	se.CreatedAt, se.ExpiresAt, se.LastSeenAt = fromNanos(created), fromNanos(expires), fromNanos(seen)
	return se, nil
}

// TouchSession records a request of the session now.
func (s *Store) TouchSession(ctx context.Context, id string) error {
	return s.write(ctx, "touch session", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE sessions SET last_seen_at = ? WHERE id = ?`, nanos(s.now()), id)
		return err
	})
}

// DeleteSession ends one session.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	return s.write(ctx, "delete session", func(tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
		return err
	})
}

// DeleteUserSessions ends every session of user.
func (s *Store) DeleteUserSessions(ctx context.Context, user string) (int64, error) {
	var n int64
	err := s.write(ctx, "delete user sessions", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE user_name = ?`, user)
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}

// PruneSessions deletes expired sessions.
func (s *Store) PruneSessions(ctx context.Context) (int64, error) {
	var n int64
	err := s.write(ctx, "prune sessions", func(tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE expires_at <= ?`, nanos(s.now()))
		if err != nil {
			return err
		}
		n, err = res.RowsAffected()
		return err
	})
	return n, err
}
