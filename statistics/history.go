package statistics

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	"github.com/fom-go/fom/store"
)

// Run history: every completed round (or batch) is one record, with its
// cause, times, counts by status and the results of up to MaxRoundTasks of
// its tasks. Memory holds only the records not yet written; the store keeps
// the newest Settings.Rounds per schedule, each in a slot (its sequence
// number modulo Settings.Rounds) that the next lap overwrites, so a flush
// writes one row per round and never deletes to stay within the bound.

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

type taskEntry struct {
	id      string
	err     error
	started int64
	cost    time.Duration
	status  uint8
}

// roundEntry is a round as kept until it is written: errors are formatted
// then, not on the round's path.
type roundEntry struct {
	seq, number         int64
	planned, start, end int64
	byStatus            [numStatus]uint32
	omitted             int32
	batch, single       bool
	cause               uint8 // index in causeNames
	by                  string
	tasks               []taskEntry
	one                 taskEntry // a round of one task keeps it here, not in tasks
}

// causeNames are the causes a round can have, as schedule.Cause names them.
func causeNames() [5]string { return [5]string{"plan", "start", "exec", "rerun", "submit"} }

func causeIndex(name string) uint8 {
	names := causeNames()
	if i := slices.Index(names[:], name); i > 0 {
		return uint8(i)
	}
	return 0
}

func (e *roundEntry) list() []taskEntry {
	if e.single {
		return []taskEntry{e.one}
	}
	return e.tasks
}

// RecordRound adds a completed round to the history.
func (s *Stats) RecordRound(x RoundSample) {
	e := newRoundEntry(x)
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.histLocked()
	h.seq++
	e.seq = h.seq
	if h.rounds.push(e) {
		h.unsaved++
	}
}

// history is a schedule's rounds not yet in the store: rounds waits for a
// flush (the newest Settings.Rounds), inflight is being written by one.
type history struct {
	seq      int64 // the last round's sequence number
	rounds   ring[roundEntry]
	inflight []roundEntry
	unsaved  int64 // rounds dropped before a flush took them
}

// newRoundEntry keeps what the history needs of a round, its tasks' errors
// unformatted.
func newRoundEntry(x RoundSample) roundEntry {
	e := roundEntry{number: x.Number, batch: x.Batch, cause: causeIndex(x.Cause), by: x.By,
		planned: x.Planned.UnixNano(), start: x.Start.UnixNano(), end: x.End.UnixNano()}
	for _, t := range x.Tasks {
		if t.Status >= 0 && t.Status < numStatus {
			e.byStatus[t.Status]++
		}
	}
	entry := func(t TaskSample) taskEntry {
		return taskEntry{id: t.ID, status: uint8(t.Status), started: unixOrZero(t.Started), cost: t.Cost, err: t.Err}
	}
	switch {
	case len(x.Tasks) == 1:
		e.one, e.single = entry(x.Tasks[0]), true
	case len(x.Tasks) <= MaxRoundTasks:
		e.tasks = make([]taskEntry, len(x.Tasks))
		for i, t := range x.Tasks {
			e.tasks[i] = entry(t)
		}
	default:
		keep := pickTasks(x.Tasks)
		e.omitted = int32(len(x.Tasks) - len(keep))
		e.tasks = make([]taskEntry, len(keep))
		for i, k := range keep {
			e.tasks[i] = entry(x.Tasks[k])
		}
	}
	return e
}

func unixOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
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

