package schedule

import "slices"

// fifo is a first-in first-out queue that keeps its room. Taking from the
// front moves a head index rather than reslicing (which would lose the
// room before it, so that a queue that fills and drains allocates anew
// every time); the waiting items go back to the start of the array when
// the queue drains, or once half of it was taken under a load that never
// lets it drain, which bounds it.
type fifo[T any] struct {
	items []T
	head  int // items[head:] wait
}

func (q *fifo[T]) len() int { return len(q.items) - q.head }

func (q *fifo[T]) push(v T) { q.items = append(q.items, v) }

// waiting returns the waiting items, oldest first; valid until the next
// change.
func (q *fifo[T]) waiting() []T { return q.items[q.head:] }

// pop takes the oldest item; the zero T when none waits.
func (q *fifo[T]) pop() T {
	var zero T
	if q.head == len(q.items) {
		return zero
	}
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	q.compact()
	return v
}

// removeAt takes out the i-th waiting item.
func (q *fifo[T]) removeAt(i int) {
	q.items = slices.Delete(q.items, q.head+i, q.head+i+1)
	q.compact()
}

// keep keeps the waiting items for which f is true, in order.
func (q *fifo[T]) keep(f func(T) bool) {
	q.items = append(q.items[:q.head], slices.DeleteFunc(q.items[q.head:], func(v T) bool { return !f(v) })...)
	q.compact()
}

// drain takes every waiting item and lets go of the room.
func (q *fifo[T]) drain() []T {
	out := q.items[q.head:]
	q.items, q.head = nil, 0
	return out
}

func (q *fifo[T]) compact() {
	switch {
	case q.head == len(q.items):
		clear(q.items[:q.head])
		q.items, q.head = q.items[:0], 0
	case q.head >= 1024 && q.head*2 >= len(q.items):
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
}
