# fom — make targets. `make run` and `make test` are the two commands a new
# user needs; `make check` is what CI adds on top.
GO       ?= go
TEMPL    := $(GO) tool templ
PKGS     := ./...

.PHONY: run test bench generate check fmt vet screenshots

run: ## run the quickstart app with its admin page on http://127.0.0.1:8080/fom/
	@# Built, then run: go run answers Ctrl-C with exit status 1 even when
	@# the app stopped cleanly (and make would report an error).
	$(GO) build -o bin/quickstart ./examples/quickstart
	./bin/quickstart

test: ## all tests under the race detector
	$(GO) test -race -count=1 -timeout 20m $(PKGS)

bench: ## benchmark suite (about 30 minutes; the cluster scenarios need PostgreSQL): micro-benchmarks, then fom against its peers as markdown tables
	$(GO) test -run '^$$' -bench . -benchmem -benchtime 300ms ./schedule/...
	cd bench && $(GO) build -o ../bin/fombench .
	@# One process per scenario, so that one's heap does not disturb the next.
	./bin/fombench -only oneshot -pending 500000 -trials 2
	./bin/fombench -only cost -passes 3
	./bin/fombench -only flush
	./bin/fombench -only memory
	./bin/fombench -only periodic -trials 2
	./bin/fombench -only throughput
	./bin/fombench -only cluster -passes 3
	./bin/fombench -only failover

screenshots: ## retake docs/*.png from a real run of the quickstart (needs Chromium; about a minute)
	$(GO) run ./internal/screenshots

generate: ## regenerate templ code
	@if ls web/*.templ >/dev/null 2>&1; then $(TEMPL) generate; fi

check: generate ## fail on generated-code drift, gofmt or vet problems (bench/ included)
	@git diff --exit-code -- '*_templ.go' || (echo "generated code is out of date: run make generate and commit" && exit 1)
	@test -z "$$(gofmt -l .)" || (gofmt -l . && echo "gofmt needed" && exit 1)
	$(GO) vet $(PKGS)
	$(GO) tool staticcheck $(PKGS)
	@# bench/ is a module of its own (its peers are not fom's dependencies): vetted, so it builds.
	cd bench && $(GO) vet ./...
