package sqlite

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"
	"weak"

	"github.com/fom-go/fom/store"
)

// The statistics log. A flush of an app hands the store, for every
// schedule that ran since the last one, its day and a page of its run
// history: two rows to rewrite per schedule, each an upsert whose cost
// (binding its values, finding and rewriting its row) is most of a
// flush's. Most of those rows are rewritten again soon: a schedule firing
// every second rewrites today's row at every flush, and its history page
// lands in the same slot again a lap of the history later (ten flushes
// with the default 50 rounds). So a flush writes its days and pages as
// one row of the log, a blob, and the log keeps the newest logKeep
// flushes. When a flush pushes the oldest row out, what in it is still
// the newest of its key (a schedule's day, a schedule's history slot) is
// written to its table row then, as a flush would have written it, and
// the rest, replaced by a newer flush, goes without being written at all.
//
// What the store holds is therefore the tables overlaid by the log, the
// newest entry of a key winning, and every read of days or pages overlays
// the log: the store keeps, per schedule, where the newest logged entry of
// each key is (a few hundred bytes: its day and up to a lap of history
// slots). Opening a store folds a log that a previous process left into
// the tables, in one transaction, so that the reads an app makes for
// every schedule it registers find the tables complete; a log row that
// cannot be read fails the open, naming it.
//
// Nothing is lost or half-written: a flush's log row, the entries it
// pushes out to the tables and the removal of the row they came from
// commit together or not at all. Retention (Prune) drops logged entries
// it deletes from the overlay; their bytes stay in the log row until it
// leaves, and a restart before then folds them back into the tables, for
// the next Prune (an app's first flush applies retention) to delete again.

// logKeep is how many flushes the log holds (store.LogFlushes).
const logKeep = store.LogFlushes

// logVersion is the first byte of a log row.
const logVersion = 1

// Kinds of a log entry.
const (
	logDay  = 1
	logPage = 2
)

// logEntry is an entry of a log row: a day or a page.
type logEntry struct {
	kind     byte
	schedule string
	day      int64 // days since 1970-01-01 (UTC), for a day
	slot     int   // for a page, and its rounds, last round's start
	first    int64
	seq      int64
	start    int64 // Unix ns
	data     []byte
	off, n   int // the entry's bytes in its row
}

// key is what a newer entry of the same schedule replaces this one by.
func (e *logEntry) key() int32 {
	if e.kind == logDay {
		return dayRefKey(e.day)
	}
	return int32(e.slot)
}

// logKey names what an entry is the newest of: its schedule's day or
// slot.
type logKey struct {
	schedule string
	key      int32
}

func (e *logEntry) id() logKey { return logKey{e.schedule, e.key()} }

// dayRefKey keeps days apart from slots (0..maxSlot) in a logRef's key.
func dayRefKey(day int64) int32 { return int32(-1 - day) }

// logRef is where the newest logged entry of one key of a schedule is.
type logRef struct {
	row    uint32 // the log row's id
	off, n uint32 // its bytes in the row
	key    int32  // a slot, or dayRefKey of a day
	seq    int64  // a page's last round
	start  int64  // a page's last round's start (Unix ns)
}

func (r logRef) isDay() bool { return r.key < 0 }

// logRow is a row of the log, and how many refs still point into it.
type logRow struct {
	id    uint32
	live  int
	flush uint64 // StatsBatch.Flush; 0: a flush of its own
}

// statsLog is the store's memory of its log.
type statsLog struct {
	// mu is held across a flush (its transaction and what it learns) and
	// across a read that overlays the log, so that a read never finds a
	// ref whose row a flush removed; the store's one connection
	// serializes them anyway.
	mu   sync.Mutex
	keep int      // flushes kept (pushOut); 0: no log, a flush writes the tables
	rows []logRow // oldest first
	next uint32   // the next row's id
	of   map[string][]logRef
	bufs weak.Pointer[logBufs] // the last flush's, for the next (encodeLog)

	// opened is the number of the newest page of each schedule whose
	// pages the log held at open (foldLog), kept until the first flush
	// or prune: every page goes through the log, so no page in the tables
	// is newer, and LastRoundSeq, as an app registers its schedules, need
	// not seek each slot's row in the table for it. Taken by the first
	// LastRoundSeq of each schedule.
	opened map[string]int64
}

