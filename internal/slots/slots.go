// Package slots groups instants into fixed-width slots, so that the
// items due within one slot are handled by one store statement armed
// ahead of it: the durable timers begin their fires' attempts by slot
// (package timer), and the owner of clustered schedules records the fires
// they announced by slot (package pgcluster). Instants are Unix
// milliseconds.
package slots

// Of is the first instant of the width-wide slot holding ms: slots are
// aligned on multiples of width (> 0), before 1970 as after.
func Of(ms, width int64) int64 { return ms - ((ms%width)+width)%width }

// Slot is the items of a slot and what acts on it when its time comes
// (its owner's timer).
type Slot[T, A any] struct {
	Items []T
	Armed A
}

// Set is the open slots by their first instant. It is not safe for
// concurrent use: its owner's lock guards it.
type Set[T, A any] struct {
	width int64
	m     map[int64]*Slot[T, A]
	spare []T // items given back (Recycle), for the next slot opened
}

// New returns an empty set of width-wide slots (width > 0).
func New[T, A any](width int64) *Set[T, A] {
	return &Set[T, A]{width: max(width, 1), m: map[int64]*Slot[T, A]{}}
}

// Of is the first instant of the slot holding ms.
func (s *Set[T, A]) Of(ms int64) int64 { return Of(ms, s.width) }

// Add puts item into the slot holding ms; opened reports that the slot
// was opened by it, for its owner to arm.
func (s *Set[T, A]) Add(ms int64, item T) (k int64, sl *Slot[T, A], opened bool) {
	k = s.Of(ms)
	if sl = s.m[k]; sl == nil {
		sl, opened = &Slot[T, A]{Items: s.spare}, true
		s.spare = nil
		s.m[k] = sl
	}
	sl.Items = append(sl.Items, item)
	return k, sl, opened
}

// Take removes the slot that begins at k and returns it; nil when none is
// open.
func (s *Set[T, A]) Take(k int64) *Slot[T, A] {
	sl := s.m[k]
	delete(s.m, k)
	return sl
}

// Each calls f with every open slot, in no order.
func (s *Set[T, A]) Each(f func(k int64, sl *Slot[T, A])) {
	for k, sl := range s.m {
		f(k, sl)
	}
}

// Clear closes every slot.
func (s *Set[T, A]) Clear() { clear(s.m) }

// Recycle gives back the items of a slot taken, once handled: the next
// slot opened appends to them rather than growing its own from none (an
// aligned burst's slot holds thousands, every second). They are cleared.
func (s *Set[T, A]) Recycle(items []T) {
	if cap(items) > cap(s.spare) {
		clear(items)
		s.spare = items[:0]
	}
}
