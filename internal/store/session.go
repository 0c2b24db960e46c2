package store

import (
	"context"
	"time"
)

// Sessions of the web UI (docs/guide.md#running-oncesync-for-several-teams): kept in the store so
// that they survive a restart of serve and can be revoked. A session's ID
// is the hex SHA-256 of the secret in the browser's cookie: the store never
// holds a value that signs anyone in.
type Session struct {
	// ID is the hex SHA-256 of the cookie's secret.
	ID string
	// User is the principal's name (a web.users name, or "oidc:NAME#DIGEST").
	User string
	// Provider is how the user signed in: "password" or "oidc".
	Provider string
	// Access is the principal's role and workspaces as the web tier encodes
	// them; opaque to the store. A password session whose Access no longer
	// matches the configuration is ended by the web tier.
	Access string
	// CreatedAt, ExpiresAt and LastSeenAt: the sign-in, the end, and the
	// last request (updated at most about once a minute).
	CreatedAt  time.Time
	ExpiresAt  time.Time
	LastSeenAt time.Time
}

// Sessions is the store's session table. store/sqlite and store/postgres
// implement it.
type Sessions interface {
	// CreateSession stores s (CreatedAt and LastSeenAt default to now).
	CreateSession(ctx context.Context, s Session) error
	// GetSession returns the session with id, or an error wrapping
	// ErrNotFound when there is none or it has expired.
	GetSession(ctx context.Context, id string) (Session, error)
	// TouchSession sets a session's LastSeenAt to now.
	TouchSession(ctx context.Context, id string) error
	// DeleteSession ends one session (no error when there is none).
	DeleteSession(ctx context.Context, id string) error
	// DeleteUserSessions ends every session of user ("sign out
	// everywhere") and returns how many there were.
	DeleteUserSessions(ctx context.Context, user string) (int64, error)
	// PruneSessions deletes the sessions expired at now.
	PruneSessions(ctx context.Context) (int64, error)
}
