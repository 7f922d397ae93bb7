// Command screenshots takes the README's pictures of the admin page from a
// real run of the quickstart: it builds and starts examples/quickstart in
// a scratch directory, lets its jobs run for a while (rounds, a failure, a
// timeout), asks for one round from the page as an operator would, and
// photographs the schedules table, a schedule page and the table on a
// phone with headless Chromium into docs/. Run it from the repository
// root with `make screenshots`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/chromedp/chromedp"
)

func main() {
	out := flag.String("out", "docs", "directory the pictures are written to")
	warm := flag.Duration("warm", 35*time.Second, "how long the quickstart runs before the pictures")
	flag.Parse()
	if err := run(*out, *warm); err != nil {
		log.Fatal("screenshots: ", err)
	}
}

func run(out string, warm time.Duration) error {
	scratch, err := os.MkdirTemp("", "fom-screenshots-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(scratch)
	bin := filepath.Join(scratch, "quickstart")
	if b, err := exec.Command("go", "build", "-o", bin, "./examples/quickstart").CombinedOutput(); err != nil {
		return fmt.Errorf("build the quickstart (run from the repository root): %v\n%s", err, b)
	}
	addr, err := freeAddr()
	if err != nil {
		return err
	}
	app := exec.Command(bin)
	app.Dir, app.Env = scratch, append(os.Environ(), "FOM_ADDR="+addr)
	logFile, err := os.Create(filepath.Join(scratch, "quickstart.log"))
	if err != nil {
		return err
	}
	app.Stdout, app.Stderr = logFile, logFile
	if err := app.Start(); err != nil {
		return err
	}
	defer func() {
		app.Process.Signal(syscall.SIGTERM)
		app.Wait()
	}()
	base := "http://" + addr + "/fom"
	if err := waitUp(base+"/", 30*time.Second); err != nil {
		b, _ := os.ReadFile(logFile.Name())
		return fmt.Errorf("%w\nquickstart log:\n%s", err, b)
	}
	log.Printf("quickstart up on %s; letting it run %s", base, warm)

	browser, err := chromium()
	if err != nil {
		return err
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.DisableGPU, chromedp.WindowSize(1280, 900))
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(func(format string, args ...any) {
		// This cdproto predates some enum values newer Chromium sends; those events are not ours.
		if msg := fmt.Sprintf(format, args...); !strings.Contains(msg, "could not unmarshal event") {
			log.Print("chromedp: " + msg)
		}
	}))
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, warm+2*time.Minute)
	defer cancelTimeout()

	// Half way through, an operator asks for an import round from the table.
	time.Sleep(warm / 2)
	if err := chromedp.Run(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(`[data-testid="schedules"]`, chromedp.ByQuery),
		chromedp.Click(`[data-testid="row-importOrders"] [data-testid="exec"]`, chromedp.ByQuery), chromedp.WaitVisible(`[data-testid="flash"]`, chromedp.ByQuery)); err != nil {
		return fmt.Errorf("exec now from the table: %w", err)
	}
	time.Sleep(warm - warm/2)

	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	shots := []struct {
		file, path, ready string
		w, h              int64
	}{
		{"schedules.png", "/", `[data-testid="schedules"]`, 1280, 900},
		{"schedule.png", "/schedules/importOrders", `[data-testid="history"]`, 1280, 900},
		{"schedules-phone.png", "/", `[data-testid="schedules"]`, 390, 844},
	}
	for _, s := range shots {
		var png []byte
		var flash string
		err := chromedp.Run(ctx, chromedp.EmulateViewport(s.w, s.h), chromedp.Navigate(base+s.path),
			chromedp.WaitVisible(s.ready, chromedp.ByQuery),
			chromedp.Evaluate(`(document.querySelector('.flash.error') || {}).textContent || ''`, &flash),
			chromedp.FullScreenshot(&png, 100)) // 100: PNG (below, JPEG)
		if err != nil {
			return fmt.Errorf("%s: %w", s.file, err)
		}
		if strings.TrimSpace(flash) != "" {
			return fmt.Errorf("%s: the page shows an error: %s", s.file, flash)
		}
		if err := os.WriteFile(filepath.Join(out, s.file), png, 0o644); err != nil {
			return err
		}
		log.Printf("wrote %s (%d KB)", filepath.Join(out, s.file), len(png)/1024)
	}
	return nil
}

// freeAddr returns a loopback address nothing listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func waitUp(url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(url); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the quickstart did not answer on %s within %s", url, within)
}

func chromium() (string, error) {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", errors.New("no Chromium found: apt-get install -y chromium")
}
