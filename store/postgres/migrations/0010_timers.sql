-- Durable timers (package timer): definitions, their fires (one per timer
-- and planned time; the last attempt's times and status in the fire's
-- row) and the attempts that failed. Times are Unix ms.
CREATE TABLE {{schema}}.timers (
	id           TEXT PRIMARY KEY,
	namespace    TEXT NOT NULL,
	name         TEXT NOT NULL,
	kind         TEXT NOT NULL,
	at           BIGINT NOT NULL,
	cron         TEXT NOT NULL,
	payload      BYTEA NOT NULL,
	enabled      BOOLEAN NOT NULL,
	version      BIGINT NOT NULL,
	max_attempts INT NOT NULL,
	min_backoff  BIGINT NOT NULL,
	max_backoff  BIGINT NOT NULL,
	timeout      BIGINT NOT NULL,
	misfire      TEXT NOT NULL,
	next_at      BIGINT NOT NULL,
	created      BIGINT NOT NULL,
	updated      BIGINT NOT NULL,
	UNIQUE (namespace, name)
);
CREATE INDEX timers_due ON {{schema}}.timers (next_at) WHERE enabled AND next_at > 0;
CREATE TABLE {{schema}}.timer_fires (
	timer_id    TEXT NOT NULL,
	planned     BIGINT NOT NULL,
	namespace   TEXT NOT NULL,
	state       TEXT NOT NULL,
	attempt     INT NOT NULL,
	base        INT NOT NULL,
	due_at      BIGINT NOT NULL,
	owner       TEXT NOT NULL,
	lease_until BIGINT NOT NULL,
	last_error  TEXT NOT NULL,
	started     BIGINT NOT NULL DEFAULT 0,
	finished    BIGINT NOT NULL,
	status_code INT NOT NULL DEFAULT 0,
	PRIMARY KEY (timer_id, planned)
);
CREATE INDEX timer_fires_due ON {{schema}}.timer_fires (due_at) WHERE state IN ('pending', 'retry', 'running');
CREATE INDEX timer_fires_finished ON {{schema}}.timer_fires (state, finished) WHERE state IN ('succeeded', 'dead');
CREATE TABLE {{schema}}.timer_attempts (
	timer_id    TEXT NOT NULL,
	planned     BIGINT NOT NULL,
	attempt     INT NOT NULL,
	started     BIGINT NOT NULL,
	finished    BIGINT NOT NULL,
	error       TEXT NOT NULL,
	status_code INT NOT NULL,
	PRIMARY KEY (timer_id, planned, attempt)
);
