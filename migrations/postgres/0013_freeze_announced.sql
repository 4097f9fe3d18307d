-- The freeze an environment was last announced to be in (JSON: window, reason, until), NULL
-- when none: the scheduler compares it with the freeze open now and, by compare-and-set,
-- writes one audit entry (and webhook event) when a freeze starts or ends.
ALTER TABLE environments ADD COLUMN freeze_announced TEXT;
