-- Who asked for a forwarded action (exec now), for the run history.
ALTER TABLE {{schema}}.requests ADD COLUMN principal TEXT NOT NULL DEFAULT '';
