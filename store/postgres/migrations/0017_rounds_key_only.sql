-- A page of rounds is found by its schedule (the key's first column):
-- reading a schedule's history, and pruning by age, which names the
-- schedules. The index by start cost every page a flush writes a third
-- more, and made a slot rewritten a lap later a new row version with
-- index entries; with the key alone unchanged, and room on the page, it
-- is written beside the old one (a HOT update).
DROP INDEX IF EXISTS {{schema}}.rounds_by_start;
ALTER TABLE {{schema}}.rounds SET (fillfactor = 70);
