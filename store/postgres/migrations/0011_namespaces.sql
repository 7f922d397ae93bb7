-- The timer service's namespaces (fomd): a bearer token's hash, the
-- signing secrets in force and the delivery limits, read by every instance.
CREATE TABLE {{schema}}.namespaces (
	name        TEXT PRIMARY KEY,
	token_hash  TEXT NOT NULL UNIQUE,
	secrets     JSONB NOT NULL,
	rate        DOUBLE PRECISION NOT NULL,
	burst       INTEGER NOT NULL,
	concurrency INTEGER NOT NULL,
	max_timers  BIGINT NOT NULL,
	created     BIGINT NOT NULL,
	updated     BIGINT NOT NULL
);
