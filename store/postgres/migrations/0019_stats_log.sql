-- The statistics log (statslog.go): a flush writes its days and pages as
-- one row, arrays of its entries, and an entry reaches stats_days or
-- rounds only when its row leaves the log and no newer row holds its key.
-- Readers overlay the rows of every instance on the tables.
CREATE TABLE {{schema}}.stats_log (
	instance  TEXT        NOT NULL,
	id        BIGINT      NOT NULL,
	at        TIMESTAMPTZ NOT NULL DEFAULT now(),
	schedules TEXT[]      NOT NULL,
	kinds     SMALLINT[]  NOT NULL, -- 1 a day, 2 a page of rounds
	keys      BIGINT[]    NOT NULL, -- a day's number since 1970-01-01, a page's slot
	firsts    BIGINT[]    NOT NULL, -- a page's first and last round, and its last round's start (Unix ns)
	seqs      BIGINT[]    NOT NULL,
	starts    BIGINT[]    NOT NULL,
	datas     BYTEA[]     NOT NULL,
	PRIMARY KEY (instance, id)
);
-- Written once and read whole or by a reader's filter: stored out of line
-- uncompressed, so a flush does not spend its time compressing.
ALTER TABLE {{schema}}.stats_log
	ALTER COLUMN schedules SET STORAGE EXTERNAL,
	ALTER COLUMN kinds SET STORAGE EXTERNAL,
	ALTER COLUMN keys SET STORAGE EXTERNAL,
	ALTER COLUMN firsts SET STORAGE EXTERNAL,
	ALTER COLUMN seqs SET STORAGE EXTERNAL,
	ALTER COLUMN starts SET STORAGE EXTERNAL,
	ALTER COLUMN datas SET STORAGE EXTERNAL;
