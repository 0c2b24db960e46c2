# oncesync developer targets. `make` (or `make help`) lists them.
#
# Targets that need PostgreSQL/Redis run under scripts/test-services.sh, which reuses running servers
# (127.0.0.1:5432, 127.0.0.1:6379, or ONCESYNC_TEST_DATABASE_URL / ONCESYNC_TEST_REDIS_URL) or starts
# throwaway ones on free ports, and stops only what it started.

GO        ?= go
SERVICES  := bash scripts/test-services.sh
FUZZTIME  ?= 10s
TEST_FUZZTIME ?= 5s
TESTFLAGS ?=
# Packages tested at once: one more than the cores, because the largest
# packages (internal/e2e, cmd/oncesync-chaos, internal/queue) spend much of
# their time waiting on processes they killed and leases expiring; with
# -p 2 a 2-core machine sat half idle for six minutes (docs/PERFORMANCE.md#the-test-suites-time-2026-12-06).
TESTP     ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 1 )))
CHAOS_ARGS ?=

.DEFAULT_GOAL := help

.PHONY: help build test vet lint bench bench-scale chaos fuzz demo clean

help: ## List targets
	@echo 'Usage: make <target>'
	@echo
	@grep -E '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | \
		awk 'BEGIN {FS = ":.*## "}; {printf "  %-8s %s\n", $$1, $$2}'
	@echo
	@echo 'Variables: FUZZTIME (fuzz, default 10s), TEST_FUZZTIME (fuzzing in test, default 5s; 0 skips), TESTFLAGS (extra go test flags), TESTP (packages at once, default cores + 1), CHAOS_ARGS (chaos).'

COMMIT    ?= $(shell git rev-parse HEAD 2>/dev/null)

build: ## Build bin/oncesync (with the commit, for --version)
	$(GO) build -ldflags "-X github.com/oncesync/oncesync/internal/cli.linkedCommit=$(COMMIT)" -o bin/oncesync ./cmd/oncesync

vet: ## go vet ./...
	$(GO) vet ./...

test: ## Build, vet, run all tests with -race against PostgreSQL + Redis, then fuzz each target TEST_FUZZTIME
	$(GO) build ./...
	$(GO) vet ./...
	$(SERVICES) run -- $(GO) test -race -count=1 -timeout 15m -p $(TESTP) $(TESTFLAGS) ./...
	@if [ "$(TEST_FUZZTIME)" != 0 ]; then FUZZTIME=$(TEST_FUZZTIME) GO=$(GO) bash scripts/fuzz-ci.sh; fi

lint: ## gofmt -l, go vet, staticcheck (only if installed)
	bash scripts/lint.sh

bench: ## Run benchmarks (scripts/bench.sh if present)
	@if [ -f scripts/bench.sh ]; then \
		$(SERVICES) run -- bash scripts/bench.sh; \
	else \
		$(SERVICES) run -- $(GO) test -run '^$$' -bench . -benchmem ./...; \
	fi

bench-scale: ## The long measurements: 10M-entry ledgers, 1M-row scale-out (scripts/bench-scale.sh)
	$(SERVICES) run -- bash scripts/bench-scale.sh

chaos: ## Run the chaos harness (cmd/oncesync-chaos)
	@if [ -d cmd/oncesync-chaos ]; then \
		$(SERVICES) run -- $(GO) run ./cmd/oncesync-chaos $(CHAOS_ARGS); \
	else \
		echo 'chaos: cmd/oncesync-chaos is not built yet' >&2; exit 1; \
	fi

fuzz: ## Run every Fuzz target for FUZZTIME each (default 10s; scripts/fuzz-ci.sh)
	FUZZTIME=$(FUZZTIME) GO=$(GO) bash scripts/fuzz-ci.sh

demo: ## Run the end-to-end demo on embedded defaults
	$(GO) run ./cmd/oncesync demo

clean: ## Remove build output
	rm -rf bin
