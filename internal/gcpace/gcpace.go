// Package gcpace starts, in the calm part of a second, the garbage
// collection an App's aligned fires would otherwise have running through
// their burst.
//
// An App allocates in steps: its fires at whole seconds, its statistics
// flush half-way between them every few seconds. A collection that one of
// them sets off marks for 200–500 ms (three Apps of ten thousand
// every-second schedules in one process, the cluster benchmark, on two
// CPUs), taking a quarter of the CPUs and assists from every goroutine
// that allocates meanwhile: begun in a burst, or in a flush shortly
// before one, it takes its CPU from the fires, and that second read
// 120–320 ms at p99 against 40–50 ms for the others. The pacer looks at
// the heap just after each whole second and, when the heap, growing at
// the most it grew in one of the last ten seconds, would reach the
// collector's trigger within two seconds, collects then, in the calm part
// of the second, instead.
//
// It acts only in a process whose collections come at least minGap apart,
// and brings a collection forward by a few seconds of allocation at most:
// there it costs a collection in five more at most. A process that
// collects more often (a busy server) is left to the collector's own
// pacing. runtime.GC waits for a collection under way and starts another:
// one pacer a process (WithGCPacing in package fom says so).
package gcpace

import (
	"runtime"
	"runtime/metrics"
	"slices"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/internal/clockx"
)

// minGap is the shortest time between two collections for which the
// pacer brings one forward.
const minGap = 10 * time.Second

// horizon is how many seconds of allocation ahead the pacer looks, at
// the most any one second allocated over the last `recent` (an App's
// statistics flush allocates most of what it does once in five seconds).
const (
	horizon = 2
	recent  = 10
)

// trigger is the fraction of the way from the live heap to the heap goal
// at which the pacer expects the collector to trigger (the runtime's
// pacer sets it between 0.7 and 0.95; the cluster benchmark's collections
// began at 0.84–0.86). Where the collector triggers sooner, it does so
// before the pacer: no worse than without it.
const trigger = 0.8

// Sample is what the pacer reads of the runtime at a look.
type Sample struct {
	Goal   uint64 // the heap goal of the next collection
	Live   uint64 // the heap marked live by the last collection
	Heap   uint64 // heap object bytes now (live, new and not yet swept)
	Allocs uint64 // bytes allocated since the process started
	Cycles uint64 // collections completed since the process started
	// Started is the collections begun: each stops the world twice, as
	// it begins and as its mark ends, and the runtime counts those pauses
	// as they happen, where it counts a collection once it completed.
	Started uint64
}

// collecting reports whether a collection is under way: asked for
// another then, runtime.GC would wait for it and start a second.
func (s Sample) collecting() bool { return s.Started > s.Cycles }

// Due reports whether a collection should start now, at cur, when the
// last collection was seen since ago and rate is the most bytes allocated
// in a second lately: none is under way, collections come minGap apart at
// least, and the heap, growing at rate, would reach the collector's
// trigger within horizon seconds.
func Due(cur Sample, rate uint64, since time.Duration) bool {
	if since < minGap || cur.Goal <= cur.Live || cur.collecting() {
		return false
	}
	at := cur.Live + uint64(trigger*float64(cur.Goal-cur.Live))
	return cur.Heap+horizon*rate >= at
}

// Read reads a Sample of this process's runtime.
func Read() Sample {
	s := []metrics.Sample{
		{Name: "/gc/heap/goal:bytes"},
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/gc/heap/allocs:bytes"},
		{Name: "/gc/cycles/total:gc-cycles"},
		{Name: "/sched/pauses/total/gc:seconds"},
	}
	metrics.Read(s)
	var pauses uint64
	if s[5].Value.Kind() == metrics.KindFloat64Histogram {
		for _, n := range s[5].Value.Float64Histogram().Counts {
			pauses += n
		}
	}
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return Sample{Goal: v(0), Live: v(1), Heap: v(2), Allocs: v(3), Cycles: v(4), Started: pauses - v(4)}
}

// Pacer looks at the heap after every whole second until Stop.
type Pacer struct {
	stop, done chan struct{}
}

// Start starts a pacer on clk that reads the runtime with read and
// collects with collect (Read and runtime.GC, but in tests).
func Start(clk clockwork.Clock, read func() Sample, collect func()) *Pacer {
	p := &Pacer{stop: make(chan struct{}), done: make(chan struct{})}
	go p.loop(clk, read, collect)
	return p
}

// StartRuntime starts a pacer of this process's collector.
func StartRuntime(clk clockwork.Clock) *Pacer { return Start(clk, Read, runtime.GC) }

// Stop stops the pacer and waits for it (and a collection it started) to
// end.
func (p *Pacer) Stop() {
	close(p.stop)
	<-p.done
}

func (p *Pacer) loop(clk clockwork.Clock, read func() Sample, collect func()) {
	defer close(p.done)
	prev := read()
	seen := clk.Now()         // when the last collection was seen to complete
	var allocs [recent]uint64 // bytes allocated in each of the last seconds
	for i := 0; ; i++ {
		now := clk.Now()
		// At the calm part's beginning the burst's fires have run, and
		// a collection marks before the next ones are recorded ahead.
		next := clockx.NextCalm(now)
		t := clk.NewTimer(next.Sub(now))
		select {
		case <-p.stop:
			t.Stop()
			return
		case <-t.Chan():
		}
		cur := read()
		now = clk.Now()
		if cur.Allocs >= prev.Allocs {
			allocs[i%recent] = cur.Allocs - prev.Allocs
		}
		if cur.Started != prev.Started || cur.Cycles != prev.Cycles {
			seen = now // the runtime's own collection, begun or done
		} else if Due(cur, slices.Max(allocs[:]), now.Sub(seen)) {
			collect()
			cur = read()
			seen = clk.Now()
		}
		prev = cur
	}
}
