-- Webhooks (issue 16): per environment, URLs that hear of release events, signed with their
-- secret. Deliveries are an outbox written in the transaction of the event itself (with its
-- audit entry) and sent by a worker: at least once, retried with backoff for up to 24 h.
CREATE TABLE webhooks (
    id              TEXT PRIMARY KEY,
    environment_id  TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    secret          TEXT NOT NULL,
    events          TEXT NOT NULL,
    slack           BIGINT NOT NULL DEFAULT 0,
    created_by      TEXT NOT NULL,
    created_at      BIGINT NOT NULL
);
CREATE INDEX webhooks_environment ON webhooks(environment_id);

CREATE TABLE webhook_deliveries (
    id               TEXT PRIMARY KEY,
    webhook_id       TEXT NOT NULL REFERENCES webhooks(id) ON DELETE CASCADE,
    event            TEXT NOT NULL,
    body             TEXT NOT NULL,
    status           TEXT NOT NULL,
    attempts         BIGINT NOT NULL DEFAULT 0,
    created_at       BIGINT NOT NULL,
    next_attempt_at  BIGINT,
    claimed_until    BIGINT,
    last_attempt_at  BIGINT,
    response_code    BIGINT,
    latency_ms       BIGINT,
    error            TEXT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(status, next_attempt_at);
CREATE INDEX webhook_deliveries_webhook ON webhook_deliveries(webhook_id, created_at);
