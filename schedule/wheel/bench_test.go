package wheel

import (
	"testing"
	"time"
)

func nop() {}

// BenchmarkAddCancel adds a timer 1-5s out and cancels it, with a million
// other timers pending, as a delay queue with mostly-cancelled tasks does.
func BenchmarkAddCancel(b *testing.B) {
	w, _ := New()
	defer w.Stop()
	for i := range 1_000_000 {
		w.AfterFunc(time.Second+time.Duration(i%4000)*time.Millisecond, nop)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t := w.AfterFunc(time.Second+time.Duration(i%4000)*time.Millisecond, nop)
		t.Stop()
	}
}

// BenchmarkRuntimeAfterFuncStop is the same with Go's runtime timers.
func BenchmarkRuntimeAfterFuncStop(b *testing.B) {
	var pending []*time.Timer
	for i := range 1_000_000 {
		pending = append(pending, time.AfterFunc(time.Hour+time.Duration(i%4000)*time.Millisecond, nop))
	}
	defer func() {
		for _, t := range pending {
			t.Stop()
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		t := time.AfterFunc(time.Second+time.Duration(i%4000)*time.Millisecond, nop)
		t.Stop()
	}
}

// BenchmarkAddCancelParallel adds and cancels from every P at once.
func BenchmarkAddCancelParallel(b *testing.B) {
	w, _ := New()
	defer w.Stop()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			w.AfterFunc(time.Second+time.Duration(i%4000)*time.Millisecond, nop).Stop()
		}
	})
}

func BenchmarkRuntimeAfterFuncStopParallel(b *testing.B) {
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			time.AfterFunc(time.Second+time.Duration(i%4000)*time.Millisecond, nop).Stop()
		}
	})
}
