// Command cluster is one instance of an app whose jobs run on several
// replicas through PostgreSQL: start it three times and every fire of every
// job runs on one of them, once. Kill one (Ctrl-C, or kill -9) and watch
// the others take its schedules over on their admin pages.
//
//	go run ./examples/cluster -id a -addr 127.0.0.1:8081 &
//	go run ./examples/cluster -id b -addr 127.0.0.1:8082 &
//	go run ./examples/cluster -id c -addr 127.0.0.1:8083 &
//
// FOM_DATABASE_URL (default: the local PostgreSQL's database "test") says
// where; the tables go in a schema of the example's own, fom_example_cluster
// (-schema to change it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.uber.org/zap"

	"github.com/fom-go/fom/fom"
	"github.com/fom-go/fom/store/postgres"
	"github.com/fom-go/fom/web"
)

// Report runs every five seconds and says which instance ran it.
type Report struct {
	fom.Schedule `name:"report" cron:"*/5 * * * * *" remark:"runs on one instance per fire"`
	instance     string
}

func (r *Report) Run(ctx context.Context) (any, error) {
	fom.Logger(ctx).Info("report", zap.String("ranOn", r.instance))
	return r.instance, nil
}

// Sync runs every two seconds, on whichever instance owns it.
type Sync struct {
	fom.Schedule `name:"sync" fixedRate:"2s" remark:"owned by one instance at a time"`
	instance     string
}

func (s *Sync) Run(ctx context.Context) (any, error) {
	fom.Logger(ctx).Info("sync", zap.String("ranOn", s.instance))
	return s.instance, nil
}

// settings are what the command line says.
type settings struct {
	dsn, schema, id, addr string
	leaseTTL              time.Duration
}

func parse(args []string, stderr io.Writer) (settings, error) {
	s := settings{dsn: os.Getenv("FOM_DATABASE_URL")}
	if s.dsn == "" {
		s.dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	host, _ := os.Hostname()
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&s.id, "id", fmt.Sprintf("%s-%d", host, os.Getpid()), "this instance's id")
	fs.StringVar(&s.addr, "addr", "127.0.0.1:8081", "where the admin page listens (port 0: any free port)")
	fs.StringVar(&s.schema, "schema", "fom_example_cluster", "the PostgreSQL schema of the example's tables")
	fs.DurationVar(&s.leaseTTL, "lease-ttl", 15*time.Second, "how long a killed instance's schedules wait for another owner")
	if err := fs.Parse(args); err != nil {
		return s, err
	}
	if fs.NArg() > 0 {
		return s, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return s, nil
}

// run is one instance until ctx ends. It prints the admin page's address
// on out once it serves it.
func run(ctx context.Context, s settings, out io.Writer, log *zap.Logger) (err error) {
	st, err := postgres.Open(ctx, s.dsn, postgres.WithSchema(s.schema))
	if err != nil {
		return err
	}
	defer st.Close()
	app, err := fom.New(fom.WithStore(st), fom.WithInstanceID(s.id), fom.WithLeaseTTL(s.leaseTTL), fom.WithLogger(log))
	if err != nil {
		return err
	}
	if _, err := app.Register(&Report{instance: s.id}); err != nil {
		return err
	}
	if _, err := app.Register(&Sync{instance: s.id}); err != nil {
		return err
	}
	h, err := web.NewHandler(app, web.Options{Title: "fom cluster: " + s.id})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return err
	}
	if err := app.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(out, "instance %s: admin page http://%s/fom/\n", s.id, ln.Addr())
	select {
	case <-ctx.Done():
	case err = <-served:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if serr := srv.Shutdown(sctx); serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return errors.Join(err, app.Stop(sctx))
}

func main() {
	s, err := parse(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintln(os.Stderr, "cluster example:", err)
		os.Exit(2)
	}
	log := zap.Must(zap.NewDevelopment()).With(zap.String("instance", s.id))
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	if err := run(ctx, s, os.Stdout, log); err != nil {
		log.Fatal("cluster example", zap.Error(err))
	}
}
