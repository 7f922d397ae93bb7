// Package pgcluster is the cluster's coordinator on PostgreSQL (see
// package cluster): store/postgres builds it for an App, so that an App
// without that store links none of it.
//
// # Leases
//
// Each schedule has a row in leases: its owner, a term (the fencing
// token, bumped by each new owner), and its last recorded fire (as of the
// owner's last fold, see below). A lease lives as long as its owner's row
// in instances says (leases_until): an owner renews every lease it holds
// by renewing that one row, with its heartbeat, every RenewEvery, and
// trusts them for a fifth less than the TTL after it sent it. Renewed
// lease by lease, each renewal rewrote every lease's row: at a few
// thousand leases an instance, most of what the cluster cost the database
// between bursts. A lease whose owner's row ended, or given back (no
// owner), is taken by another instance, which continues the plan after
// the last fire. The first to take its share of a dead instance's leases
// tells the others (leases:expired:<id>), which take theirs at once
// rather than at their own renewals.
//
// An instance's row carries an epoch, bumped by every transaction that
// moves one of its leases away: a taker of the leases of an instance whose
// leases ended, and the instance giving leases back. The owner reads its
// epoch, then its leases, at each renewal (and learns the new epoch from
// its own give-backs): a batch of fires whose leases it knows, in their
// terms, is recorded when the epoch is still the one it read (no lease of
// it moved since), without a look at each lease. Otherwise each fire's
// lease is looked up.
//
// # Fire records
//
// A fire runs only once recorded by its owner, fenced by its lease: in
// the fire's term, its owner's leases not ended, and after the fire the
// plan resumed from when the lease was taken (refused here, at once, and
// by the database when each lease is looked up). A batch of
// fires (an aligned burst's, or the slot of those announced ahead) is one
// row of fire_batches, its schedules and planned times as arrays: a row
// and a key a fire were most of what a burst cost the database. No key
// keeps a fire from being recorded twice; the order of three things does:
//
//   - A batch is sent with a lock on its instance's row in instances
//     (KEY SHARE: batches and heartbeats proceed side by side), then its
//     insert, whose snapshot follows the lock.
//   - A taker of leases locks the rows of their owners (FOR UPDATE, in
//     the order of their ids) and bumps their epochs, so their batches
//     under way finish first and the ones that follow find the leases
//     moved; it then reads the fires those owners recorded and did not
//     fold yet, and writes the last into the leases, in the same
//     transaction.
//   - Every few renewals (at one that finds leases new to the instance,
//     and before leases are given back) the owner folds its batches: it marks them compacted and
//     folds their fires into its leases' last_fire, so that a taker reads
//     a few renewal intervals of records at most. A batch of fires
//     recorded ahead stays uncompacted while one of them waits to run.
//
// A lease given back (to rebalance, or at a graceful stop) locks its own
// instance's row, bumps its epoch, takes the fires recorded ahead and not
// run out of their batches, and writes its last fire from the batches not
// folded, in one transaction: the next owner runs the fires not run here. A fire
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
// whose next fire is within handoverLead (400 ms) and twice RecordAhead
// is kept until that fire ran, then given back (the rekick, a tick right
// after it): the taker has a notification, a statement and the record
// ahead to fit before the fire, under the load of the burst. The App
// starts its schedules, parked, before it registers, so that a lease
// taken from the registration on resumes its schedule at once. A lease
// given back has no owner whose fires could still be recorded, so no
// owner's row is locked, as it is for the leases of an instance that died
// (acquire, at a renewal). Takers at once compete for the same free
// leases: takeFree and acquire pick their share under their locks (a
// LIMIT over SKIP LOCKED), so that what another locked first is made up
// for from the rest, and none is left free past its next fire.
package pgcluster
