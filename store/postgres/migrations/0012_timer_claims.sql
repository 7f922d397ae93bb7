-- Claims look for fires no instance holds (by due time) and for leases
-- that ran out (by lease), each in an index of its own: a claim no longer
-- walks past the fires already claimed, which a burst of fires due at one
-- instant made quadratic.
DROP INDEX {{schema}}.timer_fires_due;
CREATE INDEX timer_fires_unclaimed ON {{schema}}.timer_fires (due_at) WHERE owner = '' AND state IN ('pending', 'retry', 'running');
CREATE INDEX timer_fires_leased ON {{schema}}.timer_fires (lease_until) WHERE owner <> '' AND state IN ('pending', 'retry', 'running');
