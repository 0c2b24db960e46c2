-- oncesync PostgreSQL store, migration 18: web UI sessions
-- (docs/guide.md#running-oncesync-for-several-teams). id is the SHA-256 of
-- the cookie's secret, never the secret; access is the web tier's encoding
-- of the role and workspaces at sign-in.

CREATE TABLE sessions (
    id           text   NOT NULL PRIMARY KEY,
    user_name    text   NOT NULL,
    provider     text   NOT NULL,
    access       text   NOT NULL,
    created_at   bigint NOT NULL,
    expires_at   bigint NOT NULL,
    last_seen_at bigint NOT NULL
);

CREATE INDEX sessions_user_name ON sessions (user_name);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
