package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
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
		// (5 s): five one-task rounds, each with its history record.
		now := clk.Now()
		for _, sc := range scs {
			for r := range 5 {
				at := now.Add(time.Duration(r) * time.Second)
				sc.Stats().Record(statistics.Sample{TaskID: "t", Status: statistics.Success, Cost: time.Millisecond})
				sc.Stats().RecordRound(statistics.RoundSample{Number: int64(r + 1), Cause: "plan", Planned: at, Start: at, End: at.Add(time.Millisecond),
					Tasks: []statistics.TaskSample{{ID: "t", Status: statistics.Success, Started: at, Cost: time.Millisecond}}})
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

func flushScenario(ns []int, log func(string)) string {
	var out strings.Builder
	out.WriteString("### One statistics flush of a default App (every schedule ran five one-task rounds; median of 5)\n\n| schedules | CPU per flush | per schedule | statements | transactions |\n|---|---|---|---|---|\n")
	for _, n := range ns {
		cpu, stmts, txs, err := flushCost(n, 5)
		if err != nil {
			fmt.Fprintf(&out, "| %d | failed: %v | | | |\n", n, err)
			continue
		}
		log(fmt.Sprintf("  flush N=%d: %s, %d statements, %d transactions", n, us(cpu), stmts, txs))
		fmt.Fprintf(&out, "| %d | %s | %s | %d | %d |\n", n, ms(cpu), us(cpu/time.Duration(n)), stmts, txs)
	}
	out.WriteString("\n")
	return out.String()
}
