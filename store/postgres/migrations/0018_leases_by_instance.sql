-- A lease lives as long as its owner's instance row says (package
-- pgcluster): an owner renews its leases by renewing that one row, where a
-- renewal rewrote every lease's row. epoch is bumped by every transaction
-- that moves one of the instance's leases away (a taker of an expired
-- owner's leases, a lease given back): a batch of fires whose owner's
-- epoch is still the one the owner read with its leases is recorded
-- without a look at each lease.
ALTER TABLE {{schema}}.instances ADD COLUMN leases_until TIMESTAMPTZ NOT NULL DEFAULT '-infinity',
	ADD COLUMN epoch BIGINT NOT NULL DEFAULT 0;
-- An instance of an earlier release cannot renew in this form: its leases
-- end now (or when they ended), and the plan of each resumes from its last
-- fire, or from that instant.
UPDATE {{schema}}.instances i SET leases_until = least(now(), l.until)
	FROM (SELECT owner, max(expires_at) AS until FROM {{schema}}.leases WHERE owner <> '' GROUP BY owner) l
	WHERE l.owner = i.id;
-- A lease given back keeps the instant it was given back as its last fire
-- when it had none: its next owner resumes from there.
UPDATE {{schema}}.leases SET last_fire = expires_at
	WHERE owner = '' AND last_fire IS NULL AND expires_at > '-infinity' AND expires_at < 'infinity';
ALTER TABLE {{schema}}.leases DROP COLUMN expires_at;