// appendEntry encodes e onto b: its kind, schedule, key (and a page's
// sequence numbers and start) and data.
func appendEntry(b []byte, e *logEntry) []byte {
	b = append(b, e.kind)
	b = binary.AppendUvarint(b, uint64(len(e.schedule)))
	b = append(b, e.schedule...)
	if e.kind == logDay {
		b = binary.AppendVarint(b, e.day)
	} else {
		b = binary.AppendUvarint(b, uint64(e.slot))
		b = binary.AppendVarint(b, e.first)
		b = binary.AppendVarint(b, e.seq)
		b = binary.AppendVarint(b, e.start)
	}
	b = binary.AppendUvarint(b, uint64(len(e.data)))
	return append(b, e.data...)
}

// errBadEntry names what of a log entry is wrong.
var errBadEntry = errors.New("bad log entry")

// readEntry decodes the entry at b[off:], returning it and where the next
// begins. Its data aliases b.
func readEntry(b []byte, off int) (logEntry, int, error) {
	e, name, next, err := scanEntry(b, off)
	e.schedule = string(name)
	return e, next, err
}

// scanEntry is readEntry but for the schedule's name, which it returns as
// the bytes of b that hold it: reading a row to find the few entries
// still live in it allocates for those only.
func scanEntry(b []byte, off int) (e logEntry, name []byte, next int, err error) {
	e.off = off
	i := off
	fail := func(what string) (logEntry, []byte, int, error) {
		return logEntry{}, nil, 0, fmt.Errorf("%w at byte %d: %s", errBadEntry, off, what)
	}
	uv := func() (uint64, bool) {
		v, n := binary.Uvarint(b[i:])
		if n <= 0 {
			return 0, false
		}
		i += n
		return v, true
	}
	sv := func() (int64, bool) { // binary.Varint's zig-zag over uv
		u, ok := uv()
		return int64(u>>1) ^ -int64(u&1), ok
	}
	if i >= len(b) {
		return fail("truncated")
	}
	e.kind = b[i]
	i++
	if e.kind != logDay && e.kind != logPage {
		return fail(fmt.Sprintf("kind %d", e.kind))
	}
	l, ok := uv()
	if !ok || l == 0 || l > uint64(len(b)-i) {
		return fail("schedule name")
	}
	name = b[i : i+int(l)]
	i += int(l)
	if e.kind == logDay {
		if e.day, ok = sv(); !ok || e.day < -1<<30 || e.day > 1<<30 {
			return fail("day")
		}
	} else {
		slot, ok := uv()
		if !ok || slot > maxSlot {
			return fail("slot")
		}
		e.slot = int(slot)
		var ok1, ok2, ok3 bool
		e.first, ok1 = sv()
		e.seq, ok2 = sv()
		e.start, ok3 = sv()
		if !ok1 || !ok2 || !ok3 || e.first > e.seq {
			return fail("page rounds")
		}
	}
	l, ok = uv()
	if !ok || l > uint64(len(b)-i) {
		return fail("data")
	}
	e.data = b[i : i+int(l)]
	i += int(l)
	e.n = i - off
	return e, name, i, nil
}

