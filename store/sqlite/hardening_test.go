package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/fom-go/fom/store"
)

func TestPruneKeepsTheNewestFailuresByCount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := open(t, t.TempDir())
	d := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var fs []store.Failure
	for i := range 50 {
		fs = append(fs, store.Failure{Schedule: "a", At: d.Add(time.Duration(i) * time.Second), TaskID: fmt.Sprint(i), Status: "failed"})
		fs = append(fs, store.Failure{Schedule: "b", At: d.Add(time.Duration(i) * time.Second), TaskID: fmt.Sprint(i), Status: "failed"})
	}
	if err := s.SaveStats(ctx, store.StatsBatch{Failures: fs}); err != nil {
		t.Fatal(err)
	}
	err := s.Prune(ctx, []store.Retention{{Schedule: "a", Before: d, KeepFailures: 7}, {Schedule: "b", Before: d, KeepFailures: 0}})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := s.LoadFailures(ctx, "a", 100)
	b, _ := s.LoadFailures(ctx, "b", 100)
	if len(a) != 7 || a[0].TaskID != "49" || a[6].TaskID != "43" || len(b) != 0 {
		t.Fatalf("a kept %d (newest %v), b kept %d", len(a), a, len(b))
	}
}

// TestSecondOpenIsRefusedNamingTheHolder: of many simultaneous opens of one
// data directory exactly one succeeds; the others name the lock's holder.
// After Close the directory opens again.
func TestSecondOpenIsRefusedNamingTheHolder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	const n = 10
	var wg sync.WaitGroup
	stores := make([]*Store, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(context.Background(), dir)
		}()
	}
	wg.Wait()
	var held *Store
	for i := range n {
		switch {
		case errs[i] == nil && held == nil:
			held = stores[i]
		case errs[i] == nil:
			t.Fatal("two opens of one data directory both succeeded")
		case !errors.Is(errs[i], store.ErrInUse):
			t.Fatalf("open %d: %v, want ErrInUse", i, errs[i])
		case !strings.Contains(errs[i].Error(), fmt.Sprintf("pid %d", os.Getpid())) || !strings.Contains(errs[i].Error(), dir):
			t.Fatalf("message names neither the directory nor the holder: %v", errs[i])
		}
	}
	if held == nil {
		t.Fatalf("no open succeeded: %v", errs)
	}
	held.Close()
	again := open(t, dir)
	if err := again.SaveConfig(context.Background(), "a", map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
}

// TestMigrationsRunOnceUnderConcurrentOpeners opens one new file from many
// connections at once, past the lock: the version is read inside each
// migration's transaction, so none applies a migration twice.
func TestMigrationsRunOnceUnderConcurrentOpeners(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), FileName)
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := openLocked(context.Background(), path)
			if err != nil {
				errs <- err
				return
			}
			s.Close()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestPathsAreEscaped stores data under directories whose names SQLite's
// URI syntax would misread.
func TestPathsAreEscaped(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"with#hash", "with%percent", "with?query", "with space", "with%23encoded"} {
		dir := filepath.Join(t.TempDir(), name)
		s := open(t, dir)
		if err := s.SaveConfig(context.Background(), "a", map[string]string{"k": name}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		s.Close()
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		if _, err := os.Stat(filepath.Join(dir, FileName)); err != nil {
			t.Fatalf("%s: the store is not at %s/%s; the directory holds %v", name, dir, FileName, names)
		}
		again := open(t, dir)
		if got, _ := again.LoadConfig(context.Background(), "a"); got["k"] != name {
			t.Fatalf("%s: reopened %v", name, got)
		}
	}
}

func TestOpenFailuresNameTheFileAndCause(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	blocker := filepath.Join(parent, "file")
	if err := os.WriteFile(blocker, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), filepath.Join(blocker, "data"))
	if err == nil || !strings.Contains(err.Error(), blocker) || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("data dir under a file: %v", err)
	}
	if os.Geteuid() != 0 { // root writes anywhere
		ro := filepath.Join(parent, "ro")
		os.Mkdir(ro, 0o555)
		_, err = Open(context.Background(), ro)
		if err == nil || !strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "out of memory") {
			t.Fatalf("read-only dir: %v", err)
		}
	}
}

// TestWritesToARemovedFileFail: a store file deleted while in use makes
// every later write fail, naming the file, instead of acknowledging it.
func TestWritesToARemovedFileFail(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := open(t, dir)
	ctx := context.Background()
	if err := s.SaveConfig(ctx, "a", map[string]string{"k": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"config":  s.SaveConfig(ctx, "a", map[string]string{"k": "2"}),
		"setting": s.PutSetting(ctx, "a", "logLevel", "debug"),
		"stats":   s.SaveStats(ctx, store.StatsBatch{Days: []store.Day{{Schedule: "a", Day: time.Now(), Data: []byte("x")}}}),
	} {
		if !errors.Is(err, store.ErrGone) || !strings.Contains(err.Error(), FileName) {
			t.Errorf("%s write after removal: %v", name, err)
		}
	}
}
