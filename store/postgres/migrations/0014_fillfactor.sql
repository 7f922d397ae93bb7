-- Rows rewritten in place at a steady pace (a lease renewed every few
-- seconds, an instance's heartbeat, a day's statistics at every flush)
-- leave room on their page, so that the new version is written beside the
-- old one without an index entry (a HOT update, whose dead versions the
-- next reader of the page prunes, with no vacuum). On a full page every
-- renewal of ten thousand leases wrote twenty thousand index entries.
-- Pages written from now on keep the room.
ALTER TABLE {{schema}}.leases SET (fillfactor = 50);
ALTER TABLE {{schema}}.instances SET (fillfactor = 50);
ALTER TABLE {{schema}}.stats_days SET (fillfactor = 70);
