//go:build unix

package sqlite

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/fom-go/fom/store"
)

// lockFile takes an exclusive advisory lock on path (created if missing)
// and writes who holds it there. The lock lives as long as the returned
// file is open, and the kernel drops it when the process dies, so a
// crashed holder never blocks the next start.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("fom: store lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			// The holder writes its name right after taking the lock: an
			// empty file is a holder between the two, worth a short wait.
			var who string
			for range 40 {
				holder, _ := os.ReadFile(path)
				if who = strings.TrimSpace(string(holder)); who != "" {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			if who == "" {
				who = "a process that has not written its name yet"
			}
			return nil, fmt.Errorf("%w: %s is held by %s; two processes on one data directory would both run every job: give each its own data directory, or run replicas on a cluster store", store.ErrInUse, path, who)
		}
		return nil, fmt.Errorf("fom: store lock %s: %w", path, err)
	}
	host, _ := os.Hostname()
	if err := f.Truncate(0); err == nil {
		fmt.Fprintf(f, "pid %d on host %s since %s\n", os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	}
	return f, nil
}
