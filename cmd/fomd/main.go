// Command fomd is the timer service: durable timers that call HTTP
// endpoints back on time, at least once, signed the Standard Webhooks way.
//
//	go run ./cmd/fomd                      # SQLite in ./fomd-data, on 127.0.0.1:8090
//	go run ./cmd/fomd --database-url postgres://…  # several instances share the timers
//
// Every flag is also an environment variable FOMD_<NAME>; --help lists
// them. SIGTERM or Ctrl-C stops it gracefully: no new claims, deliveries
// under way finish (or are left to their lease) within --shutdown-timeout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/fom-go/fom/internal/fomd"
)

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "fomd:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	cfg, err := fomd.ParseConfig(args, getenv, stderr)
	if err != nil {
		return err
	}
	zc := zap.NewProductionConfig()
	if !cfg.LogJSON {
		zc.Encoding = "console"
		zc.EncoderConfig.EncodeTime = zapcore.ISO8601TimeEncoder
	}
	log, err := zc.Build()
	if err != nil {
		return err
	}
	defer log.Sync()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := fomd.New(ctx, cfg, fomd.WithLogger(log))
	if err != nil {
		return err
	}
	if err := s.Start(ctx); err != nil {
		s.Shutdown(context.Background())
		return err
	}
	fmt.Fprint(stdout, fomd.Banner(s, cfg))
	<-ctx.Done()
	stop()
	log.Info("stopping: no new claims; waiting for deliveries under way", zap.Duration("timeout", cfg.ShutdownTimeout))
	sctx, cancel := context.WithTimeout(context.Background(), cfg.ShutdownTimeout)
	defer cancel()
	return s.Shutdown(sctx)
}
