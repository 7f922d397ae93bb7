package fom

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store/postgres"
)

// statsChildEnv makes the test binary an App that runs a task and flushes
// its statistics, over and over, printing "flushed N" after the flush of
// the Nth task: "schema instance-id".
const statsChildEnv = "FOM_STATS_CHILD"

func statsChild(spec string) {
	schema, id, _ := strings.Cut(spec, " ")
	ctx := context.Background()
	fail := func(err error) {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	st, err := postgres.Open(ctx, pgtest.DSN(), postgres.WithSchema(schema))
	if err != nil {
		fail(err)
	}
	app, err := New(WithStore(st), WithInstanceID(id))
	if err != nil {
		fail(err)
	}
	sc, err := app.Register(&clusterJob{log: newFireLog(), instance: id}, Named("pool"))
	if err != nil {
		fail(err)
	}
	if err := app.Start(ctx); err != nil {
		fail(err)
	}
	task := TaskFunc("t", func(context.Context) (any, error) { return nil, nil })
	for n := 1; ; n++ {
		b, err := sc.Submit(ctx, task)
		if err != nil {
			fail(err)
		}
		b.Wait(ctx)
		if err := app.FlushStats(ctx); err != nil {
			fail(err)
		}
		fmt.Println("flushed", n)
	}
}

// TestFlushedStatisticsSurviveSIGKILL: an App in a child process runs
// tasks and flushes its statistics, each flush a row of the statistics
// log and, past store.LogFlushes, a push-out; killed with SIGKILL at a
// random flush, every task whose flush returned is counted by another
// instance (at most one more: a flush that committed as the kill came),
// read through the logs and the tables.
func TestFlushedStatisticsSurviveSIGKILL(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a child process")
	}
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx := context.Background()
	reader := startInstance(t, schema, "reader", newFireLog(), map[string]map[string]string{"pool": {}})
	defer stopInstance(t, reader)
	cmd, out := startChild(t, statsChildEnv+"="+schema+" child")
	lines := bufio.NewScanner(out)
	flushed := 0
	var err error
	read := func() bool {
		if !lines.Scan() {
			return false
		}
		n, ok := strings.CutPrefix(lines.Text(), "flushed ")
		if !ok {
			t.Fatalf("child: %q", lines.Text())
		}
		if flushed, err = strconv.Atoi(n); err != nil {
			t.Fatalf("child: %q", lines.Text())
		}
		return true
	}
	kill := 40 + rand.IntN(40)
	for flushed < kill && read() {
	}
	if flushed < kill {
		t.Fatalf("the child flushed %d times, then: %v", flushed, cmd.Wait())
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for read() { // what it printed before the kill
	}
	cmd.Wait()
	days, err := reader.ClusterDays(ctx, "pool")
	if err != nil {
		t.Fatal(err)
	}
	if len(days) == 0 {
		t.Fatal("no day read")
	}
	got := days[len(days)-1].Count
	if got < int64(flushed) || got > int64(flushed)+1 {
		t.Fatalf("the killed instance's tasks counted: %d, want %d flushed (or one more)", got, flushed)
	}
	var logged int
	pool.QueryRow(ctx, "SELECT count(*) FROM "+schema+".stats_log WHERE instance = 'child'").Scan(&logged)
	t.Logf("killed after %d flushes; %d counted, %d rows of its log left", flushed, got, logged)
}
