-- Coordination of several instances of one app (package cluster).
CREATE TABLE {{schema}}.instances (
	id           TEXT PRIMARY KEY,
	host         TEXT NOT NULL,
	version      TEXT NOT NULL,
	started_at   TIMESTAMPTZ NOT NULL,
	heartbeat_at TIMESTAMPTZ NOT NULL,
	stopped      BOOLEAN NOT NULL DEFAULT false
);
-- One owner per schedule: term is the fencing token, bumped by every new owner.
CREATE TABLE {{schema}}.leases (
	schedule   TEXT PRIMARY KEY,
	owner      TEXT NOT NULL,
	term       BIGINT NOT NULL,
	expires_at TIMESTAMPTZ NOT NULL
);
CREATE INDEX leases_by_owner ON {{schema}}.leases (owner);
-- Each planned fire recorded once, before its round runs.
CREATE TABLE {{schema}}.fires (
	schedule    TEXT NOT NULL,
	planned     TIMESTAMPTZ NOT NULL,
	term        BIGINT NOT NULL,
	owner       TEXT NOT NULL,
	recorded_at TIMESTAMPTZ NOT NULL DEFAULT now(),
	PRIMARY KEY (schedule, planned)
);
