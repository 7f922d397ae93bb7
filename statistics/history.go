package statistics

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/fom-go/fom/store"
)

// Run history: every completed round (or batch) is one record, with its
// cause, times, counts by status and the results of up to MaxRoundTasks of
// its tasks. A round is encoded once, when it completes, onto the page the
// next flush writes: memory holds only those bytes (about 45 for a round of
// one successful task), and a flush hands the page over without encoding.
// The store keeps a page per flush and schedule in a slot (the page's last
// sequence number modulo Settings.Rounds) that a later lap overwrites, so
// it stays bounded without deletes.

// Bounds of one round's record.
const (
	MaxRoundTasks = 100      // task results kept per round; failures are kept first
	maxTaskError  = 2 << 10  // bytes of a task's error message
	maxTaskStack  = 8 << 10  // bytes of a panicking task's stack
	maxRoundBytes = 64 << 10 // task details stop here; the rest are counted as omitted
)

// TaskSample is one task's result as a round reports it.
type TaskSample struct {
	ID      string
	Status  int // Success ... Canceled
	Started time.Time
	Cost    time.Duration
	Err     error
}

// RoundSample is a completed round or batch.
type RoundSample struct {
	Number  int64
	Batch   bool
	Cause   string // plan, start, exec, rerun, submit
	By      string // who asked, for exec and rerun
	Planned time.Time
	Start   time.Time
	End     time.Time
	Tasks   []TaskSample
}

// RoundRecord is a round of the history as shown and exported.
type RoundRecord struct {
	Seq      int64            `json:"seq"`                // per schedule and instance, from 1
	Instance string           `json:"instance,omitempty"` // on a shared store, the instance that ran it
	Number   int64            `json:"number"`
	Batch    bool             `json:"batch,omitempty"`
	Cause    string           `json:"cause"`
	By       string           `json:"by,omitempty"`
	Planned  time.Time        `json:"planned"`
	Start    time.Time        `json:"start"`
	End      time.Time        `json:"end"`
	Late     time.Duration    `json:"lateNs"`
	Duration time.Duration    `json:"durationNs"`
	Outcome  string           `json:"outcome"` // success, partial, failed, timeout
	Counts   map[string]int64 `json:"counts"`  // tasks by status, the non-zero ones
	Tasks    []TaskRecord     `json:"tasks,omitempty"`
	Omitted  int64            `json:"omittedTasks,omitempty"` // tasks counted but not detailed

	byStatus [numStatus]int64
}

// TaskRecord is one task of a recorded round.
type TaskRecord struct {
	ID      string        `json:"id"`
	Status  string        `json:"status"`
	Started time.Time     `json:"started,omitzero"`
	Cost    time.Duration `json:"costNs"`
	Error   string        `json:"error,omitempty"`
	Stack   string        `json:"stack,omitempty"`
}

// causeNames are the causes a round can have, as schedule.Cause names them.
func causeNames() [6]string {
	return [6]string{"plan", "start", "exec", "rerun", "submit", "catchup"}
}

// history is a schedule's rounds not yet in the store, each encoded as a
// page holds it (appendRound): the newest Settings.Rounds of them wait for
// a flush, taken is being written by one.
//
// They are kept in pages of a quarter of Settings.Rounds rounds (older,
// then page, the one appended to), so that dropping the oldest rounds
// never moves the kept ones: a round past Settings.Rounds only counts one
// more of older[0]'s rounds as dropped (skip), and the page is released,
// as the next page's array, once all of them are. Without a store (or
// with flushes further apart than the history's size) every round drops
// one, and copying the kept ones down in one array, as a single page
// would, cost a fire about six cold lines. With a store a flush takes the
// rounds every few seconds and older stays empty.
//
// A page begins with pageHead bytes of room for a stored page's header,
// so that a flush that takes one page hands its array to the store as
// the stored page (take), rather than copying its rounds into one.
type history struct {
	// What a round writes, in 64 bytes.
	seq       int64 // the last round's sequence number
	lastStart int64 // and its start
	page      []byte
	n         int32 // rounds in page
	kept      int32 // rounds in older (less skip) and page
	skip      int32 // rounds of older[0] dropped
	left      int32 // and not: a round that drops one reads no page of older

	unsaved int64 // rounds dropped before a flush took them (on the first line: without a store every round drops one)
	grow    bool  // page is in the small array begin made: its first round sizes it (roomFor); read once a page
	older   []heldPage
	spare   []byte // a released page's array, for the next page
	taken   []byte
	takenN  int
	handed  []byte   // the array of the page taken whole, while the store writes it
	next    int32    // bytes of the page taken whole: what the next page has room for
	_       [12]byte // to 192 bytes, a size class whose objects start on a line: the 64 bytes above are one
}

