# The commands: `make run`, `make check` (minutes) and `make test` (all of
# it). `make help` lists the rest.
SHELL := /bin/bash
# A machine starts on its own Go whatever go.mod says: this one names the
# toolchain every target builds with (the go command fetches it from the
# module proxy the first time, about 10 s).
export GOTOOLCHAIN := go1.27.3
GO    ?= go
BIN   := bin
# The version bin/server is stamped with: `server version`, the start-up log
# line and paywebhooks_build_info say it. `make build VERSION=v1.2.3` sets it.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

.DEFAULT_GOAL := help
.PHONY: help build run check test race lint vuln fuzz bench screenshots fmt clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

build: ## build bin/server, bin/dev and bin/loadgen
	$(GO) build -ldflags "-X github.com/paywebhooks/receiver/internal/version.Version=$(VERSION)" -o $(BIN)/server ./cmd/server
	$(GO) build -o $(BIN)/dev ./cmd/dev
	$(GO) build -o $(BIN)/loadgen ./cmd/loadgen

run: build ## run the receiver on :8080 (a local PostgreSQL when DATABASE_URL is unset)
	@if [ -n "$$DATABASE_URL" ]; then exec $(BIN)/server; \
	else scripts/ensure-postgres.sh && exec $(BIN)/dev -receiver -- $(BIN)/server; fi

check: build lint ## lint, unit and database tests: no end-to-end, no browser (about 4 minutes on 2 cores)
	scripts/ensure-postgres.sh
	LOG=var/check.log scripts/test.sh -short $$(scripts/packages.sh check)

test: build lint ## every test: unit, database (also through PgBouncer), end-to-end and browser; the core under the race detector
	scripts/ensure-postgres.sh
	scripts/ensure-pgbouncer.sh
	scripts/ensure-chromium.sh >/dev/null
	RACE=core POOLER=1 scripts/test.sh

race: build ## the race detector on the core: internal/webhooks and the providers
	scripts/ensure-postgres.sh
	LOG=var/race.log scripts/test.sh -race $$(scripts/packages.sh race)

lint: ## go vet and staticcheck (a tool of go.mod)
	$(GO) vet ./...
	$(GO) tool staticcheck ./...

vuln: ## govulncheck (a tool of go.mod) against the Go vulnerability database
	scripts/vuln.sh

fuzz: ## run the fuzz targets for a bounded time (FUZZTIME, default 20s each)
	scripts/fuzz.sh

bench: build ## measure the receiver against the copied snippet (net/http, Echo) and pgbench, direct and through PgBouncer; writes BENCHMARKS.md
	scripts/bench.sh

screenshots: build ## the console's screenshots in docs/ (headless Chromium)
	scripts/ensure-postgres.sh && scripts/ensure-chromium.sh >/dev/null
	CONSOLE_SCREENSHOTS=1 $(BIN)/dev -temp -- $(GO) test -count=1 -run TestConsoleInBrowser ./e2e/

fmt: ## gofmt every file
	gofmt -w $$(git ls-files '*.go')

clean: ## remove build output and the local database and mail
	rm -rf $(BIN) var