func (s *Stats) histLocked() *history {
	if s.hist == nil {
		s.hist = &history{rounds: newRing[roundEntry](s.settings.Rounds)}
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

// record converts an entry, formatting its errors.
func (e *roundEntry) record() RoundRecord {
	r := RoundRecord{Seq: e.seq, Number: e.number, Batch: e.batch, Cause: causeNames()[e.cause], By: e.by,
		Planned: timeOrZero(e.planned), Start: timeOrZero(e.start), End: timeOrZero(e.end), Omitted: int64(e.omitted)}
	for i, n := range e.byStatus {
		r.byStatus[i] = int64(n)
	}
	r.fill(r.byStatus)
	e.details(func(t TaskRecord) { r.Tasks = append(r.Tasks, t) }, func() { r.Omitted++ })
	return r
}

// details gives each task's record, its error formatted and clipped, to
// keep, and counts with omit the tasks past the round's byte bound.
func (e *roundEntry) details(keep func(TaskRecord), omit func()) {
	size := 0
	for _, t := range e.list() {
		tr := TaskRecord{ID: t.id, Status: StatusNames()[min(int(t.status), numStatus-1)], Started: timeOrZero(t.started), Cost: t.cost}
		if t.err != nil {
			msg := t.err.Error()
			_, stack := chainOf(t.err, msg)
			tr.Error, tr.Stack = clip(msg, maxTaskError), clip(stack, maxTaskStack)
		}
		size += len(tr.ID) + len(tr.Error) + len(tr.Stack) + 32
		if size > maxRoundBytes {
			omit()
			continue
		}
		keep(tr)
	}
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

// The stored form of a round (version 1): a version byte, then varints:
// number, batch, planned, end, the six status counts, omitted, the cause
// and by as strings (length, bytes), the task count and per task: id,
// status, started, cost, error, stack. Start and the sequence number are
// columns of their own.
const roundVersion1 = 1

// encode is the stored form of the round, written without building its
// record first (a flush encodes every round).
func (e *roundEntry) encode() []byte {
	n := len(e.tasks)
	if e.single {
		n = 1
	}
	cause := causeNames()[e.cause]
	b := make([]byte, 0, 48+len(cause)+len(e.by)+n*32)
	b = append(b, roundVersion1)
	batch := int64(0)
	if e.batch {
		batch = 1
	}
	for _, v := range []int64{e.number, batch, e.planned, e.end} {
		b = binary.AppendVarint(b, v)
	}
	for _, c := range e.byStatus {
		b = binary.AppendVarint(b, int64(c))
	}
	omitted, at := int64(e.omitted), len(b)
	var tasks []byte
	count := 0
	e.details(func(t TaskRecord) {
		count++
		tasks = appendString(tasks, t.ID)
		tasks = binary.AppendUvarint(tasks, uint64(statusIndex(t.Status)))
		tasks = binary.AppendVarint(tasks, unixOrZero(t.Started))
		tasks = binary.AppendVarint(tasks, int64(t.Cost))
		tasks = appendString(tasks, t.Error)
		tasks = appendString(tasks, t.Stack)
	}, func() { omitted++ })
	b = binary.AppendVarint(b[:at], omitted)
	b = appendString(b, cause)
	b = appendString(b, e.by)
	b = binary.AppendUvarint(b, uint64(count))
	return append(b, tasks...)
}

func statusIndex(name string) int {
	names := StatusNames()
	return slices.Index(names[:], name)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
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

// The stored form of a flush's rounds of one schedule (a page): a version
// byte, the round count, then per round its sequence number, start (Unix
// ns) and the length of its encoding, then that encoding.
const pageVersion1 = 1

// encodePage writes es (oldest first) as one page.
func encodePage(es []roundEntry) []byte {
	b := make([]byte, 0, 16+len(es)*64)
	b = append(b, pageVersion1)
	b = binary.AppendUvarint(b, uint64(len(es)))
	for i := range es {
		body := es[i].encode()
		b = binary.AppendUvarint(b, uint64(es[i].seq))
		b = binary.AppendVarint(b, es[i].start)
		b = binary.AppendUvarint(b, uint64(len(body)))
		b = append(b, body...)
	}
	return b
}

// DecodePage reads a stored page of rounds, oldest first; an unreadable
// one is an error naming the schedule and its rounds.
func DecodePage(sr store.Round) ([]RoundRecord, error) {
	bad := func(err error) ([]RoundRecord, error) {
		return nil, fmt.Errorf("schedule %q: rounds #%d-#%d of the history unreadable: %w", sr.Schedule, sr.First, sr.Seq, err)
	}
	if len(sr.Data) == 0 || sr.Data[0] != pageVersion1 {
		return bad(fmt.Errorf("%w: unknown encoding", store.ErrCorrupt))
	}
	rd := &reader{b: sr.Data[1:]}
	n := rd.uvarint()
	if rd.err == nil && n > uint64(len(rd.b)) {
		return bad(fmt.Errorf("%d rounds in %d bytes", n, len(rd.b)))
	}
	out := make([]RoundRecord, 0, n)
	for i := uint64(0); i < n && rd.err == nil; i++ {
		seq, start := int64(rd.uvarint()), rd.varint()
		size := rd.uvarint()
		if rd.err != nil {
			break
		}
		if size > uint64(len(rd.b)) {
			return bad(fmt.Errorf("round of %d bytes in %d", size, len(rd.b)))
		}
		r, err := decodeRound(rd.b[:size])
		if err != nil {
			return bad(fmt.Errorf("round #%d: %w", seq, err))
		}
		rd.b = rd.b[size:]
		r.Seq, r.Instance, r.Start = seq, sr.Instance, time.Unix(0, start).UTC()
		r.fill(r.byStatus)
		out = append(out, r)
	}
	if rd.err != nil {
		return bad(rd.err)
	}
	return out, nil
}

// decodeRound reads one round's encoding (encode).
func decodeRound(b []byte) (RoundRecord, error) {
	if len(b) == 0 || b[0] != roundVersion1 {
		return RoundRecord{}, fmt.Errorf("%w: unknown encoding", store.ErrCorrupt)
	}
	rd := &reader{b: b[1:]}
	var r RoundRecord
	r.Number = rd.varint()
	r.Batch = rd.varint() == 1
	r.Planned, r.End = time.Unix(0, rd.varint()).UTC(), time.Unix(0, rd.varint()).UTC()
	for i := range r.byStatus {
		r.byStatus[i] = rd.varint()
	}
	r.Omitted = rd.varint()
	r.Cause, r.By = rd.string(), rd.string()
	n := rd.uvarint()
	if rd.err == nil && n > MaxRoundTasks {
		return r, fmt.Errorf("%d tasks", n)
	}
	names := StatusNames()
	for i := uint64(0); i < n && rd.err == nil; i++ {
		t := TaskRecord{ID: rd.string()}
		st := rd.uvarint()
		if st >= numStatus {
			return r, fmt.Errorf("task status %d", st)
		}
		t.Status = names[st]
		t.Started, t.Cost = timeOrZero(rd.varint()), time.Duration(rd.varint())
		t.Error, t.Stack = rd.string(), rd.string()
		r.Tasks = append(r.Tasks, t)
	}
	return r, rd.err
}

// RecentRounds returns the rounds not yet written to the store, newest
// first, with their tasks: without a store, the whole history.
func (s *Stats) RecentRounds() []RoundRecord {
	var es []roundEntry
	s.mu.Lock()
	if s.hist != nil {
		es = append(s.hist.rounds.items(), s.hist.inflight...)
	}
	s.mu.Unlock()
	slices.SortFunc(es, func(a, b roundEntry) int { return int(b.seq - a.seq) })
	out := make([]RoundRecord, len(es))
	for i := range es {
		out[i] = es[i].record()
	}
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
	for _, sr := range stored {
		rs, err := DecodePage(sr)
		if err != nil {
			// One unreadable page does not hide the rest.
			rs = []RoundRecord{{Seq: sr.Seq, Instance: sr.Instance, Start: sr.Start, Cause: "unreadable", Outcome: "unknown", Counts: map[string]int64{}}}
		}
		for _, r := range rs {
			if seen[[2]int64{r.Seq, r.Start.UnixNano()}] {
				continue
			}
			r.Tasks = nil
			out = append(out, r)
		}
	}
	slices.SortStableFunc(out, func(a, b RoundRecord) int { return b.Start.Compare(a.Start) })
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
