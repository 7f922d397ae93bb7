package slots

import "testing"

func TestOfAlignsOnTheWidthBothSidesOfZero(t *testing.T) {
	for _, c := range []struct{ ms, width, want int64 }{
		{0, 50, 0}, {49, 50, 0}, {50, 50, 50}, {1_767_603_601_537, 100, 1_767_603_601_500},
		{-1, 50, -50}, {-50, 50, -50}, {-51, 50, -100}, {7, 1, 7},
	} {
		if got := Of(c.ms, c.width); got != c.want {
			t.Errorf("Of(%d, %d) = %d, want %d", c.ms, c.width, got, c.want)
		}
	}
}

func TestAddOpensASlotOnceAndTakeClosesIt(t *testing.T) {
	s := New[string, int](100)
	k, sl, opened := s.Add(1_250, "a")
	if k != 1_200 || !opened || len(sl.Items) != 1 {
		t.Fatalf("first add: slot %d opened %v items %v", k, opened, sl.Items)
	}
	sl.Armed = 7
	k2, sl2, opened2 := s.Add(1_299, "b")
	if k2 != k || opened2 || sl2 != sl || sl.Items[1] != "b" {
		t.Fatalf("second add: slot %d opened %v items %v", k2, opened2, sl2.Items)
	}
	if _, _, opened := s.Add(1_300, "c"); !opened {
		t.Fatal("1300 is in the next slot, which the add opens")
	}
	n := 0
	s.Each(func(int64, *Slot[string, int]) { n++ })
	if n != 2 {
		t.Fatalf("%d slots open, want 2", n)
	}
	if got := s.Take(1_200); got != sl || got.Armed != 7 {
		t.Fatalf("take: %+v", got)
	}
	if s.Take(1_200) != nil {
		t.Fatal("a slot taken twice")
	}
	s.Clear()
	if s.Take(1_300) != nil {
		t.Fatal("a slot left after Clear")
	}
}

func TestASlotOpensOnTheItemsOfOneRecycled(t *testing.T) {
	s := New[string, int](100)
	_, sl, _ := s.Add(1_250, "a")
	s.Add(1_250, "b")
	items := s.Take(1_200).Items
	s.Recycle(items)
	if items[0] != "" || items[1] != "" {
		t.Fatalf("recycled items kept %q", items)
	}
	_, next, opened := s.Add(1_350, "c")
	if !opened || next == sl || len(next.Items) != 1 || &next.Items[0] != &items[0] {
		t.Fatalf("the next slot opened on %v (opened %v), not on the items recycled", next.Items, opened)
	}
	_, other, _ := s.Add(1_450, "d") // the spare went to the slot before
	if &other.Items[0] == &items[0] {
		t.Fatal("two slots share the items recycled once")
	}
}
