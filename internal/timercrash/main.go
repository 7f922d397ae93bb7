// Command timercrash is the child process of package timer's crash
// tests: a timer service that the test kills with SIGKILL midway. It is
// no tool of fom's; see timer/crash_test.go.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store"
	"github.com/fom-go/fom/store/postgres"
	"github.com/fom-go/fom/store/sqlite"
	"github.com/fom-go/fom/timer"
)

func main() { crashChild(os.Getenv("FOM_TIMER_CRASH_CHILD")) }

// crashChild runs a timer service as the parent asks, until SIGTERM:
// FOM_TIMER_CRASH_CHILD is "sqlite:<dir>" or "postgres:<schema>";
// FOM_TIMER_CREATE, when set, is "<n>:<first due ms>:<spread ms>", timers
// to create first; FOM_TIMER_DISABLE, a count of them to disable before
// starting (their ids written to <log>.disabled); FOM_TIMER_LOG, where
// each delivery is appended: "key planned_ms delivered_ms".
func crashChild(spec string) {
	ctx := context.Background()
	kind, arg, _ := strings.Cut(spec, ":")
	var st store.TimerStore
	switch kind {
	case "sqlite":
		s, err := sqlite.Open(ctx, arg)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		defer s.Close()
		st = s
	default:
		s, err := postgres.Open(ctx, pgtest.DSN(), postgres.WithSchema(arg))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		defer s.Close()
		st = s
	}
	logPath := os.Getenv("FOM_TIMER_LOG")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		os.Exit(3)
	}
	svc, err := timer.New(timer.Options{Store: st, Instance: os.Getenv("FOM_TIMER_INSTANCE"), Lease: 2 * time.Second, Window: time.Second, Poll: 100 * time.Millisecond})
	if err != nil {
		os.Exit(3)
	}
	svc.Handle("crash", func(ctx context.Context, f timer.Fire) error {
		now := time.Now()
		// One write a delivery: whole lines survive a SIGKILL.
		fmt.Fprintf(lf, "%s %d %d\n", f.Key, f.Planned.UnixMilli(), now.UnixMilli())
		return nil
	}, timer.WithTimeout(time.Second))
	if c := os.Getenv("FOM_TIMER_CREATE"); c != "" {
		parts := strings.Split(c, ":")
		n, _ := strconv.Atoi(parts[0])
		first, _ := strconv.ParseInt(parts[1], 10, 64)
		spread, _ := strconv.ParseInt(parts[2], 10, 64)
		specs := make([]timer.Spec, n)
		for i := range specs {
			specs[i] = timer.Spec{Name: "t" + strconv.Itoa(i), Kind: "crash", At: time.UnixMilli(first + spread*int64(i)/int64(n))}
		}
		if _, err := svc.CreateMany(ctx, specs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
	}
	if d := os.Getenv("FOM_TIMER_DISABLE"); d != "" {
		n, _ := strconv.Atoi(d)
		df, _ := os.Create(logPath + ".disabled")
		cut := time.Now().Add(3 * time.Second)
		for cursor := ""; n > 0; {
			ts, next, err := svc.List(ctx, timer.Filter{State: "enabled", Limit: 1000, Cursor: cursor})
			if err != nil {
				os.Exit(3)
			}
			for _, tm := range ts {
				if n > 0 && tm.At.After(cut) {
					if err := svc.Disable(ctx, tm.ID); err != nil {
						os.Exit(3)
					}
					fmt.Fprintln(df, tm.ID)
					n--
				}
			}
			if next == "" {
				break
			}
			cursor = next
		}
		df.Close()
	}
	if err := svc.Start(ctx); err != nil {
		os.Exit(3)
	}
	fmt.Println("started")
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	<-sig
	sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	svc.Stop(sctx)
	os.Exit(0)
}