// pageHead is the room at the start of a page for a stored page's
// header: its version byte and its count of rounds (a uvarint).
const pageHead = 1 + binary.MaxVarintLen64

// begin starts the page in array b (nil for a new one: room for the
// header and a small round or two, until the first round tells the
// page's size, roomFor).
func (h *history) begin(b []byte) {
	h.grow = b == nil
	if h.grow {
		b = make([]byte, 0, pageHead+firstRoom)
	}
	var room [pageHead]byte
	h.page = append(b[:0], room[:]...)
}

// start begins a page for the next round after none or a flush: in the
// array of the page the flush took whole once the store wrote it (spare,
// written), else in a new one with the room that page took, else in a
// small one its first round sizes.
func (h *history) start() {
	switch {
	case h.spare != nil && cap(h.spare) >= int(h.next):
		h.begin(h.spare)
		h.spare = nil
	case h.next > 0:
		h.page, h.grow = make([]byte, pageHead, max(int(h.next), pageHead+firstRoom)), false
	default:
		h.begin(nil)
	}
	h.next = 0
}

// written is told that the store wrote the taken page: an array taken
// whole serves the next page, unless a round began one meanwhile (a
// schedule holds one page's array between flushes, not two) or it has far
// more room than the page took (a young schedule's first page, sized for
// a page of rounds without a store: it would stay that size for good).
func (h *history) written() {
	if h.handed != nil && len(h.page) == 0 && cap(h.handed) <= int(h.next)*3/2 && cap(h.handed) > cap(h.spare) {
		h.spare = h.handed[:0]
	}
	h.handed, h.taken, h.takenN = nil, nil, 0
}

// firstRoom is the room a new page has for its first round: a round of a
// task or two without an error takes 20 to 60 bytes (a short one 20 to
// 25), and 11+53 bytes are a size class of their own.
const firstRoom = 53

// rounds returns the page's rounds.
func (h *history) rounds() []byte {
	if len(h.page) < pageHead {
		return nil
	}
	return h.page[pageHead:]
}

// heldPage is a page of history that is no longer appended to.
type heldPage struct {
	b []byte
	n int32
}

// pageRounds is how many rounds a page of history holds before the next
// page begins, for a history of keep rounds.
func pageRounds(keep int32) int32 { return max(keep/4, 1) }

// RecordRound adds a completed round to the history, and counts a
// round's lateness (Start − Planned; not a batch's) on the day it started:
// mostly later, with the ring's newest result (lateWithResultLocked).
func (s *Stats) RecordRound(x RoundSample) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !x.Batch && !s.lateWithResultLocked(&x) {
		s.lateLocked(x.Start.UnixNano(), x.Start.Sub(x.Planned))
	}
	h := s.histLocked()
	keep := int32(s.rounds)
	if h.n >= pageRounds(keep) {
		h.hold()
	}
	if len(h.page) == 0 {
		h.start()
	}
	h.seq++
	h.page = appendRound(h.page, s.schedule, h.seq, &x)
	h.n++
	if h.n == 1 && h.grow {
		h.roomFor(pageRounds(keep), len(h.page)-pageHead)
	}
	h.kept++
	h.lastStart = x.Start.UnixNano()
	if h.kept > keep {
		h.drop(h.kept - keep)
	}
}

// roomFor makes the page room for rounds of size bytes and a quarter
// more, once: its first round tells the size, or a copy readied to fire
// here (Stats.Reserve) reserves for short rounds (shortRound) before that
// round, so that its first fire grows no page. A young schedule's page
// otherwise grew by doubling, a copy and an allocation every other round
// or so, and without a store a page is filled whole. Only the small array
// begin makes is grown (grow): an array used again (spare) held a page
// already, and the one a flush leaves (take) is sized by the rounds of a
// flush's interval, which may be one. Longer rounds than reserved for
// grow the page as they come.
func (h *history) roomFor(rounds int32, size int) {
	h.grow = false
	need := pageHead + size*int(rounds)*5/4
	if cap(h.page) >= need {
		return
	}
	grown := make([]byte, len(h.page), need)
	copy(grown, h.page)
	h.page = grown
}

