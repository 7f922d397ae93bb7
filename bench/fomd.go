package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The fomd scenario: N one-shot timers created through the REST API (in
// batches of 1 000), due evenly over a window that begins once they are
// all created, delivered as signed HTTP callbacks to a receiver on
// loopback in this process. fomd runs as users run it: the built binary,
// on SQLite, and on PostgreSQL with one and with three instances (the
// creates spread over them). Reported: creates a second, deliveries,
// duplicates, lateness (arrival less the Fom-Planned header) and the fomd
// processes' CPU per delivery (from /proc; PostgreSQL's own not included).

type fomdRun struct {
	name            string
	n               int
	creates         float64
	delivered, dups int
	p50, p99, max   time.Duration
	cpu             time.Duration
	err             string
}

// fomdChild is one fomd process.
type fomdChild struct {
	cmd *exec.Cmd
	url string
}

var fomdURL = regexp.MustCompile(`serving on (http://127\.0\.0\.1:\d+)`)

func startFomd(bin string, args ...string) (*fomdChild, error) {
	cmd := exec.Command(bin, append([]string{"--addr", "127.0.0.1:0", "--allow-cidrs", "127.0.0.0/8", "--max-concurrent", "2000"}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if m := fomdURL.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if ok {
			return &fomdChild{cmd: cmd, url: u}, nil
		}
	case <-time.After(30 * time.Second):
	}
	cmd.Process.Kill()
	cmd.Wait()
	return nil, fmt.Errorf("fomd did not start: %s", stderr.String())
}

func (c *fomdChild) stop() {
	c.cmd.Process.Signal(os.Interrupt)
	done := make(chan struct{})
	go func() { c.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(40 * time.Second):
		c.cmd.Process.Kill()
		<-done
	}
}

// cpu is the process's user and system time so far.
func (c *fomdChild) cpu() time.Duration {
	d, _ := procCPU(c.cmd.Process.Pid)
	return d
}

func fomdScenario(dsn string, n int, spread time.Duration, log func(string)) string {
	dir, err := os.MkdirTemp("", "fom-bench-fomd-")
	if err != nil {
		return "fomd: " + err.Error() + "\n"
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "fomd")
	build := exec.Command("go", "build", "-o", bin, "./cmd/fomd")
	build.Dir = ".."
	if out, err := build.CombinedOutput(); err != nil {
		return fmt.Sprintf("fomd: build: %v\n%s\n", err, out)
	}
	setups := []struct {
		name      string
		instances int
		pg        bool
	}{{"fomd, SQLite", 1, false}, {"fomd, PostgreSQL, 1 instance", 1, true}, {"fomd, PostgreSQL, 3 instances", 3, true}}
	var runs []fomdRun
	for _, su := range setups {
		log(fmt.Sprintf("fomd: %s, %d timers over %s", su.name, n, spread))
		runs = append(runs, fomdOnce(bin, dir, dsn, su.name, su.instances, su.pg, n, spread))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n### fomd: %d one-shot HTTP callbacks due over %s\n\n", n, spread)
	b.WriteString("| setup | creates/s | delivered | duplicates | p50 | p99 | max | fomd CPU per delivery |\n|---|---|---|---|---|---|---|---|\n")
	for _, r := range runs {
		if r.err != "" {
			fmt.Fprintf(&b, "| %s | error: %s |||||||\n", r.name, r.err)
			continue
		}
		fmt.Fprintf(&b, "| %s | %.0f | %d / %d | %d | %s | %s | %s | %s |\n", r.name, r.creates, r.delivered, r.n, r.dups,
			ms(r.p50), ms(r.p99), ms(r.max), r.cpu)
	}
	return b.String()
}

func fomdOnce(bin, dir, dsn, name string, instances int, pg bool, n int, spread time.Duration) fomdRun {
	run := fomdRun{name: name, n: n}
	rec := newRecorder(n)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		run.err = err.Error()
		return run
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		planned, _ := time.Parse(time.RFC3339Nano, r.Header.Get("Fom-Planned"))
		rec.note(r.Header.Get("Idempotency-Key"), planned)
		w.WriteHeader(204)
	})}
	go srv.Serve(ln)
	defer srv.Close()
	token := "bench-admin-token-" + randomSchema("")
	var children []*fomdChild
	defer func() {
		for _, c := range children {
			c.stop()
		}
	}()
	schema := randomSchema("fombench_fomd_")
	for i := range instances {
		args := []string{"--admin-token", token, "--instance-id", fmt.Sprintf("i%d", i)}
		if pg {
			args = append(args, "--database-url", dsn, "--schema", schema, "--data-dir", filepath.Join(dir, "pg"))
		} else {
			args = append(args, "--data-dir", filepath.Join(dir, "sqlite-"+randomSchema("")))
		}
		c, err := startFomd(bin, args...)
		if err != nil {
			run.err = err.Error()
			return run
		}
		children = append(children, c)
	}
	if pg {
		defer dropSchema(dsn, schema)
	}
	// Creates: batches of 1 000, four at a time, over the instances. The
	// window begins after them, so a slow create never makes a fire late.
	created := time.Now()
	start := created.Add(time.Duration(n/5000+5) * time.Second) // creates run at 15-19 k/s here
	url := "http://" + ln.Addr().String() + "/cb"
	var wg sync.WaitGroup
	errs := make(chan error, n/1000+1)
	sem := make(chan struct{}, 4)
	for lo := 0; lo < n; lo += 1000 {
		wg.Add(1)
		sem <- struct{}{}
		go func(lo int) {
			defer wg.Done()
			defer func() { <-sem }()
			var ts []map[string]any
			for i := lo; i < min(lo+1000, n); i++ {
				at := start.Add(time.Duration(int64(spread) * int64(i) / int64(n)))
				ts = append(ts, map[string]any{"namespace": "default", "name": "t" + strconv.Itoa(i), "at": at.UTC().Format(time.RFC3339Nano),
					"callback": map[string]any{"url": url, "body": map[string]any{"i": i}}})
			}
			body, _ := json.Marshal(map[string]any{"timers": ts})
			req, _ := http.NewRequest("POST", children[(lo/1000)%len(children)].url+"/api/v1/timers/batch", bytes.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err
				return
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 201 {
				errs <- fmt.Errorf("batch: %d %s", resp.StatusCode, raw)
			}
		}(lo)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		run.err = err.Error()
		return run
	}
	run.creates = float64(n) / time.Since(created).Seconds()
	if time.Now().After(start) {
		run.err = fmt.Sprintf("creates took %s, past the window's start", time.Since(created))
		return run
	}
	time.Sleep(time.Until(start))
	cpu0 := time.Duration(0)
	for _, c := range children {
		cpu0 += c.cpu()
	}
	rec.wait(spread + 60*time.Second)
	time.Sleep(time.Second) // late duplicates
	cpu1 := time.Duration(0)
	for _, c := range children {
		cpu1 += c.cpu()
	}
	var tr timerRun
	rec.result(&tr)
	run.delivered, run.dups, run.p50, run.p99, run.max = tr.delivered, tr.dups, tr.p50, tr.p99, tr.max
	if tr.delivered > 0 {
		run.cpu = (cpu1 - cpu0) / time.Duration(tr.delivered)
	}
	return run
}
