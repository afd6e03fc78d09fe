# The two commands: `make run` and `make test`. `make help` lists the rest.
SHELL := /bin/bash
GO    ?= go
BIN   := bin

.DEFAULT_GOAL := help
.PHONY: help build run test test-unit fuzz vet fmt clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

build: ## build bin/server and bin/dev
	$(GO) build -o $(BIN)/server ./cmd/server
	$(GO) build -o $(BIN)/dev ./cmd/dev

run: build ## run the receiver on :8080 (a local PostgreSQL when DATABASE_URL is unset)
	@if [ -n "$$DATABASE_URL" ]; then exec $(BIN)/server; \
	else scripts/ensure-postgres.sh && exec $(BIN)/dev -dev-secrets -- $(BIN)/server; fi

test: build ## run every test: unit, database and end-to-end, on a private PostgreSQL
	$(GO) vet ./...
	scripts/ensure-postgres.sh
	scripts/test.sh

fuzz: ## run the fuzz targets for a bounded time (FUZZTIME, default 20s each)
	scripts/fuzz.sh

fmt: ## gofmt every file
	gofmt -w $$(git ls-files '*.go')

clean: ## remove build output and the local database and mail
	rm -rf $(BIN) var
bench: build ## measure the receiver against pgbench and the copied snippet; writes BENCHMARKS.md
	scripts/bench.sh
