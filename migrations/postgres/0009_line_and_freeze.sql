-- Stopping the line of an environment (JSON: at, by, reason), NULL while it runs: its
-- in-flight releases pause, new releases and direct deploys are refused until lifted.
ALTER TABLE environments ADD COLUMN line_stopped TEXT;

-- Freeze windows: while one is open the scheduler neither advances nor completes a release
-- of the environment, and changes are refused unless an admin overrides with a reason.
-- `spec` is the window's text ("Fri 16:00 - Mon 08:00 Europe/Berlin"), read by vf-rules.
CREATE TABLE freeze_windows (
    id              TEXT PRIMARY KEY,
    environment_id  TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    spec            TEXT NOT NULL,
    reason          TEXT,
    created_by      TEXT NOT NULL,
    created_at      BIGINT NOT NULL
);
CREATE INDEX freeze_windows_environment ON freeze_windows(environment_id);
