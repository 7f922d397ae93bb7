// Command cluster runs three instances of one app on PostgreSQL, in one
// process for the demonstration (in production each is a replica of your
// service): every fire of every job runs on one instance, once; stop an
// instance's admin page or the whole process and watch the others take
// over. Each instance serves its admin page: http://127.0.0.1:8081/fom/,
// :8082 and :8083.
//
//	go run ./examples/cluster   # FOM_DATABASE_URL defaults to the local PostgreSQL
package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
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

// instance is one App with its admin page.
type instance struct {
	app *fom.App
	srv *http.Server
	st  *postgres.Store
}

// start builds and starts an instance listening on addr.
func start(ctx context.Context, dsn, schema, id, addr string, log *zap.Logger) (*instance, error) {
	st, err := postgres.Open(ctx, dsn, postgres.WithSchema(schema))
	if err != nil {
		return nil, err
	}
	app, err := fom.New(fom.WithStore(st), fom.WithInstanceID(id), fom.WithLogger(log.With(zap.String("instance", id))))
	if err == nil {
		_, err = app.Register(&Report{instance: id})
	}
	if err == nil {
		_, err = app.Register(&Sync{instance: id})
	}
	if err == nil {
		err = app.Start(ctx)
	}
	var h http.Handler
	if err == nil {
		h, err = web.NewHandler(app, web.Options{Title: "fom cluster: " + id})
	}
	var ln net.Listener
	if err == nil {
		ln, err = net.Listen("tcp", addr)
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	log.Info("instance started", zap.String("instance", id), zap.String("admin", "http://"+ln.Addr().String()+"/fom/"))
	return &instance{app: app, srv: srv, st: st}, nil
}

func (i *instance) stop(ctx context.Context) error {
	err := errors.Join(i.srv.Shutdown(ctx), i.app.Stop(ctx))
	i.st.Close()
	return err
}

// run starts three instances and stops them when ctx ends.
func run(ctx context.Context, dsn, schema string, addrs []string, log *zap.Logger) error {
	var started []*instance
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for _, i := range started {
			if err := i.stop(sctx); err != nil {
				log.Warn("stop", zap.Error(err))
			}
		}
	}()
	for n, addr := range addrs {
		i, err := start(ctx, dsn, schema, fmt.Sprintf("instance-%d", n+1), addr, log)
		if err != nil {
			return err
		}
		started = append(started, i)
	}
	<-ctx.Done()
	return nil
}

func main() {
	dsn := os.Getenv("FOM_DATABASE_URL")
	if dsn == "" {
		dsn = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	log := zap.Must(zap.NewDevelopment())
	ctx, cancel := signal.NotifyContext(context.Background(), os.Interrupt)
	defer cancel()
	if err := run(ctx, dsn, "fom_example", []string{"127.0.0.1:8081", "127.0.0.1:8082", "127.0.0.1:8083"}, log); err != nil {
		log.Fatal("cluster example", zap.Error(err))
	}
}
