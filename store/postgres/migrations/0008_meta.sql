-- The data format of the rows (store.DataFormat): a build that knows an
-- older one refuses the store rather than skip and then overwrite what it
-- cannot read. This migration itself makes the builds from before it
-- refuse a schema written since.
CREATE TABLE {{schema}}.meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);
INSERT INTO {{schema}}.meta (key, value) VALUES ('data_format', '1');
