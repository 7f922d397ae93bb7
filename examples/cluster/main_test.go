package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/fom-go/fom/internal/pgtest"
)

// TestExampleRuns starts the example's three instances for a few seconds
// and reads each admin page.
func TestExampleRuns(t *testing.T) {
	pool := pgtest.Pool(t)
	schema := pgtest.Schema(t, pool)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	addrs := []string{"127.0.0.1:18081", "127.0.0.1:18082", "127.0.0.1:18083"}
	go func() { done <- run(ctx, pgtest.DSN(), schema, addrs, zap.NewNop()) }()
	deadline := time.Now().Add(10 * time.Second)
	for _, addr := range addrs {
		for {
			res, err := http.Get("http://" + addr + "/fom/api/schedules")
			if err == nil {
				res.Body.Close()
				if res.StatusCode == 200 {
					break
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v", addr, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
