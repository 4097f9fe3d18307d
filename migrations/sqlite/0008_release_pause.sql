-- An operator's pause (JSON: at, by, reason, bakeLeftMs), NULL while not paused: the
-- scheduler skips paused releases. And the reasons operators gave for their actions (JSON
-- list of {at, actor, action, reason}), NULL for none.
ALTER TABLE releases ADD COLUMN paused TEXT;
ALTER TABLE releases ADD COLUMN notes TEXT;
