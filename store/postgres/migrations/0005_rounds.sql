-- The run history: each instance writes a page of rounds per flush and
-- schedule, in a slot overwritten a lap later; readers merge the instances
-- by start.
CREATE TABLE {{schema}}.rounds (
	schedule  TEXT   NOT NULL,
	instance  TEXT   NOT NULL DEFAULT '',
	slot      INT    NOT NULL,
	first_seq BIGINT NOT NULL,
	seq       BIGINT NOT NULL,
	start     BIGINT NOT NULL,
	data      BYTEA  NOT NULL,
	PRIMARY KEY (schedule, instance, slot)
);
CREATE INDEX rounds_by_start ON {{schema}}.rounds (start);