// shortRound is the size of a short round (one task named as its
// schedule, without an error), 20 to 25 bytes, that a page reserved ahead
// of its first round has room for.
const shortRound = 25

// hold moves page, full, to older; the next round begins a page.
func (h *history) hold() {
	if len(h.older) == 0 {
		h.left = h.n
	}
	h.older = append(h.older, heldPage{b: h.rounds(), n: h.n})
	h.begin(h.spare)
	h.spare, h.n = nil, 0
}

// trim drops the oldest rounds past keep: settings that keep fewer, or
// rounds a failed flush put back.
func (h *history) trim(keep int32) {
	if h.kept > keep {
		h.drop(h.kept - keep)
	}
}

// drop drops the k oldest rounds, counting them as unsaved.
func (h *history) drop(k int32) {
	h.kept -= k
	h.unsaved += int64(k)
	for k > 0 && h.left > 0 {
		d := min(k, h.left)
		h.skip, h.left, k = h.skip+d, h.left-d, k-d
		if h.left == 0 { // the whole of older[0]: its array serves the next page
			h.release(h.older[0].b)
			h.older = slices.Delete(h.older, 0, 1)
			h.skip = 0
			if len(h.older) > 0 {
				h.left = h.older[0].n
			}
		}
	}
	if k > 0 { // only with settings that keep fewer rounds than a page holds
		rest := skipRounds(h.rounds(), int(k))
		h.page = h.page[:pageHead+copy(h.page[pageHead:], rest)]
		h.n -= k
	}
}

// release keeps the array of a page no longer held as the next page's,
// the larger one when there are two.
func (h *history) release(b []byte) {
	if cap(b) > cap(h.spare) {
		h.spare = b[:0]
	}
}

// skipRounds returns b after its first n rounds; nil if b ends first.
func skipRounds(b []byte, n int) []byte {
	for range n {
		if b = skipRound(b); b == nil {
			return nil // cannot happen: fom wrote them
		}
	}
	return b
}

// appendKept appends the kept rounds to b, oldest first.
func (h *history) appendKept(b []byte) []byte {
	for i, o := range h.older {
		if i == 0 {
			o.b = skipRounds(o.b, int(h.skip))
		}
		b = append(b, o.b...)
	}
	return append(b, h.rounds()...)
}

// size is at least the bytes of the kept rounds.
func (h *history) size() int {
	n := len(h.rounds())
	for _, o := range h.older {
		n += len(o.b)
	}
	return n
}

// take returns the kept rounds as a stored page, and empties the history
// of them. One page (a flush every few seconds takes one) is handed over
// whole: its header goes in the room before its rounds, and the next
// round begins a page in an array the size of the rounds taken. Otherwise they are
// copied into one.
func (h *history) take() []byte {
	var data []byte
	if len(h.older) == 0 && len(h.page) > pageHead {
		var hdr [pageHead]byte
		hdr[0] = pageVersion1
		n := 1 + binary.PutUvarint(hdr[1:], uint64(h.kept))
		at := pageHead - n
		copy(h.page[at:], hdr[:n])
		data = slices.Clip(h.page[at:])
		// The next flush likely takes as many rounds: room for them, in
		// this array once the store wrote it (written, start).
		h.handed, h.next = h.page, int32(len(h.page))
		h.page, h.grow = nil, false
	} else {
		data = h.appendKept(pageHeader(int(h.kept), h.size()))
		h.begin(h.page)
	}
	for _, o := range h.older {
		h.release(o.b)
	}
	clear(h.older)
	h.older, h.skip, h.left = h.older[:0], 0, 0
	h.n, h.kept = 0, 0
	return data
}

// putBack puts n rounds a flush took back ahead of the kept ones, and
// keeps the newest keep. They are copied: body is the store's page,
// which the store may still hold, and a held page's array is written
// again once released.
func (h *history) putBack(body []byte, n int, keep int32) {
	if h.skip > 0 { // older[0]'s dropped rounds leave it: the taken ones go before it
		h.older[0].b = skipRounds(h.older[0].b, int(h.skip))
		h.older[0].n -= h.skip
		h.skip = 0
	}
	h.older = slices.Insert(h.older, 0, heldPage{b: bytes.Clone(body), n: int32(n)})
	h.left = int32(n)
	h.kept += int32(n)
	h.trim(keep)
}

