CREATE TABLE {{schema}}.config_edits (
	schedule TEXT NOT NULL,
	key      TEXT NOT NULL,
	value    TEXT NOT NULL,
	PRIMARY KEY (schedule, key)
);
CREATE TABLE {{schema}}.settings (
	schedule TEXT NOT NULL,
	key      TEXT NOT NULL,
	value    TEXT NOT NULL,
	PRIMARY KEY (schedule, key)
);
-- Each instance of an app keeps its own aggregate of a day: instances
-- sharing the store never overwrite each other's; readers merge them.
CREATE TABLE {{schema}}.stats_days (
	schedule TEXT  NOT NULL,
	day      DATE  NOT NULL,
	instance TEXT  NOT NULL DEFAULT '',
	data     BYTEA NOT NULL,
	PRIMARY KEY (schedule, day, instance)
);
CREATE TABLE {{schema}}.failures (
	id       BIGSERIAL PRIMARY KEY,
	schedule TEXT   NOT NULL,
	at       BIGINT NOT NULL,
	task_id  TEXT   NOT NULL,
	status   TEXT   NOT NULL,
	error    TEXT   NOT NULL,
	stack    TEXT   NOT NULL,
	cost_ns  BIGINT NOT NULL,
	instance TEXT   NOT NULL DEFAULT '',
	round    BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX failures_by_schedule_at ON {{schema}}.failures (schedule, at);
CREATE INDEX failures_by_schedule_id ON {{schema}}.failures (schedule, id);
