package timer

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fom-go/fom/internal/pgtest"
	"github.com/fom-go/fom/store/postgres"
)

// The crash tests run internal/timercrash, built without the race
// detector (it would slow SQLite, compiled from C, twentyfold), as a child
// process, kill it with SIGKILL midway and count, from the log its
// handler appends to, what was delivered.

const childEnv = "FOM_TIMER_CRASH_CHILD"

var childBin = struct {
	once sync.Once
	path string
	err  error
}{}

// crashBinary builds internal/timercrash once for the test binary.
func crashBinary(t *testing.T) string {
	t.Helper()
	childBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "fom-timercrash-")
		if err != nil {
			childBin.err = err
			return
		}
		childBin.path = filepath.Join(dir, "timercrash")
		out, err := exec.Command("go", "build", "-o", childBin.path, "github.com/fom-go/fom/internal/timercrash").CombinedOutput()
		if err != nil {
			childBin.err = fmt.Errorf("build the crash child: %v\n%s", err, out)
		}
	})
	if childBin.err != nil {
		t.Fatal(childBin.err)
	}
	return childBin.path
}

// startChild starts a child and waits until its service started.
func startChild(t *testing.T, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(crashBinary(t))
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	started := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		ok := false
		for sc.Scan() {
			if sc.Text() == "started" && !ok {
				ok = true
				started <- true
			}
		}
		if !ok {
			started <- false
		}
	}()
	select {
	case ok := <-started:
		if !ok {
			t.Fatal("the child exited before it started")
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the child did not start")
	}
	return cmd
}

type delivery struct{ planned, at int64 }

// readLog reads the deliveries by key.
func readLog(t *testing.T, path string) map[string][]delivery {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]delivery{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var key string
		var d delivery
		if n, _ := fmt.Sscanf(sc.Text(), "%s %d %d", &key, &d.planned, &d.at); n == 3 {
			out[key] = append(out[key], d)
		}
	}
	return out
}

// check fails on a fire delivered early, on one of want not delivered,
// and on more duplicates than maxDup; it returns the duplicates.
func check(t *testing.T, got map[string][]delivery, want int, disabled map[string]bool, maxDup int) (dups int) {
	t.Helper()
	delivered := 0
	for key, ds := range got {
		id, _, _ := strings.Cut(key, ":")
		if disabled[id] {
			t.Errorf("%s delivered after its timer was disabled", key)
		}
		for _, d := range ds {
			if d.at < d.planned {
				t.Errorf("%s delivered %d ms early", key, d.planned-d.at)
			}
		}
		delivered++
		dups += len(ds) - 1
	}
	if delivered != want-len(disabled) {
		t.Errorf("%d fires delivered, want %d", delivered, want-len(disabled))
	}
	if dups > maxDup {
		t.Errorf("%d fires delivered twice, more than the %d that can have been running at the kill", dups, maxDup)
	}
	return dups
}

// TestTimerCrashSQLite: a child with 10 000 timers due over 20 s is killed
// with SIGKILL midway and started again (disabling 50 timers first): every
// fire is delivered, none early, none of a disabled timer, duplicates only
// for fires that were running at the kill.
func TestTimerCrashSQLite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "deliveries")
	const n = 10000
	first := time.Now().Add(3 * time.Second)
	env := []string{childEnv + "=sqlite:" + dir, "FOM_TIMER_LOG=" + logPath, "FOM_TIMER_INSTANCE=one"}
	child := startChild(t, append(env, fmt.Sprintf("FOM_TIMER_CREATE=%d:%d:%d", n, first.UnixMilli(), 20000))...)
	time.Sleep(time.Until(first.Add(9 * time.Second)))
	child.Process.Signal(syscall.SIGKILL)
	child.Wait()
	before := readLog(t, logPath)
	child = startChild(t, append(env, "FOM_TIMER_DISABLE=50")...)
	time.Sleep(time.Until(first.Add(22 * time.Second)))
	child.Process.Signal(syscall.SIGTERM)
	if err := child.Wait(); err != nil {
		t.Fatalf("graceful stop: %v", err)
	}
	disabled := map[string]bool{}
	if b, err := os.ReadFile(logPath + ".disabled"); err == nil {
		for _, id := range strings.Fields(string(b)) {
			disabled[id] = true
		}
	}
	if len(disabled) != 50 {
		t.Fatalf("%d timers disabled, want 50", len(disabled))
	}
	got := readLog(t, logPath)
	dups := check(t, got, n, disabled, 100)
	t.Logf("%d delivered before the kill, %d in all, %d twice", len(before), len(got), dups)
}

// TestTimerKillOneOfTwoInstances: on PostgreSQL, one of two instances is
// killed with SIGKILL while 10 000 timers fall due over 20 s: the other
// delivers every fire (the dead one's claims and attempts taken over when
// their leases end), none early.
func TestTimerKillOneOfTwoInstances(t *testing.T) {
	t.Parallel()
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	dir := t.TempDir()
	const n = 10000
	first := time.Now().Add(4 * time.Second)
	st, err := postgres.Open(context.Background(), pgtest.DSN(), postgres.WithSchema(schema))
	if err != nil {
		t.Fatal(err)
	}
	creator, _ := New(Options{Store: st, Instance: "creator"})
	creator.Handle("crash", func(context.Context, Fire) error { return nil })
	specs := make([]Spec, n)
	for i := range specs {
		specs[i] = Spec{Name: "t" + strconv.Itoa(i), Kind: "crash", At: first.Add(time.Duration(20000*int64(i)/n) * time.Millisecond)}
	}
	if _, err := creator.CreateMany(context.Background(), specs); err != nil {
		t.Fatal(err)
	}
	st.Close()
	logs := []string{filepath.Join(dir, "a"), filepath.Join(dir, "b")}
	a := startChild(t, childEnv+"=postgres:"+schema, "FOM_TIMER_LOG="+logs[0], "FOM_TIMER_INSTANCE=a")
	b := startChild(t, childEnv+"=postgres:"+schema, "FOM_TIMER_LOG="+logs[1], "FOM_TIMER_INSTANCE=b")
	time.Sleep(time.Until(first.Add(9 * time.Second)))
	killed := time.Now()
	a.Process.Signal(syscall.SIGKILL)
	a.Wait()
	time.Sleep(time.Until(first.Add(24 * time.Second)))
	b.Process.Signal(syscall.SIGTERM)
	if err := b.Wait(); err != nil {
		t.Fatalf("graceful stop of b: %v", err)
	}
	got := readLog(t, logs[0])
	fromB := readLog(t, logs[1])
	late := int64(0)
	for k, ds := range fromB {
		got[k] = append(got[k], ds...)
		for _, d := range ds {
			if d.planned < killed.UnixMilli() && d.planned > killed.UnixMilli()-3000 {
				late = max(late, d.at-d.planned)
			}
		}
	}
	dups := check(t, got, n, nil, 200)
	// The dead instance's claims end with their leases (2 s past due) and
	// are taken at the next poll: within lease + poll + a margin.
	if late > 5000 {
		t.Errorf("a fire the dead instance held was delivered %d ms late, past its lease", late)
	}
	t.Logf("%d delivered by a before the kill, %d by b; %d twice; the taken-over fires at most %d ms late", len(readLog(t, logs[0])), len(fromB), dups, late)
}