func (s *Stats) histLocked() *history {
	if s.hist == nil {
		s.hist = &history{}
	}
	return s.hist
}

// UnsavedRounds counts rounds dropped from memory before a flush took
// them (more rounds between two flushes than the history keeps).
func (s *Stats) UnsavedRounds() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.hist == nil {
		return 0
	}
	return s.hist.unsaved
}

func timeOrZero(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// pickTasks returns the indexes of the tasks whose details are kept when
// they are more than MaxRoundTasks, in order: the failures first, then the
// earliest successes.
func pickTasks(ts []TaskSample) []int {
	keep := make([]bool, len(ts))
	n := 0
	for pass := range 2 {
		for i, t := range ts {
			if n < MaxRoundTasks && (t.Status == Success) == (pass == 1) {
				keep[i], n = true, n+1
			}
		}
	}
	out := make([]int, 0, n)
	for i, k := range keep {
		if k {
			out = append(out, i)
		}
	}
	return out
}

// fill sets the derived fields from the counts by status.
func (r *RoundRecord) fill(byStatus [numStatus]int64) {
	r.Counts = map[string]int64{}
	names := StatusNames()
	for i, n := range byStatus {
		if n > 0 {
			r.Counts[names[i]] = n
		}
	}
	r.Late, r.Duration = r.Start.Sub(r.Planned), r.End.Sub(r.Start)
	r.Outcome = outcomeOf(byStatus)
}

// outcomeOf sums up a round as schedule.OutcomeOf does: every task a
// success, some, none with a timeout among them, or none.
func outcomeOf(byStatus [numStatus]int64) string {
	var all int64
	for _, n := range byStatus {
		all += n
	}
	switch ok := byStatus[Success]; {
	case ok == all:
		return "success"
	case ok > 0:
		return "partial"
	case byStatus[Timeout] > 0:
		return "timeout"
	}
	return "failed"
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// A page (version 1): a version byte and the round count, then the rounds.
// A round: its sequence number and start (Unix ns) as varints, then a
// version byte and varints: number, batch, planned, end, the six status
// counts, the cause's index and who asked (length, bytes); then per task
// detailed a 1 byte and its id, status, started, cost, error and stack;
// a 0 byte and the count of tasks not detailed. Version 1 wrote planned,
// end and started as Unix ns; version 2 writes them from the round's
// start (appendSince), and a task's id as a single 0 when it is the
// schedule's name (a Run job's one task) or its length plus one and its
// bytes: a round of one Run task is about 44 bytes, against 58 plus its
// name in version 1, and a flush writes that much less per schedule.
//
// The short form writes the round most schedules record, one task named
// as its schedule that ended without an error, planned and asked for by
// no one, in 20 to 25 bytes: most of a flush's log row was pages, so the
// row, its WAL frames, and the pages a later flush must read to free are
// a third smaller. Its version byte is roundShort in the low two bits,
// the task's status and the batch flag above; then varints: the round's
// sequence number less its number, planned and the task's start from the
// round's start (appendSince), the task's cost, and the end less the
// task's end (start plus cost). The counts, cause, by and the task's id
// are implied. Version 1 and 2 rounds still read.
const (
	pageVersion1  = 1
	roundVersion1 = 1
	roundVersion2 = 2
	roundShort    = 3 // the low bits of a short round's version byte
)

// shortStatus returns the status of x's one task when x takes the short
// form.
func shortStatus(schedule string, x *RoundSample) (int, bool) {
	if len(x.Tasks) != 1 || x.By != "" || causeIndex(x.Cause) != 0 || x.End.IsZero() {
		return 0, false
	}
	t := &x.Tasks[0]
	// As version 2 would detail it: a name within maxRoundBytes.
	ok := t.ID == schedule && t.Err == nil && t.Status >= 0 && t.Status < numStatus &&
		!t.Started.IsZero() && len(t.ID)+32 <= maxRoundBytes
	return t.Status, ok
}

// appendShort writes the rest of a short round, after its sequence number
// and start.
func appendShort(b []byte, seq, start int64, x *RoundSample, status int) []byte {
	v := byte(roundShort | status<<2)
	if x.Batch {
		v |= 1 << 5
	}
	b = append(b, v)
	b = binary.AppendVarint(b, seq-x.Number)
	b = appendSince(b, x.Planned, start)
	t := &x.Tasks[0]
	started := t.Started.UnixNano()
	b = appendSince(b, t.Started, start)
	b = binary.AppendVarint(b, int64(t.Cost))
	return binary.AppendVarint(b, x.End.UnixNano()-(started+int64(t.Cost)))
}

// readShort reads the rest of a short round of version byte v into r.
func readShort(rd *reader, r *RoundRecord, v byte, start int64, schedule string, tasks bool) error {
	status := int(v >> 2 & 7)
	if v>>6 != 0 || status >= numStatus {
		return fmt.Errorf("%w: unknown encoding", store.ErrCorrupt)
	}
	r.Batch = v>>5&1 == 1
	r.Number = r.Seq - rd.varint()
	r.Planned = sinceOf(rd.uvarint(), start)
	at := rd.uvarint()
	cost := rd.varint()
	endGap := rd.varint()
	if rd.err != nil {
		return rd.err
	}
	if at == 0 {
		return errors.New("a short round's task never started")
	}
	started := sinceOf(at, start).UnixNano()
	r.End = time.Unix(0, started+cost+endGap).UTC()
	r.Cause = causeNames()[0]
	if tasks {
		r.Tasks = append(r.Tasks, TaskRecord{ID: schedule, Status: StatusNames()[status], Started: time.Unix(0, started).UTC(), Cost: time.Duration(cost)})
	}
	r.byStatus[status] = 1
	r.fill(r.byStatus)
	return nil
}

// appendSince encodes t as its distance from start (Unix ns): 0 for the
// zero time, else 1 + the distance zigzagged (an instant before start
// takes as few bytes as one after it). The difference wraps as int64
// arithmetic does, and sinceOf adds it back the same way: every instant
// comes back exactly.
func appendSince(b []byte, t time.Time, start int64) []byte {
	if t.IsZero() {
		return append(b, 0)
	}
	d := t.UnixNano() - start
	return binary.AppendUvarint(b, uint64(d<<1^d>>63)+1)
}

// sinceOf decodes appendSince's form.
func sinceOf(u uint64, start int64) time.Time {
	if u == 0 {
		return time.Time{}
	}
	u--
	return time.Unix(0, start+(int64(u>>1)^-int64(u&1))).UTC()
}

// appendRound encodes round seq of schedule onto b. Errors are formatted
// here, once. It runs on every fire's path, so the common round (a few
// tasks, counts below 64, no error) takes single bytes where a varint
// would be one, and no closure holds b.
func appendRound(b []byte, schedule string, seq int64, x *RoundSample) []byte {
	start := x.Start.UnixNano()
	b = binary.AppendUvarint(b, uint64(seq))
	b = binary.AppendVarint(b, start)
	if status, ok := shortStatus(schedule, x); ok {
		return appendShort(b, seq, start, x, status)
	}
	return appendLong(b, schedule, start, x)
}

// appendLong writes the rest of a version 2 round, after its sequence
// number and start.
func appendLong(b []byte, schedule string, start int64, x *RoundSample) []byte {
	b = append(b, roundVersion2)
	b = binary.AppendVarint(b, x.Number)
	batch := byte(0)
	if x.Batch {
		batch = 2 // the varint 1
	}
	b = append(b, batch)
	b = appendSince(b, x.Planned, start)
	b = appendSince(b, x.End, start)
	var byStatus [numStatus]int64
	for i := range x.Tasks {
		if st := x.Tasks[i].Status; st >= 0 && st < numStatus {
			byStatus[st]++
		}
	}
	for _, n := range byStatus {
		if n < 64 {
			b = append(b, byte(n<<1)) // the varint n
		} else {
			b = binary.AppendVarint(b, n)
		}
	}
	b = append(b, causeIndex(x.Cause))
	b = appendString(b, x.By)
	var omitted int64
	size := 0
	if len(x.Tasks) <= MaxRoundTasks {
		for i := range x.Tasks {
			b = appendTask(b, schedule, &x.Tasks[i], start, &size, &omitted)
		}
	} else {
		keep := pickTasks(x.Tasks)
		omitted = int64(len(x.Tasks) - len(keep))
		for _, i := range keep {
			b = appendTask(b, schedule, &x.Tasks[i], start, &size, &omitted)
		}
	}
	b = append(b, 0)
	return binary.AppendVarint(b, omitted)
}

// causeIndex is the index of cause in causeNames, 0 (plan) for a name it
// does not hold.
func causeIndex(cause string) byte {
	switch cause {
	case "start":
		return 1
	case "exec":
		return 2
	case "rerun":
		return 3
	case "submit":
		return 4
	case "catchup":
		return 5
	}
	return 0
}

// appendTask encodes a task's details onto b, or counts it in omitted
// once the round's details reach maxRoundBytes (size, the bytes so far).
func appendTask(b []byte, schedule string, t *TaskSample, start int64, size *int, omitted *int64) []byte {
	var msg, stack string
	if t.Err != nil {
		msg = t.Err.Error()
		_, stack = chainOf(t.Err, msg)
		msg, stack = clip(msg, maxTaskError), clip(stack, maxTaskStack)
	}
	if *size += len(t.ID) + len(msg) + len(stack) + 32; *size > maxRoundBytes {
		*omitted++
		return b
	}
	b = append(b, 1)
	if t.ID == schedule {
		b = append(b, 0)
	} else {
		b = binary.AppendUvarint(b, uint64(len(t.ID))+1)
		b = append(b, t.ID...)
	}
	b = append(b, byte(min(max(t.Status, 0), numStatus-1))) // a uvarint below 128
	b = appendSince(b, t.Started, start)
	b = binary.AppendVarint(b, int64(t.Cost))
	b = appendString(b, msg)
	return appendString(b, stack)
}

// readRound decodes the round at rd (appendRound's form), its tasks'
// details only when tasks is set.
func readRound(rd *reader, schedule string, tasks bool) (RoundRecord, error) {
	var r RoundRecord
	r.Seq = int64(rd.uvarint())
	start := rd.varint()
	r.Start = time.Unix(0, start).UTC()
	version := rd.byte()
	if version&3 == roundShort {
		return r, readShort(rd, &r, version, start, schedule, tasks)
	}
	if version != roundVersion1 && version != roundVersion2 && rd.err == nil {
		return r, fmt.Errorf("%w: unknown encoding", store.ErrCorrupt)
	}
	// at reads an instant of the round in its version's form.
	at := func() time.Time {
		if version == roundVersion1 {
			return time.Unix(0, rd.varint()).UTC()
		}
		return sinceOf(rd.uvarint(), start)
	}
	r.Number = rd.varint()
	r.Batch = rd.varint() == 1
	r.Planned = at()
	r.End = at()
	for i := range r.byStatus {
		r.byStatus[i] = rd.varint()
	}
	causes, cause := causeNames(), rd.uvarint()
	if cause >= uint64(len(causes)) && rd.err == nil {
		return r, fmt.Errorf("cause %d", cause)
	}
	r.Cause = causes[min(cause, uint64(len(causes)-1))]
	r.By = rd.string()
	names := StatusNames()
	detailed := 0
	for rd.err == nil && rd.byte() == 1 {
		if detailed++; detailed > MaxRoundTasks {
			return r, fmt.Errorf("more than %d tasks", MaxRoundTasks)
		}
		if !tasks {
			if version == roundVersion1 {
				rd.skipString()
			} else {
				rd.taskID(schedule)
			}
			for range 3 { // status, started, cost
				rd.varint()
			}
			rd.skipString()
			rd.skipString()
			continue
		}
		var t TaskRecord
		if version == roundVersion1 {
			t.ID = rd.string()
		} else {
			t.ID = rd.taskID(schedule)
		}
		st := rd.uvarint()
		if st >= numStatus && rd.err == nil {
			return r, fmt.Errorf("task status %d", st)
		}
		t.Status = names[min(st, numStatus-1)]
		if version == roundVersion1 {
			t.Started = timeOrZero(rd.varint())
		} else {
			t.Started = sinceOf(rd.uvarint(), start)
		}
		t.Cost = time.Duration(rd.varint())
		t.Error, t.Stack = rd.string(), rd.string()
		r.Tasks = append(r.Tasks, t)
	}
	r.Omitted = rd.varint()
	if rd.err != nil {
		return r, rd.err
	}
	r.fill(r.byStatus)
	return r, nil
}

// skipRound returns b after its first round, reading nothing into memory
// (it steps over varints by their continuation bits rather than decoding
// them), or nil for a truncated round. Reading a history's kept rounds
// needs it to step over the dropped ones.
func skipRound(b []byte) []byte {
	i := skipVarints(b, 0, 2) + 1 // seq, start; version
	if i <= len(b) && b[i-1]&3 == roundShort {
		// number, planned, the task's start and cost, the end
		if i = skipVarints(b, i, 5); i > len(b) {
			return nil
		}
		return b[i:]
	}
	v2 := i <= len(b) && b[i-1] == roundVersion2
	// number, batch, planned, end, the counts, the cause
	i = skipVarints(b, i, 4+numStatus+1)
	i = skipString(b, i) // by
	for i < len(b) && b[i] == 1 {
		if v2 {
			i = skipTaskID(b, i+1)
		} else {
			i = skipString(b, i+1) // id
		}
		i = skipVarints(b, i, 3) // status, started, cost
		i = skipString(b, i)     // error
		i = skipString(b, i)     // stack
	}
	i = skipVarints(b, i+1, 1) // the 0 that ends the tasks; omitted
	if i > len(b) {
		return nil // cannot happen: fom wrote it; drop the rest rather than loop
	}
	return b[i:]
}

// skipVarints returns the index after the n varints at b[i:] (each ends
// at its first byte below 0x80), or len(b)+1 if b ends first.
func skipVarints(b []byte, i, n int) int {
	for ; i < len(b); i++ {
		if b[i] < 0x80 {
			if n--; n == 0 {
				return i + 1
			}
		}
	}
	return len(b) + 1
}

// skipTaskID returns the index after a task's id in version 2's form at
// b[i:] (0 for the schedule's name, else its length plus one and its
// bytes), or len(b)+1 if b ends first.
func skipTaskID(b []byte, i int) int {
	if i >= len(b) {
		return len(b) + 1
	}
	v, n := binary.Uvarint(b[i:])
	if n <= 0 || v > uint64(len(b)-i-n)+1 {
		return len(b) + 1
	}
	return i + n + int(max(v, 1)-1)
}

// skipString returns the index after the length-prefixed string at b[i:],
// or len(b)+1 if b ends first.
func skipString(b []byte, i int) int {
	if i >= len(b) {
		return len(b) + 1
	}
	v, n := binary.Uvarint(b[i:])
	if n <= 0 || v > uint64(len(b)-i-n) {
		return len(b) + 1
	}
	return i + n + int(v)
}

func (r *reader) skipString() {
	n := r.uvarint()
	if r.err == nil && n > uint64(len(r.b)) {
		r.err = fmt.Errorf("string of %d bytes in %d", n, len(r.b))
	}
	if r.err == nil {
		r.b = r.b[n:]
	}
}

// readRounds decodes n rounds of a page's body, oldest first.
func readRounds(b []byte, n int, schedule, instance string, tasks bool) ([]RoundRecord, error) {
	rd := &reader{b: b}
	out := make([]RoundRecord, 0, n)
	for range n {
		r, err := readRound(rd, schedule, tasks)
		if err != nil {
			return out, fmt.Errorf("round #%d: %w", r.Seq, err)
		}
		r.Instance = instance
		out = append(out, r)
	}
	return out, nil
}

// pageHeader begins a stored page of n rounds, with room for size bytes
// of them.
func pageHeader(n, size int) []byte {
	b := make([]byte, 0, 1+binary.MaxVarintLen64+size)
	b = append(b, pageVersion1)
	return binary.AppendUvarint(b, uint64(n))
}

// pageBody returns a stored page's rounds and their count.
func pageBody(data []byte) ([]byte, int, error) {
	if len(data) == 0 || data[0] != pageVersion1 {
		return nil, 0, fmt.Errorf("%w: unknown encoding", store.ErrCorrupt)
	}
	rd := &reader{b: data[1:]}
	n := rd.uvarint()
	if rd.err != nil {
		return nil, 0, rd.err
	}
	if n > uint64(len(rd.b)) {
		return nil, 0, fmt.Errorf("%d rounds in %d bytes", n, len(rd.b))
	}
	return rd.b, int(n), nil
}

// DecodePage reads a stored page of rounds, oldest first; an unreadable
// one is an error naming the schedule and its rounds.
func DecodePage(sr store.Round) ([]RoundRecord, error) { return decodePage(sr, true) }

func decodePage(sr store.Round, tasks bool) ([]RoundRecord, error) {
	body, n, err := pageBody(sr.Data)
	if err == nil {
		var rs []RoundRecord
		if rs, err = readRounds(body, n, sr.Schedule, sr.Instance, tasks); err == nil {
			return rs, nil
		}
	}
	return nil, fmt.Errorf("schedule %q: rounds #%d-#%d of the history unreadable: %w", sr.Schedule, sr.First, sr.Seq, err)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// taskID reads a task's id in version 2's form (appendRound).
func (r *reader) taskID(schedule string) string {
	n := r.uvarint()
	if r.err != nil || n == 0 {
		return schedule
	}
	if n-1 > uint64(len(r.b)) {
		r.err = fmt.Errorf("string of %d bytes in %d", n-1, len(r.b))
		return ""
	}
	s := string(r.b[:n-1])
	r.b = r.b[n-1:]
	return s
}

func (r *reader) string() string {
	n := r.uvarint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = fmt.Errorf("string of %d bytes in %d", n, len(r.b))
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *reader) byte() byte {
	if r.err != nil {
		return 0
	}
	if len(r.b) == 0 {
		r.err = errors.New("truncated")
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

// RecentRounds returns the rounds not yet written to the store, newest
// first, with their tasks: without a store, the whole history.
func (s *Stats) RecentRounds() []RoundRecord {
	var taken, page []byte
	var takenN, n int
	s.mu.Lock()
	if h := s.hist; h != nil { // copies: the pages are appended to under the lock
		// and the taken page's array serves the next page once written
		taken, takenN = bytes.Clone(h.taken), h.takenN
		page, n = h.appendKept(nil), int(h.kept)
	}
	s.mu.Unlock()
	var out []RoundRecord
	if body, _, err := pageBody(taken); err == nil {
		rs, _ := readRounds(body, takenN, s.schedule, "", true)
		out = append(out, rs...)
	}
	rs, _ := readRounds(page, n, s.schedule, "", true)
	out = append(out, rs...)
	slices.Reverse(out)
	return out
}

// History returns a schedule's most recent rounds, newest first, at most
// limit: those in memory and those in st (nil: memory only). Listed rounds
// from the store come without their tasks; Round reads one whole.
func (s *Stats) History(ctx context.Context, st store.Store, limit int) ([]RoundRecord, error) {
	// Memory first: a round written between the two reads is then found
	// twice (and kept once), never lost between them.
	mem := s.RecentRounds()
	if st == nil {
		return mem[:min(limit, len(mem))], nil
	}
	stored, err := st.LoadRounds(ctx, s.schedule, limit)
	if err != nil {
		return nil, err
	}
	seen := map[[2]int64]bool{}
	out := make([]RoundRecord, 0, min(limit, len(mem)+len(stored)))
	for _, r := range mem {
		seen[[2]int64{r.Seq, r.Start.UnixNano()}] = true
		out = append(out, r)
	}
	newestFirst := func() { slices.SortStableFunc(out, func(a, b RoundRecord) int { return b.Start.Compare(a.Start) }) }
	for i, sr := range stored {
		rs, err := decodePage(sr, false)
		if err != nil {
			// One unreadable page does not hide the rest.
			rs = []RoundRecord{{Seq: sr.Seq, Instance: sr.Instance, Start: sr.Start, Cause: "unreadable", Outcome: "unknown", Counts: map[string]int64{}}}
		}
		for _, r := range rs {
			if !seen[[2]int64{r.Seq, r.Start.UnixNano()}] {
				out = append(out, r)
			}
		}
		// Pages come newest first by their last round: once limit rounds
		// are newer than the next page's last, no later page can add one.
		newestFirst()
		if len(out) >= limit && (i+1 == len(stored) || stored[i+1].Start.Before(out[limit-1].Start)) {
			break
		}
	}
	newestFirst()
	return out[:min(limit, len(out))], nil
}

// Round returns one round of the history with its tasks: seq of instance
// ("" for this process on an embedded store).
func (s *Stats) Round(ctx context.Context, st store.Store, instance string, seq int64) (RoundRecord, bool, error) {
	if instance == "" || st == nil {
		for _, r := range s.RecentRounds() {
			if r.Seq == seq {
				return r, true, nil
			}
		}
	}
	if st == nil {
		return RoundRecord{}, false, nil
	}
	sr, ok, err := st.LoadRound(ctx, s.schedule, instance, seq)
	if err != nil || !ok {
		return RoundRecord{}, false, err
	}
	rs, err := DecodePage(sr)
	if err != nil {
		return RoundRecord{}, false, err
	}
	for _, r := range rs {
		if r.Seq == seq {
			return r, true, nil
		}
	}
	return RoundRecord{}, false, nil
}
