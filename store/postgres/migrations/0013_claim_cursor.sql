-- A poll's claims go on in (due, timer, planned) order, each after the
-- last fire the one before it took (store.FireKey): a claim no longer
-- walks again past the index entries the claims before it left behind
-- (until a vacuum), which made the claims of a burst of fires due at one
-- instant quadratic.
DROP INDEX {{schema}}.timer_fires_unclaimed;
CREATE INDEX timer_fires_unclaimed ON {{schema}}.timer_fires (due_at, timer_id, planned) WHERE owner = '' AND state IN ('pending', 'retry', 'running');
