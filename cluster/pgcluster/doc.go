// Package pgcluster is the cluster's coordinator on PostgreSQL (see
// package cluster): store/postgres builds it for an App, so that an App
// without that store links none of it.
//
// # Leases
//
// Each schedule has a row in leases: its owner, a term (the fencing
// token, bumped by each new owner), an expiry on the database's clock,
// and its last recorded fire. An owner renews all its leases in one
// statement every RenewEvery and trusts them for a fifth less than the
// TTL after it sent it; a lease expired, or given back, is taken by
// another instance, which continues the plan after the last fire. The
// first to take its share of a dead instance's leases tells the others
// (leases:expired:<id>), which take theirs at once rather than at their
// own renewals.
//
// # Fire records
//
// A fire runs only once recorded by its owner, fenced by its lease: in
// the fire's term, unexpired, and after the lease's last fire. A batch of
// fires (an aligned burst's, or the slot of those announced ahead) is one
// row of fire_batches, its schedules and planned times as arrays: a row
// and a key a fire were most of what a burst cost the database. No key
// keeps a fire from being recorded twice; the order of three things does:
//
//   - A batch is sent with a lock on its instance's row in instances
//     (KEY SHARE: batches and heartbeats proceed side by side), then its
//     insert, whose snapshot follows the lock.
//   - A taker of leases locks the rows of their owners (FOR UPDATE, in
//     the order of their ids), so their batches under way finish first
//     and the ones that follow find the leases moved; it then reads the
//     fires those owners recorded and did not compact yet, and writes the
//     last into the leases, in the same transaction.
//   - Each renewal compacts the owner's batches: it marks them compacted
//     and folds their fires into its leases' last_fire, so that a taker
//     reads at most a renewal interval of records. A batch of fires
//     recorded ahead stays uncompacted while one of them waits to run.
//
// A lease given back (to rebalance, or at a graceful stop) locks its own
// instance's row, takes the fires recorded ahead and not run out of their
// batches, and writes its last fire from the batches not compacted, in
// one transaction: the next owner runs the fires not run here. A fire
// admitted whose round then did not begin (its schedule stopped) is
// withdrawn, and counts as not run. Batches are read, one fire to a row,
// through the view fire_records, and deleted once compacted and ten
// minutes old.
//
// # A graceful stop
//
// The App drains its coordinator before it stops its schedules, in the
// calm part of a second (after that second's aligned fires ran here, with
// room for the handover before the next whole second): the instance is
// marked stopped, so the others count it out of their
// shares, and the leases of the schedules not in a round are handed
// over. The others follow once their rounds end, and at Stop. A drain
// hands over the leases whose fires are imminent as well, which a
// rebalance keeps until those fires ran: the schedules stop next, so a
// fire kept here would run nowhere until its lease came back.
//
// A lease is handed over by the instance that leaves, in the transaction
// that writes its last fire: each goes, in a new term, to a live instance
// that declared its schedule, spread evenly, and each taker is told
// (leases:handed:<id>). The taker reads its leases, one statement, and
// resumes the schedules it did not hold from their last fires; one that
// missed the notification finds them at its next renewal. A lease no
// other instance declared is left free.
//
// A lease given back to rebalance is left free, and the others told
// (leases:free) take it by one statement: the live instances counted and
// their share of the free leases taken, without a renewal first. A lease
// given back has no owner whose fires could still be recorded, so no
// owner's row is locked, as it is for the leases of an instance that died
// (acquire, at a renewal).
package pgcluster
