package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fom-go/fom/internal/pgtest"
)

// TestFailoverBetweenProcesses runs the example as three processes (each
// on a free port), kills the owner of "sync" with SIGKILL and watches a
// survivor record and run its next fires, as the README tells a reader to.
func TestFailoverBetweenProcesses(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	bin := filepath.Join(t.TempDir(), "cluster")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	procs := map[string]*exec.Cmd{}
	addrs := map[string]string{}
	for _, id := range []string{"a", "b", "c"} {
		cmd := exec.CommandContext(ctx, bin, "-id", id, "-addr", "127.0.0.1:0", "-schema", schema, "-lease-ttl", "3s")
		cmd.Env = append(os.Environ(), "FOM_DATABASE_URL="+pgtest.DSN())
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		procs[id] = cmd
		addrs[id] = readAddr(t, stdout)
	}
	owner := func(via string) string {
		res, err := http.Get("http://" + addrs[via] + "/fom/api/cluster")
		if err != nil {
			return ""
		}
		defer res.Body.Close()
		var env struct {
			Data struct {
				Owners map[string]string `json:"owners"`
			} `json:"data"`
		}
		if json.NewDecoder(res.Body).Decode(&env) != nil {
			return ""
		}
		return env.Data.Owners["sync"]
	}
	var victim string
	waitUntil(t, 20*time.Second, "sync has an owner", func() bool { victim = owner("a"); return victim != "" })
	killedAt := time.Now()
	if err := procs[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	procs[victim].Wait()
	var survivor string
	for id := range procs {
		if id != victim {
			survivor = id
		}
	}
	// Within the lease TTL and a renewal, a survivor owns sync and records
	// its fires.
	var taker string
	waitUntil(t, 15*time.Second, "a survivor takes sync over", func() bool {
		taker = owner(survivor)
		return taker != "" && taker != victim
	})
	waitUntil(t, 10*time.Second, "the new owner records a fire of sync", func() bool {
		var n int
		err := pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM %s.fire_records WHERE schedule = 'sync' AND owner = $1 AND planned > $2", schema), taker, killedAt).Scan(&n)
		return err == nil && n > 0
	})
	// Each planned fire was recorded once, by one instance.
	var dup int
	if err := pool.QueryRow(ctx, fmt.Sprintf("SELECT count(*) FROM (SELECT schedule, planned FROM %s.fire_records GROUP BY 1, 2 HAVING count(*) > 1) d", schema)).Scan(&dup); err != nil || dup != 0 {
		t.Fatalf("duplicated fires: %d (%v)", dup, err)
	}
	t.Logf("killed %s, %s took sync over after %s", victim, taker, time.Since(killedAt).Round(100*time.Millisecond))
	// A graceful stop of a survivor exits 0.
	procs[survivor].Process.Signal(os.Interrupt)
	if err := procs[survivor].Wait(); err != nil {
		t.Fatalf("graceful stop of %s: %v", survivor, err)
	}
}

var addrLine = regexp.MustCompile(`admin page http://([^/]+)/fom/`)

// readAddr reads the instance's admin address from its output.
func readAddr(t *testing.T, r io.Reader) string {
	t.Helper()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			if m := addrLine.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, r)
	}()
	select {
	case a := <-found:
		return a
	case <-time.After(60 * time.Second):
		t.Fatal("the instance did not print its admin address")
		return ""
	}
}

func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !cond(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
	}
}

func TestFlags(t *testing.T) {
	s, err := parse([]string{"-id", "x", "-addr", "127.0.0.1:0", "-schema", "s", "-lease-ttl", "3s"}, io.Discard)
	if err != nil || s.id != "x" || s.addr != "127.0.0.1:0" || s.schema != "s" || s.leaseTTL != 3*time.Second {
		t.Fatalf("%+v %v", s, err)
	}
	if _, err := parse([]string{"extra"}, io.Discard); err == nil || !strings.Contains(err.Error(), "unexpected arguments") {
		t.Fatalf("got %v", err)
	}
}