// readLog decodes a log row.
func readLog(b []byte) ([]logEntry, error) {
	var out []logEntry
	err := scanLog(b, func(e logEntry, name []byte) {
		e.schedule = string(name)
		out = append(out, e)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// scanLog calls f with every entry of log row b, in order, and the bytes
// of b that hold its schedule's name; its data aliases b.
func scanLog(b []byte, f func(e logEntry, name []byte)) error {
	if len(b) == 0 || b[0] != logVersion {
		return fmt.Errorf("%w: not a log row of version %d", errBadEntry, logVersion)
	}
	for i := 1; i < len(b); {
		e, name, next, err := scanEntry(b, i)
		if err != nil {
			return err
		}
		f(e, name)
		i = next
	}
	return nil
}

// logBufs are what encodeLog builds a flush's row in: the row's bytes
// and its entries. A flush of a thousand schedules writes a row of about
// 350 KB; allocated anew at every flush, its pages came fresh from the
// operating system, and faulting them in was most of building the row.
// The store keeps them between flushes behind a weak pointer
// (statsLog.bufs): reused by every flush until a garbage collection finds
// them unused, and never counted as the store's memory. (A sync.Pool
// missed them half the time: a flush that ran on another P than the last
// one found the pool empty.)
type logBufs struct {
	b  []byte
	es []logEntry
}

// encodeLog is a flush's log row, its days and pages, built in bufs (nil:
// new ones).
func encodeLog(bufs *logBufs, days []store.Day, rounds []store.Round) ([]byte, []logEntry) {
	size := 1
	for _, d := range days {
		size += len(d.Schedule) + len(d.Data) + 16
	}
	for _, r := range rounds {
		size += len(r.Schedule) + len(r.Data) + 40
	}
	if bufs == nil {
		bufs = &logBufs{}
	}
	b, es := bufs.b[:0], bufs.es[:0]
	if cap(b) < size {
		// A quarter more: the next flushes' rows differ by a round here
		// and there, and each would otherwise outgrow this one by a little.
		b = make([]byte, 0, size+size/4)
	}
	if n := len(days) + len(rounds); cap(es) < n {
		es = make([]logEntry, 0, n)
	}
	b = append(b, logVersion)
	add := func(e logEntry) {
		e.off = len(b)
		b = appendEntry(b, &e)
		e.n = len(b) - e.off
		e.data = nil // not needed: refs keep offsets
		es = append(es, e)
	}
	for _, d := range days {
		add(logEntry{kind: logDay, schedule: d.Schedule, day: store.DayNumber(d.Day), data: d.Data})
	}
	for _, r := range rounds {
		add(logEntry{kind: logPage, schedule: r.Schedule, slot: r.Slot, first: r.First, seq: r.Seq, start: r.Start.UnixNano(), data: r.Data})
	}
	return b, es
}

// saveLogged is SaveStats with the log: the batch's days and pages as one
// log row, the oldest row out when the log is full, what of it is still
// the newest of its key written to the tables, and the failures.
func (s *Store) saveLogged(ctx context.Context, flush uint64, days []store.Day, rounds []store.Round, failures []store.Failure) error {
	l := &s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	l.opened = nil // what LastRoundSeq reads of this flush is in of
	var blob []byte
	var entries []logEntry
	id := l.next
	if len(days)+len(rounds) > 0 {
		bufs := l.bufs.Value()
		if bufs == nil {
			bufs = &logBufs{}
		}
		blob, entries = encodeLog(bufs, days, rounds)
		// The driver copies the row as it binds it, and remember copies
		// what it keeps of the entries: both serve the next flush.
		defer func() {
			clear(entries) // they name schedules
			bufs.b, bufs.es = blob[:0], entries[:0]
			l.bufs = weak.Make(bufs)
		}()
	}
	out := 0 // rows this flush pushes out
	if blob != nil {
		out = l.pushOut(flush)
	}
	var got []learned
	var through []logEntry
	var gone []string // schedules with refs into the rows pushed out
	all := false      // or every schedule's: a row was gone already
	err := s.tx(ctx, func(tx *sql.Tx) error {
		if blob != nil {
			// OR REPLACE: a commit that reported an error but took place
			// (an I/O error after the WAL write) left a row of this id,
			// holding an older form of this batch.
			if err := s.exec(ctx, tx, "INSERT OR REPLACE INTO stats_log (id, data) VALUES (?, ?)", int64(id), blob); err != nil {
				return err
			}
		}
		through, gone, all = through[:0], gone[:0], false
		for _, r := range l.rows[:out] {
			es, names, err := s.pushedOut(ctx, tx, r, entries)
			if err != nil {
				return err
			}
			through, gone = append(through, es...), append(gone, names...)
			all = all || (r.live > 0 && names == nil)
		}
		if out > 0 {
			if err := s.exec(ctx, tx, "DELETE FROM stats_log WHERE id <= ?", int64(l.rows[out-1].id)); err != nil {
				return err
			}
		}
		var err error
		if got, err = s.writeEntries(ctx, tx, through); err != nil {
			return err
		}
		return s.writeFailures(ctx, tx, failures)
	})
	if err != nil {
		return err
	}
	if all {
		gone = slices.Collect(maps.Keys(l.of))
	}
	if out > 0 {
		l.forget(gone, l.rows[out-1].id)
	}
	l.rows = l.rows[out:]
	if blob != nil {
		l.next++
		l.rows = append(l.rows, logRow{id: id, flush: flush})
		l.remember(id, entries)
	}
	s.ids.learn(got)
	return nil
}

// pushOut is how many of the oldest rows a new row of flush pushes out:
// the log keeps keep flushes' worth of rows, as many rows a flush as the
// largest flush it holds (the new row counted) was written in. A flush in
// several rows thus pushes out one row of the flush keep flushes back
// with each of its own: the row of the same schedules, whose entries it
// replaces. (Pushing that whole flush out at its first row would write
// the entries of the rows after it, which the flush's later rows replace.)
func (l *statsLog) pushOut(flush uint64) int {
	most, run, last := 1, 0, uint64(0)
	for _, r := range l.rows {
		if r.flush == 0 || r.flush != last {
			run = 0
		}
		run++
		last = r.flush
		most = max(most, run)
	}
	if flush != 0 && flush == last {
		most = max(most, run+1)
	}
	return max(len(l.rows)+1-l.keep*most, 0)
}

// pushedOut returns the entries of row r that are still the newest of
// their key, and not replaced by this flush's entries: those the tables
// must now hold; and the schedules whose refs point into r. A row no ref
// points into (a lap of schedules firing every second leaves none) is not
// read.
//
// A running app's pushed-out row holds a handful of live entries among
// tens of thousands (a schedule whose pages moved to other slots when a
// flush came a round early or late): the row is read in place, each entry
// looked up by its name's bytes, and only the live ones are copied out.
func (s *Store) pushedOut(ctx context.Context, tx *sql.Tx, r logRow, flush []logEntry) ([]logEntry, []string, error) {
	if r.live == 0 {
		return nil, nil, nil
	}
	s.statements.Add(1)
	rows, err := tx.QueryContext(ctx, "SELECT data FROM stats_log WHERE id = ?", int64(r.id))
	if err != nil {
		return nil, nil, fmt.Errorf("statistics log row %d: %w", r.id, err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return nil, nil, fmt.Errorf("statistics log row %d: %w", r.id, err)
		}
		// Pushed out already, by a flush whose commit reported an error
		// but took place: what it wrote of the row is in the tables. Every
		// schedule's refs into it go (nil names).
		return nil, nil, nil
	}
	var blob sql.RawBytes // the driver's bytes, valid until Next or Close
	if err := rows.Scan(&blob); err != nil {
		return nil, nil, fmt.Errorf("statistics log row %d: %w", r.id, err)
	}
	live, err := s.log.liveIn(blob, r.id)
	if err != nil {
		return nil, nil, fmt.Errorf("statistics log row %d: %w", r.id, err)
	}
	if err := rows.Close(); err != nil {
		return nil, nil, fmt.Errorf("statistics log row %d: %w", r.id, err)
	}
	names := make([]string, len(live))
	for i := range live {
		names[i] = live[i].schedule
	}
	if len(live) > 0 { // those replaced in this flush are not written
		replaced := make(map[logKey]bool, len(live))
		for i := range live {
			replaced[live[i].id()] = false
		}
		for i := range flush {
			if _, ok := replaced[flush[i].id()]; ok {
				replaced[flush[i].id()] = true
			}
		}
		live = slices.DeleteFunc(live, func(e logEntry) bool { return replaced[e.id()] })
	}
	return live, names, nil
}

// liveIn returns the entries of log row id, held in b, that a ref points
// to, in the row's order, with their data copied out of b; a row that
// cannot be read is an error, as readLog's.
func (l *statsLog) liveIn(b []byte, id uint32) ([]logEntry, error) {
	var out []logEntry
	err := scanLog(b, func(e logEntry, name []byte) {
		refs := l.of[string(name)] // no allocation for a lookup
		if j := refIndex(refs, e.key()); j < 0 || refs[j].row != id || refs[j].off != uint32(e.off) {
			return
		}
		e.schedule, e.data = string(name), bytes.Clone(e.data)
		out = append(out, e)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// refIndex is where key is in refs, or -1.
func refIndex(refs []logRef, key int32) int {
	for i := range refs {
		if refs[i].key == key {
			return i
		}
	}
	return -1
}

// writeEntries writes log entries to their tables.
func (s *Store) writeEntries(ctx context.Context, tx *sql.Tx, es []logEntry) ([]learned, error) {
	if len(es) == 0 {
		return nil, nil
	}
	var days []store.Day
	var rounds []store.Round
	for _, e := range es {
		if e.kind == logDay {
			days = append(days, store.Day{Schedule: e.schedule, Day: store.DayTime(e.day), Data: e.data})
		} else {
			rounds = append(rounds, store.Round{Schedule: e.schedule, Slot: e.slot, First: e.first, Seq: e.seq, Start: time.Unix(0, e.start).UTC(), Data: e.data})
		}
	}
	return s.writeTables(ctx, tx, days, store.LastPerSlot(rounds))
}

// remember makes entries, in row id, the newest of their keys.
func (l *statsLog) remember(id uint32, entries []logEntry) {
	if l.of == nil {
		// Sized for the first flush's schedules (a day and a page each),
		// rather than grown through them one doubling at a time.
		l.of = make(map[string][]logRef, len(entries)/2)
	}
	live := 0
	for i := range entries {
		e := &entries[i]
		ref := logRef{row: id, off: uint32(e.off), n: uint32(e.n), key: e.key()}
		if e.kind == logPage {
			ref.seq, ref.start = e.seq, e.start
		}
		refs := l.of[e.schedule]
		if j := refIndex(refs, ref.key); j >= 0 {
			if refs[j].row != id {
				l.release(refs[j].row)
				live++
			}
			refs[j] = ref
		} else {
			if len(refs) == cap(refs) {
				// Four at a time: a schedule firing every second holds
				// about a dozen (its day and a lap of slots), and doubling
				// would give it room for sixteen.
				refs = append(make([]logRef, 0, len(refs)+4), refs...)
			}
			l.of[e.schedule] = append(refs, ref)
			live++
		}
	}
	l.rows[len(l.rows)-1].live += live
}

// release counts one ref fewer into row id.
func (l *statsLog) release(id uint32) {
	for i := range l.rows {
		if l.rows[i].id == id {
			l.rows[i].live--
			return
		}
	}
}

// forget drops the refs of schedules into the rows up to id, pushed out
// of the log: what they pointed to is in the tables now.
func (l *statsLog) forget(schedules []string, id uint32) {
	for _, name := range schedules {
		refs := l.of[name]
		if refs == nil {
			continue
		}
		kept := slices.DeleteFunc(refs, func(r logRef) bool { return r.row <= id })
		if len(kept) == 0 {
			delete(l.of, name)
		} else {
			l.of[name] = kept
		}
	}
}

// drop removes the refs of schedule that match, as retention deletes
// them from the overlay.
func (l *statsLog) drop(schedule string, match func(logRef) bool) {
	refs := l.of[schedule]
	kept := refs[:0]
	for _, r := range refs {
		if match(r) {
			l.release(r.row)
		} else {
			kept = append(kept, r)
		}
	}
	if len(kept) == 0 {
		delete(l.of, schedule)
	} else {
		l.of[schedule] = kept
	}
}

// logged reads the entries of schedule's refs that match, with their
// data; called with l.mu held.
func (s *Store) logged(ctx context.Context, schedule string, match func(logRef) bool) ([]logEntry, error) {
	var out []logEntry
	for _, r := range s.log.of[schedule] {
		if !match(r) {
			continue
		}
		var b []byte
		if err := s.db.QueryRowContext(ctx, "SELECT substr(data, ?, ?) FROM stats_log WHERE id = ?", int64(r.off)+1, int64(r.n), int64(r.row)).Scan(&b); err != nil {
			return nil, fmt.Errorf("statistics log row %d: %w", r.row, err)
		}
		e, _, err := readEntry(b, 0)
		if err != nil || e.schedule != schedule || e.key() != r.key {
			return nil, fmt.Errorf("statistics log row %d: entry of %q at byte %d unreadable (%v)", r.row, schedule, r.off, err)
		}
		out = append(out, e)
	}
	return out, nil
}

// foldLog writes the log a previous process left into the tables, the
// newest entry of each key, and empties it: one transaction, when the
// store opens.
func (s *Store) foldLog(ctx context.Context) error {
	l := &s.log
	l.mu.Lock()
	defer l.mu.Unlock()
	rows, err := s.db.QueryContext(ctx, "SELECT id, data FROM stats_log ORDER BY id")
	if err != nil {
		return s.readErr(err)
	}
	newest := map[logKey]int{}
	var es []logEntry
	var last int64
	for rows.Next() {
		var id int64
		var b []byte
		if err := rows.Scan(&id, &b); err != nil {
			rows.Close()
			return s.readErr(err)
		}
		row, err := readLog(b)
		if err != nil {
			rows.Close()
			return fmt.Errorf("%w: %s: statistics log row %d unreadable (%v); it was left untouched (deleting the row, DELETE FROM stats_log WHERE id = %d, opens the store without the statistics it holds)",
				store.ErrCorrupt, s.path, id, err, id)
		}
		for _, e := range row {
			k := e.id()
			if i, ok := newest[k]; ok {
				es[i] = e
			} else {
				newest[k] = len(es)
				es = append(es, e)
			}
		}
		last = id
	}
	if err := rows.Close(); err != nil {
		return s.readErr(err)
	}
	if err := rows.Err(); err != nil {
		return s.readErr(err)
	}
	if last >= 1<<32-1 {
		return fmt.Errorf("%w: %s: statistics log row id %d out of range", store.ErrCorrupt, s.path, last)
	}
	l.next = uint32(last) + 1
	if last == 0 {
		return nil
	}
	var got []learned
	err = s.tx(ctx, func(tx *sql.Tx) error {
		var err error
		if got, err = s.writeEntries(ctx, tx, es); err != nil {
			return err
		}
		return s.exec(ctx, tx, "DELETE FROM stats_log")
	})
	if err != nil {
		return fmt.Errorf("fom: store %q: fold the statistics log: %w", s.path, err)
	}
	s.ids.learn(got)
	l.opened = make(map[string]int64)
	for _, e := range es {
		if e.kind == logPage {
			l.opened[e.schedule] = max(l.opened[e.schedule], e.seq)
		}
	}
	return nil
}

// round is a page entry as the store hands it out.
func (e *logEntry) round() store.Round {
	return store.Round{Schedule: e.schedule, Slot: e.slot, First: e.first, Seq: e.seq, Start: time.Unix(0, e.start).UTC(), Data: e.data}
}
