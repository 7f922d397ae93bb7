-- Each instance's code declaration of each schedule it registered (its
-- keys' code defaults: tags, else built-in defaults), so that instances
-- that disagree (a rolling deploy) are shown rather than followed silently.
CREATE TABLE {{schema}}.declarations (
	instance TEXT NOT NULL,
	schedule TEXT NOT NULL,
	decl     JSONB NOT NULL,
	PRIMARY KEY (instance, schedule)
);
