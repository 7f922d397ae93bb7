package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/fom-go/fom/fom"
)

// crashChildEnv makes the test binary a child app serving the admin API
// on the data directory it names.
const crashChildEnv = "FOM_CRASH_CHILD_DIR"

// crashChild runs an app with the admin API, prints its address and waits
// to be killed.
func crashChild(dir string) {
	app, err := fom.New(fom.WithDataDir(dir))
	if err == nil {
		_, err = app.Register(&alpha{})
	}
	if err == nil {
		err = app.Start(context.Background())
	}
	var h http.Handler
	if err == nil {
		h, err = NewHandler(app, Options{})
	}
	var ln net.Listener
	if err == nil {
		ln, err = net.Listen("tcp", "127.0.0.1:0")
	}
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("listening", ln.Addr())
	http.Serve(ln, h)
	os.Exit(3)
}

// TestConfigEditSurvivesKill9 edits a config over HTTP and SIGKILLs the
// process the moment the 200 arrives: the edit is there at the next start.
func TestConfigEditSurvivesKill9(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts child processes")
	}
	dir := t.TempDir()
	for i := range 5 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+dir)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line, err := bufio.NewReader(out).ReadString('\n')
		addr, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
		if err != nil || !ok {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("child %d: %q %v", i, line, err)
		}
		want := fmt.Sprintf("edit-%d", i)
		req, _ := http.NewRequest("PATCH", "http://"+addr+"/fom/api/schedules/alpha/config", strings.NewReader(`{"remark":"`+want+`","size":"`+fmt.Sprint(100+i)+`"}`))
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err == nil && res.StatusCode == 200 {
			cmd.Process.Signal(syscall.SIGKILL) // right after the 200
		}
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		res.Body.Close()
		cmd.Process.Kill()
		cmd.Wait()
		if res.StatusCode != 200 {
			t.Fatalf("edit %d: %d %s", i, res.StatusCode, body)
		}

		app, err := fom.New(fom.WithDataDir(dir))
		if err != nil {
			t.Fatal(err)
		}
		sc, err := app.Register(&alpha{})
		if err != nil {
			t.Fatalf("restart after kill -9: %v", err)
		}
		if got := sc.Config().Get("remark"); got != want || sc.Config().Get("size") != fmt.Sprint(100+i) {
			t.Fatalf("after kill -9: remark %q size %q, want %q and %d", got, sc.Config().Get("size"), want, 100+i)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		err = app.Stop(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
	}
}
