-- A digest of each instance's declarations (every schedule's), written
-- with them: when the live instances share one digest they agree, and a
-- resync reads no declaration (ten thousand schedules on three instances
-- were compared one by one at every resync, 70 ms of the database's time
-- each, while the leases moved). '': unknown (written by no Declare yet),
-- compared one by one.
ALTER TABLE {{schema}}.instances ADD COLUMN decl_digest TEXT NOT NULL DEFAULT '';
