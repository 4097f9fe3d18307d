-- Operator accounts, sessions, API tokens and the one-time setup link (issue 7).
-- Secrets (passwords, session and API tokens) are stored only as hashes: argon2id for
-- passwords, sha256 for random tokens. environment_id '*' means every environment.

CREATE TABLE users (
    id             TEXT PRIMARY KEY,
    email          TEXT NOT NULL UNIQUE,
    password_hash  TEXT NOT NULL,
    created_by     TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    disabled_at    INTEGER
);

CREATE TABLE role_grants (
    user_id         TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    environment_id  TEXT NOT NULL,
    role            TEXT NOT NULL,
    PRIMARY KEY (user_id, environment_id)
);

CREATE TABLE sessions (
    id          TEXT PRIMARY KEY,
    token_hash  TEXT NOT NULL UNIQUE,
    user_id     TEXT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
    ip          TEXT,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
CREATE INDEX sessions_user ON sessions(user_id);

-- role: viewer | editor | admin, or edge-config (reads GET /api/edge-config, nothing else).
CREATE TABLE api_tokens (
    id              TEXT PRIMARY KEY,
    name            TEXT NOT NULL,
    prefix          TEXT NOT NULL,
    token_hash      TEXT NOT NULL UNIQUE,
    environment_id  TEXT NOT NULL,
    role            TEXT NOT NULL,
    created_by      TEXT NOT NULL,
    created_at      INTEGER NOT NULL,
    last_used_at    INTEGER,
    revoked_at      INTEGER
);

-- The one-time link printed on a first start without VF_ADMIN_EMAIL / VF_ADMIN_PASSWORD.
CREATE TABLE setup_tokens (
    token_hash  TEXT PRIMARY KEY,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    used_at     INTEGER
);
