-- oncesync embedded store, migration 18: web UI sessions
-- (docs/guide.md#running-oncesync-for-several-teams). id is the SHA-256 of
-- the cookie's secret, never the secret; access is the web tier's encoding
-- of the role and workspaces at sign-in.

CREATE TABLE sessions (
    id           TEXT    NOT NULL PRIMARY KEY,
    user_name    TEXT    NOT NULL,
    provider     TEXT    NOT NULL,
    access       TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER NOT NULL,
    last_seen_at INTEGER NOT NULL
) STRICT;

CREATE INDEX sessions_user_name ON sessions (user_name);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
