// Package statistics keeps one schedule's statistics (Stats): outcomes by
// day, the recent results and failures, and the run history, in memory,
// and writes what changed to a store when asked (Take, or Flush).
//
// # What a fire records
//
// A task's outcome counts on the day it ended (UTC days): by status, min,
// max and sum of its cost, a histogram of the cost (16 sub-buckets per
// octave of microseconds, arrays made per octave reached) and exact counts
// cut at the settings' thresholds. A round's lateness (start minus plan)
// counts on the day it started, in a histogram of its own. The last
// outcomes go in a ring (Results), failures in another (Failures) and in a
// bounded list of failures not yet written, and the round itself is
// encoded once, onto the page of the run history the next flush writes.
//
// A fire writes the ring's slot, the page and the Stats' first line, and
// counts nothing in its day: its outcome waits in the ring, with its
// round's lateness, and is counted later, a few at a time (a fold). A fold
// runs when the ring would drop a result not yet counted, and before
// anything reads or takes the days, so no reader ever sees a figure short
// of what was recorded. With thousands of schedules a fire finds its
// schedule's lines in memory rather than in a cache; counting at the fire
// wrote five more of them (the day's first three lines and a line of each
// histogram), which a fold fetches once for a flush's worth of fires, just
// before the flush encodes the day. What a fire reads and writes of a
// Stats sits in its first line (TestStatsLayout), and the since-start
// figures are not counted at all but derived when read (the days in
// memory, plus those that left, less those Load read: outside).
//
// # Days in memory
//
// Days of the retention window are kept, today's open. A day that is over
// and written is closed by the next Take: kept in the form a flush writes
// it (tens of bytes instead of about a kilobyte with its histograms), its
// outcomes counted in the since-start figures as a day that left memory.
// Reads decode a copy. A late record (a round that began on that day and
// ended after it) opens the day again, so that the next flush writes it
// whole; a flush always writes a day whole, never a part of it. After a
// restart, today's day as Load reads it is the open one; the older days
// it reads are closed by the first Take.
//
// # Writing
//
// Take returns what changed since the last Take (today, or every day when
// a day began, a late record came or the settings changed; the history's
// page; the failures not yet written) and hands it over without holding
// the lock while the store writes. Done drops what was written; Failed puts
// it back for the next Take, ahead of anything newer, so nothing recorded
// is lost to a failed write. Load reads the days of the retention window
// and the recent failures back at start, and numbers the history after the
// stored rounds.
package statistics
