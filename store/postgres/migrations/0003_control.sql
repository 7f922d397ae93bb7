-- Start and stop as desired states every instance follows, and requests
-- (exec-now) forwarded to a schedule's owner (package cluster).
CREATE TABLE {{schema}}.desired (
	schedule    TEXT PRIMARY KEY,
	running     BOOLEAN NOT NULL,
	updated_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
	by_instance TEXT NOT NULL
);
CREATE TABLE {{schema}}.requests (
	id          BIGSERIAL PRIMARY KEY,
	schedule    TEXT NOT NULL,
	action      TEXT NOT NULL,
	requester   TEXT NOT NULL,
	created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
	answered_at TIMESTAMPTZ,
	answered_by TEXT,
	answer      TEXT
);
-- What each instance can run, to tell an orphaned schedule (no live
-- instance registered it) from one between owners.
ALTER TABLE {{schema}}.instances ADD COLUMN schedules TEXT[] NOT NULL DEFAULT '{}';
-- Task ids running with enableTaskConflict, across instances.
CREATE TABLE {{schema}}.task_claims (
	task_id    TEXT PRIMARY KEY,
	instance   TEXT NOT NULL,
	expires_at TIMESTAMPTZ NOT NULL
);
