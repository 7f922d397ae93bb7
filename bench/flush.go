package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/statistics"
	"github.com/fom-go/fom/store/sqlite"
)

// flushCost measures one statistics flush of a default App whose n
// schedules each recorded a result since the last one: CPU and the
// store's statements and transactions per flush (median of tries).
func flushCost(n, tries int) (cpu time.Duration, statements, txs int64, err error) {
	dir, err := os.MkdirTemp("", "fom-bench-flush")
	if err != nil {
		return 0, 0, 0, err
	}
	defer os.RemoveAll(dir)
	clk := clockwork.NewFakeClock() // the app's own flush loop never ticks
	app, err := fom.New(fom.WithDataDir(dir), fom.WithClock(clk))
	if err != nil {
		return 0, 0, 0, err
	}
	scs := make([]*fom.ScheduleContext, n)
	for i := range n {
		if scs[i], err = app.Register(&memJob{}, fom.Named(fmt.Sprintf("flush-%d", i))); err != nil {
			return 0, 0, 0, err
		}
	}
	defer app.Stop(context.Background())
	st, _ := app.Store()
	sq := st.(*sqlite.Store)
	var cpus []time.Duration
	// The first flush also applies retention (hourly after that), and the
	// history's slots fill during the first lap (ten flushes of five
	// rounds with the default 50 rounds kept); from then on a page
	// replaces one, as in an app that has run for a minute. Only the
	// flushes after the lap are measured.
	const lap = 10
	for try := 0; try < lap+tries; try++ {
		// What a schedule firing every second records between two flushes
		// (5 s): five rounds of its Run task (named after the schedule),
		// each with its history record.
		now := clk.Now()
		for _, sc := range scs {
			for r := range 5 {
				at := now.Add(time.Duration(r) * time.Second)
				sc.Stats().Record(statistics.Sample{TaskID: sc.Name(), Status: statistics.Success, Cost: time.Millisecond})
				sc.Stats().RecordRound(statistics.RoundSample{Number: int64(r + 1), Cause: "plan", Planned: at, Start: at, End: at.Add(time.Millisecond),
					Tasks: []statistics.TaskSample{{ID: sc.Name(), Status: statistics.Success, Started: at, Cost: time.Millisecond}}})
			}
		}
		c0, k0 := cpuTime(), sq.Counters()
		if err := app.FlushStats(context.Background()); err != nil {
			return 0, 0, 0, err
		}
		c1, k1 := cpuTime(), sq.Counters()
		if try >= lap {
			cpus = append(cpus, c1-c0)
			statements, txs = k1.Statements-k0.Statements, k1.Transactions-k0.Transactions
		}
	}
	slices.Sort(cpus)
	return cpus[len(cpus)/2], statements, txs, nil
}

// flushScenario measures one flush at each of ns schedules, hot, and with
// live > 0 also the flush of a running App of live schedules (about 75 s).
func flushScenario(ns []int, live int, log func(string)) string {
	hot := map[int]time.Duration{}
	var out strings.Builder
	out.WriteString("### One statistics flush of a default App (every schedule ran five one-task rounds; median of 5)\n\n| schedules | CPU per flush | per schedule | statements | transactions |\n|---|---|---|---|---|\n")
	for _, n := range ns {
		cpu, stmts, txs, err := flushCost(n, 5)
		if err != nil {
			fmt.Fprintf(&out, "| %d | failed: %v | | | |\n", n, err)
			continue
		}
		hot[n] = cpu
		log(fmt.Sprintf("  flush N=%d: %s, %d statements, %d transactions", n, us(cpu), stmts, txs))
		fmt.Fprintf(&out, "| %d | %s | %s | %d | %d |\n", n, ms(cpu), us(cpu/time.Duration(n)), stmts, txs)
	}
	out.WriteString("\n")
	if live > 0 {
		out.WriteString("### The flush of a running App (schedules firing every second, a flush every 5 s half-way between bursts; median)\n\n| schedules | first lap of the history: CPU per flush | per schedule | after it | per schedule | the same flush hot (above) |\n|---|---|---|---|---|---|\n")
		for _, n := range ns {
			if n != live {
				continue
			}
			lap, steady, err := liveFlushCost(n, 14)
			if err != nil {
				fmt.Fprintf(&out, "| %d | failed: %v | | | | |\n", n, err)
				continue
			}
			log(fmt.Sprintf("  live flush N=%d: first lap %s, after it %s", n, us(lap), us(steady)))
			fmt.Fprintf(&out, "| %d | %s | %s | %s | %s | %s |\n", n, ms(lap), us(lap/time.Duration(n)), ms(steady), us(steady/time.Duration(n)), ms(hot[n]))
		}
		out.WriteString("\n")
	}
	return out.String()
}

// liveFlushCost measures the statistics flush of a running default App:
// n schedules firing every second on the real clock (fixedRate 1s, all on
// the same instants), flushed every five seconds half-way between two
// bursts. The app's own flush ticker is set aside (an hour), so that the
// scenario chooses the instant and measures the process CPU of the flush
// alone. It returns the median CPU per flush during the history's first
// lap (each flush writes new rows) and after it (rows rewritten), the
// steady state of an app that has run for a minute.
//
// The flush above (flushCost) runs right after the rounds were recorded,
// with the data it reads still in the CPU's caches; in an app a flush
// comes after most of a second of other work or of idling, and its data
// is cold.
func liveFlushCost(n, flushes int) (firstLap, steady time.Duration, err error) {
	dir, err := os.MkdirTemp("", "fom-bench-liveflush")
	if err != nil {
		return 0, 0, err
	}
	defer os.RemoveAll(dir)
	app, err := fom.New(fom.WithDataDir(dir), fom.WithFlushInterval(time.Hour))
	if err != nil {
		return 0, 0, err
	}
	var done atomic.Int64
	if err := startMemJobs(app, n, "live", &done); err != nil {
		return 0, 0, err
	}
	defer app.Stop(context.Background())
	start := time.Now()
	// The first flush applies the retention too (then hourly): made
	// before the first round, it is not measured.
	if err := app.FlushStats(context.Background()); err != nil {
		return 0, 0, err
	}
	const lap = 10 // flushes of five rounds that fill the 50 rounds kept
	var lapCPU, steadyCPU []time.Duration
	for i := 1; i <= flushes; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(5*i)*time.Second + 500*time.Millisecond)))
		c0 := cpuTime()
		if err := app.FlushStats(context.Background()); err != nil {
			return 0, 0, err
		}
		c := cpuTime() - c0
		if i <= lap {
			lapCPU = append(lapCPU, c)
		} else {
			steadyCPU = append(steadyCPU, c)
		}
	}
	if got := done.Load(); got < int64(n*5*flushes*9/10) {
		return 0, 0, fmt.Errorf("%d rounds ran in %d flush periods of %d schedules", got, flushes, n)
	}
	return percentile(lapCPU, 0.5), percentile(steadyCPU, 0.5), nil
}
