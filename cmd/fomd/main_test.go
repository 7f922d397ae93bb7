package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/fom-go/fom/internal/pgtest"
)

// These tests run fomd as a built binary (without the race detector:
// it is a child process here), kill it with SIGKILL and count what a
// receiver on loopback got.

func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "fomd")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

type proc struct {
	cmd *exec.Cmd
	url string
	log *bytes.Buffer
	mu  *sync.Mutex
}

var urlRE = regexp.MustCompile(`serving on (http://127\.0\.0\.1:\d+)`)

// launch starts fomd and waits for its banner.
func launch(t *testing.T, bin string, args ...string) proc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"--addr", "127.0.0.1:0", "--allow-cidrs", "127.0.0.0/8", "--lease", "2s"}, args...)...)
	cmd.Env = os.Environ()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := proc{cmd: cmd, log: &bytes.Buffer{}, mu: &sync.Mutex{}}
	cmd.Stderr = lockedWriter{p.mu, p.log}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if m := urlRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	select {
	case u, ok := <-found:
		if !ok {
			p.mu.Lock()
			defer p.mu.Unlock()
			t.Fatalf("fomd exited before serving: %s", p.log)
		}
		p.url = u
	case <-time.After(30 * time.Second):
		t.Fatal("fomd did not serve within 30s")
	}
	return p
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// deliveries records every callback by key, with when it came.
type deliveries struct {
	mu    sync.Mutex
	byKey map[string][]time.Time
	plan  map[string]time.Time // key -> planned, from Fom-Planned
	held  string               // the key of the fire held at the kill
}

func (d *deliveries) serve(w http.ResponseWriter, r *http.Request) {
	io.Copy(io.Discard, r.Body) // so that the server sees the sender's connection close
	key := r.Header.Get("Idempotency-Key")
	planned, _ := time.Parse(time.RFC3339Nano, r.Header.Get("Fom-Planned"))
	d.mu.Lock()
	d.byKey[key] = append(d.byKey[key], time.Now())
	d.plan[key] = planned
	hold := r.URL.Path == "/hold" && r.Header.Get("Fom-Attempt") == "1"
	if r.URL.Path == "/hold" {
		d.held = key
	}
	d.mu.Unlock()
	if hold {
		select { // until the sender gives up or dies
		case <-r.Context().Done():
		case <-time.After(20 * time.Second):
		}
		return
	}
	w.WriteHeader(204)
}

func (d *deliveries) count() (keys, calls int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, ts := range d.byKey {
		calls += len(ts)
	}
	return len(d.byKey), calls
}

func create(t *testing.T, base, token string, body map[string]any) string {
	t.Helper()
	j, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", base+"/api/v1/timers", bytes.NewReader(j))
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 201 {
		t.Fatalf("create: %d %s", resp.StatusCode, raw)
	}
	var out struct{ ID string }
	json.Unmarshal(raw, &out)
	return out.ID
}

// killScenario creates n one-shots due over spread in namespace default,
// the first held by the receiver (running at the kill), kills victim
// with SIGKILL midway, runs restart, and checks every fire was delivered,
// none early, duplicates only of fires that had begun.
func killScenario(t *testing.T, base, token string, n int, spread time.Duration, victim proc, restart func()) {
	d := &deliveries{byKey: map[string][]time.Time{}, plan: map[string]time.Time{}}
	rcv := httptest.NewServer(http.HandlerFunc(d.serve))
	defer rcv.Close()
	start := time.Now().Add(3 * time.Second) // after the creates
	for i := range n {
		due := start.Add(spread * time.Duration(i) / time.Duration(n)).UTC().Format(time.RFC3339Nano)
		cb := map[string]any{"url": rcv.URL + "/t", "body": map[string]any{"i": i}}
		if i == n/2-5 { // held by the receiver at the kill: delivered again, after its lease or its timeout
			cb["url"], cb["timeout"] = rcv.URL+"/hold", "1s"
		}
		create(t, base, token, map[string]any{"namespace": "default", "name": fmt.Sprintf("t%d", i), "at": due, "callback": cb})
	}
	time.Sleep(time.Until(start.Add(spread / 2)))
	before, _ := d.count()
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	victim.cmd.Wait()
	restart()
	deadline := time.Now().Add(60 * time.Second)
	for {
		keys, _ := d.count()
		d.mu.Lock()
		again := d.held != "" && len(d.byKey[d.held]) >= 2
		d.mu.Unlock()
		if keys == n && again {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d fires delivered within 60s of the kill (the held one again: %v)", keys, n, again)
		}
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(500 * time.Millisecond) // late duplicates, if any, arrive
	d.mu.Lock()
	defer d.mu.Unlock()
	dups := 0
	for key, ts := range d.byKey {
		if ts[0].Before(d.plan[key]) {
			t.Errorf("%s delivered at %s, before its planned %s", key, ts[0], d.plan[key])
		}
		dups += len(ts) - 1
	}
	t.Logf("%d fires, %d delivered before the kill, %d duplicates (the same key; a fire under way at the kill is delivered again)", n, before, dups)
}

func TestFomdKilledOnSQLiteDeliversEverythingAfterRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a binary")
	}
	bin := build(t)
	dir := t.TempDir()
	p := launch(t, bin, "--data-dir", dir)
	tok, err := os.ReadFile(filepath.Join(dir, "admin-token"))
	if err != nil {
		t.Fatal(err)
	}
	killScenario(t, p.url, strings.TrimSpace(string(tok)), 300, 4*time.Second, p, func() {
		launch(t, bin, "--data-dir", dir)
	})
}

func TestFomdOneOfTwoInstancesKilledOnPostgreSQL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and kills a binary")
	}
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	bin := build(t)
	tok := "admin-token-for-the-kill-test"
	args := func(id string) []string {
		return []string{"--database-url", pgtest.DSN(), "--schema", schema, "--admin-token", tok, "--instance-id", id, "--data-dir", t.TempDir()}
	}
	a := launch(t, bin, args("a")...)
	b := launch(t, bin, args("b")...)
	killScenario(t, b.url, tok, 300, 4*time.Second, a, func() {})
}

// SIGTERM stops fomd gracefully: exit status 0.
func TestFomdStopsOnSIGTERM(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	p := launch(t, build(t), "--data-dir", t.TempDir())
	resp, err := http.Get(p.url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("readyz: %d", resp.StatusCode)
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := p.cmd.Wait(); err != nil {
		p.mu.Lock()
		defer p.mu.Unlock()
		t.Fatalf("exit: %v\n%s", err, p.log)
	}
}
