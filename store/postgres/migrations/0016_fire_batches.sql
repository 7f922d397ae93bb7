-- A fire record is a row per batch of fires, not per fire (package
-- pgcluster): a row and a key for each fire were most of the
-- database's cost of an aligned burst on a cluster. No key keeps a fire
-- from being recorded twice any more; the owner's lock orders each batch
-- against a takeover (a batch locks its instance's row, a taker locks the
-- previous owner's, then reads its batches), and a lease keeps its
-- schedule's last recorded fire, compacted into it at each renewal, which
-- the records of a new owner must come after.
ALTER TABLE {{schema}}.leases ADD COLUMN last_fire TIMESTAMPTZ;
UPDATE {{schema}}.leases l SET last_fire = f.planned
	FROM (SELECT schedule, max(planned) AS planned FROM {{schema}}.fires GROUP BY schedule) f
	WHERE f.schedule = l.schedule;
DROP TABLE {{schema}}.fires;
-- compacted: folded into the leases' last_fire by the owner's renewal (or
-- read by the taker of its leases). A batch of fires recorded ahead stays
-- uncompacted until they ran or were given back.
CREATE TABLE {{schema}}.fire_batches (
	owner       TEXT NOT NULL,
	batch       BIGINT NOT NULL,
	recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
	compacted   BOOLEAN NOT NULL DEFAULT false,
	schedules   TEXT[] NOT NULL,
	planned     TIMESTAMPTZ[] NOT NULL,
	PRIMARY KEY (owner, batch)
);
-- Stored apart and uncompressed: a burst's names compress poorly and
-- are read once (by the renewal), then deleted.
ALTER TABLE {{schema}}.fire_batches ALTER COLUMN schedules SET STORAGE EXTERNAL, ALTER COLUMN planned SET STORAGE EXTERNAL;
CREATE INDEX fire_batches_uncompacted ON {{schema}}.fire_batches (owner) WHERE NOT compacted;
CREATE INDEX fire_batches_recorded ON {{schema}}.fire_batches (recorded_at);
-- Every fire recorded in the last ten minutes, one row each, for reading.
CREATE VIEW {{schema}}.fire_records AS
	SELECT u.schedule, u.planned, b.owner, b.batch, b.recorded_at
	FROM {{schema}}.fire_batches b, unnest(b.schedules, b.planned) AS u(schedule, planned);
