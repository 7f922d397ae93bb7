-- Operators' actions on schedules, kept within the statistics retention
-- and at most 1000 per schedule.
CREATE TABLE {{schema}}.audit (
	id        BIGSERIAL PRIMARY KEY,
	schedule  TEXT NOT NULL,
	at        TIMESTAMPTZ NOT NULL,
	action    TEXT NOT NULL,
	principal TEXT NOT NULL,
	detail    TEXT NOT NULL,
	outcome   TEXT NOT NULL,
	instance  TEXT NOT NULL DEFAULT ''
);
CREATE INDEX audit_by_schedule ON {{schema}}.audit (schedule, id);
