package schedule

import (
	"slices"
	"testing"
)

// A fifo that fills and drains keeps its array: taking from the front
// does not lose the room before the head.
func TestFifoKeepsItsRoom(t *testing.T) {
	var q fifo[int]
	for i := range 100 {
		q.push(i)
	}
	room := &q.items[:1][0]
	for round := range 1000 {
		for i := range 100 {
			if v := q.pop(); v != i {
				t.Fatalf("round %d: popped %d, want %d", round, v, i)
			}
		}
		if q.len() != 0 || q.pop() != 0 {
			t.Fatalf("round %d: %d left", round, q.len())
		}
		for i := range 100 {
			q.push(i)
		}
		if &q.items[:1][0] != room {
			t.Fatalf("round %d: the queue moved to a new array", round)
		}
	}
}

// removeAt, keep and drain see only the waiting items, in order.
func TestFifoRemovesWaitingItems(t *testing.T) {
	var q fifo[int]
	for i := range 10 {
		q.push(i)
	}
	q.pop()
	q.pop() // 2..9 wait
	q.removeAt(1)
	if got := q.waiting(); !slices.Equal(got, []int{2, 4, 5, 6, 7, 8, 9}) {
		t.Fatalf("after removeAt: %v", got)
	}
	q.keep(func(v int) bool { return v%2 == 0 })
	if got := q.waiting(); !slices.Equal(got, []int{2, 4, 6, 8}) {
		t.Fatalf("after keep: %v", got)
	}
	if v := q.pop(); v != 2 {
		t.Fatalf("popped %d after keep", v)
	}
	if got := q.drain(); !slices.Equal(got, []int{4, 6, 8}) || q.len() != 0 {
		t.Fatalf("drain: %v, %d left", got, q.len())
	}
	q.keep(func(int) bool { return false }) // on an empty queue
	if q.len() != 0 {
		t.Fatal("an empty queue grew")
	}
}
