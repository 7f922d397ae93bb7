module github.com/fom-go/fom

go 1.24.0

require (
	github.com/jonboulle/clockwork v0.5.0
	github.com/robfig/cron/v3 v3.0.1
	go.uber.org/goleak v1.3.0
	go.uber.org/zap v1.28.0
)

require go.uber.org/multierr v1.10.0 // indirect
