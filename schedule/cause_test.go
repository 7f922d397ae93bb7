package schedule

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// TestRoundCauses: each round says what started it and who asked: the
// start's execOnLoad round, the plan's fire, an exec-now while sleeping,
// an exec-now queued during a round (a re-run), and an ad-hoc batch; the
// run history records the same.
func TestRoundCauses(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string
	hold := make(chan chan struct{}, 1) // a round takes a gate from here when there is one
	h := newHarness(t, map[string]string{"fixedRate": "10s", "execOnLoad": "true", "ignoreExecRequestWhenRunning": "false"}, Job{
		Tasks: func(context.Context) ([]Task, error) {
			select {
			case g := <-hold:
				return []Task{TaskFunc("held", func(context.Context) (any, error) { <-g; return nil, nil })}, nil
			default:
				return []Task{ok("t")}, nil
			}
		},
		OnComplete: func(_ context.Context, r Round) {
			mu.Lock()
			got = append(got, fmt.Sprintf("%d:%s:%s", r.Number, r.Cause, r.By))
			mu.Unlock()
		},
	})
	c := h.c
	if err := c.Startup(); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(1)
	h.clk.Advance(10 * time.Second)
	h.waitSleeping(2)
	if err := c.ExecNowBy("alice"); err != nil {
		t.Fatal(err)
	}
	h.waitSleeping(3)
	g := make(chan struct{})
	hold <- g
	if err := c.ExecNow(); err != nil { // round 4, holding
		t.Fatal(err)
	}
	h.waitState(Running)
	if err := c.ExecNowBy("bob"); err != nil { // queued: round 5 right after
		t.Fatal(err)
	}
	close(g)
	h.waitSleeping(5)
	b, err := c.Submit(context.Background(), ok("adhoc"))
	if err != nil {
		t.Fatal(err)
	}
	<-b.Done()
	mu.Lock()
	defer mu.Unlock()
	want := "[1:start: 2:plan: 3:exec:alice 4:exec: 5:rerun:bob 1:submit:]"
	if fmt.Sprint(got) != want {
		t.Fatalf("causes %v, want %s", got, want)
	}
	var hist []string
	for _, r := range c.Stats().RecentRounds() {
		hist = append(hist, fmt.Sprintf("%d:%s:%s", r.Number, r.Cause, r.By))
	}
	if fmt.Sprint(hist) != "[1:submit: 5:rerun:bob 4:exec: 3:exec:alice 2:plan: 1:start:]" {
		t.Fatalf("history %v", hist)
	}
}
